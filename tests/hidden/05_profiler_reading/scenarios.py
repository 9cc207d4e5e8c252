"""The six profiled scenarios of the hidden suite, built by trusted code from sizes (data).

Each builder returns a step function: one training step whose dominant cost is known by
construction, by a wide margin (at least 3x the next cost on a loaded 2-core machine), and
which takes well under a second. `draw_sizes` picks the sizes from a seeded generator, so the
answers cannot be memorised; `record` profiles a step function the way the exercise asks
(schedule with warmup, prof.step() per call, shapes recorded) and returns (table, trace).
"""
import contextlib
import json
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import record_function

STEPS, WARMUP = 2, 1


def gemm(rows, width, depth, seed):
    """A chain of large matmuls, forward and backward: GEMMs dominate."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, width, generator=gen)
    weights = [(torch.randn(width, width, generator=gen) / width ** 0.5).requires_grad_() for _ in range(depth)]

    def step():
        with record_function("forward"):
            y = x
            for w in weights:
                y = y @ w
            loss = y.square().mean()
        with record_function("backward"):
            loss.backward()
        for w in weights:
            w.grad = None
    return step


def attention(seq, heads, head_dim, seed):
    """Causal attention over a long sequence with a small output projection: the attention op dominates."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, heads, seq, head_dim, generator=gen).requires_grad_() for _ in range(3))
    width = heads * head_dim
    w_out = (torch.randn(width, width, generator=gen) / width ** 0.5).requires_grad_()

    def step():
        with record_function("forward"):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            loss = (out.transpose(1, 2).reshape(seq, width) @ w_out).square().mean()
        with record_function("backward"):
            loss.backward()
        for leaf in (q, k, v, w_out):
            leaf.grad = None
    return step


def data_loading(batch, features, sleep_ms, seed):
    """A DataLoader whose collate function sleeps, feeding a tiny model: the device waits for data."""
    gen = torch.Generator().manual_seed(seed)
    dataset = torch.utils.data.TensorDataset(torch.randn(batch * 8, features, generator=gen),
                                             torch.randn(batch * 8, 1, generator=gen))

    def slow_collate(items):
        time.sleep(sleep_ms / 1000.0)            # decoding, augmentation, a slow disk ...
        return torch.utils.data.default_collate(items)

    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, collate_fn=slow_collate)
    model = torch.nn.Linear(features, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = iter(loader)

    def step():
        nonlocal batches
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            x, y = next(batches)
        with record_function("forward"):
            loss = F.mse_loss(model(x), y)
        with record_function("backward"):
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return step


def launch_overhead(ops, size, seed):
    """Thousands of tiny elementwise ops on a small tensor: per-op overhead dominates."""
    gen = torch.Generator().manual_seed(seed)
    x, scale, shift = torch.randn(size, generator=gen), torch.full((size,), 1.0001), torch.full((size,), 1e-4)

    def step():
        with record_function("forward"):
            y = x
            for _ in range(ops // 2):
                y = y * scale + shift
    return step


def host_sync(history, features, seed):
    """An evaluation step: a small forward pass, then the running mean of every loss so far,
    read back to the host one `.item()` at a time (the losses were kept as tensors)."""
    gen = torch.Generator().manual_seed(seed)
    x, y, w = torch.randn(16, features, generator=gen), torch.randn(16, 1, generator=gen), torch.randn(features, 1, generator=gen)
    losses = [torch.tensor(v) for v in torch.rand(history, generator=gen).tolist()]   # earlier steps' losses

    def step():
        with record_function("forward"):
            loss = (x @ w - y).square().mean()
        losses.append(loss)
        losses.pop(0)
        return sum(value.item() for value in losses) / len(losses)     # one host read per stored loss
    return step


def optimizer(rows, dim, batch, seed):
    """A large embedding table trained on a tiny batch with Adam: the optimizer step dominates."""
    gen = torch.Generator().manual_seed(seed)
    table = torch.nn.Embedding(rows, dim)
    head = torch.nn.Linear(dim, 1)
    adam = torch.optim.Adam([*table.parameters(), *head.parameters()], lr=1e-3)
    ids, y = torch.randint(rows, (batch,), generator=gen), torch.randn(batch, 1, generator=gen)

    def step():
        with record_function("forward"):
            loss = F.mse_loss(head(table(ids)), y)
        with record_function("backward"):
            loss.backward()
        adam.step()
        adam.zero_grad()
    return step


BUILDERS = {"gemm": gemm, "attention": attention, "data_loading": data_loading,
            "launch_overhead": launch_overhead, "host_sync": host_sync, "optimizer": optimizer}


def draw_sizes(rng):
    """Sizes for every scenario, from a seeded numpy Generator."""
    def pick(low, high, step=1):
        return int(rng.integers(low // step, high // step + 1)) * step

    return {
        "gemm": dict(rows=pick(192, 320, 32), width=pick(320, 448, 32), depth=pick(3, 4)),
        "attention": dict(seq=pick(768, 1152, 64), heads=pick(2, 3), head_dim=pick(32, 64, 16)),
        "data_loading": dict(batch=pick(16, 48, 8), features=pick(16, 64, 8), sleep_ms=pick(40, 60)),
        "launch_overhead": dict(ops=pick(1000, 1400, 100), size=pick(16, 64, 16)),
        "host_sync": dict(history=pick(900, 1200, 50), features=pick(4, 16)),
        "optimizer": dict(rows=pick(30_000, 50_000, 5_000), dim=pick(48, 64, 16), batch=pick(2, 8)),
    }


@contextlib.contextmanager
def one_thread():
    """Profile on one intra-op thread: on a shared 2-core machine a second OpenMP thread mostly waits."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def record(step_fn, steps=STEPS, warmup=WARMUP):
    """(table, trace) of `steps` calls after `warmup` unrecorded ones, by trusted code.

    It records what torch.profiler.profile with a schedule records (each active call inside a
    `ProfilerStep#N` annotation, N counting every call), through the autograd profiler that
    torch.profiler drives: the same events, without torch.profiler's start-up cost of
    importing the compiler stack on first use.
    """
    with one_thread():
        for _ in range(warmup):
            step_fn()
        with torch.autograd.profiler.profile(use_kineto=True) as prof:
            for number in range(warmup, warmup + steps):
                with record_function(f"ProfilerStep#{number}"):
                    step_fn()
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "trace.json"
            prof.export_chrome_trace(str(path))
            trace = json.loads(path.read_text())
    table = [{"name": a.key, "count": a.count, "self_cpu_us": a.self_cpu_time_total,
              "cpu_total_us": a.cpu_time_total, "self_device_us": a.self_device_time_total,
              "device_total_us": a.device_time_total, "device_type": a.device_type.name.lower()}
             for a in prof.key_averages()]
    return table, trace
