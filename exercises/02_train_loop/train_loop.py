"""Exercise 02: the training loop.

Fill in every function below; README.md explains each line of the loop and the
determinism contract `train` follows. Run the visible tests with:
    pytest exercises/02_train_loop
"""
import json
import math

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
    raise NotImplementedError('see README.md, section "Batching and padding"')


def lr_at(step, *, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """Learning rate after `step` optimizer steps.

    Linear warmup from 0 at step 0 to max_lr at warmup_steps, then cosine decay to min_lr at
    total_steps, and min_lr after. With min_lr=0 this is max_lr times the multiplier of
    transformers.get_cosine_schedule_with_warmup (for steps up to total_steps).
    """
    raise NotImplementedError('see README.md, section "Warmup and cosine"')


def param_groups(model, weight_decay):
    """AdamW parameter groups: a group with weight decay for parameters with ndim >= 2
    (matrices, embeddings) and a group without it for the rest (biases, norm weights).
    Frozen parameters (requires_grad=False) are left out. Returns a list of dicts with
    "params" and "weight_decay", as torch.optim.AdamW takes them.
    """
    raise NotImplementedError('see README.md, section "Weight decay groups"')


def causal_lm_loss(logits, labels, reduction="mean"):
    """Cross-entropy of a causal LM: position t predicts token t + 1.

    logits (batch, seq, vocab) in any float dtype; labels (batch, seq), unshifted as Hugging
    Face models take them, -100 where no loss is counted. Computed in float32 whatever the
    logits dtype. reduction "mean" averages over the counted tokens, "sum" adds them up.
    Returns a 0-dim float32 tensor.
    """
    raise NotImplementedError('see README.md, section "The loss: shift, ignore_index, float32"')


def evaluate(model, batches):
    """Mean loss per counted token over all `batches` (dicts as collate returns them),
    computed in eval mode under torch.no_grad(); the model's previous mode is restored.
    Returns a Python float.
    """
    raise NotImplementedError('see README.md, section "Evaluation mode"')


def train(cfg):
    """Train a causal LM as the determinism contract in README.md says; `cfg` is a plain
    dict whose keys and defaults the README documents.

    Writes out_dir/log.jsonl, out_dir/checkpoint.pt and out_dir/run.json, and returns
    {"log": [...], "eval": [...], "final_eval_loss": float, "checkpoint": path, "record": path}.
    """
    raise NotImplementedError('see README.md, section "The determinism contract"')


def plot_curves(log_path, png_path):
    """Plot a log.jsonl as a PNG: two subplots sharing the step axis (log scale), the
    training loss above and the learning rate below."""
    raise NotImplementedError('see README.md, section "Curves"')
