"""Visible tests for exercise 02. Run: pytest exercises/02_train_loop

One or more checks per README section, each aimed at the bug people make there. The loop is
checked by relations a correct loop must keep, on a micro Llama that trains in a fraction of a
second: accumulated micro-batches step as one big batch does, identical batches on frozen
weights give identical gradients, an interrupted and resumed run is the uninterrupted run, two
configurations that mean the same thing train the same. The probes in probes.py watch your loop
from the outside (every forward pass, every optimizer step). The graded suite replays your loop
step by step against a reference on other data and sizes; a pass here is a start, not a grade.

A longer convergence run, of the kind the graded suite makes: pytest exercises/02_train_loop --long
"""
import hashlib
import json
import math
import random

import pytest
import torch
import torch.nn.functional as F
import transformers
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, LlamaConfig

from grader.course import COURSE
from grader.session.submission import StudentError
from grader.suite.checks import assert_close, assert_equal, check_array, shown, sibling_module
from grader.suite.learner_files import learner_file, learner_json, learner_jsonl

# Seconds for a test of quick calls: its own work is milliseconds, but the first test of a task also
# waits for the worker that runs your module to start (4 s on a 2-core machine at load 2, several
# times that on a loaded one).
QUICK = 30

# by path: a notebook has no __file__
probes = sibling_module(COURSE.exercises / "02_train_loop" / "test_train_loop.py", "probes")
# One thread, as graded: a micro model's matmuls are too small to share, and on a busy machine a
# second thread waiting for a core makes a run ten times slower.
torch.set_num_threads(1)

# float32 sums taken in another order (other padding, other micro-batching): correct loops agree to
# ~1e-6 relative on losses and gradient norms; the bugs these tests catch are off by 1e-2 and more.
SAME_NUMBER = dict(rtol=1e-4, atol=1e-6)
# lr_at is closed-form arithmetic: only float rounding may differ.
SCHEDULE = dict(rtol=1e-12, atol=1e-15)
# Two runs that should be one run: the same arithmetic in the same order gives the same bits; a
# little slack for kernels that reduce in another order. Wrong restores are off by 1e-3 and more.
SAME_PARAMS_ATOL = 1e-5
# The quick convergence run (60 steps on a corpus whose next token is one of two, see
# `two_way_corpus`): a correct loop ends about 0.09 nats above the floor, a loop that never zeroes
# its gradients 0.28, a loss scored against the wrong tokens far above or below it.
QUICK_CONVERGENCE_MARGIN = 0.2
# A learning rate under which the weights stay put, to float32's resolution (an update of ~1e-12
# on weights of ~1e-2): 0 itself would divide by zero in a LambdaLR built on max_lr.
STILL_LR = 1e-12

VOCAB = 61
MICRO = dict(vocab_size=VOCAB, hidden_size=24, intermediate_size=40, num_hidden_layers=1, num_attention_heads=3,
             num_key_value_heads=1, max_position_embeddings=48, pad_token_id=0, bos_token_id=1, eos_token_id=2)
RUN = {"seed": 13, "batch_size": 4, "grad_accum_steps": 1, "max_steps": 4, "warmup_steps": 1, "max_lr": 1e-2,
       "min_lr": 1e-3, "weight_decay": 0.05, "clip_norm": 1e9, "log_every": 1, "eval_every": 100}
# The README's configuration table, spelled out (betas as run.json records it).
README_DEFAULTS = dict(init="scratch", seed=0, batch_size=8, grad_accum_steps=1, max_steps=100, max_lr=1e-3,
                       min_lr=0.0, warmup_steps=10, weight_decay=0.1, betas=[0.9, 0.95], clip_norm=1.0, amp=None,
                       device="cpu", log_every=1, eval_every=50, resume=False)


# ---------------------------------------------------------------- test data

def write_model(folder, **extra):
    LlamaConfig(**MICRO, **extra).save_pretrained(folder)
    return str(folder)


def uneven_documents(seed, n):
    """Token documents of 3 to 20 tokens between bos and eos; every third one masks a prompt."""
    draw = random.Random(seed)
    rows = []
    for index in range(n):
        ids = [1] + [draw.randrange(3, VOCAB) for _ in range(draw.randrange(3, 21))] + [2]
        row = {"input_ids": ids, "source": f"doc-{index}"}      # a key collate must ignore
        if index % 3 == 0:
            row["labels"] = [-100] * (len(ids) // 2) + ids[len(ids) // 2:]
        rows.append(row)
    return rows


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def run_config(tmp_path, name="run", train=None, evaluation=None, **overrides):
    """A micro run's configuration; its files are written into tmp_path once."""
    if not (tmp_path / "model").exists():
        write_model(tmp_path / "model")
    train_path, eval_path = tmp_path / f"{name}-train.jsonl", tmp_path / f"{name}-eval.jsonl"
    write_jsonl(train_path, train if train is not None else uneven_documents(101, 26))
    write_jsonl(eval_path, evaluation if evaluation is not None else uneven_documents(202, 11))
    return {**RUN, "model_dir": str(tmp_path / "model"), "train_path": str(train_path), "eval_path": str(eval_path),
            "out_dir": str(tmp_path / name), **overrides}


def close(a, b, rtol, atol):
    return isinstance(a, (int, float)) and abs(a - b) <= atol + rtol * abs(b)


def padded(rows):
    """Rows as a batch: right-padded with 0, labels -100 on the padding, the attention mask."""
    width = max(len(row["input_ids"]) for row in rows)
    def fill(values, pad):
        return torch.tensor([list(v) + [pad] * (width - len(v)) for v in values], dtype=torch.long)
    return {"input_ids": fill([r["input_ids"] for r in rows], 0),
            "labels": fill([r.get("labels", r["input_ids"]) for r in rows], -100),
            "attention_mask": fill([[1] * len(r["input_ids"]) for r in rows], 0)}


def counted(batch):
    """Tokens a batch's loss counts: labels other than -100, after the shift."""
    return int((batch["labels"][:, 1:] != -100).sum())


def contract_batches(rows, batch_size, seed, count):
    """The first `count` micro-batches the determinism contract's loader gives: one seeded, shuffled DataLoader that
    drops an incomplete last batch, iterated epoch after epoch (a new iterator per epoch, one generator)."""
    loader = DataLoader(rows, batch_size=batch_size, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(seed), collate_fn=padded)
    batches = []
    while len(batches) < count:
        batches += [batch for _, batch in zip(range(count - len(batches)), loader)]
    return batches


def token_mean_loss(model, batches):
    """The oracle of an eval loss: summed cross-entropy of the next tokens over all counted labels."""
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            logits = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            targets = batch["labels"][:, 1:]
            total += F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten(), reduction="sum").item()
            count += int((targets != -100).sum())
    return total / count


