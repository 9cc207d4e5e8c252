"""Hidden suite for exercise 02 (the training loop). PYTEST_DONT_REWRITE

Oracles: transformers' schedules and its models' own loss, torch's AdamW and clip_grad_norm_,
and `replay.py`, which replays the README's determinism contract from those library pieces.
Training runs use a micro Llama (about 25k parameters) on generated token data, so a run of a
few steps takes well under a second; one test trains the datasets' model config from scratch
on the corpus and compares its eval loss with the corpus's known floor.
"""
import hashlib
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, get_cosine_schedule_with_warmup
from transformers import get_cosine_with_min_lr_schedule_with_warmup

from grader.core.checks import GRADING, ConceptError, assert_close, assert_equal, check_array, sibling_module

probes = sibling_module(__file__, "probes")
replay = sibling_module(__file__, "replay")
convergence = sibling_module(__file__, "convergence")

LR = dict(rtol=1e-12, atol=1e-15)         # closed-form schedule: only float rounding differs
LOSS = dict(rtol=1e-5, atol=1e-6)          # float32 cross-entropy, summed in another order
# Parameters are compared relative to how far the step moved them: reordered float32 sums
# (an equivalent loss reduction) drift to ~1e-5 of a step's update over 8 steps, while every
# wrong loop seen moves them by more than 1e-2 of it (AdamW magnifies noise in near-zero
# gradients, so a per-element tolerance would have to be loose where it matters).
PARAMS_OF_UPDATE = 1e-3
CONVERGENCE_MARGIN = 0.45                  # nats/token above the floor; the reference ends ~0.35 above it

LOSS_CONCEPT = "The loss: shift, ignore_index, float32"
VOCAB = 97
MICRO_LLAMA = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                   tie_word_embeddings=False)


# ---------------------------------------------------------------- scenario data (generated per test)

def write_model_dir(folder, **config):
    LlamaConfig(**{**MICRO_LLAMA, **config}).save_pretrained(folder)
    return str(folder)


def write_documents(path, rng, n, prompt_share=0.3):
    """Token documents of uneven lengths (bos ... eos); some carry labels that mask a prompt."""
    with open(path, "w") as f:
        for _ in range(n):
            ids = [1, *rng.integers(3, VOCAB, size=int(rng.integers(3, 24))).tolist(), 2]
            row = {"input_ids": ids}
            if rng.random() < prompt_share:
                cut = int(rng.integers(1, len(ids) - 1))
                row["labels"] = [-100] * cut + ids[cut:]
            f.write(json.dumps(row) + "\n")
    return str(path)


def scenario(tmp_path, rng, **overrides):
    cfg = {"model_dir": write_model_dir(tmp_path / "model"),
           "train_path": write_documents(tmp_path / "train.jsonl", rng, 120),
           "eval_path": write_documents(tmp_path / "eval.jsonl", rng, 20),
           "out_dir": str(tmp_path / "run"), "seed": int(rng.integers(1000)), "batch_size": 4,
           "grad_accum_steps": 1, "max_steps": 6, "warmup_steps": 2, "max_lr": 1e-2, "min_lr": 1e-3,
           "weight_decay": 0.0, "betas": (0.9, 0.95), "clip_norm": 1e9, "amp": None, "device": "cpu",
           "log_every": 1, "eval_every": 100}
    cfg.update(overrides)
    return cfg


def close(a, b, rtol, atol):
    return abs(a - b) <= atol + rtol * abs(b)


def params_close(seen, want, before):
    """`seen` is within PARAMS_OF_UPDATE of the update that took `before` to `want`."""
    difference = torch.linalg.vector_norm(seen - want)
    return bool(difference <= PARAMS_OF_UPDATE * torch.linalg.vector_norm(want - before) + 1e-9)


