"""Hidden suite for exercise 02 (the training loop). PYTEST_DONT_REWRITE

Oracles: transformers' schedules and its models' own loss, torch's AdamW and clip_grad_norm_,
and `replay.py`, which replays the README's determinism contract from those library pieces.
Training runs use a micro Llama (about 25k parameters) on generated token data, so a run of a
few steps takes well under a second; one test trains the datasets' model config from scratch
on the corpus and compares its eval loss with the corpus's known floor. The inputs are chosen so
that every rule the README marks shows: batch sizes that divide neither file, runs that cross
epochs, log and eval cadences other than 1 that do not divide the run, dropout where random state
must be restored, a pretrained checkpoint saved in bf16, a configuration that leaves keys out.
"""
import hashlib
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from hypothesis import given
from hypothesis import strategies as st
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    LlamaConfig,
    get_cosine_schedule_with_warmup,
    get_cosine_with_min_lr_schedule_with_warmup,
)

from grader.session.submission import StudentError
from grader.suite.checks import (
    GRADING,
    ConceptError,
    assert_close,
    assert_equal,
    check_array,
    sibling_module,
)
from grader.suite.learner_files import learner_json, learner_jsonl, learner_png

probes = sibling_module(__file__, "probes")
replay = sibling_module(__file__, "replay")
convergence = sibling_module(__file__, "convergence")

# Every tolerance below states the largest error a correct loop shows (the reference, the course's
# alternatives and the independent solution, over the suite's scenarios) and the smallest error of
# the nearest mutant that the check has to catch.
# Closed-form schedule: a correct lr_at differs by float rounding (~1e-16 relative); the nearest
# wrong schedule (the floor added on top of the cosine) by 3e-2 at its worst checked step.
LR = dict(rtol=1e-12, atol=1e-15)
# Logged losses, gradient norms and eval losses: float32 sums in another order differ by at most
# 1.9e-7 (losses) and 6.1e-7 (gradient norms) relative; the nearest mutants whose first difference is
# one of these differ by 1.4e-4 (a gradient norm, AdamW's eps 1e-6) and 1.7e-5 (a loss, autocast left
# on in fp32, which the autocast check names first). AdamW's eps shows in the loss by only 4e-6, but
# in the parameters a step earlier, by 0.12 of the update.
LOSS = dict(rtol=1e-5, atol=1e-6)
# bf16 autocast: a loop computing what the contract says runs the same bf16 kernels as the replay,
# and its logged losses stay within 1e-7 of it; a loop that trains in fp32 instead differs by only
# 2.4e-5, too close for a tolerance (the autocast flag of each forward pass catches it), so this
# bound is a backstop for loops that compute something else, which differ by more than 1e-2.
BF16_LOSS = dict(rtol=1e-3, atol=0)
# Parameters are compared relative to how far the step moved them: reordered float32 sums
# (an equivalent loss reduction) drift to 9.7e-6 of a step's update, while the nearest mutant that
# only the parameters show (AdamW's eps 1e-6) is 0.12 of it off, and every other wrong loop more
# (AdamW magnifies noise in near-zero gradients, so a per-element tolerance would have to be loose
# where it matters). One mutant lands within 1e-5 (tokens counted before the shift, under active
# clipping, where Adam's update forgets the gradient's scale): the token count names it first.
PARAMS_OF_UPDATE = 1e-3
# One generator, one seed, the same draws: a model built as the contract says is bit-identical to
# the replay's (error 0); one built from another seed (or none) differs by 0.13.
INITIAL_PARAMS_ATOL = 1e-6
# Convergence, in nats/token above the source's floor after the 150-step run: correct loops end
# 0.35 above it (the reference, the LambdaLR alternative and the independent solution alike). Loops
# without clipping end 0.48 above, without warmup 0.63, without zeroing 1.27: closer than 2x to the
# correct 0.35, and no input in the CPU budget separates them further (a higher peak rate hurts the
# correct loop more than the warmup-less one), so this is a backstop; the replay tests catch each of
# them exactly. Below the floor no model can go: a loss that scores the wrong targets (the input
# itself, unshifted) ends 1.9 under it.
CONVERGENCE_MARGIN = 0.45
# tokens_per_s is timed as the learner sees fit, but within the call of train: a rate of the run's tokens
# over any part of it is at least their count over the wall time of the whole call (model building and
# evaluations included, measured around it). Time read with the sign flipped (now + start) gives 1e-7 of it.
TOKENS_PER_S_FLOOR = 1.0
PLOT_PIXELS = 10_000_000                # the largest PNG the curves test decodes (matplotlib's default figure: 307,200)

BATCHING = "Batching and padding"
LOSS_CONCEPT = "The loss: shift, ignore_index, float32"
SCHEDULE = "Warmup and cosine"
ZEROING = "Zeroing gradients"
ACCUMULATION = "Gradient accumulation"
CLIPPING = "Clipping"
PRECISION = "Mixed precision"
EVALUATION = "Evaluation mode"
RESUMING = "Resuming"
RECORD = "The run record"
CONTRACT = "The determinism contract"
VOCAB = 97
MICRO_LLAMA = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                   tie_word_embeddings=False)
# Attention dropout for the runs where random-number state must be observable (resume, pretrained
# init): with it, a dropout mask drawn from the wrong generator state changes the step's loss.
DROPOUT = 0.2
EVAL_DOCUMENTS = 22                        # no batch size of the suite divides it: the last eval batch is smaller


# ---------------------------------------------------------------- scenario data (generated per test)

def write_model_dir(folder, **config):
    LlamaConfig(**{**MICRO_LLAMA, **config}).save_pretrained(folder)
    return str(folder)


def write_documents(path, rng, n, prompt_share=0.3):
    """Token documents of uneven lengths (bos ... eos), each with an id beside its tokens, as the
    corpus's lines carry; some carry labels that mask a prompt."""
    with open(path, "w") as f:
        for index in range(n):
            ids = [1, *rng.integers(3, VOCAB, size=int(rng.integers(3, 24))).tolist(), 2]
            row = {"id": index, "input_ids": ids}
            if rng.random() < prompt_share:
                cut = int(rng.integers(1, len(ids) - 1))
                row["labels"] = [-100] * cut + ids[cut:]
            f.write(json.dumps(row) + "\n")
    return str(path)


def scenario_inputs(cfg):
    """What a test needs of a scenario's files besides the replay (the model config, the eval
    documents, the data files' digests), read before the learner's code runs: that code may
    change them, and the test runs as the grader's user."""
    config, documents = AutoConfig.from_pretrained(cfg["model_dir"]), replay.read_jsonl(cfg["eval_path"])
    digests = {k: hashlib.sha256(open(cfg[k], "rb").read()).hexdigest() for k in ("train_path", "eval_path")}
    return config, documents, digests


