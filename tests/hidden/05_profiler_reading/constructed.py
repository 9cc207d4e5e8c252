"""Constructed profiles for the hidden suite of exercise 05, built by trusted code from a seeded
generator: inputs that make a README rule observable where a recorded profile cannot.

A recorded trace nests every region inside its step, has one region per phase and step, and
numbers its steps from 1. The README promises more than that, so the traces built here have
regions of one phase that overlap or nest, regions that stick out of their step, steps numbered
across 9 -> 10, and (on the device side) kernels of two streams that overlap and cross a step's
ends, copies and fills in the gaps between kernels, the device's copies of the regions, and a
step without kernels. The CPU profiles pair a trace with the table `key_averages()` would make
of it (self time = duration minus the direct children's), so a reader may use either.
"""
import re

HOST_PID, HOST_TID = 101, 101
DEVICE_PID = 0
COMPUTE_STREAM, NCCL_STREAM = 7, 21
REGION_NAMES = {"data_loading": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                "forward": "forward", "backward": "backward", "optimizer": "Optimizer.step#AdamW.step"}
NOT_A_PHASE = "Optimizer.zero_grad#AdamW.zero_grad"    # an optimizer region that is not its step
TINY_OP_US = 50.0       # as in the stub: an op is tiny when its self time per call is *under* this
# loader_beside_gemm: the matmul's self time is D (1 +- RATIO_GAP). A correct reading compares
# the two exactly (timestamps are rounded to 1e-3 us of about 8000: 1e-7 relative); costs read
# 0.1% off in either (1001 us to the ms) or twice the table's (2 / steps) swap the answer.
RATIO_GAP = 2e-4


def _event(cat, name, ts, dur, pid=HOST_PID, tid=HOST_TID):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(float(ts), 3),
            "dur": round(float(dur), 3)}


def _step_spans(rng, count):
    """Consecutive steps, some back to back, some with a gap; durations in microseconds."""
    spans, start = [], float(rng.uniform(1e6, 2e6))
    for _ in range(count):
        duration = float(rng.uniform(2_000, 6_000))
        spans.append((start, start + duration))
        start += duration + float(rng.choice([0.0, rng.uniform(5, 300)]))
    return spans


def _regions(rng, start, end):
    """A phase's host regions around one step: one that nests in another, one that overlaps it,
    one that starts inside the step and runs past its end, at random places."""
    length = end - start
    outer_start = start + float(rng.uniform(0.05, 0.3)) * length
    outer = (outer_start, float(rng.uniform(0.2, 0.35)) * length)
    nested = (outer_start + 0.25 * outer[1], 0.5 * outer[1])
    overlapping = (outer_start + 0.6 * outer[1], float(rng.uniform(0.6, 1.0)) * outer[1])
    past_the_end = (end - float(rng.uniform(0.02, 0.1)) * length, float(rng.uniform(0.15, 0.3)) * length)
    chosen = [outer, nested, overlapping, past_the_end]
    keep = rng.permutation(len(chosen))[:int(rng.integers(2, len(chosen) + 1))]
    return [chosen[i] for i in sorted(keep)]


def _kernels(rng, start, end, free_at, crosses_end):
    """Kernels of one step on the compute stream (back to back or with gaps, from when the stream
    is free), an all-reduce on its own stream overlapping them, and copies and fills placed in the
    compute stream's gaps. Returns the events and when the compute stream is free again."""
    events, gaps = [], []
    cursor = max(free_at, start + float(rng.uniform(20, 200)))
    stop = end + float(rng.uniform(100, 400)) if crosses_end else end - float(rng.uniform(50, 150))
    while cursor < stop:
        duration = float(rng.uniform(20, 400))
        if not crosses_end:
            duration = min(duration, stop - cursor)
        events.append(_event("kernel", "sm90_xmma_gemm_bf16bf16", cursor, duration, DEVICE_PID, COMPUTE_STREAM))
        cursor += duration
        gap = float(rng.choice([0.0, rng.uniform(30, 300)]))
        if gap:
            gaps.append((cursor, gap))
        cursor += gap
    first, last = events[0]["ts"], events[-1]["ts"] + events[-1]["dur"]
    reduce_start = first + float(rng.uniform(0.2, 0.5)) * (last - first)
    events.append(_event("kernel", "ncclDevKernel_AllReduce_Sum_bf16", reduce_start,
                         float(rng.uniform(0.1, 0.3)) * (last - first), DEVICE_PID, NCCL_STREAM))
    for gap_start, gap in gaps[:3]:
        copy = rng.random() < 0.6
        events.append(_event("gpu_memcpy" if copy else "gpu_memset",
                             "Memcpy HtoD (Pageable -> Device)" if copy else "Memset (Device)",
                             gap_start + 0.2 * gap, 0.6 * gap, DEVICE_PID, COMPUTE_STREAM))
    return events, last


