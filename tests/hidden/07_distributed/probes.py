"""Probes of the graded suite, beside the visible suite's (`exercises/07_distributed/probes.py`,
whose ranks and group they share): a shutdown with no group, and a checkpoint write that crashes
half-way, and `main` run on forked ranks."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from grader.worker.loading import load_module

visible = load_module(Path(__file__).resolve().parents[3] / "exercises" / "07_distributed" / "probes.py")


def shutdown_without_a_group(module):
    """What `shutdown()` does in a process that never joined a group: None, or what it raised."""
    try:
        module.shutdown()
    except Exception as exc:       # noqa: BLE001 (the learner's error is the answer)
        return f"{type(exc).__name__}: {exc}"
    return None


CRASH_STATUS = 9          # the exit status of a rank that died in the middle of torch.save


def crash_while_saving(module, world_size, config, seed, folder):
    """Rank 0's torch.save writes half a file and dies: each rank's outcome, and what is left in
    `folder` once the ranks end."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def work(rank):
        with visible.probe_group():
            torch.manual_seed(seed)
            ddp_model = torch.nn.parallel.DistributedDataParallel(LlamaForCausalLM(LlamaConfig(**config)))
            optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=1e-3)

            def dies_half_way(obj, target, *args, **kwargs):
                with open(target, "wb") as out:
                    out.write(b"PK\x03\x04 half a checkpoint")
                os._exit(CRASH_STATUS)

            torch.save = dies_half_way
            module.save_checkpoint(ddp_model, optimizer, os.path.join(folder, "checkpoint.pt"), 3)
    ranks = visible.on_ranks(world_size, work, limit_s=8.0)
    return {"ranks": ranks, "left": sorted(os.listdir(folder))}


def seeds_in_main(module, world_size, data, folder):
    """`main` on forked ranks (torchrun's environment, without torchrun) on `data`, writing into
    `folder`: each rank's `torch.initial_seed()` (what torch's generator, which dropout draws from,
    was last seeded with) at each of its `train_step` calls."""
    spec = visible.data_file(folder, data)

    def work(rank):
        seeds, kept = [], []
        step, wrap = module.train_step, module.wrap_ddp

        def seed_then_step(*args, **kwargs):
            seeds.append(torch.initial_seed())
            return step(*args, **kwargs)

        def kept_alive(*args, **kwargs):     # freed after main's group is gone, a DDP model can hang gloo
            kept.append(wrap(*args, **kwargs))
            return kept[-1]

        module.train_step, module.wrap_ddp = seed_then_step, kept_alive
        sys.argv = [module.__file__, "--data", spec, "--out", folder]
        module.main()
        return seeds
    return visible.on_ranks(world_size, work)