def scenario(tmp_path, rng, train_documents=120, **overrides):
    """A small training run's files in `tmp_path` and its configuration. What the test computes
    from those files (the replay, `scenario_inputs`) it computes before the learner's code runs."""
    cfg = {"model_dir": write_model_dir(tmp_path / "model"),
           "train_path": write_documents(tmp_path / "train.jsonl", rng, train_documents),
           "eval_path": write_documents(tmp_path / "eval.jsonl", rng, EVAL_DOCUMENTS),
           "out_dir": str(tmp_path / "run"), "seed": int(rng.integers(1000)), "batch_size": 4,
           "grad_accum_steps": 1, "max_steps": 6, "warmup_steps": 2, "max_lr": 1e-2, "min_lr": 1e-3,
           "weight_decay": 0.0, "betas": (0.9, 0.95), "clip_norm": 1e9, "amp": None, "device": "cpu",
           "log_every": 1, "eval_every": 100}
    cfg.update(overrides)
    return cfg


def close(a, b, rtol, atol):
    try:
        return abs(a - b) <= atol + rtol * abs(b)
    except TypeError:
        return False


def params_close(seen, want, before):
    """`seen` is within PARAMS_OF_UPDATE of the update that took `before` to `want`."""
    if seen.shape != want.shape:
        return False
    difference = torch.linalg.vector_norm(seen - want)
    return bool(difference <= PARAMS_OF_UPDATE * torch.linalg.vector_norm(want - before) + 1e-9)


def real_rows(input_ids, attention_mask, lengths):
    """The real tokens of each row: where the mask is 1, or else the first `lengths` tokens."""
    if attention_mask is not None and attention_mask.shape == input_ids.shape:
        return [row[mask.bool()].tolist() for row, mask in zip(input_ids, attention_mask)]
    return [row[:n].tolist() for row, n in zip(input_ids, lengths)]


def check_forwards(step, forwards, batches, amp):
    """The forward passes that led to one optimizer step: train mode, one per micro-batch, the
    contract's examples, padded as collate pads, under autocast exactly when amp='bf16'."""
    training = [f for f in forwards if f["grad"]]
    if any(not f["training"] for f in training):
        if step == 1:
            raise ConceptError(CONTRACT, "the forward passes of step 1 ran in eval mode: train in train mode "
                               "(from_pretrained returns a model in eval mode; call model.train())")
        raise ConceptError(EVALUATION, f"a forward pass with grad enabled ran in eval mode before step {step}: "
                           "training goes on in train mode, and evaluate restores the mode it found")
    if len(training) != len(batches):
        raise ConceptError(ACCUMULATION, f"optimizer step {step} followed {len(training)} forward passes with grad "
                           f"enabled; grad_accum_steps={len(batches)} asks for {len(batches)} micro-batches per step")
    for index, (seen, want) in enumerate(zip(training, batches), start=1):
        ids = seen["input_ids"]
        lengths = want["attention_mask"].sum(1).tolist()
        if (ids is None or ids.ndim != 2 or ids.shape[0] != want["input_ids"].shape[0]
                or real_rows(ids, seen["attention_mask"], lengths) != real_rows(want["input_ids"], None, lengths)):
            raise ConceptError(CONTRACT, f"micro-batch {index} of step {step} holds other examples than the "
                               "contract's loader gives: one DataLoader (shuffle=True, drop_last=True, a generator "
                               "seeded with seed), a new iterator per epoch, steps taking the next batches")
        mask = seen["attention_mask"]
        if not (torch.equal(ids, want["input_ids"])
                and (mask is None or torch.equal(mask.long(), want["attention_mask"]))):
            raise ConceptError(BATCHING, f"micro-batch {index} of step {step} holds the right examples, padded "
                               f"otherwise: shape {tuple(ids.shape)}, expected {tuple(want['input_ids'].shape)} "
                               "(each batch padded on the right to its own longest example)")
        if seen["autocast"] != (amp == "bf16"):
            raise ConceptError(PRECISION, f"a forward pass of step {step} ran {'under' if seen['autocast'] else 'without'}"
                               f" bf16 autocast with amp={amp!r}: autocast exactly when amp='bf16'")


def check_initial_model(watched, expected, rng_state=False):
    """The model the loop trained, before its first step: float32, the contract's weights, and
    (`rng_state`) torch's generator where the contract leaves it."""
    initial = watched.get("initial") or {}
    if not initial:
        return
    if initial["dtypes"] != ["torch.float32"]:
        raise ConceptError(CONTRACT, f"the model trained has {initial['dtypes']} weights: the contract keeps them "
                           "float32 (from_pretrained keeps a bf16 file's dtype unless told dtype=torch.float32)")
    seen, want = initial["params"], expected["initial_params"]
    if seen.shape != want.shape or float((seen - want).abs().max()) > INITIAL_PARAMS_ATOL:
        raise ConceptError(CONTRACT, "before its first step the model holds other weights than the contract's: "
                           "torch.manual_seed(seed) immediately before building it, from model_dir as init says")
    if rng_state and not torch.equal(initial["rng"], expected["rng_at_first_forward"]):
        raise ConceptError(CONTRACT, "torch's generator is not where the contract leaves it at the first forward "
                           "pass, so dropout draws other masks: torch.manual_seed(seed) immediately before the "
                           "model is built, whichever the init, and no other draw from it before training")


