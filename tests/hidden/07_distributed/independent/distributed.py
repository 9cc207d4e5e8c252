"""Exercise 07: data parallelism for real, on CPU: DDP and FSDP over gloo, launched by torchrun.

Every function runs on each rank of a process group (`torchrun --standalone --nproc-per-node N`
starts one process per rank and gives it RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT).
Fill in every function below; README.md explains each one and ends each section with its contract.
Run the visible tests with:  pytest exercises/07_distributed
"""
from __future__ import annotations

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


# ----------------------------------------------------------------------------- helpers

def _group_ready():
    return dist.is_available() and dist.is_initialized()


def _rank():
    if _group_ready():
        return dist.get_rank()
    return int(os.environ.get("RANK", 0))


def _world_size():
    if _group_ready():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", 1))


def _device_of(model):
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


# ----------------------------------------------------------------------------- joining the group

def init_distributed(timeout_s=60.0):
    """Join the process group torchrun's environment describes; return (rank, world_size)."""
    if _group_ready():
        return dist.get_rank(), dist.get_world_size()
    if torch.cuda.is_available():
        backend = "nccl"
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    else:
        backend = "gloo"
    # env:// rendezvous: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT come from torchrun.
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def shutdown():
    """Leave the process group (every rank, once, at the end); nothing when no group was joined."""
    if _group_ready():
        dist.destroy_process_group()


# ----------------------------------------------------------------------------- sharding the data

def shard_loader(dataset, batch_size, epoch, seed, drop_last=False):
    """This rank's DataLoader for `epoch`: its share of a shuffled order that changes every epoch."""
    sampler = DistributedSampler(
        dataset,
        num_replicas=_world_size(),
        rank=_rank(),
        shuffle=True,
        seed=seed,
        drop_last=drop_last,
    )
    sampler.set_epoch(epoch)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


# ----------------------------------------------------------------------------- seeds

def build_model(model_class, config, seed):
    """The model every rank starts from: `model_class(config)` built after the same seed on every rank."""
    torch.manual_seed(seed)
    return model_class(config)


def seed_for_dropout(seed):
    """After the model is built: the seed of this rank's own randomness (dropout masks)."""
    torch.manual_seed(seed + _rank())


# ----------------------------------------------------------------------------- the DDP step

def wrap_ddp(model):
    """The model wrapped for data parallelism: a whole copy on every rank, gradients all-reduced."""
    if torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        model = model.to(torch.device("cuda", local_rank))
        return DistributedDataParallel(model, device_ids=[local_rank])
    return DistributedDataParallel(model)


def count_label_tokens(labels):
    """Tokens that carry loss in a batch of labels: the shifted labels that are not IGNORE_INDEX."""
    labels = torch.as_tensor(labels)
    return int((labels[..., 1:] != IGNORE_INDEX).sum().item())


def _summed_shifted_loss(logits, labels):
    """Sum over loss-carrying tokens of the causal-LM cross-entropy, in float32."""
    logits = logits[..., :-1, :].float()
    labels = labels[..., 1:]
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        labels.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )


def train_step(ddp_model, optimizer, micro_batches):
    """One optimizer step over this rank's micro-batches; return the step's loss over every rank's tokens."""
    micro_batches = list(micro_batches)
    device = _device_of(ddp_model)
    world_size = _world_size()

    optimizer.zero_grad(set_to_none=True)

    # Every rank learns the total number of loss-carrying tokens over all ranks.
    local_tokens = sum(count_label_tokens(mb["labels"]) for mb in micro_batches)
    total = torch.tensor([local_tokens], dtype=torch.float64, device=device)
    if _group_ready():
        dist.all_reduce(total)
    total_tokens = total.item()
    denom = max(total_tokens, 1.0)

    # DDP divides the summed gradients by the world size: multiply it back, so that the
    # gradient applied is d(sum of every rank's token losses)/d(theta) / total_tokens.
    scale = world_size / denom

    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    last = len(micro_batches) - 1
    for i, mb in enumerate(micro_batches):
        input_ids = mb["input_ids"].to(device)
        labels = mb["labels"].to(device)
        kwargs = {}
        if "attention_mask" in mb:
            kwargs["attention_mask"] = mb["attention_mask"].to(device)
        sync = contextlib.nullcontext()
        if i < last and hasattr(ddp_model, "no_sync"):
            sync = ddp_model.no_sync()
        with sync:
            logits = ddp_model(input_ids=input_ids, **kwargs).logits
            summed = _summed_shifted_loss(logits, labels)
            (summed * scale).backward()
        loss_sum += summed.detach().double()

    optimizer.step()

    if _group_ready():
        dist.all_reduce(loss_sum)
    return float(loss_sum.item() / denom)