def trace(rng, *, device):
    """A trace of 3 to 5 steps, events in random order (see the module docstring)."""
    count = int(rng.integers(3, 6))
    first = int(rng.integers(11 - count, 10))          # the last step is #10 or later
    spans = _step_spans(rng, count)
    empty = int(rng.integers(2, count)) if device else -1   # a step without kernels (not the first two)
    events, free_at = [], 0.0
    for index, (start, end) in enumerate(spans):
        name = f"ProfilerStep#{first + index}"
        events.append(_event("user_annotation", name, start, end - start))
        for phase in rng.permutation(list(REGION_NAMES)):
            for region_start, duration in _regions(rng, start, end):
                events.append(_event("user_annotation", REGION_NAMES[phase], region_start, duration))
        events.append(_event("user_annotation", NOT_A_PHASE, start + 0.9 * (end - start), 0.05 * (end - start)))
        events.append(_event("cpu_op", "aten::mm", start + 0.4 * (end - start), 0.1 * (end - start)))
        if device:
            events.append(_event("gpu_user_annotation", name, start + 15, end - start, DEVICE_PID, COMPUTE_STREAM))
            events.append(_event("gpu_user_annotation", "forward", start + 0.1 * (end - start), 0.8 * (end - start),
                                 DEVICE_PID, COMPUTE_STREAM))
            if index != empty:
                crosses = index == 0 or (index + 1 < count and index + 1 != empty and rng.random() < 0.7)
                kernels, free_at = _kernels(rng, start, end, free_at, crosses)
                events += kernels
    order = rng.permutation(len(events))
    return {"traceEvents": [events[i] for i in order]}


# ---------------------------------------------------------------- CPU profiles for the diagnosis

def _lay_out(node, cursor, events):
    """Place a (cat, name, self_us, children) tree from `cursor`: half its self time before the
    children, half after, and 1 us after each child, so that no rounding of the timestamps can
    make one sibling look nested in the other (that microsecond is the parent's self time too).
    Returns where it ends."""
    cat, name, self_us, children = node
    start = cursor
    cursor += self_us / 2
    for child in children:
        cursor = _lay_out(child, cursor, events) + 1.0
    cursor += self_us / 2
    events.append(_event(cat, name, start, cursor - start))
    return cursor


def table_of(trace):
    """What key_averages() makes of a one-thread CPU trace: one row per name (the steps' numbers
    replaced by *), its count, and its self and total time in microseconds."""
    events = sorted(trace["traceEvents"], key=lambda e: (e["ts"], -e["dur"]))
    rows, stack = {}, []
    for e in events:
        while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
            stack.pop()
        name = re.sub(r"^ProfilerStep#\d+$", "ProfilerStep*", e["name"])
        row = rows.setdefault(name, {"name": name, "count": 0, "self_cpu_us": 0.0, "cpu_total_us": 0.0,
                                     "self_device_us": 0.0, "device_total_us": 0.0, "device_type": "cpu"})
        row["count"] += 1
        row["self_cpu_us"] += e["dur"]
        row["cpu_total_us"] += e["dur"]
        if stack:
            parent = re.sub(r"^ProfilerStep#\d+$", "ProfilerStep*", stack[-1]["name"])
            rows[parent]["self_cpu_us"] -= e["dur"]
        stack.append(e)
    return list(rows.values())


def _profile(steps):
    events, cursor = [], 1_000_000.0
    for step in steps:
        cursor = _lay_out(step, cursor, events) + 40.0
    trace_ = {"traceEvents": events}
    return table_of(trace_), trace_


