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

# F.cross_entropy skips targets equal to ignore_index (-100 is its default and Hugging Face's):
# padding and prompt tokens carry it, so they add nothing to the loss or its token count.
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
    # Pad to the longest example of this batch, not of the data set: short batches stay short.
    width = max(len(example["input_ids"]) for example in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)
    attention_mask = torch.zeros((len(examples), width), dtype=torch.long)
    # Right padding: real tokens first, so position t of every row is token t of its example. Labels
    # default to the inputs themselves: the shift by one happens in the loss, not here.
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
    # Warmup: a straight line from 0, so the first update (at step 0) uses lr 0, as transformers' does.
    if step < warmup_steps:
        return max_lr * step / warmup_steps
    if step >= total_steps:
        return min_lr
    # Cosine: progress runs from 0 at the end of warmup to 1 at total_steps, the rate from max_lr to min_lr.
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def param_groups(model, weight_decay):
    """AdamW parameter groups: a group with weight decay for parameters with ndim >= 2
    (matrices, embeddings) and a group without it for the rest (biases, norm weights).
    Frozen parameters (requires_grad=False) are left out. Returns a list of dicts with
    "params" and "weight_decay", as torch.optim.AdamW takes them.
    """
    # model.parameters() yields a tied weight (embedding = output layer) once: it must not sit in two groups.
    # Frozen parameters stay out: AdamW would keep state for them and decay them all the same.
    trainable = [p for p in model.parameters() if p.requires_grad]
    # Decay pulls weight matrices towards 0 (a regulariser); biases and norm gains are left alone, as
    # GPT-2 and LLaMA trainings do: they are few, and shrinking them only shifts or scales activations.
    return [{"params": [p for p in trainable if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in trainable if p.ndim < 2], "weight_decay": 0.0}]


def causal_lm_loss(logits, labels, reduction="mean"):
    """Cross-entropy of a causal LM: position t predicts token t + 1.

    logits (batch, seq, vocab) in any float dtype; labels (batch, seq), unshifted as Hugging
    Face models take them, -100 where no loss is counted. Computed in float32 whatever the
    logits dtype. reduction "mean" averages over the counted tokens, "sum" adds them up.
    Returns a 0-dim float32 tensor.
    """
    # The shift: logits at position t score token t + 1, so the last position has no target and the first
    # token is never predicted. float32 before the log-softmax: bf16 keeps 8 bits of mantissa, too few for it.
    logits = logits[:, :-1, :].float()
    targets = labels[:, 1:]
    # reduction="sum" lets the caller divide by the tokens of a whole step (see train).
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                           ignore_index=IGNORE_INDEX, reduction=reduction)


