"""Probes of the graded suite, beside the visible suite's (`exercises/07_distributed/probes.py`,
whose ranks and group they share): a shutdown with no group, a checkpoint write that crashes
half-way, and a real `torchrun` launch of the learner's module."""
from __future__ import annotations

import json
import os
import subprocess
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


def launched(module, data, out, nproc, limit_s):
    """`torchrun --standalone --nproc-per-node nproc <the learner's module> --data D --out O` in this
    process's environment: its exit status, the tail of what it printed, the log's lines and what the
    checkpoint holds (its keys, its step, whether the model's keys carry DDP's prefix)."""
    with open(os.path.join(out, "data.json"), "w", encoding="utf-8") as spec:
        json.dump(data, spec)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               module.__file__, "--data", os.path.join(out, "data.json"), "--out", out]
    environment = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit_s, env=environment)
        status, printed = done.returncode, (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as exc:
        status, printed = None, f"still running after {limit_s} s: {str(exc.stderr or '')[-2000:]}"
    log_path, checkpoint_path = os.path.join(out, "log.jsonl"), os.path.join(out, "checkpoint.pt")
    lines = open(log_path, encoding="utf-8").read().splitlines() if os.path.exists(log_path) else None
    held = None
    if os.path.exists(checkpoint_path):
        state = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
        held = {"keys": sorted(state) if isinstance(state, dict) else None,
                "step": state.get("step") if isinstance(state, dict) else None,
                "prefixed": any(str(k).startswith("module.") for k in (state.get("model") or {}))
                if isinstance(state, dict) else None,
                "weights": dict(state.get("model") or {}) if isinstance(state, dict) else None}
    return {"status": status, "printed": printed, "log": lines, "checkpoint": held}
