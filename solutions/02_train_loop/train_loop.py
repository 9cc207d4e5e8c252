"""Exercise 02: the training loop (reference solution).

The loop follows the determinism contract of README.md, so a run can be replayed step for step.
"""
import hashlib
import json
import math
import platform
import subprocess
import time
import uuid
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from transformers import AutoConfig, AutoModelForCausalLM

IGNORE_INDEX = -100
DEFAULTS = {"init": "scratch", "seed": 0, "batch_size": 8, "grad_accum_steps": 1, "max_steps": 100,
            "max_lr": 1e-3, "min_lr": 0.0, "warmup_steps": 10, "weight_decay": 0.1, "betas": (0.9, 0.95),
            "clip_norm": 1.0, "amp": None, "device": "cpu", "log_every": 1, "eval_every": 50, "resume": False}


def collate(examples, pad_id):
    """Right-pad a list of examples to the longest one of the batch.

    Each example is {"input_ids": list[int], "labels": list[int] (optional, defaults to
    input_ids)}. Returns a dict of long tensors of shape (batch, longest): "input_ids" (pad_id
    on padding), "labels" (-100 on padding), "attention_mask" (1 on real tokens, 0 on padding).
    """
    width = max(len(example["input_ids"]) for example in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)
    attention_mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, example in enumerate(examples):
        n = len(example["input_ids"])
        input_ids[row, :n] = torch.tensor(example["input_ids"])
        labels[row, :n] = torch.tensor(example.get("labels", example["input_ids"]))
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
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def param_groups(model, weight_decay):
    """AdamW parameter groups: a group with weight decay for parameters with ndim >= 2
    (matrices, embeddings) and a group without it for the rest (biases, norm weights).
    Frozen parameters (requires_grad=False) are left out. Returns a list of dicts with
    "params" and "weight_decay", as torch.optim.AdamW takes them.
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in trainable if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in trainable if p.ndim < 2], "weight_decay": 0.0}]


def causal_lm_loss(logits, labels, reduction="mean"):
    """Cross-entropy of a causal LM: position t predicts token t + 1.

    logits (batch, seq, vocab) in any float dtype; labels (batch, seq), unshifted as Hugging
    Face models take them, -100 where no loss is counted. Computed in float32 whatever the
    logits dtype. reduction "mean" averages over the counted tokens, "sum" adds them up.
    Returns a 0-dim float32 tensor.
    """
    logits = logits[:, :-1, :].float()
    targets = labels[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                           ignore_index=IGNORE_INDEX, reduction=reduction)


def evaluate(model, batches):
    """Mean loss per counted token over all `batches` (dicts as collate returns them),
    computed in eval mode under torch.no_grad(); the model's previous mode is restored.
    Returns a Python float.
    """
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            batch = {key: value.to(device) for key, value in batch.items()}
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            total += causal_lm_loss(logits, batch["labels"], reduction="sum").item()
            count += int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
    model.train(was_training)
    return total / count


def train(cfg):
    """Train a causal LM as the determinism contract in README.md says; `cfg` is a plain
    dict whose keys and defaults the README documents.

    Writes out_dir/log.jsonl, out_dir/checkpoint.pt and out_dir/run.json, and returns
    {"log": [...], "eval": [...], "final_eval_loss": float, "checkpoint": path, "record": path}.
    """
    cfg = {**DEFAULTS, **cfg}
    started = time.time()
    out_dir = Path(cfg["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    device = torch.device(cfg["device"])
    model = _build_model(cfg).to(device)
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    batch_of = partial(collate, pad_id=pad_id)
    train_set, eval_set = _read_jsonl(cfg["train_path"]), _read_jsonl(cfg["eval_path"])
    eval_batches = [batch_of(eval_set[i:i + cfg["batch_size"]]) for i in range(0, len(eval_set), cfg["batch_size"])]
    schedule = partial(lr_at, max_lr=cfg["max_lr"], warmup_steps=cfg["warmup_steps"],
                       total_steps=cfg["max_steps"], min_lr=cfg["min_lr"])
    optimizer = torch.optim.AdamW(param_groups(model, cfg["weight_decay"]), lr=schedule(0),
                                  betas=tuple(cfg["betas"]), eps=1e-8)
    generator = torch.Generator().manual_seed(cfg["seed"])
    loader = DataLoader(train_set, batch_size=cfg["batch_size"], shuffle=True, drop_last=True,
                        generator=generator, collate_fn=batch_of, pin_memory=device.type == "cuda")
    state = {"step": 0, "epoch_generator_state": generator.get_state(), "batches_into_epoch": 0,
             "log": [], "eval": [], "tokens": 0}
    if cfg["resume"]:
        state = _restore(out_dir / "checkpoint.pt", model, optimizer, generator)
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"])
    _write_jsonl(out_dir / "log.jsonl", state["log"])
    autocast = partial(torch.autocast, device_type=device.type, dtype=torch.bfloat16, enabled=cfg["amp"] == "bf16")
    micro_batches = _micro_batches(loader, generator, state)
    model.train()
    while state["step"] < cfg["max_steps"]:
        step_batches = [next(micro_batches) for _ in range(cfg["grad_accum_steps"])]
        tokens = sum(int((b["labels"][:, 1:] != IGNORE_INDEX).sum()) for b in step_batches)
        loss_sum = 0.0
        for batch in step_batches:
            batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()}
            with autocast():
                logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            loss = causal_lm_loss(logits, batch["labels"], reduction="sum")
            (loss / tokens).backward()          # every token of the step weighs the same
            loss_sum += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip_norm"]).item()
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        state["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"])
        optimizer.zero_grad(set_to_none=True)
        state["tokens"] += tokens
        if state["step"] % cfg["log_every"] == 0:
            entry = {"step": state["step"], "loss": loss_sum / tokens, "lr": lr, "grad_norm": grad_norm, "tokens": tokens}
            state["log"].append(entry)
            _write_jsonl(out_dir / "log.jsonl", [entry], mode="a")
        if state["step"] % cfg["eval_every"] == 0:
            with autocast():
                state["eval"].append({"step": state["step"], "eval_loss": evaluate(model, eval_batches)})
            _save(out_dir / "checkpoint.pt", model, optimizer, state)
    with autocast():
        final_eval_loss = evaluate(model, eval_batches)
    _save(out_dir / "checkpoint.pt", model, optimizer, state)
    record = _write_record(out_dir / "run.json", cfg, final_eval_loss, state, time.time() - started)
    return {"log": state["log"], "eval": state["eval"], "final_eval_loss": final_eval_loss,
            "checkpoint": str(out_dir / "checkpoint.pt"), "record": str(record)}


def plot_curves(log_path, png_path):
    """Plot a log.jsonl as a PNG: two subplots sharing the step axis (log scale), the
    training loss above and the learning rate below."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = _read_jsonl(log_path)
    steps = [entry["step"] for entry in log]
    figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    loss_axes.plot(steps, [entry["loss"] for entry in log])
    loss_axes.set_xscale("log")
    loss_axes.set_ylabel("training loss (nats/token)")
    lr_axes.plot(steps, [entry["lr"] for entry in log])
    lr_axes.set_ylabel("learning rate")
    lr_axes.set_xlabel("optimizer step")
    figure.tight_layout()
    figure.savefig(png_path, format="png")
    plt.close(figure)
    return str(png_path)


