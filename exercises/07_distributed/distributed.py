"""Exercise 07: data parallelism for real, on CPU: DDP and FSDP over gloo, launched by torchrun.

Every function runs on each rank of a process group (`torchrun --standalone --nproc-per-node N`
starts one process per rank and gives it RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT).
Fill in every function below; README.md explains each one and ends each section with its contract.
Run the visible tests with:  pytest exercises/07_distributed
"""
import argparse
import contextlib
import json
import os
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

IGNORE_INDEX = -100


def init_distributed(timeout_s=60.0):
    """Join the process group torchrun's environment describes; return (rank, world_size).

    gloo on CPU, nccl where CUDA is available (each rank on the device LOCAL_RANK names); the
    rendezvous is torchrun's (`env://`: MASTER_ADDR and MASTER_PORT), never a port of your own;
    every collective gives up after `timeout_s` seconds instead of waiting forever.
    """
    raise NotImplementedError('see README.md, section "Joining the group"')


def shutdown():
    """Leave the process group (every rank, once, at the end)."""
    raise NotImplementedError('see README.md, section "Joining the group"')


def shard_loader(dataset, batch_size, epoch, seed, drop_last=False):
    """This rank's DataLoader for `epoch`: its share of a shuffled order that changes every epoch.

    Across ranks, every sample appears once per epoch; when the dataset does not divide evenly,
    `drop_last=False` repeats samples from the start of the order to even the shares out and
    `drop_last=True` leaves the tail out.
    """
    raise NotImplementedError('see README.md, section "Sharding the data"')


def build_model(model_class, config, seed):
    """The model every rank starts from: the same seed on every rank, so that the ranks build the
    same weights (FSDP shards what each rank built; it does not broadcast rank 0's)."""
    raise NotImplementedError('see README.md, section "Seeds: alike and not alike"')


def seed_for_dropout(seed):
    """After the model is built: a generator state of this rank's own (seed + rank), so that the
    ranks draw different dropout masks for their different samples."""
    raise NotImplementedError('see README.md, section "Seeds: alike and not alike"')


def wrap_ddp(model):
    """The model wrapped for data parallelism: a whole copy on every rank, gradients all-reduced.
    A model on a CUDA device names it (`device_ids`); one on the CPU names none."""
    raise NotImplementedError('see README.md, section "The DDP step"')


def count_label_tokens(labels):
    """Tokens that carry loss in a batch of labels: the shifted labels that are not IGNORE_INDEX."""
    raise NotImplementedError('see README.md, section "The DDP step"')


def train_step(ddp_model, optimizer, micro_batches):
    """One optimizer step over this rank's micro-batches; return the loss of the step over every
    rank's tokens.

    The gradient equals that of one process on all ranks' micro-batches together: the mean over
    every loss-carrying token of the step, however the tokens are spread over ranks and
    micro-batches. Gradients are all-reduced once per step: every backward but the last under
    `no_sync()`. Gradients left from before the step are zeroed first. The batches may come on the
    CPU: they go to the model's device.
    """
    raise NotImplementedError('see README.md, section "The DDP step"')


def save_checkpoint(ddp_model, optimizer, path, step):
    """Rank 0 writes the model's weights (without DDP's `module.` prefix), the optimizer's state
    and the step, whole or not at all; every rank returns once the file is complete."""
    raise NotImplementedError('see README.md, section "Rank 0 writes, every rank waits"')


def load_checkpoint(model, optimizer, path):
    """Every rank reads what `save_checkpoint` wrote into its own model and optimizer; return the step."""
    raise NotImplementedError('see README.md, section "Rank 0 writes, every rank waits"')


def log_metrics(path, step, loss):
    """Rank 0 appends one JSON line {"step", "loss"} to `path`; the other ranks write nothing."""
    raise NotImplementedError('see README.md, section "Rank 0 writes, every rank waits"')


def shard_fsdp(model):
    """Shard a Llama-style model with FSDP2: each decoder layer its own unit, then the root (the
    embeddings, final norm and head), so that one layer's parameters at a time are gathered whole."""
    raise NotImplementedError('see README.md, section "FSDP: sharding the training state"')


def fsdp_state_bytes(model, optimizer):
    """Bytes this rank holds of the sharded training state: {"params", "grads", "optimizer"}."""
    raise NotImplementedError('see README.md, section "FSDP: sharding the training state"')


def main(argv=None):
    """`torchrun --standalone --nproc-per-node N distributed.py --data FILE --out DIR`: a few DDP
    steps on the data file's batches, the log and the checkpoint written by rank 0."""
    raise NotImplementedError('see README.md, section "Launching with torchrun"')


if __name__ == "__main__":
    main()