# ---------------------------------------------------------------- collate, schedule, loss, groups

@pytest.mark.points(1)
@pytest.mark.concept("Batching and padding")
@pytest.mark.timeout(QUICK)
def test_collate_pads_on_the_right(submission):
    """lengths 3, 1 and 2 (one with its own labels, one with extra keys): pad_id and -100 on the right, a 1/0 mask,
    long tensors"""
    batch = submission.collate([{"input_ids": [5, 6, 7], "text": "5 6 7"},
                                {"input_ids": [8], "labels": [-100]},
                                {"input_ids": [9, 4], "labels": [-100, 4], "id": 2}], pad_id=3)
    for key in ("input_ids", "labels", "attention_mask"):
        check_array(batch[key], what=f"collate(...)[{shown(key)}]", shape=(3, 3), dtype=torch.long, tensor=True)
    assert_equal(batch["input_ids"], torch.tensor([[5, 6, 7], [8, 3, 3], [9, 4, 3]]), what="input_ids", tensor=True)
    assert_equal(batch["labels"], torch.tensor([[5, 6, 7], [-100, -100, -100], [-100, 4, -100]]), what="labels",
                 tensor=True)
    assert_equal(batch["attention_mask"], torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]]), what="attention_mask",
                 tensor=True)


@pytest.mark.points(0.5)
@pytest.mark.concept("Warmup and cosine")
@pytest.mark.timeout(QUICK)
def test_lr_at_landmarks(submission):
    """0 at step 0, max_lr at the end of warmup, half way down in the middle of the cosine, min_lr at the end"""
    def lr(step):
        return submission.lr_at(step, max_lr=1.0, warmup_steps=10, total_steps=110, min_lr=0.1)

    for step, expected in [(0, 0.0), (5, 0.5), (10, 1.0), (60, 0.55), (110, 0.1), (200, 0.1)]:
        got = lr(step)
        assert math.isclose(got, expected, abs_tol=1e-12), (
            f"lr_at({step}, max_lr=1.0, warmup_steps=10, total_steps=110, min_lr=0.1): expected {shown(expected)}, "
            f"got {shown(got)}")


@pytest.mark.points(0.5)
@pytest.mark.concept("Warmup and cosine")
@pytest.mark.timeout(QUICK)
def test_lr_at_is_transformers_schedule(submission):
    """with min_lr=0, max_lr times get_cosine_schedule_with_warmup's multiplier at every step; a warmup as long as the
    run ends on the floor"""
    from transformers import get_cosine_schedule_with_warmup  # imported here: it pulls in trainer code (~2 s)
    lambdas = get_cosine_schedule_with_warmup(torch.optim.SGD([torch.ones(1, requires_grad=True)]), 4, 22).lr_lambdas
    for step in range(23):
        got = submission.lr_at(step, max_lr=2e-3, warmup_steps=4, total_steps=22)
        want = 2e-3 * lambdas[0](step)
        assert close(got, want, **SCHEDULE), (
            f"lr_at({step}, max_lr=2e-3, warmup_steps=4, total_steps=22): expected {shown(want)} (max_lr times "
            f"get_cosine_schedule_with_warmup's multiplier), got {shown(got)}")
    for step, expected in [(2, 1e-2 * 2 / 3), (3, 1e-4), (9, 1e-4)]:
        got = submission.lr_at(step, max_lr=1e-2, warmup_steps=3, total_steps=3, min_lr=1e-4)
        assert close(got, expected, **SCHEDULE), (
            f"lr_at({step}, max_lr=1e-2, warmup_steps=3, total_steps=3, min_lr=1e-4): expected {shown(expected)}, "
            f"got {shown(got)}")


@pytest.mark.points(1)
@pytest.mark.concept("Warmup and cosine")
@pytest.mark.timeout(60)
def test_train_steps_the_schedule_once_per_optimizer_step(submission, tmp_path):
    """three micro-batches per step: optimizer step s runs (and logs) the rate transformers' schedule gives after s - 1
    steps, starting at 0"""
    from transformers import get_cosine_with_min_lr_schedule_with_warmup
    cfg = run_config(tmp_path, grad_accum_steps=3, max_steps=4, warmup_steps=2, batch_size=2)
    optimizer = torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=cfg["max_lr"])
    schedule = get_cosine_with_min_lr_schedule_with_warmup(optimizer, 2, 4, min_lr=cfg["min_lr"])
    expected = []
    for _ in range(4):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    seen = submission.probe(probes.watch_train, cfg)
    used = [step["lr"] for step in seen["steps"]]
    assert len(used) == 4, f"train with max_steps=4: expected 4 optimizer steps, got {len(used)}"
    for step, (got, want) in enumerate(zip(used, expected), start=1):
        assert close(got, want, **SCHEDULE), (
            f"optimizer step {step}'s lr: expected {shown(want)} (the schedule after {step - 1} optimizer steps), "
            f"got {shown(got)} (rates used: {shown(used)})")
    logged = [entry["lr"] for entry in seen["result"]["log"]]
    assert len(logged) == 4, f"train's log with max_steps=4, log_every=1: expected 4 entries, got {len(logged)}"
    assert all(close(got, want, **SCHEDULE) for got, want in zip(logged, expected)), \
        f"the log's lr per step: expected {shown(expected)} (the rates the steps ran with), got {shown(logged)}"