# ---------------------------------------------------------------- helpers

def _build_model(cfg):
    config = None if cfg["init"] == "pretrained" else AutoConfig.from_pretrained(cfg["model_dir"])
    torch.manual_seed(cfg["seed"])          # a scratch model's weights and every dropout mask draw from here
    if config is None:
        return AutoModelForCausalLM.from_pretrained(cfg["model_dir"], dtype=torch.float32)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def _micro_batches(loader, generator, state):
    """Batches across epochs, from the position `state` records; the position is updated as
    batches are taken, so a checkpoint knows where the data stood."""
    generator.set_state(state["epoch_generator_state"])
    skip = state["batches_into_epoch"]
    while True:
        state["epoch_generator_state"] = generator.get_state()   # the epoch's shuffle is drawn from here
        for index, batch in enumerate(loader):
            if index < skip:
                continue
            state["batches_into_epoch"] = index + 1
            yield batch
        skip = 0
        state["batches_into_epoch"] = 0


def _save(path, model, optimizer, state):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state,
                "rng": torch.get_rng_state()}, path)


def _restore(path, model, optimizer, generator):
    checkpoint = torch.load(path, weights_only=False)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng"])
    return checkpoint["state"]


def _read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _write_jsonl(path, rows, mode="w"):
    with open(path, mode, encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _git_commit():
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _write_record(path, cfg, final_eval_loss, state, seconds):
    import transformers
    record = {
        "run_id": uuid.uuid4().hex,
        "commit": _git_commit(),
        "config": {key: list(value) if isinstance(value, tuple) else value for key, value in cfg.items()},
        "data_version": {"train_path": _sha256(cfg["train_path"]), "eval_path": _sha256(cfg["eval_path"])},
        "seed": cfg["seed"],
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": transformers.__version__, "platform": platform.platform(),
                        "device": cfg["device"]},
        "metrics": {"final_eval_loss": final_eval_loss, "steps": state["step"], "tokens": state["tokens"],
                    "tokens_per_s": state["tokens"] / max(seconds, 1e-9), "wall_s": seconds},
    }
    Path(path).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path
