"""Probes of the visible tests: they run beside your module (in the worker during official grading),
start the ranks of a process group (`grader.worker.ranks`: forked, with torchrun's environment),
call your functions on every rank, watch what they do from the outside (what reached
`init_process_group`, each all-reduce of DDP, who saved what) and return it, as data, rank by rank.

Except in the tests of "Joining the group", the probe joins the group itself (gloo, with a
timeout), so that a mistake in `init_distributed` costs only its own tests.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from grader.worker.ranks import RankOutcome, run_ranks

COLLECTIVE_TIMEOUT_S = 30      # the probe's own group: a rank left waiting gives up after this
COMMON_PORTS = (29500, 12355, 12345)      # what a port written into code usually is: taken here by someone else
PER_MACHINE = 2      # ranks per machine: four ranks are two machines, where LOCAL_RANK and the rank differ


def on_ranks(world_size, work, *args, limit_s=60.0):
    """`work(rank, *args)` on every rank, as `PER_MACHINE` ranks to a machine and with no CUDA device
    in sight (these tests are the CPU's, whatever the grading machine has); each rank's outcome as
    data (`RankOutcome.as_data`)."""
    def on_the_cpu(rank, *args):
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        return work(rank, *args)
    return [outcome.as_data() for outcome in
            run_ranks(world_size, on_the_cpu, *args, limit_s=limit_s, per_node=min(world_size, PER_MACHINE))]


@contextlib.contextmanager
def probe_group():
    """The probe's own process group for one rank's work. Every rank has joined before any works
    (`all_joined`). It is never destroyed: the rank ends once its work returns (`run_ranks`), and
    destroying a group while the objects built on it (a DDP model's reducer) are still alive can
    hang in gloo's teardown."""
    dist.init_process_group("gloo", timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    all_joined()
    yield dist.get_rank(), dist.get_world_size()


def all_joined():
    """Wait until every rank of the group has joined it. A rank's `init_process_group` can return
    while a slower rank is still connecting to it (gloo's full mesh); a rank that then leaves (its
    work done, or `shutdown()` called) makes the slower one's join fail ("Connection closed by
    peer"), a failure of no one's code."""
    dist.barrier()


@contextlib.contextmanager
def ports_taken(ports=COMMON_PORTS):
    """Listening sockets on the ports code tends to write in, as another job on the machine would have."""
    held = []
    for port in ports:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with contextlib.suppress(OSError):
            listener.bind(("127.0.0.1", port))
            listener.listen()
            held.append(listener)
    try:
        yield
    finally:
        for listener in held:
            listener.close()


# ---------------------------------------------------------------- Joining the group

def joined(module, world_size, timeout_s):
    """Each rank: what `init_distributed(timeout_s)` (with its default where `timeout_s` is None)
    returned and passed to `init_process_group`, the group it made, and whether `shutdown()` left
    it (and did nothing when called again)."""
    def work(rank):
        seen = {}
        real = dist.init_process_group

        def watching(*args, **kwargs):
            seen.update(backend=args[0] if args else kwargs.get("backend"),
                        timeout_s=kwargs["timeout"].total_seconds() if kwargs.get("timeout") else None,
                        init_method=kwargs.get("init_method"), explicit_rank=kwargs.get("rank"))
            return real(*args, **kwargs)

        dist.init_process_group = watching
        try:
            returned = module.init_distributed() if timeout_s is None else module.init_distributed(timeout_s)
        finally:
            dist.init_process_group = real
        group = {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "backend": dist.get_backend()}
        all_joined()
        module.shutdown()
        left = not dist.is_initialized()
        module.shutdown()
        return {"returned": list(returned) if isinstance(returned, tuple) else returned, "seen": seen,
                "group": group, "left": left}

    with ports_taken():
        return on_ranks(world_size, work)


# ---------------------------------------------------------------- Sharding the data

def shards(module, world_size, n_samples, batch_size, epochs, seed, drop_last):
    """Each rank: the sample ids its loader yields, epoch by epoch (the dataset's items are their
    ids), `drop_last` left to its default where it is None."""
    def work(rank):
        with probe_group():
            dataset = list(range(n_samples))
            given = {} if drop_last is None else {"drop_last": drop_last}
            return [[int(i) for batch in module.shard_loader(dataset, batch_size, epoch, seed, **given) for i in batch]
                    for epoch in range(epochs)]
    return on_ranks(world_size, work)


# ---------------------------------------------------------------- Seeds

def seeded(module, world_size, config, seed):
    """Each rank: a fingerprint of the weights `build_model` built, and the first draws after
    `seed_for_dropout(seed)` (a dropout mask's randomness)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def work(rank):
        with probe_group():
            torch.manual_seed(1000 + rank)          # whatever each rank's state was before
            model = module.build_model(LlamaForCausalLM, LlamaConfig(**config), seed)
            weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            module.seed_for_dropout(seed)
            return {"weights": weights[:64].clone(), "weights_sum": float(weights.double().sum()), "draws": torch.rand(8)}
    return on_ranks(world_size, work)


# ---------------------------------------------------------------- The DDP step

def counting_all_reduces(calls):
    """A DDP communication hook that appends to `calls` for each bucket DDP all-reduces, then
    all-reduces it as DDP does by default (`allreduce_hook`: the sum divided by the world size)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def all_reduce(state, bucket):
        calls.append(bucket.index())
        return allreduce_hook(state, bucket)
    return all_reduce


def stepped(module, world_size, config, seed, micro_batches_per_rank, stale=False):
    """Each rank: the loss `train_step` returned, the gradient it applied (as one vector; the
    optimizer is SGD with lr 0, so the weights stay those built), how many buckets DDP all-reduced
    during the step, and how many buckets one all-reduce of the whole gradient takes. With `stale`,
    every parameter holds a gradient of its own before the step, as one left by an earlier step would."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def work(rank):
        with probe_group():
            torch.manual_seed(seed)
            model = LlamaForCausalLM(LlamaConfig(**config))
            ddp_model = module.wrap_ddp(model)
            calls = []
            ddp_model.register_comm_hook(None, counting_all_reduces(calls))
            optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.0)
            for parameter in model.parameters() if stale else ():
                parameter.grad = torch.full_like(parameter, 0.5)
            loss = module.train_step(ddp_model, optimizer, micro_batches_per_rank[rank])
            applied, during_step = gradient(model), len(calls)
            calls.clear()
            model.zero_grad(set_to_none=True)
            ddp_model(input_ids=micro_batches_per_rank[rank][0]["input_ids"]).logits.float().sum().backward()
            return {"loss": loss, "grad": applied, "all_reduces": during_step, "buckets": len(calls),
                    "wrapped": type(ddp_model).__name__}

    return on_ranks(world_size, work)


def gradient(model):
    """Every parameter's gradient as one vector (zeros where a parameter has none)."""
    return torch.cat([p.grad.detach().reshape(-1) if p.grad is not None else torch.zeros(p.numel())
                      for p in model.parameters()])


# ---------------------------------------------------------------- Rank 0 writes, every rank waits

SLOW_WRITE_S = 1.0        # rank 0's torch.save takes this long here: a rank that does not wait reads too early


def checkpointed(module, world_size, config, seed, folder, step):
    """Each rank: which ranks called torch.save (and on what), then what it read back right after
    `save_checkpoint` returned, with rank 0's write slowed down: the step, the keys, and whether
    the weights it loaded equal the ones saved."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def work(rank):
        with probe_group():
            torch.manual_seed(seed)
            model = LlamaForCausalLM(LlamaConfig(**config))
            ddp_model = torch.nn.parallel.DistributedDataParallel(model)
            optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=1e-3)
            ddp_model(input_ids=torch.arange(8).reshape(1, 8)).logits.float().mean().backward()
            optimizer.step()
            saves = []
            real_save = torch.save

            def slow_save(obj, target, *args, **kwargs):
                saves.append({"rank": rank, "target": str(target),
                              "keys": sorted(obj) if isinstance(obj, dict) else None})
                time.sleep(SLOW_WRITE_S)
                return real_save(obj, target, *args, **kwargs)

            torch.save = slow_save
            path = os.path.join(folder, "checkpoint.pt")
            try:
                module.save_checkpoint(ddp_model, optimizer, path, step)
            finally:
                torch.save = real_save
            fresh = LlamaForCausalLM(LlamaConfig(**config))
            fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
            read_step = module.load_checkpoint(fresh, fresh_optimizer, path)
            same = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))
            stored = torch.load(path, map_location="cpu", weights_only=True)
            return {"saves": saves, "step": read_step, "same_weights": same, "keys": sorted(stored),
                    "model_keys_prefixed": any(k.startswith("module.") for k in stored.get("model", {})),
                    "optimizer_steps": sorted({int(s["step"]) for s in fresh_optimizer.state_dict()["state"].values()}),
                    "files": sorted(os.listdir(folder))}

    return on_ranks(world_size, work)


def logged(module, world_size, path, steps):
    """Each rank logs `steps` (step, loss) pairs, losses of its own (rank 0's: 1 / (step + 1); each
    other rank's that plus its rank, so that a line says who wrote it); the file's lines, read after
    every rank is done."""
    def work(rank):
        with probe_group():
            for step in range(steps):
                module.log_metrics(path, step, 1.0 / (step + 1) + rank)
            dist.barrier()
            with open(path, encoding="utf-8") as log:
                return log.read().splitlines()
    return on_ranks(world_size, work)


# ---------------------------------------------------------------- FSDP

def sharded_state(module, world_size, config, seed):
    """Each rank: the FSDP units of the model `shard_fsdp` returned, after one AdamW step the bytes
    `fsdp_state_bytes` reported and the bytes its local shards really hold, and the model's whole size."""
    from torch.distributed.fsdp import FSDPModule
    from transformers import LlamaConfig, LlamaForCausalLM

    def work(rank):
        with probe_group():
            torch.manual_seed(seed)
            model = LlamaForCausalLM(LlamaConfig(**config))
            whole = sum(p.numel() * p.element_size() for p in model.parameters())
            sharded = module.shard_fsdp(model)
            units = sorted(name or "<root>" for name, m in sharded.named_modules() if isinstance(m, FSDPModule))
            optimizer = torch.optim.AdamW(sharded.parameters(), lr=1e-3)
            sharded(input_ids=torch.arange(8).reshape(1, 8)).logits.float().mean().backward()
            optimizer.step()
            reported = module.fsdp_state_bytes(sharded, optimizer)

            def shard_bytes(tensors):
                shards = [t.to_local() if hasattr(t, "to_local") else t for t in tensors]
                return sum(shard.numel() * shard.element_size() for shard in shards)

            moments = [v for st in optimizer.state.values() for v in st.values() if torch.is_tensor(v) and v.dim() > 0]
            held = {"params": shard_bytes(sharded.parameters()),
                    "grads": shard_bytes(p.grad for p in sharded.parameters() if p.grad is not None),
                    "optimizer": shard_bytes(moments)}
            return {"units": units, "reported": reported, "held": held, "whole_param_bytes": whole,
                    "layers": len(model.model.layers)}
    return on_ranks(world_size, work)


# ---------------------------------------------------------------- Launching with torchrun

EXIT_GRACE_S = 30      # after the checkpoint is written, the ranks have this long to leave the group and exit


def data_file(folder, data):
    """`main`'s data file (`--data`), written into `folder`: its path."""
    path = os.path.join(folder, "data.json")
    with open(path, "w", encoding="utf-8") as spec:
        json.dump(data, spec)
    return path


def launched(module, data, out, nproc, limit_s, cuda=False):
    """`torchrun --standalone --nproc-per-node nproc <the learner's module> --data D --out O` in this
    process's environment (CUDA devices visible only with `cuda`): its exit status, the tail of what
    it printed, the log's lines and what the checkpoint holds (its keys, its step, whether the
    model's keys carry DDP's prefix, the devices its tensors were saved from and the dtypes of its
    weights, its weights as float32 on the CPU).

    torch's gloo can hang, rarely, in a rank's exit after its group was destroyed while a DDP model
    still lived (pytorch/pytorch#75097; about 1 launch in 40 here, with correct code): a launch whose
    ranks are still running `EXIT_GRACE_S` after the checkpoint appeared is stopped and run once
    more. A hang of the learner's own comes back the second time too, and is reported."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               module.__file__, "--data", data_file(out, data), "--out", out]
    environment = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    if not cuda:
        environment["CUDA_VISIBLE_DEVICES"] = ""
    log_path, checkpoint_path = os.path.join(out, "log.jsonl"), os.path.join(out, "checkpoint.pt")
    deadline = time.monotonic() + limit_s          # for both launches together
    for launches in (1, 2):
        for written in (log_path, checkpoint_path):
            with contextlib.suppress(FileNotFoundError):
                os.remove(written)
        status, printed, hung_at_exit = _torchrun(command, environment, deadline, checkpoint_path)
        if not hung_at_exit:
            break
        printed = (f"the ranks were still running {EXIT_GRACE_S} s after the checkpoint was written, in {launches} launches "
                   f"(a rank that never leaves the group, or never returns from main): {printed}")
    lines = open(log_path, encoding="utf-8").read().splitlines() if os.path.exists(log_path) else None
    held = None
    if os.path.exists(checkpoint_path):
        saved_from = set()

        def on_the_cpu(storage, location):          # where each tensor was saved from, loaded onto the CPU
            saved_from.add(location.split(":")[0])
            return storage

        state = torch.load(checkpoint_path, map_location=on_the_cpu, weights_only=True)
        held = {"keys": sorted(state) if isinstance(state, dict) else None, "saved_from": sorted(saved_from),
                "step": state.get("step") if isinstance(state, dict) else None,
                "prefixed": any(str(k).startswith("module.") for k in (state.get("model") or {}))
                if isinstance(state, dict) else None,
                "dtypes": sorted({str(value.dtype) for value in (state.get("model") or {}).values() if torch.is_tensor(value)})
                if isinstance(state, dict) else None,
                "weights": {name: value.float() if torch.is_tensor(value) else value
                            for name, value in (state.get("model") or {}).items()} if isinstance(state, dict) else None}
    return {"status": status, "printed": printed, "log": lines, "checkpoint": held, "launches": launches}


def _stop(launch):
    """torchrun stops its ranks when it is asked to (SIGTERM; they run in sessions of their own);
    it and whatever of its session is left are killed if it has not ended within seconds."""
    launch.send_signal(signal.SIGTERM)
    try:
        launch.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launch.pid, signal.SIGKILL)
        launch.wait()


def _torchrun(command, environment, deadline, checkpoint_path):
    """One launch: (exit status or None, the tail of what it printed, whether it was stopped for
    running on `EXIT_GRACE_S` after the checkpoint appeared)."""
    written_at, hung_at_exit = None, False
    with tempfile.TemporaryFile() as printed:
        launch = subprocess.Popen(command, stdout=printed, stderr=subprocess.STDOUT, env=environment,
                                  start_new_session=True)
        try:
            while launch.poll() is None and time.monotonic() < deadline:
                if written_at is None and os.path.exists(checkpoint_path):
                    written_at = time.monotonic()
                if written_at is not None and time.monotonic() - written_at > EXIT_GRACE_S:
                    hung_at_exit = True
                    break
                time.sleep(0.2)
        finally:
            status = launch.poll()
            if status is None:
                _stop(launch)
        printed.seek(0)
        text = printed.read().decode(errors="replace")[-3000:]
    if status is None and not hung_at_exit:
        text = f"still running at the launch's time limit: {text[-2000:]}"
    return status, text, hung_at_exit


def outcomes(data):
    """The outcomes of `on_ranks` again, for a test's messages (`RankOutcome.describe`)."""
    return [RankOutcome(**entry) for entry in data]