@pytest.mark.points(0.5)
@pytest.mark.concept("The loss: shift, ignore_index, float32")
@pytest.mark.timeout(QUICK)
def test_causal_lm_loss_shifts_and_ignores(submission):
    """position t predicts token t+1, and -100 labels count for nothing"""
    logits = torch.randn(2, 5, 11, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([[1, 2, 3, 4, 5], [-100, -100, 6, 7, -100]])
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, 11), labels[:, 1:].reshape(-1), ignore_index=-100)
    assert_close(submission.causal_lm_loss(logits, labels), expected, what="causal_lm_loss", tensor=True,
                 rtol=1e-6, atol=1e-7)


@pytest.mark.points(0.5)
@pytest.mark.concept("The loss: shift, ignore_index, float32")
@pytest.mark.timeout(QUICK)
def test_causal_lm_loss_sums_in_float32(submission):
    """reduction='sum' adds the counted tokens; bf16 and float64 logits give a float32 loss computed from upcast logits;
    with nothing counted the mean is NaN and the sum 0"""
    logits = (torch.randn(3, 7, 19, generator=torch.Generator().manual_seed(41)) * 6).bfloat16()
    labels = torch.randint(0, 19, (3, 7), generator=torch.Generator().manual_seed(42))
    labels[1, 2:5] = -100
    flat_logits, flat_targets = logits[:, :-1].float().reshape(-1, 19), labels[:, 1:].reshape(-1)
    got = submission.causal_lm_loss(logits, labels, reduction="sum")
    check_array(got, what="causal_lm_loss(bf16 logits, labels, 'sum')", shape=(), dtype=torch.float32, tensor=True)
    assert_close(got, F.cross_entropy(flat_logits, flat_targets, reduction="sum"), tensor=True, rtol=1e-5, atol=1e-4,
                 what="causal_lm_loss(bf16 logits, labels, 'sum') against the cross-entropy of the upcast logits")
    wide = submission.causal_lm_loss(logits.double(), labels)
    check_array(wide, what="causal_lm_loss(float64 logits, labels)", shape=(), dtype=torch.float32, tensor=True)
    nothing = torch.full_like(labels, -100)
    nothing[:, 0] = 4                    # the first position is never a target
    empty_mean = submission.causal_lm_loss(logits, nothing)
    assert torch.isnan(empty_mean), \
        f"causal_lm_loss with no counted token: expected NaN (the mean is 0/0), got {shown(empty_mean)}"
    empty_sum = float(submission.causal_lm_loss(logits, nothing, reduction="sum"))
    assert empty_sum == 0.0, \
        f"causal_lm_loss(..., reduction='sum') with no counted token: expected 0.0, got {shown(empty_sum)}"


@pytest.mark.points(1)
@pytest.mark.concept("Weight decay groups")
@pytest.mark.timeout(QUICK)
def test_param_groups_with_tied_and_frozen_parameters(submission):
    """a micro Llama with tied embeddings and a frozen attention block: every trainable parameter once, matrices and
    embeddings decayed, norm weights not, frozen ones left out"""
    config = {**MICRO, "tie_word_embeddings": True}
    frozen = ("model.layers.0.self_attn.",)
    groups = submission.probe(probes.param_group_report, config, 0.3, frozen)
    model = probes.build_micro_llama(config, 0)
    trainable = {name: p for name, p in model.named_parameters() if not name.startswith(frozen)}
    listed = [name for group in groups for name in group["names"]]
    repeated = sorted({name for name in listed if listed.count(name) > 1})
    assert not repeated, f"listed more than once: {repeated} (a tied weight is one parameter)"
    assert sorted(listed) == sorted(trainable), (
        f"the groups' parameters: expected every trainable one, frozen ones left out, got "
        f"{shown(sorted(set(trainable) - set(listed)))} missing, {shown(sorted(set(listed) - set(trainable)))} extra")
    for group in groups:
        for name in group["names"]:
            want = 0.3 if trainable[name].ndim >= 2 else 0.0
            got = group["options"].get("weight_decay")
            assert got == want, (f"the group of {name} (ndim {trainable[name].ndim}): expected weight_decay={shown(want)}, "
                                 f"got weight_decay={shown(got)}")


# ---------------------------------------------------------------- the optimizer step