def compare_with_replay(watched, expected, params_concept):
    """Walk the steps in causal order; the first difference names the concept that broke."""
    log = (watched["result"] or {}).get("log") or []
    if len(watched["steps"]) != len(expected["steps"]):
        raise ConceptError("The determinism contract", f"train took {len(watched['steps'])} optimizer steps, "
                           f"the configuration asks for {len(expected['steps'])}")
    if len(log) != len(expected["steps"]):
        raise ConceptError("The run record", f"with log_every=1 the log should have {len(expected['steps'])} "
                           f"entries, it has {len(log)}")
    before = expected["initial_params"]
    for step, (seen, entry, want) in enumerate(zip(watched["steps"], log, expected["steps"]), start=1):
        if entry.get("tokens") != want["tokens"]:
            raise ConceptError("Batching and padding", f"step {step} counted {entry.get('tokens')} tokens in its "
                               f"loss, the reference {want['tokens']}: padding and masked labels must not count")
        if not close(entry.get("loss", math.nan), want["loss"], **LOSS):
            raise ConceptError(LOSS_CONCEPT, f"the loss logged at step {step} is {entry.get('loss')}, the "
                               f"reference {want['loss']:.6f} (same weights, same batch)")
        if not close(entry.get("grad_norm", math.nan), want["grad_norm"], **LOSS):
            concept = "Gradient accumulation" if step == 1 else "Zeroing gradients"
            raise ConceptError(concept, f"the gradient norm before clipping at step {step} is "
                               f"{entry.get('grad_norm')}, the reference {want['grad_norm']:.6f}"
                               + (" (step 1 matched: are last step's gradients still there?)" if step > 1 else ""))
        if not close(seen["lr"], want["lr"], **LR):
            raise ConceptError("Warmup and cosine", f"optimizer step {step} ran with lr {seen['lr']:.6g}, "
                               f"the schedule says {want['lr']:.6g}")
        if not params_close(seen["params"], want["params"], before):
            worst = int((seen["params"] - want["params"]).abs().argmax())
            raise ConceptError(params_concept, f"after step {step} the parameters differ from the reference "
                               f"(loss, gradient norm and lr matched): parameter #{worst} is "
                               f"{seen['params'][worst]:.7g}, expected {want['params'][worst]:.7g}")
        before = want["params"]


# ---------------------------------------------------------------- collate

@pytest.mark.points(2)
@pytest.mark.concept("Batching and padding")
@GRADING
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=6), pad_id=st.integers(0, 5),
       masked=st.lists(st.booleans(), min_size=6, max_size=6))
def test_collate_right_pads_and_masks(submission, lengths, pad_id, masked):
    """input_ids right-padded with pad_id, labels -100 on padding (given labels kept), attention mask 1/0"""
    examples = []
    for i, n in enumerate(lengths):
        ids = [10 + (7 * i + j) % 50 for j in range(n)]
        example = {"input_ids": ids}
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


@pytest.mark.points(2)
@pytest.mark.concept(LOSS_CONCEPT)
def test_causal_lm_loss_runs_in_float32_for_bf16_logits(submission):
    """bf16 logits: the loss is computed and returned in float32 (upcast before the softmax)"""
    model, input_ids, labels = _micro_model_and_batch(2)
    with torch.no_grad():
        logits = (model(input_ids=input_ids).logits * 8).bfloat16()     # sharp logits: bf16 rounding shows
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
    got = submission.causal_lm_loss(logits, labels)
    assert hasattr(got, "dtype") and got.dtype == torch.float32, \
        f"causal_lm_loss on bf16 logits returned {getattr(got, 'dtype', type(got))}: upcast the logits with .float()"
    assert_close(got, expected, what="causal_lm_loss on bf16 logits", tensor=True, **LOSS)


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
    assert close(seen["value"], expected, **LOSS), \
        f"evaluate returned {seen['value']!r}, expected the mean over all counted tokens {expected:.6f}"


# ---------------------------------------------------------------- the loop against the replay