def annotated_tiny_ops(rng):
    """Every layer wraps one tiny op in its own record_function: the annotations cost more host
    time than the ops, and more than the one matmul of the step. Tiny rows are every host-side
    row with a small average self time per call, regions included: launch_overhead wins.
    Per step: gemm G, tiny ops T, tiny regions R with R + T >= 1.5 G and T <= G / 2."""
    layers, gemm_us = int(rng.integers(120, 180)), float(rng.uniform(1_800, 2_200))
    op_us, region_us = gemm_us / (2.2 * layers), 1.7 * gemm_us / layers    # T = G / 2.2, R = 1.7 G
    steps = []
    for number in range(1, 1 + int(rng.integers(3, 5))):
        blocks = [("user_annotation", "block", region_us, [("cpu_op", "aten::add", op_us, [])]) for _ in range(layers)]
        forward = ("user_annotation", "forward", 300.0, [("cpu_op", "aten::mm", gemm_us, []), *blocks])
        steps.append(("user_annotation", f"ProfilerStep#{number}", 200.0, [forward]))
    return _profile(steps)


def _loader_and_gemm_steps(count, loader_us, gemm_us):
    """`count` steps, each waiting `loader_us` for its DataLoader, then one matmul of `gemm_us`."""
    steps = []
    for number in range(1, 1 + count):
        loader = ("user_annotation", REGION_NAMES["data_loading"], loader_us, [])
        forward = ("user_annotation", "forward", 80.0, [("cpu_op", "aten::mm", gemm_us, [])])
        steps.append(("user_annotation", f"ProfilerStep#{number}", 120.0, [loader, forward]))
    return _profile(steps)


def slow_loader_many_steps(rng):
    """Each of 5 to 7 steps waits D for its DataLoader and spends G < D / 2 in one matmul: per step
    the data wins, while the table's total of the matmul (G times the steps) is larger than D."""
    count = int(rng.integers(5, 8))
    loader_us = float(rng.uniform(7_000, 9_000))
    gemm_us = loader_us * float(rng.uniform(0.3, 0.4))
    return _loader_and_gemm_steps(count, loader_us, gemm_us)


def attention_region_of_matmuls(rng):
    """Attention written by hand inside a record_function("attention"): two batched matmuls and a
    long softmax per layer, then an FFN matmul and bias adds of exactly TINY_OP_US each. By self
    time the GEMMs lead (the region's own self time is small, the adds are not tiny); the
    region's total, which holds the matmuls and the softmax, exceeds them, and so do the adds
    if TINY_OP_US itself counted as tiny: per layer, GEMMs 2B + F (about 900 us) against a region
    total of 2B + S + r (S >= 5 F) and adds of 24 x 50 us."""
    layers = int(rng.integers(4, 8))
    bmm_us, ffn_us = float(rng.uniform(350, 450)), float(rng.uniform(80, 120))
    softmax_us = float(rng.uniform(5, 6)) * ffn_us
    steps = []
    for number in range(1, 1 + int(rng.integers(3, 5))):
        blocks = []
        for _ in range(layers):
            blocks.append(("user_annotation", "attention", 30.0, [("cpu_op", "aten::bmm", bmm_us, []),
                                                                   ("cpu_op", "aten::_softmax", softmax_us, []),
                                                                   ("cpu_op", "aten::bmm", bmm_us, [])]))
            blocks.append(("cpu_op", "aten::mm", ffn_us, []))
            blocks += [("cpu_op", "aten::add_", TINY_OP_US, [])] * 24
        steps.append(("user_annotation", f"ProfilerStep#{number}", 150.0,
                      [("user_annotation", "forward", 100.0, blocks)]))
    return _profile(steps)


def reads_under_item(rng):
    """Losses read back one `.item()` at a time, among a few hundred tiny elementwise ops: the
    read's time sits mostly in aten::_local_scalar_dense, under aten::item. Per step: reads
    N x (3 + L) us with L about 25, tiny ops M x 8 us with M x 8 between 2.5 N and 0.6 N (3 + L)."""
    reads = int(rng.integers(300, 450))
    local_us = float(rng.uniform(22, 28))
    ops = int(reads * float(rng.uniform(0.35, 0.45)) * (3 + local_us) / 8)
    steps = []
    for number in range(1, 1 + int(rng.integers(3, 5))):
        forward = ("user_annotation", "forward", 100.0, [("cpu_op", "aten::mul", 8.0, [])] * ops)
        read = ("cpu_op", "aten::item", 3.0, [("cpu_op", "aten::_local_scalar_dense", local_us, [])])
        steps.append(("user_annotation", f"ProfilerStep#{number}", 150.0, [forward, *[read] * reads]))
    return _profile(steps)