@pytest.mark.points(1)
@pytest.mark.concept("Zeroing gradients")
@pytest.mark.timeout(60)
def test_identical_batches_on_frozen_weights_give_identical_gradients(submission, tmp_path):
    """a learning rate too small to move the weights, and every batch the same document: each step's gradient norm
    equals the first's; no gradient left at the start of a step or after train"""
    same = [{"input_ids": [1, 17, 33, 8, 52, 40, 9, 27, 2]}] * 12
    cfg = run_config(tmp_path, train=same, max_lr=STILL_LR, min_lr=0.0, max_steps=3)
    seen = submission.probe(probes.watch_train, cfg)
    norms = [entry["grad_norm"] for entry in seen["result"]["log"]]
    assert len(norms) == 3, f"train's log with max_steps=3, log_every=1: expected 3 entries, got {len(norms)}"
    for step, norm in enumerate(norms[1:], start=2):
        assert close(norm, norms[0], **SAME_NUMBER), (
            f"step {step}'s gradient norm: expected step 1's {shown(norms[0])} (same weights, same batch), got "
            f"{shown(norm)}; {norm / norms[0]:.2f} times it means the earlier steps' gradients are still added in")
    assert seen["grads_at_step_start"] == [0, 0, 0], (
        f"parameters holding a gradient as each step's first forward pass began: expected [0, 0, 0], got "
        f"{shown(seen['grads_at_step_start'])}; zero_grad(set_to_none=True) after every optimizer.step() leaves none")
    assert seen["grads_left"] == 0, \
        f"parameters holding a gradient after train returned: expected 0, got {shown(seen['grads_left'])}"


@pytest.mark.points(1)
@pytest.mark.concept("Gradient accumulation")
@pytest.mark.timeout(60)
def test_accumulated_micro_batches_step_as_one_big_batch(submission, tmp_path):
    """3 micro-batches of 3 uneven examples per step train as batches of 9 (the same examples in the same order): same
    tokens, loss, gradient norm and weights"""
    cfg = run_config(tmp_path, train=uneven_documents(303, 27), max_steps=3)
    runs = [submission.probe(probes.watch_train, {**cfg, "batch_size": b, "grad_accum_steps": k,
                                                  "out_dir": str(tmp_path / f"b{b}x{k}")})
            for b, k in ((9, 1), (3, 3))]
    big, accumulated = (run["result"]["log"] for run in runs)
    assert len(accumulated) == 3, \
        f"train's log with grad_accum_steps=3, max_steps=3: expected 3 entries, got {len(accumulated)}"
    forwards = [len(s["forwards"]) for s in runs[1]["steps"]]
    assert forwards == [3, 3, 3], \
        f"grad_accum_steps=3: expected forward passes per optimizer step [3, 3, 3], got {shown(forwards)}"
    for step, (one, many) in enumerate(zip(big, accumulated), start=1):
        assert one["tokens"] == many["tokens"], (f"step {step}'s tokens with 3 micro-batches of 3: expected "
                                                 f"{shown(one['tokens'])} (one batch of 9), got {shown(many['tokens'])}")
        for key in ("loss", "grad_norm"):
            assert close(many[key], one[key], **SAME_NUMBER), (
                f"step {step}'s {key} with 3 micro-batches of 3: expected {shown(one[key])} (one batch of 9), got "
                f"{shown(many[key])}: every token of the step weighs the same (sum of token losses / tokens of the "
                "step), and no micro-batch is lost")
    assert_close(runs[1]["final_params"], runs[0]["final_params"], what="parameters after 3 accumulated steps",
                 tensor=True, rtol=0, atol=SAME_PARAMS_ATOL)
    model = probes.build_micro_llama(MICRO, cfg["seed"])
    model(**contract_batches(uneven_documents(303, 27), 9, cfg["seed"], 1)[0]).loss.backward()
    oracle = float(torch.linalg.vector_norm(torch.cat([p.grad.reshape(-1) for p in model.parameters()])))
    assert close(accumulated[0]["grad_norm"], oracle, **SAME_NUMBER), (
        f"step 1's gradient norm: expected {shown(oracle)} (the mean token loss of its 9 examples), got "
        f"{shown(accumulated[0]['grad_norm'])}: backward each micro-batch's summed loss divided by the step's tokens")


@pytest.mark.points(1)
@pytest.mark.concept("Clipping")
@pytest.mark.timeout(60)
def test_the_applied_gradient_is_clipped_and_the_log_has_the_norm_before(submission, tmp_path):
    """clip_norm far below the gradient norm: the gradient optimizer.step() applies has norm clip_norm (one global clip,
    before the step); the log keeps the norm before clipping"""
    cfg = run_config(tmp_path, clip_norm=0.02, grad_accum_steps=2, max_steps=3)
    seen = submission.probe(probes.watch_train, cfg)
    logged = [entry["grad_norm"] for entry in seen["result"]["log"]]
    applied = [step["applied_grad_norm"] for step in seen["steps"]]
    assert len(applied) == len(logged) == cfg["max_steps"], (
        f"train with max_steps={cfg['max_steps']}: expected {cfg['max_steps']} optimizer steps and as many log entries, "
        f"got {len(applied)} and {len(logged)}")
    assert all(norm > 0.1 for norm in logged), (
        f"logged gradient norms: expected every one above 0.1 (clip_norm is 0.02), got {shown(logged)}: log "
        "clip_grad_norm_'s return value, the norm before clipping")
    for step, norm in enumerate(applied, start=1):
        assert close(norm, 0.02, rtol=1e-3, atol=0), (
            f"optimizer step {step}'s applied gradient norm: expected 0.02 (clip_norm), got {shown(norm)}: clip the "
            "whole gradient at once (clip_grad_norm_(model.parameters(), clip_norm)), after the last backward and "
            "before optimizer.step()")