def compare_with_replay(watched, expected, params_concept, rng_state=False):
    """Walk the steps in causal order; the first difference names the concept that broke."""
    log = (watched["result"] or {}).get("log") or []
    if len(watched["steps"]) != len(expected["steps"]):
        raise ConceptError(CONTRACT, f"train took {len(watched['steps'])} optimizer steps, "
                           f"the configuration asks for {len(expected['steps'])}")
    if len(log) != len(expected["steps"]):
        raise ConceptError(RECORD, f"with log_every=1 the log should have {len(expected['steps'])} "
                           f"entries, it has {len(log)}")
    check_initial_model(watched, expected, rng_state)
    before = expected["initial_params"]
    for step, (seen, entry, want) in enumerate(zip(watched["steps"], log, expected["steps"]), start=1):
        check_forwards(step, seen["forwards"], want["batches"], expected["amp"])
        if entry.get("step") != step:
            raise ConceptError(RECORD, f"log entry {step} says step {entry.get('step')!r}: steps count from 1")
        if not close(seen["lr"], want["lr"], **LR):
            raise ConceptError(SCHEDULE, f"optimizer step {step} ran with lr {seen['lr']:.6g}, "
                               f"the schedule says {want['lr']:.6g}")
        # What the step did (the gradient it applied, its update) against what was logged of it: a
        # right step with a wrong log entry is a logging bug, not a training one.
        grad_ok = close(entry.get("grad_norm", math.nan), want["grad_norm"], **LOSS)
        params_ok = params_close(seen["params"], want["params"], before)
        if entry.get("tokens") != want["tokens"]:
            if entry.get("tokens") == want["unshifted_tokens"]:
                raise ConceptError(CONTRACT, f"step {step} counted {entry.get('tokens')} tokens, the reference "
                                   f"{want['tokens']}: count the labels other than -100 after the shift")
            raise ConceptError(BATCHING, f"step {step} counted {entry.get('tokens')} tokens in its "
                               f"loss, the reference {want['tokens']}: padding and masked labels must not count")
        if not close(entry.get("loss", math.nan), want["loss"], **LOSS):
            if grad_ok and params_ok:
                raise ConceptError(RECORD, f"the loss logged at step {step} is {entry.get('loss')}, though the step "
                                   f"matched the reference: log the step's mean token loss, {want['loss']:.6f}")
            if len(want["batches"]) > 1 and close(entry.get("loss", math.nan), want["primer_loss"], **LOSS):
                raise ConceptError(ACCUMULATION, f"the loss logged at step {step} is the mean of the micro-batches' "
                                   f"means ({entry.get('loss')}); every token of the step weighs the same: "
                                   f"{want['loss']:.6f}")
            raise ConceptError(LOSS_CONCEPT, f"the loss logged at step {step} is {entry.get('loss')}, the "
                               f"reference {want['loss']:.6f} (same weights, same batch)")
        if not grad_ok:
            applied = seen.get("applied_grad_norm")
            if (applied is not None and close(applied, want["applied_grad_norm"], **LOSS)
                    and close(entry.get("grad_norm", math.nan), applied, **LOSS)):
                raise ConceptError(CLIPPING, f"step {step} applied the reference's clipped gradient, but logged its "
                                   f"norm after clipping, {entry.get('grad_norm')}: log the norm before clipping, "
                                   f"{want['grad_norm']:.6f} (clip_grad_norm_ returns it)")
            concept = ACCUMULATION if step == 1 else ZEROING
            raise ConceptError(concept, f"the gradient norm before clipping at step {step} is "
                               f"{entry.get('grad_norm')}, the reference {want['grad_norm']:.6f}"
                               + (" (step 1 matched: are last step's gradients still there?)" if step > 1 else ""))
        if not params_ok:
            worst = int((seen["params"] - want["params"]).abs().argmax())
            raise ConceptError(params_concept, f"after step {step} the parameters differ from the reference "
                               f"(loss, gradient norm and lr matched): parameter #{worst} is "
                               f"{seen['params'][worst]:.7g}, expected {want['params'][worst]:.7g}")
        if not close(entry.get("lr", math.nan), want["lr"], **LR):
            raise ConceptError(RECORD, f"the log says step {step} ran with lr {entry.get('lr')}; it ran with "
                               f"{want['lr']:.6g}")
        before = want["params"]
    if watched["result"] is not None and watched["grads_left"]:
        raise ConceptError(ZEROING, f"after train returned, {watched['grads_left']} parameters still hold a gradient:"
                           " zero_grad(set_to_none=True) after each optimizer.step() drops them")


# ---------------------------------------------------------------- collate

@pytest.mark.points(2)
@pytest.mark.concept("Batching and padding")
@GRADING
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=6), pad_id=st.integers(0, 5),
       masked=st.lists(st.booleans(), min_size=6, max_size=6))
def test_collate_right_pads_and_masks(submission, lengths, pad_id, masked):
    """input_ids right-padded with pad_id, labels -100 on padding (given labels kept), attention mask 1/0;
    the other keys of an example (a corpus line's id and text) ignored"""
    examples = []
    for i, n in enumerate(lengths):
        ids = [10 + (7 * i + j) % 50 for j in range(n)]
        example = {"id": i, "text": " ".join(map(str, ids)), "input_ids": ids}
        if masked[i]:
            example["labels"] = [-100] * (n // 2) + ids[n // 2:]
        examples.append(example)
    batch = submission.collate(examples, pad_id)
    assert isinstance(batch, dict) and {"input_ids", "labels", "attention_mask"} <= set(batch), \
        "collate must return a dict with input_ids, labels and attention_mask"
    width = max(lengths)
    for key in ("input_ids", "labels", "attention_mask"):
        check_array(batch[key], what=f"collate(...)['{key}']", shape=(len(lengths), width), dtype=torch.long, tensor=True)
    for key, fill in (("input_ids", pad_id), ("labels", -100), ("attention_mask", 0)):
        expected = torch.full((len(lengths), width), fill, dtype=torch.long)
        for i, example in enumerate(examples):
            n = lengths[i]
            value = {"input_ids": example["input_ids"], "labels": example.get("labels", example["input_ids"]),
                     "attention_mask": [1] * n}[key]
            expected[i, :n] = torch.tensor(value)
        assert_equal(batch[key], expected, what=f"collate(...)['{key}'] for lengths {lengths}", tensor=True)


# ---------------------------------------------------------------- the schedule

@pytest.mark.points(2)
@pytest.mark.concept("Warmup and cosine")
@pytest.mark.parametrize("warmup,total", [(10, 100), (0, 40), (7, 8), (3, 50)])
def test_lr_at_equals_transformers_schedule(submission, warmup, total):
    """with min_lr=0, lr_at is max_lr times get_cosine_schedule_with_warmup's multiplier at every step"""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    multiplier = get_cosine_schedule_with_warmup(optimizer, warmup, total).lr_lambdas[0]
    for step in range(total + 1):
        got = submission.lr_at(step, max_lr=3e-4, warmup_steps=warmup, total_steps=total)
        assert close(got, 3e-4 * multiplier(step), **LR), \
            f"lr_at({step}, warmup_steps={warmup}, total_steps={total}) = {got!r}, expected {3e-4 * multiplier(step)!r}"


@pytest.mark.points(2)
@pytest.mark.concept("Warmup and cosine")
def test_lr_at_with_a_floor_and_past_the_end(submission):
    """min_lr: the cosine ends at min_lr (as transformers' min-lr schedule) and stays there after total_steps"""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    multiplier = get_cosine_with_min_lr_schedule_with_warmup(optimizer, 5, 30, min_lr=2e-5 / 6e-4).lr_lambdas[0]
    for step in [0, 1, 4, 5, 6, 17, 29, 30, 31, 45, 1000]:
        expected = 6e-4 * multiplier(step) if step <= 30 else 2e-5
        got = submission.lr_at(step, max_lr=6e-4, warmup_steps=5, total_steps=30, min_lr=2e-5)
        assert close(got, expected, **LR), f"lr_at({step}) with min_lr=2e-5, total_steps=30: {got!r}, expected {expected!r}"
    # warmup_steps == total_steps: the warmup ends on the floor (transformers' multiplier would say max_lr)
    for step, expected in [(4, 6e-4 * 4 / 5), (5, 2e-5), (6, 2e-5)]:
        got = submission.lr_at(step, max_lr=6e-4, warmup_steps=5, total_steps=5, min_lr=2e-5)
        assert close(got, expected, **LR), \
            f"lr_at({step}) with warmup_steps = total_steps = 5, min_lr=2e-5: {got!r}, expected {expected!r}"


# ---------------------------------------------------------------- weight decay groups

QWEN2 = dict(model_type="qwen2", vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
             num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)
GPT2 = dict(model_type="gpt2", vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32)


@pytest.mark.points(2)
@pytest.mark.concept("Weight decay groups")
@pytest.mark.parametrize("config,frozen", [(QWEN2, ()), (GPT2, ()), (QWEN2, ("embed_tokens", "layers.0."))],
                         ids=["qwen2-biases", "gpt2", "qwen2-frozen"])
def test_param_groups_decay_only_matrices(submission, config, frozen):
    """matrices and embeddings decay, biases and norm weights do not, frozen parameters are left out"""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config))
    trainable = {n: p for n, p in model.named_parameters() if not any(part in n for part in frozen)}
    groups = submission.probe(probes.param_group_names, config, 0.1, frozen)
    seen = [name for group in groups for name in group["names"]]
    assert "<foreign>" not in seen, "param_groups returned tensors that are not the model's parameters"
    assert sorted(seen) == sorted(trainable), (
        f"every trainable parameter must appear exactly once: missing {sorted(set(trainable) - set(seen))[:3]}, "
        f"unexpected or repeated {sorted({n for n in seen if n not in trainable or seen.count(n) > 1})[:3]}")
    for group in groups:
        decay = group["options"].get("weight_decay")
        for name in group["names"]:
            want = 0.1 if trainable[name].ndim >= 2 else 0.0
            assert decay == want, f"{name} (ndim {trainable[name].ndim}) is in a group with weight_decay={decay}, expected {want}"


