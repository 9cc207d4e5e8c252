"""Exercise 02: the training loop, solved independently: written from the learner's README, stub
and visible tests alone, never from the reference or the hidden suite. Kept beside the suite as an
alternative that must score full marks, and as the base of its author's planted bugs (variants.py).
"""
import functools
import hashlib
import json
import math
import os
import platform
import random
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from transformers import AutoConfig, AutoModelForCausalLM


def collate(examples, pad_id):
    """Right-pad a list of examples to the longest one of the batch.

    Each example is {"input_ids": list[int], "labels": list[int] (optional, defaults to
    input_ids)}. Returns a dict of long tensors of shape (batch, longest): "input_ids" (pad_id
    on padding), "labels" (-100 on padding), "attention_mask" (1 on real tokens, 0 on padding).
    """
    if len(examples) == 0:
        raise ValueError("collate needs at least one example")
    width = max(len(example["input_ids"]) for example in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    attention_mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, example in enumerate(examples):
        ids = list(example["input_ids"])
        targets = example.get("labels")
        targets = ids if targets is None else list(targets)
        if len(targets) != len(ids):
            raise ValueError(f"example {row}: {len(ids)} input_ids but {len(targets)} labels")
        n = len(ids)
        if n:
            input_ids[row, :n] = torch.tensor(ids, dtype=torch.long)
            labels[row, :n] = torch.tensor(targets, dtype=torch.long)
            attention_mask[row, :n] = 1
    return {"input_ids": input_ids, "labels": labels, "attention_mask": attention_mask}


def lr_at(step, *, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """Learning rate after `step` optimizer steps.

    Linear warmup from 0 at step 0 to max_lr at warmup_steps, then cosine decay to min_lr at
    total_steps, and min_lr after. With min_lr=0 this is max_lr times the multiplier of
    transformers.get_cosine_schedule_with_warmup (for steps up to total_steps).
    """
    if step < warmup_steps:
        return max_lr * step / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def param_groups(model, weight_decay):
    """AdamW parameter groups: a group with weight decay for parameters with ndim >= 2
    (matrices, embeddings) and a group without it for the rest (biases, norm weights).
    Frozen parameters (requires_grad=False) are left out. Returns a list of dicts with
    "params" and "weight_decay", as torch.optim.AdamW takes them.
    """
    decay, no_decay = [], []
    for _, param in model.named_parameters():      # shared (tied) parameters come once
        if not param.requires_grad:
            continue
        (decay if param.ndim >= 2 else no_decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def causal_lm_loss(logits, labels, reduction="mean"):
    """Cross-entropy of a causal LM: position t predicts token t + 1.

    logits (batch, seq, vocab) in any float dtype; labels (batch, seq), unshifted as Hugging
    Face models take them, -100 where no loss is counted. Computed in float32 whatever the
    logits dtype. reduction "mean" averages over the counted tokens, "sum" adds them up.
    Returns a 0-dim float32 tensor.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', not {reduction!r}")
    shift_logits = logits[:, :-1, :].float()
    shift_labels = labels[:, 1:].to(shift_logits.device)
    return F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1),
                           ignore_index=-100, reduction=reduction)


def evaluate(model, batches):
    """Mean loss per counted token over all `batches` (dicts as collate returns them),
    computed in eval mode under torch.no_grad(); the model's previous mode is restored.
    Returns a Python float.
    """
    was_training = model.training
    device = _model_device(model)
    total, count = 0.0, 0
    model.eval()
    try:
        with torch.no_grad():
            for batch in batches:
                labels = batch["labels"].to(device)
                logits = _forward(model, batch, device)
                total += causal_lm_loss(logits, labels, "sum").item()
                count += _count_tokens(labels)
    finally:
        model.train(was_training)
    return total / count if count else float("nan")


def train(cfg):
    """Train a causal LM as the determinism contract in README.md says; `cfg` is a plain
    dict whose keys and defaults the README documents.

    Writes out_dir/log.jsonl, out_dir/checkpoint.pt and out_dir/run.json, and returns
    {"log": [...], "eval": [...], "final_eval_loss": float, "checkpoint": path, "record": path}.
    """
    cfg = _full_config(cfg)
    out_dir = Path(cfg["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path, ckpt_path, record_path = out_dir / "log.jsonl", out_dir / "checkpoint.pt", out_dir / "run.json"
    device = torch.device(cfg["device"])
    if cfg["amp"] not in (None, "bf16"):
        raise ValueError(f"amp must be None or 'bf16', not {cfg['amp']!r}")
    seed = cfg["seed"]
    schedule = dict(max_lr=cfg["max_lr"], warmup_steps=cfg["warmup_steps"], total_steps=cfg["max_steps"],
                    min_lr=cfg["min_lr"])

    # 1. Model: float32 weights, seeded initialisation.
    if cfg["init"] == "scratch":
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg["model_dir"]))
    elif cfg["init"] == "pretrained":
        torch.manual_seed(seed)     # not needed for the weights; makes dropout reproducible too
        model = AutoModelForCausalLM.from_pretrained(cfg["model_dir"])
    else:
        raise ValueError(f"init must be 'scratch' or 'pretrained', not {cfg['init']!r}")
    model = model.to(device=device, dtype=torch.float32)
    model.train()
    pad_id = model.config.pad_token_id
    pad_id = 0 if pad_id is None else pad_id

    # 2. Data.
    train_set = _read_jsonl(cfg["train_path"])
    eval_set = _read_jsonl(cfg["eval_path"])
    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(train_set, batch_size=cfg["batch_size"], shuffle=True, drop_last=True,
                        generator=generator, collate_fn=functools.partial(collate, pad_id=pad_id),
                        pin_memory=device.type == "cuda")
    if len(loader) == 0:
        raise ValueError(f"{len(train_set)} training examples make no full batch of {cfg['batch_size']}")
    eval_batches = [collate(eval_set[i:i + cfg["batch_size"]], pad_id)
                    for i in range(0, len(eval_set), cfg["batch_size"])]

    # 3. Optimizer.
    optimizer = torch.optim.AdamW(param_groups(model, cfg["weight_decay"]), lr=lr_at(0, **schedule),
                                  betas=tuple(cfg["betas"]), eps=1e-8)

    # State that a checkpoint carries.
    step, epoch, consumed = 0, 0, 0
    epoch_generator_state = generator.get_state()
    log, evals, tokens_seen, train_seconds = [], [], 0, 0.0
    if cfg["resume"]:
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        step, epoch, consumed = ckpt["step"], ckpt["epoch"], ckpt["batches_consumed"]
        epoch_generator_state = ckpt["epoch_generator_state"]
        log, evals = ckpt["log"], ckpt["eval"]
        tokens_seen, train_seconds = ckpt["tokens_seen"], ckpt["train_seconds"]
        _set_rng_states(ckpt["rng"])
    _set_lr(optimizer, lr_at(step, **schedule))
    # The log holds exactly the entries up to the checkpoint; later ones are dropped.
    with open(log_path, "w") as f:
        f.writelines(json.dumps(entry) + "\n" for entry in log)

    # The data position: the epoch's iterator, recreated from the generator state at its start.
    generator.set_state(epoch_generator_state)
    batches = iter(loader)
    for _ in range(consumed):
        next(batches)

    def next_batch():
        nonlocal batches, epoch, consumed, epoch_generator_state
        try:
            batch = next(batches)
        except StopIteration:
            epoch, consumed = epoch + 1, 0
            epoch_generator_state = generator.get_state()
            batches = iter(loader)
            batch = next(batches)
        consumed += 1
        return batch

    def save_checkpoint():
        state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "epoch": epoch, "batches_consumed": consumed, "epoch_generator_state": epoch_generator_state,
                 "rng": _get_rng_states(), "log": list(log), "eval": list(evals),
                 "tokens_seen": tokens_seen, "train_seconds": train_seconds, "config": cfg}
        tmp = ckpt_path.with_name(ckpt_path.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, ckpt_path)

    def run_eval():
        evals.append({"step": step, "eval_loss": evaluate(model, eval_batches)})

    amp_enabled = cfg["amp"] == "bf16"
    while step < cfg["max_steps"]:
        started = time.perf_counter()
        # 4. One optimizer step.
        micro_batches = [next_batch() for _ in range(cfg["grad_accum_steps"])]
        tokens = sum(_count_tokens(b["labels"]) for b in micro_batches)
        divisor = max(tokens, 1)
        step_loss = 0.0
        for batch in micro_batches:
            labels = batch["labels"].to(device, non_blocking=True)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp_enabled):
                logits = _forward(model, batch, device)
            loss = causal_lm_loss(logits, labels, "sum") / divisor
            loss.backward()
            step_loss += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip_norm"])
        lr_used = optimizer.param_groups[0]["lr"]
        optimizer.step()
        step += 1
        _set_lr(optimizer, lr_at(step, **schedule))
        optimizer.zero_grad(set_to_none=True)
        tokens_seen += tokens
        train_seconds += time.perf_counter() - started

        # 5. Bookkeeping.
        if step % cfg["log_every"] == 0:
            entry = {"step": step, "loss": step_loss, "lr": lr_used, "grad_norm": float(grad_norm),
                     "tokens": tokens}
            log.append(entry)
            with open(log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")
        if step % cfg["eval_every"] == 0:
            run_eval()
            save_checkpoint()

    # The last periodic evaluation may be the final one; "eval" lists the periodic ones only.
    final_eval_loss = evals[-1]["eval_loss"] if evals and evals[-1]["step"] == step else evaluate(model, eval_batches)
    save_checkpoint()

    record = {
        "run_id": f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:12]}",
        "commit": _git_head(),
        "config": cfg,
        "data_version": {key: _sha256(cfg[key]) for key in ("train_path", "eval_path")},
        "seed": seed,
        "environment": _environment(device),
        "metrics": {"final_eval_loss": final_eval_loss, "steps": step, "tokens": tokens_seen,
                    "tokens_per_s": tokens_seen / train_seconds if train_seconds > 0 else None,
                    "train_seconds": train_seconds,
                    "eval": list(evals)},
    }
    record_path.write_text(json.dumps(record, indent=2) + "\n")
    return {"log": list(log), "eval": list(evals), "final_eval_loss": final_eval_loss,
            "checkpoint": str(ckpt_path), "record": str(record_path)}


def plot_curves(log_path, png_path):
    """Plot a log.jsonl as a PNG: two subplots sharing the step axis (log scale), the
    training loss above and the learning rate below."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = _read_jsonl(log_path)
    steps = [entry["step"] for entry in entries]
    fig, (ax_loss, ax_lr) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    try:
        ax_loss.plot(steps, [entry["loss"] for entry in entries])
        ax_loss.set_ylabel("training loss (nats/token)")
        ax_loss.set_xscale("log")           # shared x axis: the learning-rate plot follows
        ax_lr.plot(steps, [entry["lr"] for entry in entries])
        ax_lr.set_ylabel("learning rate")
        ax_lr.set_xlabel("optimizer step")
        fig.tight_layout()
        fig.savefig(png_path, format="png")
    finally:
        plt.close(fig)


# ---------------------------------------------------------------- helpers

DEFAULTS = {"init": "scratch", "seed": 0, "batch_size": 8, "grad_accum_steps": 1, "max_steps": 100,
            "max_lr": 1e-3, "min_lr": 0.0, "warmup_steps": 10, "weight_decay": 0.1, "betas": (0.9, 0.95),
            "clip_norm": 1.0, "amp": None, "device": "cpu", "log_every": 1, "eval_every": 50, "resume": False}
REQUIRED = ("model_dir", "train_path", "eval_path", "out_dir")


def _full_config(cfg):
    missing = [key for key in REQUIRED if key not in cfg]
    if missing:
        raise KeyError(f"cfg lacks required keys {missing}")
    full = {**DEFAULTS, **cfg}
    full["betas"] = list(full["betas"])
    return full


def _read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _count_tokens(labels):
    """Tokens the loss counts: labels other than -100 after the shift."""
    return int((labels[:, 1:] != -100).sum())


def _model_device(model):
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def _forward(model, batch, device):
    kwargs = {"input_ids": batch["input_ids"].to(device, non_blocking=True)}
    if "attention_mask" in batch:
        kwargs["attention_mask"] = batch["attention_mask"].to(device, non_blocking=True)
    out = model(**kwargs)
    return out.logits if hasattr(out, "logits") else out


def _set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr


def _get_rng_states():
    states = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states):
    torch.set_rng_state(states["torch"])
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _git_head():
    """HEAD of the git repository holding this file, or None outside git."""
    try:
        out = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def _environment(device):
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "platform": platform.platform(), "device": str(device)}
    if device.type == "cuda":
        env["device_name"] = torch.cuda.get_device_name(device)
    return env