@pytest.mark.points(1)
@pytest.mark.concept("Mixed precision")
@pytest.mark.timeout(60)
def test_bf16_autocast_on_every_training_forward_with_float32_weights(submission, tmp_path):
    """amp='bf16': every training forward under bf16 autocast, weights and AdamW state float32; amp=None: no autocast"""
    cfg = run_config(tmp_path, grad_accum_steps=2, max_steps=2)
    for amp in ("bf16", None):
        seen = submission.probe(probes.watch_train, {**cfg, "amp": amp, "out_dir": str(tmp_path / f"amp-{amp}")})
        flags = [forward["bf16_autocast"] for step in seen["steps"] for forward in step["forwards"]]
        assert flags and all(flag == (amp == "bf16") for flag in flags), (
            f"amp={shown(amp)}: expected bf16 autocast {amp == 'bf16'} on every training forward pass, got "
            f"{shown(flags)}")
        assert seen["param_dtypes"] == ["torch.float32"], (
            f"amp={shown(amp)}: expected parameter dtypes ['torch.float32'], got {shown(seen['param_dtypes'])}; "
            "autocast keeps float32 master weights")
        assert seen["steps"][-1]["state_dtypes"] == ["torch.float32"], (
            f"amp={shown(amp)}: expected AdamW state dtypes ['torch.float32'], got "
            f"{shown(seen['steps'][-1]['state_dtypes'])}")


# ---------------------------------------------------------------- evaluation

@pytest.mark.points(1)
@pytest.mark.concept("Evaluation mode")
@pytest.mark.timeout(60)
def test_evaluate_in_eval_mode_without_a_graph(submission):
    """with dropout in the model: every forward under no_grad in eval mode, the mode it found restored, a Python float
    that is the mean over all counted tokens of batches of unequal token counts"""
    config = {**MICRO, "attention_dropout": 0.3}
    rows = uneven_documents(404, 7)
    batches = [padded(rows[:4]), padded(rows[4:6]), padded(rows[6:])]
    model = probes.build_micro_llama(config, 5).eval()
    expected = token_mean_loss(model, batches)
    for train_mode in (True, False):
        seen = submission.probe(probes.watch_evaluate, config, 5, batches, train_mode)
        assert len(seen["passes"]) == 3, f"evaluate on 3 batches: expected 3 forward passes, got {len(seen['passes'])}"
        assert not any(p["grad"] for p in seen["passes"]), "evaluate ran a forward pass with grad enabled: torch.no_grad()"
        assert not any(p["training"] for p in seen["passes"]), "evaluate ran a forward pass in train mode: model.eval()"
        assert seen["training_after"] == train_mode, (
            f"the model's mode after evaluate: expected {'train' if train_mode else 'eval'} (the mode it came in), "
            f"got {'train' if seen['training_after'] else 'eval'}: restore the mode it was in")
        assert isinstance(seen["value"], float), f"evaluate returned a {type(seen['value']).__name__}, not a float"
        assert close(seen["value"], expected, **SAME_NUMBER), (
            f"evaluate on 3 batches: expected {shown(expected)} (the mean over every counted token), got "
            f"{shown(seen['value'])}; a mean of per-batch means weighs a short batch's tokens more")


# ---------------------------------------------------------------- resuming

@pytest.mark.points(1)
@pytest.mark.concept("Resuming")
@pytest.mark.timeout(60)
def test_an_interrupted_run_resumes_as_if_nothing_happened(submission, tmp_path):
    """dropout on, 2 micro-batches per step, checkpoint at step 3, interrupted after step 5 and resumed: 3 more steps,
    the same log, eval and final weights as the uninterrupted 6 steps; log.jsonl holds steps 1-6 once each"""
    write_model(tmp_path / "dropout", attention_dropout=0.1)
    cfg = run_config(tmp_path, model_dir=str(tmp_path / "dropout"), batch_size=3, grad_accum_steps=2, max_steps=6,
                     eval_every=3)
    whole = submission.probe(probes.watch_train, {**cfg, "out_dir": str(tmp_path / "whole")})
    broken = {**cfg, "out_dir": str(tmp_path / "broken")}
    first = submission.probe(probes.watch_train, broken, 5)
    assert first["result"] is None, "the run was to be cut short after step 5, yet train returned a result"
    assert len(first["steps"]) == 5, \
        f"the run cut short after step 5: expected 5 optimizer steps, got {len(first['steps'])}"
    second = submission.probe(probes.watch_train, {**broken, "resume": True})
    assert len(second["steps"]) == 3, (
        f"the resumed run, from the checkpoint of step 3 to max_steps=6: expected 3 optimizer steps, got "
        f"{len(second['steps'])} (restore the step, the weights, the optimizer, the data position and the random state)")
    want, got = whole["result"], second["result"]
    lines = learner_jsonl(tmp_path / "broken" / "log.jsonl", tmp_path)
    assert [e.get("step") for e in lines] == [1, 2, 3, 4, 5, 6], (
        f"log.jsonl's steps after the resume: expected [1, 2, 3, 4, 5, 6], got {shown([e.get('step') for e in lines])}: "
        "one line per step, as an uninterrupted run writes it (drop the lines written after the checkpoint, keep those "
        "before it)")
    assert [e.get("step") for e in got["log"]] == [1, 2, 3, 4, 5, 6], (
        f"the resumed train's returned log: expected steps [1, 2, 3, 4, 5, 6] (the whole run's), got "
        f"{shown([e.get('step') for e in got['log']])}")
    for name, log in (("log.jsonl", lines), ("the returned log", got["log"])):
        for mine, theirs in zip(log, want["log"]):
            same = mine["tokens"] == theirs["tokens"] and all(
                close(mine[key], theirs[key], **SAME_NUMBER) for key in ("loss", "grad_norm", "lr"))
            off = [key for key in ("tokens", "loss", "grad_norm", "lr")
                   if not close(mine.get(key), theirs[key], **(dict(rtol=0, atol=0) if key == "tokens" else SAME_NUMBER))]
            assert same, (f"step {mine['step']} of {name} after the resume: expected {shown({k: theirs[k] for k in off})} "
                          f"(uninterrupted), got {shown({k: mine.get(k, '(missing)') for k in off})} (first resumed "
                          "step off: weights, data position or dropout's random state; later: the optimizer)")
    assert [e["step"] for e in got["eval"]] == [e["step"] for e in want["eval"]], (
        f"eval steps after the resume: expected {shown([e['step'] for e in want['eval']])} (uninterrupted), got "
        f"{shown([e['step'] for e in got['eval']])}")
    assert all(close(a["eval_loss"], b["eval_loss"], **SAME_NUMBER) for a, b in zip(got["eval"], want["eval"])), (
        f"eval losses after the resume: expected {shown([e['eval_loss'] for e in want['eval']])} (uninterrupted), "
        f"got {shown([e['eval_loss'] for e in got['eval']])}")
    assert close(got["final_eval_loss"], want["final_eval_loss"], **SAME_NUMBER), (
        f"final_eval_loss after the resume: expected {shown(want['final_eval_loss'])} (uninterrupted), got "
        f"{shown(got['final_eval_loss'])}")
    assert_close(second["final_params"], whole["final_params"], what="final weights, resumed against uninterrupted",
                 tensor=True, rtol=0, atol=SAME_PARAMS_ATOL)