# ---------------------------------------------------------------- the loss

def _micro_model_and_batch(seed):
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**MICRO_LLAMA))
    input_ids = torch.randint(3, VOCAB, (3, 9), generator=torch.Generator().manual_seed(seed))
    labels = input_ids.clone()
    labels[0, :4] = -100
    labels[2, 6:] = -100
    return model, input_ids, labels


@pytest.mark.points(3)
@pytest.mark.concept(LOSS_CONCEPT)
def test_causal_lm_loss_equals_the_models_own_loss(submission):
    """mean and sum reductions equal the Hugging Face model's loss for labels with -100 spans"""
    model, input_ids, labels = _micro_model_and_batch(1)
    with torch.no_grad():
        out = model(input_ids=input_ids, labels=labels)
        total = model(input_ids=input_ids, labels=labels, num_items_in_batch=torch.tensor(1)).loss
    got_mean = submission.causal_lm_loss(out.logits, labels)
    got_sum = submission.causal_lm_loss(out.logits, labels, reduction="sum")
    check_array(got_mean, what="causal_lm_loss(logits, labels)", shape=(), tensor=True)
    assert_close(got_mean, out.loss, what="causal_lm_loss(logits, labels) (mean)", tensor=True, **LOSS)
    assert_close(got_sum, total, what="causal_lm_loss(logits, labels, reduction='sum')", tensor=True, **LOSS)
    nothing = torch.full_like(labels, -100)
    nothing[:, 0] = labels[:, 0]              # counted only where the shift drops it
    empty_mean = submission.causal_lm_loss(out.logits, nothing)
    empty_sum = submission.causal_lm_loss(out.logits, nothing, reduction="sum")
    assert bool(torch.isnan(empty_mean)), f"with no counted token, the mean is 0/0: NaN, not {float(empty_mean)}"
    assert float(empty_sum) == 0.0, f"with no counted token, the sum is 0, not {float(empty_sum)}"


@pytest.mark.points(2)
@pytest.mark.concept(LOSS_CONCEPT)
def test_causal_lm_loss_runs_in_float32_for_bf16_logits(submission):
    """bf16 logits: the loss is computed and returned in float32 (upcast before the softmax); float64 logits too
    give a float32 loss"""
    model, input_ids, labels = _micro_model_and_batch(2)
    with torch.no_grad():
        logits = (model(input_ids=input_ids).logits * 8).bfloat16()     # sharp logits: bf16 rounding shows
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
    got = submission.causal_lm_loss(logits, labels)
    assert hasattr(got, "dtype") and got.dtype == torch.float32, \
        f"causal_lm_loss on bf16 logits returned {getattr(got, 'dtype', type(got))}: upcast the logits with .float()"
    assert_close(got, expected, what="causal_lm_loss on bf16 logits", tensor=True, **LOSS)
    wide = submission.causal_lm_loss(logits.double(), labels)
    assert hasattr(wide, "dtype") and wide.dtype == torch.float32, \
        f"causal_lm_loss on float64 logits returned {getattr(wide, 'dtype', type(wide))}: float32 whatever the logits' dtype"


# ---------------------------------------------------------------- evaluation

@pytest.mark.points(2)
@pytest.mark.concept("Evaluation mode")
@pytest.mark.parametrize("start_in_train_mode", [True, False], ids=["from-train-mode", "from-eval-mode"])
def test_evaluate_without_graph_in_eval_mode(submission, rng, tmp_path, start_in_train_mode):
    """evaluate runs every forward under no_grad in eval mode, restores the mode, returns the token-mean loss"""
    docs = replay.read_jsonl(write_documents(tmp_path / "eval.jsonl", rng, 10))
    batches = [replay.pad_batch(docs[i:i + 4], 0) for i in range(0, 10, 4)]
    config = {"model_type": "llama", **MICRO_LLAMA}
    seen = submission.probe(probes.watch_evaluate, config, batches, start_in_train_mode)
    assert seen["forwards"] == len(batches), f"evaluate ran {seen['forwards']} forward passes for {len(batches)} batches"
    assert not any(seen["grad_enabled"]), "evaluate ran a forward pass with grad enabled: wrap it in torch.no_grad()"
    assert not any(seen["training_during_forward"]), "evaluate ran a forward pass in train mode: call model.eval()"
    assert seen["training_after"] == start_in_train_mode, \
        f"the model was in {'train' if start_in_train_mode else 'eval'} mode before evaluate and is left in " \
        f"{'train' if seen['training_after'] else 'eval'} mode: restore the previous mode"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=torch.float32).eval()
    with torch.no_grad():
        total = sum(model(**b, num_items_in_batch=torch.tensor(1)).loss.item() for b in batches)
    expected = total / sum(replay.counted_tokens(b) for b in batches)
    assert isinstance(seen["value"], float), \
        f"evaluate returned a {type(seen['value']).__name__}: return a Python float (.item() of the tensors)"
    assert close(seen["value"], expected, **LOSS), \
        f"evaluate returned {seen['value']!r}, expected the mean over all counted tokens {expected:.6f}"


