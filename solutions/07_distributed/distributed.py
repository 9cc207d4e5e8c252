"""Exercise 07: data parallelism for real, on CPU: DDP and FSDP over gloo, launched by torchrun.

Every function runs on each rank of a process group (`torchrun --standalone --nproc-per-node N`
starts one process per rank and gives it RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT).
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
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def shutdown():
    """Leave the process group (every rank, once, at the end)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def shard_loader(dataset, batch_size, epoch, seed, drop_last=False):
    """This rank's DataLoader for `epoch`: its share of a shuffled order that changes every epoch.

    Across ranks, every sample appears once per epoch; when the dataset does not divide evenly,
    `drop_last=False` repeats samples from the start of the order to even the shares out and
    `drop_last=True` leaves the tail out.
    """
    sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank(), shuffle=True,
                                 seed=seed, drop_last=drop_last)
    sampler.set_epoch(epoch)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def build_model(model_class, config, seed):
    """The model every rank starts from: the same seed on every rank, so that the ranks build the
    same weights (FSDP shards what each rank built; it does not broadcast rank 0's)."""
    torch.manual_seed(seed)
    return model_class(config)


def seed_for_dropout(seed):
    """After the model is built: a generator state of this rank's own (seed + rank), so that the
    ranks draw different dropout masks for their different samples."""
    torch.manual_seed(seed + dist.get_rank())


def wrap_ddp(model):
    """The model wrapped for data parallelism: a whole copy on every rank, gradients all-reduced.
    A model on a CUDA device names it (`device_ids`); one on the CPU names none."""
    device = next(model.parameters()).device
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def count_label_tokens(labels):
    """Tokens that carry loss in a batch of labels: the shifted labels that are not IGNORE_INDEX."""
    return int((labels[:, 1:] != IGNORE_INDEX).sum())


def _loss_sum(model, batch):
    """The summed cross-entropy of a batch's predicted tokens (shifted, in float32), on the model's device."""
    device = next(model.parameters()).device
    logits = model(input_ids=batch["input_ids"].to(device)).logits
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), batch["labels"][:, 1:].flatten().to(device),
                           ignore_index=IGNORE_INDEX, reduction="sum")


def train_step(ddp_model, optimizer, micro_batches):
    """One optimizer step over this rank's micro-batches; return the loss of the step over every
    rank's tokens.

    The gradient equals that of one process on all ranks' micro-batches together: the mean over
    every loss-carrying token of the step, however the tokens are spread over ranks and
    micro-batches. Gradients are all-reduced once per step: every backward but the last under
    `no_sync()`. Gradients left from before the step are zeroed first. The batches may come on the
    CPU: they go to the model's device.
    """
    device = next(ddp_model.parameters()).device          # NCCL reduces CUDA tensors only
    tokens = torch.tensor(float(sum(count_label_tokens(batch["labels"]) for batch in micro_batches)), device=device)
    dist.all_reduce(tokens)
    world_size = dist.get_world_size()
    optimizer.zero_grad(set_to_none=True)
    summed = torch.zeros((), device=device)
    for index, batch in enumerate(micro_batches):
        last = index == len(micro_batches) - 1
        with contextlib.nullcontext() if last else ddp_model.no_sync():
            loss_sum = _loss_sum(ddp_model, batch)
            # DDP averages the ranks' gradients: times world_size, the average is the sum over
            # every rank's tokens divided by all of them.
            (loss_sum * world_size / tokens).backward()
        summed += loss_sum.detach()
    optimizer.step()
    dist.all_reduce(summed)
    return float(summed / tokens)


def save_checkpoint(ddp_model, optimizer, path, step):
    """Rank 0 writes the model's weights (without DDP's `module.` prefix), the optimizer's state
    and the step, whole or not at all; every rank returns once the file is complete."""
    if dist.get_rank() == 0:
        path = Path(path)
        partial = path.with_name(path.name + ".partial")
        torch.save({"model": ddp_model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, partial)
        os.replace(partial, path)
    dist.barrier()


def load_checkpoint(model, optimizer, path):
    """Every rank reads what `save_checkpoint` wrote into its own model and optimizer; return the step."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["step"]


def log_metrics(path, step, loss):
    """Rank 0 appends one JSON line {"step", "loss"} to `path`; the other ranks write nothing."""
    if dist.get_rank() == 0:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"step": step, "loss": loss}) + "\n")


def shard_fsdp(model):
    """Shard a Llama-style model with FSDP2: each decoder layer its own unit, then the root (the
    embeddings, final norm and head), so that one layer's parameters at a time are gathered whole."""
    from torch.distributed.fsdp import fully_shard
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model


def fsdp_state_bytes(model, optimizer):
    """Bytes this rank holds of the sharded training state: {"params", "grads", "optimizer"}."""
    def local(tensor):
        shard = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        return shard.numel() * shard.element_size()
    params = list(model.parameters())
    return {"params": sum(local(p) for p in params),
            "grads": sum(local(p.grad) for p in params if p.grad is not None),
            "optimizer": sum(local(value) for state in optimizer.state.values() for value in state.values()
                             if torch.is_tensor(value) and value.dim() > 0)}


def main(argv=None):
    """`torchrun --standalone --nproc-per-node N distributed.py --data FILE --out DIR`: a few DDP
    steps on the data file's batches, the log and the checkpoint written by rank 0."""
    from transformers import LlamaConfig, LlamaForCausalLM
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True, help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    spec = json.loads(Path(args.data).read_text(encoding="utf-8"))
    init_distributed()
    try:
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
        model = build_model(LlamaForCausalLM, LlamaConfig(**spec["config"]), spec["seed"])
        model = model.to(device, getattr(torch, spec.get("dtype", "float32")))
        ddp_model = wrap_ddp(model)
        seed_for_dropout(spec["seed"])
        optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=spec.get("lr", 1e-3))
        samples = [{"input_ids": torch.tensor(s), "labels": torch.tensor(s)} for s in spec["samples"]]
        out = Path(args.out)
        for step in range(spec["steps"]):
            batch = next(iter(shard_loader(samples, spec["batch_size"], epoch=step, seed=spec["seed"])))
            log_metrics(out / "log.jsonl", step, train_step(ddp_model, optimizer, [batch]))
        save_checkpoint(ddp_model, optimizer, out / "checkpoint.pt", spec["steps"])
    finally:
        shutdown()


if __name__ == "__main__":
    main()