def named_layers_one_step(rng):
    """One recorded step whose layers each wrap one tiny op in a record_function of the layer's
    own name: every layer's row counts one call, and a row called once is tiny when that call is.
    Per step: gemm G, tiny ops T (one row, many calls), tiny regions R (one row per layer, one
    call each) with R + T >= 1.5 G and T <= G / 2: launch_overhead wins only with the regions."""
    layers, gemm_us = int(rng.integers(120, 180)), float(rng.uniform(1_800, 2_200))
    op_us, region_us = gemm_us / (2.2 * layers), 1.7 * gemm_us / layers    # T = G / 2.2, R = 1.7 G
    blocks = [("user_annotation", f"layers.{index}", region_us, [("cpu_op", "aten::add", op_us, [])])
              for index in range(layers)]
    forward = ("user_annotation", "forward", 300.0, [("cpu_op", "aten::mm", gemm_us, []), *blocks])
    return _profile([("user_annotation", "ProfilerStep#1", 200.0, [forward])])


def loader_beside_gemm(rng, *, count, leader):
    """`count` steps, each waiting D for its DataLoader and spending G in one matmul, G a hair
    (RATIO_GAP) above D when `leader` is "gemm" and below it when it is "data_loading": per step,
    the table's total of the matmul divided by the steps against the phase's mean over the steps,
    both in ms, is all that decides. Nothing else costs more than a few percent of D."""
    loader_us = float(rng.uniform(7_000, 9_000))
    gemm_us = loader_us * (1.0 + RATIO_GAP if leader == "gemm" else 1.0 - RATIO_GAP)
    return _loader_and_gemm_steps(count, loader_us, gemm_us)


CPU_PROFILES = {"launch_overhead": annotated_tiny_ops, "data_loading": slow_loader_many_steps,
                "gemm": attention_region_of_matmuls, "host_sync": reads_under_item}


# ---------------------------------------------------------------- a GPU profile for the diagnosis

def _row(name, count, *, self_cpu=0.0, total_cpu=0.0, self_device=0.0, total_device=0.0, device_type="cpu"):
    return {"name": name, "count": count, "self_cpu_us": self_cpu, "cpu_total_us": total_cpu,
            "self_device_us": self_device, "device_total_us": total_device, "device_type": device_type}


def optimizer_launching_per_parameter(rng):
    """A GPU step: the GEMMs of forward and backward keep the device busy G us, then a for-loop
    optimizer launches one tiny kernel per parameter (k us each), one every 30 us of host time:
    inside Optimizer.step the device mostly waits. optimizer = its kernels' time plus that idle
    time (about 2.5 G); its kernels alone (P k, about 0.6 G) lose to the GEMMs."""
    count, params = int(rng.integers(3, 5)), int(rng.integers(230, 270))
    gemm_us, kernel_us = float(rng.uniform(1_900, 2_100)), float(rng.uniform(4.5, 5.5))
    events, cursor = [], 5_000_000.0
    for number in range(1, 1 + count):
        start = cursor
        optimizer_start, optimizer_end = start + 300.0, start + 300.0 + params * 30.0 + 20.0
        end = optimizer_end + 50.0
        events.append(_event("user_annotation", f"ProfilerStep#{number}", start, end - start))
        events.append(_event("user_annotation", "forward", start + 5.0, 120.0))
        events.append(_event("user_annotation", "backward", start + 130.0, 160.0))
        events.append(_event("user_annotation", "Optimizer.step#SGD.step", optimizer_start,
                             optimizer_end - optimizer_start))
        device = start + 40.0
        for _ in range(8):                               # forward and backward GEMMs, back to back
            events.append(_event("kernel", "sm90_xmma_gemm_bf16bf16", device, gemm_us / 8, DEVICE_PID, COMPUTE_STREAM))
            device += gemm_us / 8
        for param in range(params):                      # launched one by one from the host
            device = max(device, optimizer_start + 10.0 + 30.0 * param)
            events.append(_event("kernel", "vectorized_elementwise_kernel", device, kernel_us, DEVICE_PID,
                                 COMPUTE_STREAM))
            device += kernel_us
        cursor = end + 10.0
    gemm_total, optimizer_total = gemm_us * count, kernel_us * params * count
    table = [_row("ProfilerStep*", count, self_cpu=300.0 * count, total_cpu=(end - start) * count,
                  self_device=0.0, total_device=gemm_total + optimizer_total),
             _row("aten::mm", 8 * count, self_cpu=40.0 * count, total_cpu=40.0 * count,
                  self_device=gemm_total, total_device=gemm_total),
             _row("Optimizer.step#SGD.step", count, self_cpu=500.0 * count, total_cpu=params * 30.0 * count,
                  self_device=0.0, total_device=optimizer_total),
             _row("aten::add_", params * count, self_cpu=6.0 * params * count, total_cpu=6.0 * params * count,
                  self_device=optimizer_total, total_device=optimizer_total),
             _row("sm90_xmma_gemm_bf16bf16", 8 * count, self_device=gemm_total, total_device=gemm_total,
                  device_type="cuda"),
             _row("vectorized_elementwise_kernel", params * count, self_device=optimizer_total,
                  total_device=optimizer_total, device_type="cuda")]
    return table, {"traceEvents": [events[i] for i in rng.permutation(len(events))]}