# ---------------------------------------------------------------- records and curves

@pytest.mark.points(2)
@pytest.mark.concept("Curves")
def test_plot_curves_draws_loss_on_log_steps_and_lr(submission, tmp_path):
    """plot_curves writes a PNG with two subplots sharing a log step axis: the loss above, the learning rate below"""
    log = [{"step": s, "loss": 5.0 / s ** 0.3, "lr": min(s, 10) * 1e-4, "grad_norm": 1.0, "tokens": 100} for s in range(1, 41)]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    png = tmp_path / "curves.png"
    seen = submission.probe(probes.watch_plot, str(tmp_path / "log.jsonl"), str(png))
    assert png.exists(), "plot_curves wrote no PNG file"
    assert learner_png(png, tmp_path, PLOT_PIXELS).ndim == 3, "the PNG does not decode as a colour image"
    axes = seen["axes"]
    assert len(axes) == 2, f"the figure has {len(axes)} axes, expected 2 subplots (loss, learning rate)"
    steps = [float(e["step"]) for e in log]
    loss_axes = [a for a in axes if any(np.allclose(line["y"], [e["loss"] for e in log]) for line in a["lines"])]
    lr_axes = [a for a in axes if any(np.allclose(line["y"], [e["lr"] for e in log]) for line in a["lines"])]
    assert loss_axes and lr_axes, "one subplot must draw the logged loss and the other the logged lr, against step"
    assert any(line["x"] == steps for line in loss_axes[0]["lines"]), "the loss must be drawn against the step numbers"
    assert any(line["x"] == steps for line in lr_axes[0]["lines"]), "the learning rate must be drawn against the step numbers"
    assert loss_axes[0]["xscale"] == "log", "the loss subplot's step axis must be logarithmic (early steps matter)"
    assert lr_axes[0]["xscale"] == "log", "the learning-rate subplot shares the loss's step axis: logarithmic too"
    assert loss_axes[0]["top"] > lr_axes[0]["top"], "the loss goes above, the learning rate below"


def eval_of(config, params, documents, batch_size):
    """The eval loss of a model of `config` holding `params` (flat, in parameter order) on
    `documents`, `batch_size` at a time in their order."""
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    torch.nn.utils.vector_to_parameters(params, model.parameters())
    batches = [replay.pad_batch(documents[i:i + batch_size], model.config.pad_token_id or 0)
               for i in range(0, len(documents), batch_size)]
    return replay.eval_loss(model, batches)


@pytest.mark.points(3)
@pytest.mark.concept("The run record")
@pytest.mark.timeout(120)
def test_log_and_run_record(submission, rng, tmp_path):
    """log_every=2, eval_every=2, max_steps=5: log lines and eval entries at steps 2 and 4, the final evaluation after
    step 5; log.jsonl is the returned log; run.json holds the experiment record the map asks for"""
    cfg = scenario(tmp_path, rng, max_steps=5, log_every=2, eval_every=2)
    expected, config, documents, digests = replay.replay(cfg), *scenario_inputs(cfg)
    started = time.perf_counter()
    watched = submission.probe(probes.watch_training, cfg)
    wall_s = time.perf_counter() - started
    result = watched["result"]
    if len(watched["steps"]) != 5:
        raise ConceptError(CONTRACT, f"train took {len(watched['steps'])} optimizer steps; max_steps=5 asks for 5")
    missing = {"log", "eval", "final_eval_loss", "checkpoint", "record"} - set(result)
    if missing or not (tmp_path / "run" / "checkpoint.pt").exists():
        raise ConceptError(CONTRACT, f"train must return log, eval, final_eval_loss, checkpoint and record (missing: "
                           f"{sorted(missing)}) and write out_dir/checkpoint.pt")
    for key, name in (("checkpoint", "checkpoint.pt"), ("record", "run.json")):
        if Path(str(result[key])).resolve() != (tmp_path / "run" / name).resolve():
            raise ConceptError(CONTRACT, f"train returned {key}={result[key]!r}: expected the path of out_dir/{name}, "
                               f"{str(tmp_path / 'run' / name)!r}")
    lines = learner_jsonl(tmp_path / "run" / "log.jsonl", tmp_path)
    if lines != result["log"]:
        raise ConceptError(CONTRACT, "log.jsonl and the returned log differ")
    if [e.get("step") for e in lines] != [2, 4]:
        raise ConceptError(CONTRACT, f"with log_every=2 and max_steps=5 the log holds steps {[e.get('step') for e in lines]}:"
                           " a line after every step that is a multiple of log_every, steps counted from 1: [2, 4]")
    assert all({"step", "loss", "lr", "grad_norm", "tokens"} <= set(e) for e in lines), \
        "each log entry needs step, loss, lr, grad_norm, tokens"
    evals = [e.get("step") for e in result["eval"]]
    if evals != [2, 4]:
        if evals[:2] == [2, 4]:
            raise ConceptError(CONTRACT, f"eval entries at steps {evals}: the returned eval lists the periodic "
                               "evaluations only, the final one is final_eval_loss")
        raise ConceptError(CONTRACT, f"with eval_every=2 and max_steps=5 the eval entries are at steps {evals}: an "
                           "evaluation after every step that is a multiple of eval_every: [2, 4]")
    # Each evaluation against the learner's own weights of that moment, so a training bug elsewhere
    # does not show up here as an evaluation one.
    own = {step: eval_of(config, watched["steps"][step - 1]["params"], documents, cfg["batch_size"])
           for step in (2, 4, 5)}
    for entry in result["eval"]:
        if not close(entry.get("eval_loss", math.nan), own[entry["step"]], **LOSS):
            raise ConceptError(CONTRACT, f"the eval loss after step {entry['step']} is {entry.get('eval_loss')}; the "
                               f"model of that step evaluates to {own[entry['step']]:.6f} on every eval example, "
                               "batch_size at a time in file order, the last batch possibly smaller")
    final = result["final_eval_loss"]
    if not close(final, own[5], **LOSS):
        if close(final, own[4], **LOSS):
            raise ConceptError(CONTRACT, "final_eval_loss is the evaluation after step 4; it evaluates the model after "
                               "the last step, 5")
        raise ConceptError(CONTRACT, f"final_eval_loss is {final}; the final model evaluates to {own[5]:.6f} on every "
                           "eval example, batch_size at a time, the last batch possibly smaller")
    record = learner_json(result["record"], tmp_path)
    for key in ("run_id", "commit", "config", "data_version", "seed", "environment", "metrics"):
        assert key in record, \
            f"run.json has no {key!r}: the record is run id, commit, config, data version, seed, environment, metrics"
    expected_commit = submission.git_head
    assert record["commit"] == expected_commit, \
        f"run.json says commit {record['commit']!r}; the learner's code is at {expected_commit!r} (null outside git)"
    assert record["data_version"] == digests, \
        "data_version must identify the data files: {'train_path': sha256 of its bytes, 'eval_path': ...}"
    assert record["seed"] == cfg["seed"] and record["config"].get("max_lr") == cfg["max_lr"], \
        "run.json's seed and config must be the run's"
    environment = record["environment"] if isinstance(record["environment"], dict) else {}
    want_environment = {"torch": torch.__version__, "transformers": transformers.__version__}
    assert {"python", "platform", "device"} <= set(environment) and all(
        environment.get(k) == v for k, v in want_environment.items()), \
        f"run.json's environment names {sorted(environment)}: python, torch and transformers versions, platform, device"
    metrics = record["metrics"]
    assert close(metrics.get("final_eval_loss", math.nan), final, rtol=1e-9, atol=0), \
        "run.json's metrics need the final eval loss"
    assert metrics.get("steps") == 5 and (metrics.get("tokens_per_s") or 0) > 0, \
        f"run.json's metrics say steps {metrics.get('steps')}, tokens_per_s {metrics.get('tokens_per_s')}: the run " \
        "took 5 optimizer steps, at some positive number of tokens per second"
    if [e["tokens"] for e in lines] == [expected["steps"][s - 1]["tokens"] for s in (2, 4)]:   # the batches were right
        tokens = sum(s["tokens"] for s in expected["steps"])
        assert metrics.get("tokens") == tokens, f"run.json's metrics say tokens {metrics.get('tokens')}: the run's " \
                                                f"5 steps counted {tokens} tokens in all, logged or not"
        floor = TOKENS_PER_S_FLOOR * tokens / wall_s
        assert metrics["tokens_per_s"] >= floor, \
            f"run.json's metrics say tokens_per_s {metrics['tokens_per_s']}: {tokens} tokens in a train call of " \
            f"{wall_s:.2f} s make at least {floor:.1f} tokens per second, however the run is timed"
    # The checkpoint written at the end holds the last step: resuming the finished run takes no step and
    # returns the run as it was.
    again = submission.probe(probes.watch_training, {**cfg, "resume": True})
    again_log = (again["result"] or {}).get("log")
    if len(again["steps"]) or again_log != result["log"]:
        raise ConceptError(CONTRACT, f"resuming the finished run took {len(again['steps'])} optimizer steps and returned "
                           f"a log of steps {[e.get('step') for e in again_log or []]}: at the end, train writes a "
                           "checkpoint of the last step, 5, from which a resume has nothing left to do")