@pytest.mark.points(0.5)
@pytest.mark.concept("Resuming")
@pytest.mark.timeout(60)
def test_resume_without_a_checkpoint_raises(submission, tmp_path):
    """resume=True and no checkpoint.pt in out_dir: FileNotFoundError, never a fresh start"""
    cfg = run_config(tmp_path, max_steps=1, resume=True)
    with pytest.raises(StudentError) as raised:
        submission.train(cfg)
    if raised.value.not_implemented:
        raise raised.value                  # a stub: say so, as every other test does
    assert raised.value.info["type"] == "FileNotFoundError", \
        f"train(resume=True) without a checkpoint: expected FileNotFoundError, got {raised.value.info['type']}"


# ---------------------------------------------------------------- records and curves

@pytest.mark.points(1)
@pytest.mark.concept("The run record")
@pytest.mark.timeout(60)
def test_log_cadence_and_run_record(submission, tmp_path):
    """log_every=2, eval_every=2, 5 steps: log lines and evaluations at steps 2 and 4, log.jsonl is the returned log;
    run.json holds run id, commit, config, data version, seed, environment and metrics"""
    cfg = run_config(tmp_path, max_steps=5, log_every=2, eval_every=2)
    result = submission.train(cfg)
    lines = learner_jsonl(tmp_path / "run" / "log.jsonl", tmp_path)
    assert [e.get("step") for e in lines] == [2, 4], \
        f"log.jsonl with log_every=2, max_steps=5: expected steps [2, 4], got {shown([e.get('step') for e in lines])}"
    assert lines == result["log"], \
        f"log.jsonl: expected the returned log {shown(result['log'])}, got {shown(lines)}"
    for entry in lines:
        assert {"step", "loss", "lr", "grad_norm", "tokens"} <= set(entry), \
            f"a log line: expected the fields step, loss, lr, grad_norm and tokens, got {shown(entry)}"
    assert [e.get("step") for e in result["eval"]] == [2, 4], (f"eval with eval_every=2, max_steps=5: expected steps "
                                                             f"[2, 4], got {shown([e.get('step') for e in result['eval']])}")
    assert (tmp_path / "run" / "checkpoint.pt").is_file(), "train wrote no out_dir/checkpoint.pt"
    record = learner_json(result["record"], tmp_path)
    assert record.get("commit") == submission.git_head, (f"run.json's commit: expected {shown(submission.git_head)} "
                                                         f"(your module's repository), got {shown(record.get('commit'))}")
    digests = {key: hashlib.sha256(open(cfg[key], "rb").read()).hexdigest() for key in ("train_path", "eval_path")}
    assert record.get("data_version") == digests, (
        f"run.json's data_version: expected the sha256 of each data file's bytes, {shown(digests, 200)}, got "
        f"{shown(record.get('data_version'), 200)}")
    assert record.get("seed") == cfg["seed"], \
        f"run.json's seed: expected {shown(cfg['seed'])} (the run's), got {shown(record.get('seed'))}"
    assert record.get("config", {}).get("log_every") == 2, (
        f"run.json's config['log_every']: expected 2 (the run's), got {shown(record.get('config', {}).get('log_every'))}: "
        "the run's full configuration, defaults included")
    assert record["config"].get("betas") == [0.9, 0.95], (
        f"run.json's config['betas']: expected [0.9, 0.95] (the default, as a list), got "
        f"{shown(record['config'].get('betas'))}: the run's full configuration, defaults included")
    environment = record.get("environment", {})
    assert {"python", "platform", "device"} <= set(environment), \
        f"run.json's environment: expected the keys python, platform and device, got {shown(sorted(environment))}"
    assert environment.get("torch") == torch.__version__, (f"run.json's environment['torch']: expected "
                                                           f"{shown(torch.__version__)}, got {shown(environment.get('torch'))}")
    assert environment.get("transformers") == transformers.__version__, (
        f"run.json's environment['transformers']: expected {shown(transformers.__version__)}, got "
        f"{shown(environment.get('transformers'))}")
    metrics = record.get("metrics", {})
    assert metrics.get("final_eval_loss") == result["final_eval_loss"], (
        f"run.json's metrics['final_eval_loss']: expected {shown(result['final_eval_loss'])} (train's returned one), "
        f"got {shown(metrics.get('final_eval_loss'))}")
    assert metrics.get("steps") == 5, f"run.json's metrics['steps']: expected 5, got {shown(metrics.get('steps'))}"
    assert (metrics.get("tokens_per_s") or 0) > 0, \
        f"run.json's metrics['tokens_per_s']: expected a rate above 0, got {shown(metrics.get('tokens_per_s'))}"
    again = submission.train({**cfg, "log_every": 1, "out_dir": str(tmp_path / "again")})
    other = learner_json(again["record"], tmp_path)
    assert isinstance(record.get("run_id"), str), \
        f"run.json's run_id: expected a string, got {shown(record.get('run_id'))}"
    assert other.get("run_id") != record["run_id"], (f"two runs of one configuration: expected two different run ids, got "
                                                     f"{shown(record['run_id'])} twice")
    tokens = sum(e["tokens"] for e in again["log"])
    assert other["metrics"].get("tokens") == tokens, (f"run.json's metrics['tokens']: expected {shown(tokens)} (the "
                                                      f"tokens counted in the loss over all steps), got "
                                                      f"{shown(other['metrics'].get('tokens'))}")