def evaluate(model, batches):
    """Mean loss per counted token over all `batches` (dicts as collate returns them),
    computed in eval mode under torch.no_grad(); the model's previous mode is restored.
    Returns a Python float.
    """
    # Evaluation must not change the model: note its mode, switch dropout off, and put the mode back.
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    total, count = 0.0, 0
    # no_grad: no graph is kept, so evaluation costs activations of one batch, not of all of them.
    # The result is a mean per token over all batches (sum of losses / sum of tokens), not a mean
    # of batch means, which would weigh a short last batch as much as a full one.
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
    # A key left out means the README's default; the record below stores the whole resolved config.
    cfg = {**DEFAULTS, **cfg}
    started = time.time()
    out_dir = Path(cfg["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    device = torch.device(cfg["device"])
    # The model is built (and seeded) before the data order is drawn: both come from the seed.
    model = _build_model(cfg).to(device)
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    batch_of = partial(collate, pad_id=pad_id)
    train_set, eval_set = _read_jsonl(cfg["train_path"]), _read_jsonl(cfg["eval_path"])
    # Eval batches are fixed and in file order: every evaluation of the run scores the same tokens.
    eval_batches = [batch_of(eval_set[i:i + cfg["batch_size"]]) for i in range(0, len(eval_set), cfg["batch_size"])]
    schedule = partial(lr_at, max_lr=cfg["max_lr"], warmup_steps=cfg["warmup_steps"],
                       total_steps=cfg["max_steps"], min_lr=cfg["min_lr"])
    # lr=schedule(0): the rate of the first step is set before it, like every later one (see the loop).
    optimizer = torch.optim.AdamW(param_groups(model, cfg["weight_decay"]), lr=schedule(0),
                                  betas=tuple(cfg["betas"]), eps=1e-8)
    # The shuffle draws from its own generator, never from the global RNG that dropout uses: the data
    # order then depends on the seed alone, and its state can be saved and restored on resume.
    generator = torch.Generator().manual_seed(cfg["seed"])
    loader = DataLoader(train_set, batch_size=cfg["batch_size"], shuffle=True, drop_last=True,
                        generator=generator, collate_fn=batch_of, pin_memory=device.type == "cuda")
    # Everything a resumed run needs besides weights and optimizer: where the data stood, the log so far.
    state = {"step": 0, "epoch_generator_state": generator.get_state(), "batches_into_epoch": 0,
             "log": [], "eval": [], "tokens": 0}
    # Resume: weights, AdamW's moments, RNG and data position from the checkpoint, then the lr of the
    # next step: the rest of the run is the one an uninterrupted run would have done. The log file is
    # rewritten from the checkpoint's entries, so a resumed run never repeats or loses a line.
    if cfg["resume"]:
        state = _restore(out_dir / "checkpoint.pt", model, optimizer, generator)
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"])
    _write_jsonl(out_dir / "log.jsonl", state["log"])
    # Mixed precision: the forward pass runs in bf16 where it is safe; the weights, their gradients and
    # AdamW's state stay float32 (no loss scaling is needed with bf16's exponent range).
    autocast = partial(torch.autocast, device_type=device.type, dtype=torch.bfloat16, enabled=cfg["amp"] == "bf16")
    micro_batches = _micro_batches(loader, generator, state)
    model.train()
    while state["step"] < cfg["max_steps"]:
        # One optimizer step = grad_accum_steps micro-batches, taken first so their tokens can be counted.
        step_batches = [next(micro_batches) for _ in range(cfg["grad_accum_steps"])]
        # The step's counted tokens (after the shift): dividing each micro-batch's summed loss by this total
        # gives the gradient of one big batch, however unevenly the tokens fall into micro-batches.
        tokens = sum(int((b["labels"][:, 1:] != IGNORE_INDEX).sum()) for b in step_batches)
        loss_sum = 0.0
        for batch in step_batches:
            batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()}
            with autocast():
                # Only the forward pass runs under autocast; the loss is taken in float32 outside it.
                logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            loss = causal_lm_loss(logits, batch["labels"], reduction="sum")
            (loss / tokens).backward()          # every token of the step weighs the same
            loss_sum += loss.item()
        # Clip after all micro-batches (the whole step's gradient) and before the step; the norm it returns
        # is the one before clipping, which is what the log reports.
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip_norm"]).item()
        # The rate this step uses, read before the schedule moves on.
        lr = optimizer.param_groups[0]["lr"]
        # One optimizer step per grad_accum_steps micro-batches: the schedule counts these, not micro-batches.
        optimizer.step()
        state["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"])
        # Gradients accumulate across backward calls: clear them once per step, after it (None frees the
        # memory and skips a kernel, rather than writing zeros).
        optimizer.zero_grad(set_to_none=True)
        state["tokens"] += tokens
        if state["step"] % cfg["log_every"] == 0:
            entry = {"step": state["step"], "loss": loss_sum / tokens, "lr": lr, "grad_norm": grad_norm, "tokens": tokens}
            state["log"].append(entry)
            _write_jsonl(out_dir / "log.jsonl", [entry], mode="a")
        # Evaluate and checkpoint at the same steps: a checkpoint's eval history matches its weights.
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
    # A file-only backend: the plot works on a machine with no display (a server, CI).
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = _read_jsonl(log_path)
    steps = [entry["step"] for entry in log]
    figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    loss_axes.plot(steps, [entry["loss"] for entry in log])
    # A log step axis shows the fast early fall and the slow late decline in one picture.
    loss_axes.set_xscale("log")
    loss_axes.set_ylabel("training loss (nats/token)")
    lr_axes.plot(steps, [entry["lr"] for entry in log])
    lr_axes.set_ylabel("learning rate")
    lr_axes.set_xlabel("optimizer step")
    figure.tight_layout()
    figure.savefig(png_path, format="png")
    # pyplot keeps every open figure alive until it is closed: close it, or a long run leaks memory.
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
    # Replay the shuffle of the current epoch, then skip the batches it already gave: the same order as
    # if the run had never stopped.
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
    # The optimizer's state dict holds AdamW's moments and step counts: without it a resumed run restarts
    # its moments at zero and its updates differ. The global RNG state covers dropout.
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state,
                "rng": torch.get_rng_state()}, path)


def _restore(path, model, optimizer, generator):
    # weights_only=False trusts the file to run code as it unpickles: right for a checkpoint this loop wrote
    # itself (_save above), never for one from elsewhere (weights_only=True is the safe default there).
    checkpoint = torch.load(path, weights_only=False)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng"])
    return checkpoint["state"]


def _read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# mode="a" appends one step's line: a run that dies keeps every line written before it.
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
        # The data's version is its content hash: a changed file is a different experiment.
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