@pytest.mark.points(2)
@pytest.mark.concept("Configuration")
@pytest.mark.timeout(120)
def test_left_out_keys_take_the_documented_defaults(submission, rng, tmp_path):
    """a cfg of the required keys alone runs as one that spells the README's defaults out (max_steps=100 included);
    run.json records the defaults; out_dir is created, with its missing parent folder"""
    base = scenario(tmp_path, rng)
    minimal = {"model_dir": base["model_dir"], "train_path": base["train_path"], "eval_path": base["eval_path"],
               "out_dir": str(tmp_path / "minimal" / "run")}
    runs = [submission.train(minimal), submission.train({**replay.DEFAULTS, **minimal, "out_dir": str(tmp_path / "spelled")})]
    logs = [[(e.get("step"), e.get("loss"), e.get("lr"), e.get("grad_norm"), e.get("tokens")) for e in run["log"]]
            for run in runs]
    if logs[0] != logs[1] or runs[0]["eval"] != runs[1]["eval"]:
        first = next((i for i, (a, b) in enumerate(zip(*logs)) if a != b), min(map(len, logs)))
        raise AssertionError(f"with the defaults left out, log entry {first + 1} reads "
                             f"{logs[0][first] if first < len(logs[0]) else None}; with them spelled out, "
                             f"{logs[1][first] if first < len(logs[1]) else None}: a key left out takes the README's default")
    config = learner_json(runs[0]["record"], tmp_path).get("config", {})
    wrong = {key: config.get(key, "<missing>") for key, value in {**replay.DEFAULTS, **minimal}.items()
             if config.get(key, "<missing>") != (list(value) if isinstance(value, tuple) else value)}
    if wrong:
        raise ConceptError(RECORD, f"run.json's config lacks the defaults of {sorted(wrong)} (it says {wrong}): "
                           "record the full configuration, defaults included")


@pytest.mark.points(2)
@pytest.mark.concept("The determinism contract")
@pytest.mark.timeout(120)
def test_same_seed_same_log_other_seed_other_log(submission, rng, tmp_path):
    """two runs with one seed log the same numbers; another seed gives another run; every run its own run_id"""
    cfg = scenario(tmp_path, rng, max_steps=3, warmup_steps=1)
    runs = [submission.train({**cfg, "seed": seed, "out_dir": str(tmp_path / f"run{i}")})
            for i, seed in enumerate([cfg["seed"], cfg["seed"], cfg["seed"] + 1])]
    logs = [[(e["loss"], e["grad_norm"], e["tokens"]) for e in run["log"]] for run in runs]
    assert logs[0] == logs[1], "two runs with the same seed logged different numbers: seed the model and the data order"
    assert logs[0] != logs[2], "runs with different seeds logged the same numbers: the seed is not used"
    run_ids = [learner_json(run["record"], tmp_path).get("run_id") for run in runs]
    if not all(isinstance(run_id, str) for run_id in run_ids) or len(set(run_ids)) != len(run_ids):
        raise ConceptError(RECORD, f"three runs recorded the run_ids {run_ids}: a string unique to every run, "
                           "also for two runs of one configuration")


# ---------------------------------------------------------------- the loop against the replay

@pytest.mark.points(4)
@pytest.mark.concept("Zeroing gradients")
@pytest.mark.timeout(120)
def test_steps_match_the_replay(submission, rng, tmp_path):
    """one micro-batch per step: batches, tokens, loss, gradient norm, lr and parameters match the replay, step by
    step, and no gradient is left once train returns"""
    cfg = scenario(tmp_path, rng)
    expected = replay.replay(cfg)
    compare_with_replay(submission.probe(probes.watch_training, cfg), expected, "The optimizer step")


@pytest.mark.points(4)
@pytest.mark.concept("Gradient accumulation")
@pytest.mark.timeout(120)
def test_accumulation_with_unequal_token_counts(submission, rng, tmp_path):
    """three micro-batches of unequal token counts per step, over three epochs of a small file: every token of the
    step weighs the same, incomplete batches are dropped, and steps straddle epochs"""
    cfg = scenario(tmp_path, rng, train_documents=30, grad_accum_steps=3)
    expected = replay.replay(cfg)
    batches_per_epoch = 30 // cfg["batch_size"]
    assert len({s["tokens"] for s in expected["steps"]}) > 1 and batches_per_epoch % cfg["grad_accum_steps"]
    assert cfg["max_steps"] * cfg["grad_accum_steps"] > 2 * batches_per_epoch
    compare_with_replay(submission.probe(probes.watch_training, cfg), expected, "Gradient accumulation")