@pytest.mark.points(4)
@pytest.mark.concept("Zeroing gradients")
@pytest.mark.timeout(120)
def test_steps_match_the_replay(submission, rng, tmp_path):
    """one micro-batch per step: tokens, loss, gradient norm, lr and parameters match the replay, step by step"""
    cfg = scenario(tmp_path, rng)
    compare_with_replay(submission.probe(probes.watch_training, cfg), replay.replay(cfg), "The optimizer step")


@pytest.mark.points(4)
@pytest.mark.concept("Gradient accumulation")
@pytest.mark.timeout(120)
def test_accumulation_with_unequal_token_counts(submission, rng, tmp_path):
    """three micro-batches of unequal token counts per step: every token of the step weighs the same"""
    cfg = scenario(tmp_path, rng, grad_accum_steps=3)
    expected = replay.replay(cfg)
    assert len({s["tokens"] for s in expected["steps"]}) > 1
    compare_with_replay(submission.probe(probes.watch_training, cfg), expected, "Gradient accumulation")


@pytest.mark.points(3)
@pytest.mark.concept("Clipping")
@pytest.mark.timeout(120)
def test_active_clipping(submission, rng, tmp_path):
    """a clip norm far below the gradient norm: one global clip of the whole gradient, before the step"""
    cfg = scenario(tmp_path, rng, clip_norm=0.05, grad_accum_steps=2)
    expected = replay.replay(cfg)
    assert min(s["grad_norm"] for s in expected["steps"]) > 0.05
    compare_with_replay(submission.probe(probes.watch_training, cfg), expected, "Clipping")


@pytest.mark.points(3)
@pytest.mark.concept("Weight decay groups")
@pytest.mark.timeout(120)
def test_strong_weight_decay(submission, rng, tmp_path):
    """weight decay 0.5: only matrices and embeddings decay, in AdamW's decoupled way"""
    cfg = scenario(tmp_path, rng, weight_decay=0.5, max_lr=3e-2)
    compare_with_replay(submission.probe(probes.watch_training, cfg), replay.replay(cfg), "Weight decay groups")


@pytest.mark.points(2)
@pytest.mark.concept("The determinism contract")
@pytest.mark.timeout(120)
def test_same_seed_same_log_other_seed_other_log(submission, rng, tmp_path):
    """two runs with one seed log the same numbers; another seed gives another run"""
    cfg = scenario(tmp_path, rng, max_steps=3, warmup_steps=1)
    runs = [submission.train({**cfg, "seed": seed, "out_dir": str(tmp_path / f"run{i}")})
            for i, seed in enumerate([cfg["seed"], cfg["seed"], cfg["seed"] + 1])]
    logs = [[(e["loss"], e["grad_norm"], e["tokens"]) for e in run["log"]] for run in runs]
    assert logs[0] == logs[1], "two runs with the same seed logged different numbers: seed the model and the data order"
    assert logs[0] != logs[2], "runs with different seeds logged the same numbers: the seed is not used"