# ----------------------------------------------------------------------------- rank 0 writes

def save_checkpoint(ddp_model, optimizer, path, step):
    """Rank 0 writes the checkpoint, whole or not at all; every rank returns once it is complete."""
    path = Path(path)
    if _rank() == 0:
        module = getattr(ddp_model, "module", ddp_model)
        state = {"model": module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
        try:
            torch.save(state, tmp)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
    if _group_ready():
        dist.barrier()


def load_checkpoint(model, optimizer, path):
    """Every rank reads the checkpoint into its own (unwrapped) model and optimizer; return the step."""
    state = torch.load(path, map_location=_device_of(model), weights_only=True)
    model.load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    return state["step"]


def log_metrics(path, step, loss):
    """Rank 0 appends one JSON line {"step", "loss"} to `path`; the other ranks write nothing."""
    if _rank() != 0:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps({"step": int(step), "loss": float(loss)}) + "\n")
        f.flush()


# ----------------------------------------------------------------------------- FSDP

def shard_fsdp(model):
    """Shard a Llama-style model with FSDP2's fully_shard; return it."""
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model


def _local_bytes(t):
    if hasattr(t, "to_local"):
        t = t.to_local()
    return t.numel() * t.element_size()


def fsdp_state_bytes(model, optimizer):
    """Bytes this rank holds of the sharded training state: {"params", "grads", "optimizer"}."""
    params = grads = opt = 0
    for p in model.parameters():
        params += _local_bytes(p)
        if p.grad is not None:
            grads += _local_bytes(p.grad)
    for state in optimizer.state.values():
        for key, value in state.items():
            if not isinstance(value, torch.Tensor):
                continue
            # AdamW's "step" is a replicated scalar counter, not per-parameter state.
            if key == "step" or (value.dim() == 0 and not hasattr(value, "to_local")):
                continue
            opt += _local_bytes(value)
    return {"params": params, "grads": grads, "optimizer": opt}


# ----------------------------------------------------------------------------- launching

def _dataset_from_samples(samples, pad_token_id):
    """Samples as dicts of equal-length tensors; shorter samples right-padded, labels -100 there."""
    length = max(len(s) for s in samples)
    dataset = []
    for s in samples:
        ids = torch.full((length,), pad_token_id, dtype=torch.long)
        labels = torch.full((length,), IGNORE_INDEX, dtype=torch.long)
        ids[: len(s)] = torch.tensor(s, dtype=torch.long)
        labels[: len(s)] = torch.tensor(s, dtype=torch.long)
        dataset.append({"input_ids": ids, "labels": labels})
    return dataset


def main(argv=None):
    """The entry point `torchrun --standalone --nproc-per-node N distributed.py --data FILE --out DIR` runs."""
    from transformers import LlamaConfig, LlamaForCausalLM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    spec = json.loads(args.data.read_text())
    seed = int(spec["seed"])

    init_distributed()
    try:
        config = LlamaConfig(**spec["config"])
        model = build_model(LlamaForCausalLM, config, seed)
        model = model.to(getattr(torch, spec.get("dtype", "float32")))
        ddp_model = wrap_ddp(model)
        seed_for_dropout(seed)
        optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=spec["lr"])
        pad = config.pad_token_id if config.pad_token_id is not None else 0
        dataset = _dataset_from_samples(spec["samples"], pad)
        log_path = args.out / "log.jsonl"
        steps = int(spec["steps"])
        for step in range(steps):
            loader = shard_loader(dataset, spec["batch_size"], epoch=step, seed=seed)
            batch = next(iter(loader))
            loss = train_step(ddp_model, optimizer, [batch])
            log_metrics(log_path, step, loss)
        save_checkpoint(ddp_model, optimizer, args.out / "checkpoint.pt", steps)
    finally:
        shutdown()


if __name__ == "__main__":
    main()