@pytest.mark.points(1)
@pytest.mark.concept("Curves")
@pytest.mark.timeout(60)
def test_plot_curves_draws_loss_above_lr_on_log_steps_into_a_png(submission, tmp_path):
    """plot_curves turns a log.jsonl into a PNG file of two subplots, both with a logarithmic step axis: the loss
    above, the learning rate below"""
    log = [{"step": s, "loss": 3.0 - math.log(s) / 4, "lr": 5e-4 * min(1.0, s / 6), "grad_norm": 0.5, "tokens": 64}
           for s in range(1, 25)]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    axes = submission.probe(probes.watch_plot, str(tmp_path / "log.jsonl"), str(tmp_path / "curves.png"))
    head = learner_file(tmp_path / "curves.png", tmp_path)[:4]
    assert head == b"\x89PNG", f"curves.png: expected a PNG, starting b'\\x89PNG', got a file starting {shown(head)}"
    assert len(axes) == 2, \
        f"the saved figure: expected 2 axes (two subplots, loss and learning rate), got {len(axes)}"
    def drawing(key):
        values = [e[key] for e in log]
        return [ax for ax in axes if any(len(y) == len(values) and all(math.isclose(a, b) for a, b in zip(y, values))
                                         for _, y in ax["lines"])]
    loss, lr = drawing("loss"), drawing("lr")
    assert loss and lr, "one subplot draws the logged loss, the other the logged lr, against the steps"
    assert loss[0]["xscale"] == "log" and lr[0]["xscale"] == "log", (
        f"step axes' scales: expected 'log' for both (one shared axis), got {shown(loss[0]['xscale'])} (loss) and "
        f"{shown(lr[0]['xscale'])} (lr)")
    assert loss[0]["top"] > lr[0]["top"], (
        f"the loss subplot's top: expected above the lr subplot's {shown(lr[0]['top'])}, got {shown(loss[0]['top'])}: "
        "the loss goes above, the learning rate below")


# ---------------------------------------------------------------- configuration and determinism

@pytest.mark.points(1)
@pytest.mark.concept("Configuration")
@pytest.mark.timeout(60)
def test_left_out_keys_mean_the_readme_defaults(submission, tmp_path):
    """the required keys and max_steps alone train as the README's defaults spelled out; out_dir is created, however
    deep; run.json records the defaults"""
    cfg = run_config(tmp_path)
    required = {key: cfg[key] for key in ("model_dir", "train_path", "eval_path")}
    short = submission.train({**required, "max_steps": 3, "out_dir": str(tmp_path / "new" / "deeper")})
    spelled = submission.train({**README_DEFAULTS, **required, "max_steps": 3, "out_dir": str(tmp_path / "spelled")})
    differ = next((i for i, (a, b) in enumerate(zip(short["log"], spelled["log"])) if a != b), None)
    left_out, spelled_out = (short["log"], spelled["log"]) if differ is None else (short["log"][differ], spelled["log"][differ])
    assert short["log"] == spelled["log"], (
        f"train with keys left out: expected the log of the defaults spelled out, {shown(spelled_out)}, got "
        f"{shown(left_out)}: a left-out key takes its default")
    recorded = learner_json(short["record"], tmp_path).get("config", {})
    wrong = {key: recorded.get(key, "(missing)") for key, value in README_DEFAULTS.items()
             if key != "max_steps" and recorded.get(key, "(missing)") != value}
    assert not wrong, (f"run.json's config: expected the README's defaults "
                       f"{shown({key: README_DEFAULTS[key] for key in wrong})}, got {shown(wrong)}")


@pytest.mark.points(0.5)
@pytest.mark.concept("The determinism contract")
@pytest.mark.timeout(60)
def test_one_seed_one_run(submission, tmp_path):
    """two runs with one seed log the same numbers; another seed logs others"""
    cfg = run_config(tmp_path, max_steps=2)
    logs = [[(e["loss"], e["grad_norm"], e["tokens"]) for e in
             submission.train({**cfg, "seed": seed, "out_dir": str(tmp_path / f"seed{i}")})["log"]]
            for i, seed in enumerate((29, 29, 30))]
    assert logs[0] == logs[1], (f"two runs with seed 29: expected one log (loss, grad_norm, tokens), got "
                                f"{shown(logs[0])} and {shown(logs[1])}; seed the model and the data order")
    assert logs[0] != logs[2], \
        f"seeds 29 and 30: expected two different logs, got {shown(logs[0])} twice: the seed is not used"