@pytest.mark.points(4)
@pytest.mark.concept("Resuming")
@pytest.mark.timeout(120)
def test_resume_reproduces_an_uninterrupted_run(submission, rng, tmp_path):
    """interrupted after step 5 (checkpoint at 4) and resumed: same parameters and log as one uninterrupted run"""
    cfg = scenario(tmp_path, rng, grad_accum_steps=2, max_steps=8, eval_every=4, batch_size=5)
    whole = submission.probe(probes.watch_training, {**cfg, "out_dir": str(tmp_path / "whole")})
    broken = {**cfg, "out_dir": str(tmp_path / "broken")}
    first = submission.probe(probes.watch_training, broken, 5)
    assert first["result"] is None and len(first["steps"]) == 5, "the run was meant to be interrupted after step 5"
    second = submission.probe(probes.watch_training, {**broken, "resume": True})
    assert len(second["steps"]) == 4, f"the resumed run took {len(second['steps'])} steps; from the checkpoint " \
                                      "of step 4 to max_steps=8 it should take 4"
    for offset, (got, want) in enumerate(zip(second["steps"], whole["steps"][4:]), start=5):
        before = whole["steps"][offset - 2]["params"]
        assert close(got["lr"], want["lr"], **LR), f"resumed step {offset} ran with lr {got['lr']:.6g}, " \
                                                   f"the uninterrupted run with {want['lr']:.6g}: restore the step"
        assert params_close(got["params"], want["params"], before), (
            f"after resumed step {offset} the parameters differ from the uninterrupted run: restore the model, "
            "the optimizer state (AdamW's moments) and the position in the data")
    resumed_log = [(e["step"], e["tokens"]) for e in second["result"]["log"]]
    whole_log = [(e["step"], e["tokens"]) for e in whole["result"]["log"]]
    assert resumed_log == whole_log, f"after resuming, the log reads {resumed_log}; the uninterrupted run's {whole_log}"
    lines = [json.loads(l) for l in open(tmp_path / "broken" / "log.jsonl") if l.strip()]
    assert [e["step"] for e in lines] == list(range(1, 9)), \
        f"after resuming, log.jsonl holds steps {[e['step'] for e in lines]}: one entry per step, none repeated"


@pytest.mark.points(2)
@pytest.mark.concept("Mixed precision")
@pytest.mark.timeout(120)
def test_bf16_autocast_keeps_float32_weights_and_state(submission, rng, tmp_path):
    """amp='bf16' on CPU: autocast computes in bf16, parameters and AdamW state stay float32"""
    cfg = scenario(tmp_path, rng, amp="bf16", grad_accum_steps=2)
    watched = submission.probe(probes.watch_training, cfg)
    assert watched["dtypes"].get("params") == ["torch.float32"], \
        f"after bf16 training the parameters are {watched['dtypes'].get('params')}: keep fp32 master weights, use autocast"
    assert watched["dtypes"].get("optimizer_state") == ["torch.float32"], \
        f"AdamW's state is {watched['dtypes'].get('optimizer_state')}, expected float32"
    expected = replay.replay(cfg)
    got_loss = [e["loss"] for e in watched["result"]["log"]]
    want_loss = [s["loss"] for s in expected["steps"]]
    assert np.allclose(got_loss, want_loss, rtol=2e-2), \
        f"bf16 losses {np.round(got_loss, 4).tolist()} stray from the autocast reference {np.round(want_loss, 4).tolist()}"


# ---------------------------------------------------------------- records and curves

@pytest.mark.points(3)
@pytest.mark.concept("The run record")
@pytest.mark.timeout(120)
def test_log_and_run_record(submission, rng, tmp_path):
    """log.jsonl, the returned log and run.json hold the experiment record the map asks for"""
    cfg = scenario(tmp_path, rng, max_steps=4, eval_every=2)
    result = submission.train(cfg)
    lines = [json.loads(l) for l in open(tmp_path / "run" / "log.jsonl") if l.strip()]
    assert lines == result["log"], "log.jsonl and the returned log differ"
    assert [e["step"] for e in lines] == [1, 2, 3, 4] and all({"step", "loss", "lr", "grad_norm", "tokens"} <= set(e) for e in lines), \
        "each log entry needs step, loss, lr, grad_norm, tokens (one per step with log_every=1)"
    assert [e["step"] for e in result["eval"]] == [2, 4] and all(math.isfinite(e["eval_loss"]) for e in result["eval"]), \
        f"eval entries at steps {[e.get('step') for e in result['eval']]}, expected [2, 4] with eval_every=2"
    assert result["checkpoint"] and (tmp_path / "run" / "checkpoint.pt").exists(), "no checkpoint.pt in out_dir"
    record = json.loads(open(result["record"]).read())
    for key in ("run_id", "commit", "config", "data_version", "seed", "environment", "metrics"):
        assert key in record, f"run.json has no {key!r}: the record is run id, commit, config, data version, seed, environment, metrics"
    expected_commit = submission.git_head
    assert record["commit"] == expected_commit, \
        f"run.json says commit {record['commit']!r}; the learner's code is at {expected_commit!r} (null outside git)"
    digests = sorted(hashlib.sha256(open(cfg[k], "rb").read()).hexdigest() for k in ("train_path", "eval_path"))
    recorded = record["data_version"]
    recorded = sorted(recorded.values()) if isinstance(recorded, dict) else recorded
    assert recorded == digests, "data_version must identify the data files: the sha256 of train_path and eval_path"
    assert record["seed"] == cfg["seed"] and record["config"].get("max_lr") == cfg["max_lr"], \
        "run.json's seed and config must be the run's"
    assert close(record["metrics"].get("final_eval_loss", math.nan), result["final_eval_loss"], rtol=1e-9, atol=0), \
        "run.json's metrics need the final eval loss"