@pytest.mark.points(3)
@pytest.mark.concept("Clipping")
@pytest.mark.timeout(120)
def test_active_clipping(submission, rng, tmp_path):
    """a clip norm far below the gradient norm: one global clip of the whole gradient, before the step; the model's
    pad token is 5, which pads the batches"""
    cfg = scenario(tmp_path, rng, model_dir=write_model_dir(tmp_path / "pad5_model", pad_token_id=5), clip_norm=0.05,
                   grad_accum_steps=2)
    expected = replay.replay(cfg)
    assert min(s["grad_norm"] for s in expected["steps"]) > 0.05
    compare_with_replay(submission.probe(probes.watch_training, cfg), expected, "Clipping")


@pytest.mark.points(3)
@pytest.mark.concept("Weight decay groups")
@pytest.mark.timeout(120)
def test_strong_weight_decay(submission, rng, tmp_path):
    """weight decay 0.5: only matrices and embeddings decay, in AdamW's decoupled way; the model's config names no
    pad token, so the batches are padded with 0"""
    cfg = scenario(tmp_path, rng, model_dir=write_model_dir(tmp_path / "padless_model", pad_token_id=None),
                   weight_decay=0.5, max_lr=3e-2)
    expected = replay.replay(cfg)
    compare_with_replay(submission.probe(probes.watch_training, cfg), expected, "Weight decay groups")


@pytest.mark.points(2)
@pytest.mark.concept(CONTRACT)
@pytest.mark.timeout(120)
def test_pretrained_init_from_a_bf16_checkpoint(submission, rng, tmp_path):
    """init='pretrained' from a checkpoint saved in bf16, with dropout: float32 weights, seeded before the build,
    trained in train mode, step by step as the replay"""
    torch.manual_seed(int(rng.integers(1000)))
    model = AutoModelForCausalLM.from_config(LlamaConfig(**MICRO_LLAMA, attention_dropout=DROPOUT))
    model.to(torch.bfloat16).save_pretrained(tmp_path / "pretrained")
    cfg = scenario(tmp_path, rng, model_dir=str(tmp_path / "pretrained"), init="pretrained", max_steps=4)
    expected = replay.replay(cfg)
    compare_with_replay(submission.probe(probes.watch_training, cfg), expected, "The optimizer step", rng_state=True)


@pytest.mark.points(2)
@pytest.mark.concept("Mixed precision")
@pytest.mark.timeout(120)
def test_bf16_autocast_keeps_float32_weights_and_state(submission, rng, tmp_path):
    """amp='bf16' on CPU: every training forward under bf16 autocast, parameters and AdamW state stay float32"""
    cfg = scenario(tmp_path, rng, amp="bf16", grad_accum_steps=2)
    expected = replay.replay(cfg)
    watched = submission.probe(probes.watch_training, cfg)
    assert watched["dtypes"].get("params") == ["torch.float32"], \
        f"after bf16 training the parameters are {watched['dtypes'].get('params')}: keep fp32 master weights, use autocast"
    assert watched["dtypes"].get("optimizer_state") == ["torch.float32"], \
        f"AdamW's state is {watched['dtypes'].get('optimizer_state')}, expected float32"
    for step, (seen, want) in enumerate(zip(watched["steps"], expected["steps"]), start=1):
        check_forwards(step, seen["forwards"], want["batches"], "bf16")
    got_loss = [e["loss"] for e in watched["result"]["log"]]
    want_loss = [s["loss"] for s in expected["steps"]]
    assert np.allclose(got_loss, want_loss, **BF16_LOSS), \
        f"bf16 losses {np.round(got_loss, 4).tolist()} stray from the autocast reference {np.round(want_loss, 4).tolist()}"


# ---------------------------------------------------------------- resuming

@pytest.mark.points(1)
@pytest.mark.concept("Resuming")
@pytest.mark.timeout(120)
def test_resume_without_a_checkpoint_raises(submission, rng, tmp_path):
    """resume=True where out_dir holds no checkpoint.pt: FileNotFoundError, never a silent fresh start"""
    cfg = scenario(tmp_path, rng, max_steps=2, resume=True)
    try:
        submission.train(cfg)
    except StudentError as error:
        assert error.info["type"] == "FileNotFoundError", \
            f"train(resume=True) with no checkpoint raised {error.info['type']}; expected FileNotFoundError"
    else:
        raise AssertionError("train(resume=True) with no checkpoint.pt in out_dir trained from scratch: raise "
                             "FileNotFoundError, a resume never silently starts afresh")