@pytest.mark.points(1)
@pytest.mark.concept("The determinism contract")
@pytest.mark.timeout(60)
def test_the_contracts_model_and_eval_batches(submission, tmp_path):
    """scratch: the weights torch.manual_seed(seed) then from_config draw; pretrained from a bf16 checkpoint: its
    weights in float32, trained in train mode; with weights that do not move, the final eval loss is the token mean
    over every eval example, the last batch smaller"""
    cfg = run_config(tmp_path, max_lr=STILL_LR, min_lr=0.0, max_steps=1, evaluation=uneven_documents(505, 10))
    scratch = submission.probe(probes.watch_train, cfg)
    assert_close(scratch["initial_params"], probes.flat(probes.build_micro_llama(MICRO, cfg["seed"]).parameters()),
                 what="weights at the first forward pass (scratch)", tensor=True, rtol=0, atol=1e-7)
    probes.build_micro_llama(MICRO, 77).to(torch.bfloat16).save_pretrained(tmp_path / "pretrained")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "pretrained", dtype=torch.float32).eval()
    pretrained = submission.probe(probes.watch_train, {**cfg, "init": "pretrained", "out_dir": str(tmp_path / "p"),
                                                       "model_dir": str(tmp_path / "pretrained")})
    assert pretrained["param_dtypes"] == ["torch.float32"], (
        f"a bf16 checkpoint trained: expected parameter dtypes ['torch.float32'], got "
        f"{shown(pretrained['param_dtypes'])}: the contract trains float32 weights")
    assert all(f["training"] for step in pretrained["steps"] for f in step["forwards"]), \
        "a pretrained model trained in eval mode (from_pretrained returns one): call model.train()"
    assert_close(pretrained["initial_params"], probes.flat(loaded.parameters()), tensor=True, rtol=0, atol=0,
                 what="weights at the first forward pass (pretrained)")
    rows = uneven_documents(505, 10)
    expected = token_mean_loss(loaded, [padded(rows[i:i + 4]) for i in range(0, 10, 4)])
    assert close(pretrained["result"]["final_eval_loss"], expected, **SAME_NUMBER), (
        f"final_eval_loss: expected {shown(expected)} (the unchanged model's mean over all 10 eval examples, 4 at a "
        f"time in file order, the last batch of 2), got {shown(pretrained['result']['final_eval_loss'])}")


@pytest.mark.points(1)
@pytest.mark.concept("The determinism contract")
@pytest.mark.timeout(60)
def test_steps_take_the_contracts_batches_across_epochs(submission, tmp_path):
    """22 examples, batches of 4, 2 per step, 6 steps: each step's token count is that of the next two batches of the
    contract's loader (seeded, shuffled, incomplete batches dropped, a new order every epoch, steps across epochs)"""
    rows = uneven_documents(606, 22)
    cfg = run_config(tmp_path, train=rows, batch_size=4, grad_accum_steps=2, max_steps=6)
    batches = contract_batches(rows, 4, cfg["seed"], 12)
    expected = [counted(batches[i]) + counted(batches[i + 1]) for i in range(0, 12, 2)]
    got = [entry["tokens"] for entry in submission.train(cfg)["log"]]
    assert got == expected, (
        f"tokens per step: expected {shown(expected)} (the contract's loader), got {shown(got)}; 5 batches an epoch: "
        "the third step takes the last batch of epoch 1 and the first of epoch 2")


# ---------------------------------------------------------------- convergence

def two_way_corpus(seed, n, length=14):
    """Documents whose every next token is one of two, equally likely (the previous plus 1 or 2, wrapping):
    after the first one, a predicted token carries exactly ln 2 nats."""
    draw, span = random.Random(seed), VOCAB - 3
    rows = []
    for _ in range(n):
        x = draw.randrange(span)
        ids = [1, 3 + x]
        for _ in range(length - 1):
            x = (x + draw.choice((1, 2))) % span
            ids.append(3 + x)
        rows.append({"input_ids": ids + [2]})
    return rows


@pytest.mark.points(1)
@pytest.mark.concept("Convergence")
@pytest.mark.timeout(90)
def test_a_micro_model_learns_a_two_way_corpus(submission, tmp_path):
    """60 steps from scratch on documents with a known floor: the final model's eval loss, measured here, ends within
    0.2 nats above the floor and not below it"""
    length = 14
    floor = (math.log(VOCAB - 3) + (length - 1) * math.log(2)) / (length + 1)   # first token, steps of ln 2, eos
    config = dict(MICRO, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2)
    LlamaConfig(**config).save_pretrained(tmp_path / "wider")
    cfg = run_config(tmp_path, train=two_way_corpus(7, 640, length), evaluation=two_way_corpus(8, 64, length),
                     model_dir=str(tmp_path / "wider"), batch_size=16, max_steps=60, warmup_steps=6, max_lr=3e-2,
                     min_lr=3e-3, weight_decay=0.1, clip_norm=1.0, log_every=10, eval_every=1000)
    seen = submission.probe(probes.watch_train, cfg)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**config), dtype=torch.float32)
    torch.nn.utils.vector_to_parameters(seen["final_params"], model.parameters())
    rows = two_way_corpus(8, 64, length)
    measured = token_mean_loss(model.eval(), [padded(rows[i:i + 16]) for i in range(0, 64, 16)])
    assert measured >= floor - 0.05, (
        f"the final model's eval loss: expected at least {floor - 0.05:.3f} nats/token (the floor {floor:.3f}, which "
        f"no model can beat, less 0.05), got {measured:.3f}: does the loss score the next token (the shift)?")
    assert measured <= floor + QUICK_CONVERGENCE_MARGIN, (
        f"the final model's eval loss after 60 steps: expected at most {floor + QUICK_CONVERGENCE_MARGIN:.3f} "
        f"nats/token (a correct loop ends within {QUICK_CONVERGENCE_MARGIN} of the floor {floor:.3f}), got {measured:.3f}")