@pytest.mark.points(2)
@pytest.mark.concept("Curves")
def test_plot_curves_draws_loss_on_log_steps_and_lr(submission, tmp_path):
    """plot_curves writes a PNG with two subplots: loss over steps on a log axis, and the learning rate"""
    log = [{"step": s, "loss": 5.0 / s ** 0.3, "lr": min(s, 10) * 1e-4, "grad_norm": 1.0, "tokens": 100} for s in range(1, 41)]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    png = tmp_path / "curves.png"
    seen = submission.probe(probes.watch_plot, str(tmp_path / "log.jsonl"), str(png))
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "plot_curves wrote no PNG file"
    import matplotlib.image
    assert matplotlib.image.imread(str(png)).ndim == 3, "the PNG does not decode as an image"
    axes = seen["axes"]
    assert len(axes) == 2, f"the figure has {len(axes)} axes, expected 2 subplots (loss, learning rate)"
    steps = [float(e["step"]) for e in log]
    loss_axes = [a for a in axes if any(np.allclose(l["y"], [e["loss"] for e in log]) for l in a["lines"])]
    lr_axes = [a for a in axes if any(np.allclose(l["y"], [e["lr"] for e in log]) for l in a["lines"])]
    assert loss_axes and lr_axes, "one subplot must draw the logged loss and the other the logged lr, against step"
    assert any(l["x"] == steps for l in loss_axes[0]["lines"]), "the loss must be drawn against the step numbers"
    assert loss_axes[0]["xscale"] == "log", "the loss subplot's step axis must be logarithmic (early steps matter)"


# ---------------------------------------------------------------- does it learn?

@pytest.mark.points(4)
@pytest.mark.concept("Convergence")
@pytest.mark.timeout(300)
def test_from_scratch_run_approaches_the_corpus_floor(submission, tmp_path, artifacts):
    """from scratch on the corpus, 150 steps: eval loss within the stated margin of the source's floor"""
    cfg, floor = convergence.setup(tmp_path)
    result = submission.train(cfg)
    artifacts["loss_curve"] = convergence.loss_curves(result, floor, CONVERGENCE_MARGIN)
    assert result["final_eval_loss"] <= floor + CONVERGENCE_MARGIN, (
        f"after {cfg['max_steps']} steps from scratch the eval loss is {result['final_eval_loss']:.3f} nats/token; "
        f"the source's floor on these documents is {floor:.3f}, and a correct loop gets within {CONVERGENCE_MARGIN}")


# ---------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.concept("Mixed precision")
@pytest.mark.timeout(300)
def test_bf16_on_cuda_tracks_the_fp32_reference(submission, rng, tmp_path):
    """amp='bf16' on CUDA: losses within bf16 noise of the fp32 replay"""
    cfg = scenario(tmp_path, rng, grad_accum_steps=2, amp="bf16", device="cuda")
    result = submission.train(cfg)
    want = [s["loss"] for s in replay.replay({**cfg, "amp": None, "device": "cpu"})["steps"]]
    got = [e["loss"] for e in result["log"]]
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