@pytest.mark.points(4)
@pytest.mark.concept("Resuming")
@pytest.mark.timeout(120)
def test_resume_reproduces_an_uninterrupted_run(submission, rng, tmp_path):
    """with dropout on, interrupted in step 6 (checkpoint at step 4, in the second epoch, log lines written past it)
    and resumed: the same batches, losses, parameters, log, eval and record as one uninterrupted run"""
    cfg = scenario(tmp_path, rng, model_dir=write_model_dir(tmp_path / "dropout_model", attention_dropout=DROPOUT),
                   train_documents=30, grad_accum_steps=2, max_steps=8, eval_every=4, batch_size=5)
    # 6 batches an epoch: the checkpoint of step 4 (batch 8) stands in the second epoch, whose shuffle must be restored
    assert 30 // cfg["batch_size"] < 4 * cfg["grad_accum_steps"] < 2 * (30 // cfg["batch_size"])
    whole = submission.probe(probes.watch_training, {**cfg, "out_dir": str(tmp_path / "whole")})
    whole_evals = [e.get("step") for e in whole["result"]["eval"]]
    if whole_evals != [4, 8]:
        raise ConceptError(CONTRACT, f"with eval_every=4 and max_steps=8 the eval entries are at steps {whole_evals}: "
                           "the returned eval lists the periodic evaluations, step 8's once: [4, 8]")
    broken = {**cfg, "out_dir": str(tmp_path / "broken")}
    first = submission.probe(probes.watch_training, broken, 6)
    assert first["result"] is None and len(first["steps"]) == 6, "the run was meant to be interrupted in step 6"
    second = submission.probe(probes.watch_training, {**broken, "resume": True})
    if len(second["steps"]) != 4:
        raise ConceptError(RESUMING, f"the resumed run took {len(second['steps'])} steps; from the checkpoint of "
                           "step 4 (eval_every=4) to max_steps=8 it takes 4: restore the step and continue to max_steps")
    resumed_log = {e.get("step"): e for e in (second["result"] or {}).get("log") or []}
    whole_log = {e["step"]: e for e in whole["result"]["log"]}
    for offset, (got, want) in enumerate(zip(second["steps"], whole["steps"][4:]), start=5):
        got_batches = [f["input_ids"] for f in got["forwards"] if f["grad"]]
        want_batches = [f["input_ids"] for f in want["forwards"] if f["grad"]]
        if len(got_batches) != len(want_batches) or not all(a.shape == b.shape and torch.equal(a, b)
                                                            for a, b in zip(got_batches, want_batches)):
            raise ConceptError(RESUMING, f"resumed step {offset} trained on other batches than the uninterrupted run: "
                               "restore the position in the data (the epoch, its generator state, the batches used)")
        if offset == 5:
            restored = second["initial"].get("params")
            if restored is None or not params_close(restored, whole["steps"][3]["params"], whole["steps"][2]["params"]):
                raise ConceptError(RESUMING, "the resumed run started from other weights than the checkpoint's of "
                                   "step 4: restore the model's parameters")
            if not close(resumed_log.get(5, {}).get("loss", math.nan), whole_log[5]["loss"], **LOSS):
                raise ConceptError(RESUMING, "the first resumed step saw the same weights and batches but had another "
                                   "loss: its dropout masks differ; restore torch's random-number state")
        if not close(got["lr"], want["lr"], **LR):
            raise ConceptError(RESUMING, f"resumed step {offset} ran with lr {got['lr']:.6g}, the uninterrupted run "
                               f"with {want['lr']:.6g}: restore the step")
        if not params_close(got["params"], want["params"], whole["steps"][offset - 2]["params"]):
            raise ConceptError(RESUMING, f"after resumed step {offset} the parameters differ from the uninterrupted "
                               "run (same weights, batches and loss before it): restore the optimizer's state "
                               "(AdamW's moments)")
    returned = [e.get("step") for e in second["result"]["log"]]
    if returned != [e["step"] for e in whole["result"]["log"]] or any(
            resumed_log[s].get("tokens") != whole_log[s]["tokens"] for s in returned):
        raise ConceptError(RESUMING, f"the resumed train returned a log of steps {returned}: it returns the whole "
                           "run's log, the steps before the checkpoint included, as the uninterrupted run does")
    returned_evals = [(e.get("step"), e.get("eval_loss")) for e in second["result"]["eval"]]
    if [s for s, _ in returned_evals] != whole_evals or not all(
            close(got, want["eval_loss"], **LOSS) for (_, got), want in zip(returned_evals, whole["result"]["eval"])):
        raise ConceptError(RESUMING, f"the resumed train returned eval entries at steps {[s for s, _ in returned_evals]}:"
                           " it returns the whole run's, as the uninterrupted run does")
    lines = learner_jsonl(tmp_path / "broken" / "log.jsonl", tmp_path)
    if [e.get("step") for e in lines] != list(range(1, 9)):
        raise ConceptError(RESUMING, f"after resuming, log.jsonl holds steps {[e.get('step') for e in lines]}: one "
                           "entry per step; the entries written after the checkpoint are dropped")
    tokens = learner_json(second["result"]["record"], tmp_path).get("metrics", {}).get("tokens")
    if tokens != sum(e["tokens"] for e in whole["result"]["log"]):
        raise ConceptError(RECORD, f"run.json's tokens after the resume are {tokens}: count the tokens of all steps, "
                           "those before the resume included")


# ---------------------------------------------------------------- does it learn?

@pytest.mark.points(4)
@pytest.mark.concept("Convergence")
@pytest.mark.timeout(300)
def test_from_scratch_run_approaches_the_corpus_floor(submission, tmp_path, artifacts):
    """150 steps from scratch on the corpus: the final eval loss, measured by the test, within the stated margin of the floor"""
    cfg, floor = convergence.setup(tmp_path)
    seen = submission.probe(probes.watch_final_model, cfg)
    result = seen["result"]
    artifacts["loss_curve"] = convergence.loss_curves(result, floor, CONVERGENCE_MARGIN)
    reported = result["final_eval_loss"]
    if reported < floor:
        raise ConceptError(LOSS_CONCEPT, f"after {cfg['max_steps']} steps the eval loss is {reported:.3f} nats/token, "
                           f"below the source's floor {floor:.3f}, which no model can beat: does the loss score the "
                           "next token (the shift)?")
    if seen["params"] is None:
        raise ConceptError(CONTRACT, "train built no model through AutoModelForCausalLM.from_config, so the test "
                           "cannot evaluate the model it trained")
    # The model's own loss, measured here: a number the learner's code reports proves nothing.
    measured = eval_of(convergence.model_config(), seen["params"], convergence.eval_documents(), cfg["batch_size"])
    assert measured <= floor + CONVERGENCE_MARGIN, (
        f"after {cfg['max_steps']} steps from scratch your final model's eval loss is {measured:.3f} nats/token "
        f"(your run reports {reported:.3f}); the source's floor on these documents is {floor:.3f}, and a correct "
        f"loop gets within {CONVERGENCE_MARGIN}")


# ---------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.concept("Mixed precision")
@pytest.mark.timeout(300)
def test_bf16_on_cuda_tracks_the_fp32_reference(submission, rng, tmp_path):
    """amp='bf16' on CUDA: losses within bf16 noise of the fp32 replay"""
    cfg = scenario(tmp_path, rng, grad_accum_steps=2, amp="bf16", device="cuda")
    want = [s["loss"] for s in replay.replay({**cfg, "amp": None, "device": "cpu"})["steps"]]
    result = submission.train(cfg)
    got = [e["loss"] for e in result["log"]]
    # bf16 noise against fp32: on CPU, autocast's losses differ from fp32 by 2.4e-5 over these steps;
    # CUDA's bf16 kernels have not been measured here, hence the loose bound of a tracking check.
    assert np.allclose(got, want, rtol=3e-2), f"bf16 CUDA losses {np.round(got, 4).tolist()} vs fp32 {np.round(want, 4).tolist()}"


@pytest.mark.gpu
@pytest.mark.points(1)
@pytest.mark.concept("Mixed precision")
@pytest.mark.timeout(300)
def test_cuda_batches_come_pinned_and_non_blocking(submission, rng, tmp_path):
    """device='cuda': batches move from pinned memory with non_blocking=True"""
    cfg = scenario(tmp_path, rng, device="cuda", max_steps=2)
    seen = submission.probe(probes.watch_cuda_transfers, cfg)
    assert seen["transfers"], "no batch tensor was moved to CUDA with .to()"
    assert all(t["pinned"] and t["non_blocking"] for t in seen["transfers"]), \
        "batches should come from pinned memory (DataLoader(pin_memory=True)) and move with non_blocking=True"