def syncs_between_launches(rng, sync_name):
    """A GPU step of a few rounds: the host launches a burst of GEMM kernels (B us on the device),
    then waits in a sync call named `sync_name` until the burst is done, then spends W (about 1.5
    to 2 B) in Python before it launches the next burst, the device idle meanwhile. That idle
    time follows a sync: host_sync (about 1.7 B a round) beats the GEMMs (B a round), and the
    device's other waits (before the first burst, 5 us per round inside the sync call) are tiny.
    `sync_name` is one of the names SYNC_OPS lists; the runtime's calls are cat "cuda_runtime",
    the ops cat "cpu_op"."""
    sync_cat = "cuda_runtime" if sync_name.startswith("cuda") else "cpu_op"
    count, rounds, kernels = int(rng.integers(3, 5)), int(rng.integers(3, 6)), int(rng.integers(4, 9))
    events, cursor = [], 8_000_000.0
    for number in range(1, 1 + count):
        start = host = cursor
        for _ in range(rounds):
            burst_us = float(rng.uniform(300, 500))
            python_us = float(rng.uniform(1.5, 2.0)) * burst_us
            device = host + 10.0
            for _ in range(kernels):
                events.append(_event("cpu_op", "aten::mm", host, 3.0))
                events.append(_event("kernel", "sm90_xmma_gemm_bf16bf16", device, burst_us / kernels, DEVICE_PID,
                                     COMPUTE_STREAM))
                device += burst_us / kernels
                host += 4.0
            events.append(_event(sync_cat, sync_name, host, device + 5.0 - host))
            host = device + 5.0 + python_us
        end = host
        events.append(_event("user_annotation", f"ProfilerStep#{number}", start, end - start))
        cursor = end + 10.0
    def total_us(cat, name=""):
        return sum(e["dur"] for e in events if e["cat"] == cat and e["name"].startswith(name))

    kernel_us, launch_us, sync_us = total_us("kernel"), total_us("cpu_op", "aten::mm"), total_us(sync_cat, sync_name)
    steps_us = total_us("user_annotation", "ProfilerStep#")
    table = [_row("ProfilerStep*", count, self_cpu=steps_us - launch_us - sync_us, total_cpu=steps_us,
                  total_device=kernel_us),
             _row("aten::mm", kernels * rounds * count, self_cpu=launch_us, total_cpu=launch_us,
                  self_device=kernel_us, total_device=kernel_us),
             _row(sync_name, rounds * count, self_cpu=sync_us, total_cpu=sync_us),
             _row("sm90_xmma_gemm_bf16bf16", kernels * rounds * count, self_device=kernel_us, total_device=kernel_us,
                  device_type="cuda")]
    return table, {"traceEvents": [events[i] for i in rng.permutation(len(events))]}


GPU_PROFILES = {"optimizer": optimizer_launching_per_parameter}
