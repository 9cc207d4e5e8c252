"""Exercise 05: reading torch.profiler output.

Fill in every function below; README.md explains each one. The readers (top_ops, breakdown,
step_breakdown, diagnose) take a profile as data: the table (one dict per key_averages() row)
and the trace (the parsed Chrome-trace JSON). profile_steps records one; time_ms times a call.
Run the visible tests with:  pytest exercises/05_profiler_reading
"""
import re

# Names the profiler gives its own regions, and the regions a scenario declares itself.
PHASES = {
    "data_loading": re.compile(r"^enumerate\(DataLoader\)"),    # DataLoader.__next__
    "forward": re.compile(r"^forward$"),                         # record_function("forward")
    "backward": re.compile(r"^backward$"),                       # record_function("backward")
    "optimizer": re.compile(r"^Optimizer\.step#"),               # Optimizer.step
}
# Op families the diagnosis tells apart, by row name.
GEMM_OPS = re.compile(r"^aten::(mm|addmm|bmm|baddbmm|addmv|mv|matmul|linear)$")
ATTENTION_OPS = re.compile(r"attention")
SYNC_OPS = re.compile(r"^(aten::item|aten::_local_scalar_dense|cuda(Stream|Device|Event)Synchronize)$")
TINY_OP_US = 50.0   # an op whose average self CPU time per call is below this is "tiny"


def profile_steps(step_fn, *, steps=5, warmup=1, device="cpu"):
    """Profile `steps` calls of `step_fn` after `warmup` calls that run but are not recorded.

    Uses torch.profiler with a `torch.profiler.schedule` whose active steps are the last
    `steps` calls, calls `prof.step()` after every call of `step_fn`, records input shapes,
    and adds CUDA activity when `device == "cuda"`. Returns `(table, trace)`:

    - `table`: a list with one dict per `prof.key_averages()` row: `name` (the row's key),
      `count`, `self_cpu_us`, `cpu_total_us`, `self_device_us`, `device_total_us` (in
      microseconds, as the profiler reports them) and `device_type` ("cpu" for host-side rows,
      "cuda" for rows of device activity: kernels, copies, the device's annotations).
    - `trace`: the parsed Chrome-trace JSON (a dict with "traceEvents") holding the active
      steps only, one `ProfilerStep#N` event each.
    """
    import json
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile, schedule

    steps, warmup = int(steps), int(warmup)
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    if warmup < 0:
        raise ValueError(f"warmup must be non-negative, got {warmup}")
    on_cuda = _is_cuda(device)
    activities = [ProfilerActivity.CPU]
    if on_cuda:
        activities.append(ProfilerActivity.CUDA)

    captured = {}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")

        def ready(prof):
            # Read the table here: it is the cycle that was just recorded (the active steps).
            captured["table"] = [_row(avg) for avg in prof.key_averages()]
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as stream:
                captured["trace"] = json.load(stream)

        with profile(activities=activities,
                     schedule=schedule(wait=0, warmup=warmup, active=steps, repeat=1),
                     on_trace_ready=ready,
                     record_shapes=True) as prof:
            for _ in range(warmup + steps):
                step_fn()
                prof.step()
    return captured["table"], captured["trace"]


def top_ops(table, k=10, by="self_cpu_us"):
    """The `k` rows of `table` with the largest value in column `by`, largest first.

    Ties are broken by name (alphabetical). Returns the rows themselves (dicts), unchanged.
    """
    if k is None:
        k = len(table)
    if k <= 0:
        return []
    ranked = sorted(table, key=lambda row: (-row[by], row["name"]))
    return ranked[:k]


def breakdown(table, categories, by="self_cpu_us"):
    """Milliseconds of self time per category, plus "other", summing to the table's total.

    `categories` maps a label to a regular expression or a list of them; a row belongs to the
    first label (in the dict's order) with a pattern that `re.search`es its name, and to
    "other" when none does. Only host-side rows (`device_type == "cpu"`) count: on a GPU
    table every kernel's time is also the self device time of the op that launched it, so
    adding the kernel rows would count it twice. `by` is "self_cpu_us" or "self_device_us".
    Returns {label: ms for every label in `categories`, "other": ms}; the values add up to
    the total of column `by` over the host-side rows, in milliseconds.
    """
    compiled = {label: _patterns(spec) for label, spec in categories.items()}
    totals_us = {label: 0.0 for label in compiled}
    totals_us.setdefault("other", 0.0)
    for row in table:
        if row.get("device_type", "cpu") != "cpu":
            continue
        for label, patterns in compiled.items():     # noqa: B007 (the label found is read after the loop)
            if any(pattern.search(row["name"]) for pattern in patterns):
                break
        else:
            label = "other"
        totals_us[label] += row[by]
    return {label: us / 1000.0 for label, us in totals_us.items()}


def step_breakdown(trace):
    """Per profiled step, where its wall time goes.

    Steps are the host's `ProfilerStep#N` events (cat "user_annotation"). Returns a list
    ordered by N, one dict per step: `step` (N), `wall_ms` (the step event's duration) and
    `data_loading_ms`, `forward_ms`, `backward_ms`, `optimizer_ms`: the time inside the step
    covered by the host's regions of that phase (cat "user_annotation"): the profiler's own
    `enumerate(DataLoader)...` and `Optimizer.step#...` regions and the scenario's
    `record_function("forward")` / `record_function("backward")`; overlapping regions of one
    phase count once. When the trace holds kernels (cat "kernel", a CUDA trace) each step also
    has `device_busy_ms`, the union of the kernel intervals clipped to the step's span, and
    `device_idle_fraction`, 1 - busy / wall.
    """
    events = _complete_events(trace)
    host_regions = [e for e in events if e.get("cat") == "user_annotation"]
    steps = []
    for event in host_regions:
        match = _STEP.match(event["name"])
        if match:
            steps.append((int(match.group(1)), event))
    steps.sort(key=lambda item: (item[0], item[1]["ts"]))
    phase_regions = {phase: [(e["ts"], e["ts"] + e["dur"]) for e in host_regions if pattern.search(e["name"])]
                     for phase, pattern in PHASES.items()}
    kernels = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel"]

    result = []
    for number, event in steps:
        start, end = event["ts"], event["ts"] + event["dur"]
        wall_us = event["dur"]
        row = {"step": number, "wall_ms": wall_us / 1000.0}
        for phase in ("data_loading", "forward", "backward", "optimizer"):
            covered = _union(_clip(phase_regions[phase], start, end))
            row[f"{phase}_ms"] = _length(covered) / 1000.0
        if kernels:
            busy_us = _length(_union(_clip(kernels, start, end)))
            row["device_busy_ms"] = busy_us / 1000.0
            row["device_idle_fraction"] = 1.0 - busy_us / wall_us if wall_us > 0 else 0.0
        result.append(row)
    return result


def diagnose(table, trace):
    """Say which cost dominates the profiled steps: returns `(label, evidence)`.

    `label` is one of "gemm", "attention", "data_loading", "launch_overhead", "host_sync",
    "optimizer"; `evidence` is a dict of the numbers the decision rests on (str -> float:
    the milliseconds per step of every label, plus whatever else you measured).

    Every label is a cost in milliseconds per step and the largest one wins.

    CPU trace (no kernels): data_loading and optimizer are the time in those phases
    (`step_breakdown`); host_sync the self CPU time of SYNC_OPS; gemm and attention the self
    CPU time of GEMM_OPS and ATTENTION_OPS; launch_overhead the self CPU time of tiny ops
    (average self CPU time per call under TINY_OP_US; sync ops excluded).

    CUDA trace: every moment of a step is device-busy or device-idle. Busy time goes to gemm
    and attention by the self device time of their ops, and to optimizer by the device time
    of the ops inside Optimizer.step. Idle time goes to what the host was doing meanwhile:
    inside a DataLoader region -> data_loading, inside an Optimizer.step region -> optimizer,
    from the end of a sync call (SYNC_OPS) until the next kernel starts -> host_sync (after a
    sync the device has nothing queued), any other idle time -> launch_overhead (the device
    waits for kernels to be launched).
    """
    host_rows = [row for row in table if row.get("device_type", "cpu") == "cpu"]
    events = _complete_events(trace)
    steps = step_breakdown(trace)
    n_steps = max(1, len(steps))
    on_gpu = any(e.get("cat") == "kernel" for e in events)

    def per_step_ms(rows, column):
        return sum(row[column] for row in rows) / 1000.0 / n_steps

    def named(pattern):
        return [row for row in host_rows if pattern.search(row["name"])]

    evidence = {"steps": float(len(steps)),
                "wall_ms": sum(s["wall_ms"] for s in steps) / n_steps}
    costs = {}
    if not on_gpu:
        costs["gemm"] = per_step_ms(named(GEMM_OPS), "self_cpu_us")
        costs["attention"] = per_step_ms(named(ATTENTION_OPS), "self_cpu_us")
        costs["data_loading"] = sum(s["data_loading_ms"] for s in steps) / n_steps
        costs["optimizer"] = sum(s["optimizer_ms"] for s in steps) / n_steps
        costs["host_sync"] = per_step_ms(named(SYNC_OPS), "self_cpu_us")
        tiny = [row for row in host_rows
                if not SYNC_OPS.search(row["name"]) and row["count"] > 0
                and row["self_cpu_us"] / row["count"] < TINY_OP_US]
        costs["launch_overhead"] = per_step_ms(tiny, "self_cpu_us")
    else:
        idle = _gpu_idle_ms(events, steps_events=_step_events(events))
        optimizer_rows = named(PHASES["optimizer"])
        costs["gemm"] = per_step_ms(named(GEMM_OPS), "self_device_us")
        costs["attention"] = per_step_ms(named(ATTENTION_OPS), "self_device_us")
        costs["optimizer"] = per_step_ms(optimizer_rows, "device_total_us") + idle["optimizer"] / n_steps
        costs["data_loading"] = idle["data_loading"] / n_steps
        costs["host_sync"] = idle["host_sync"] / n_steps
        costs["launch_overhead"] = idle["launch_overhead"] / n_steps
        evidence["device_busy_ms"] = sum(s["device_busy_ms"] for s in steps) / n_steps
        evidence["device_idle_fraction"] = (sum(s["device_idle_fraction"] for s in steps) / len(steps)
                                            if steps else 0.0)
        evidence["optimizer_idle_ms"] = idle["optimizer"] / n_steps
    label = max(LABELS, key=lambda name: costs[name])        # ties: the first label in LABELS
    evidence.update({f"{name}_ms": float(costs[name]) for name in LABELS})
    return label, evidence


def time_ms(fn, *, iters=10, warmup=3, device="cpu"):
    """Median wall time of one call of `fn`, in milliseconds.

    Calls `fn` `warmup` times untimed, then `iters` times timed, one timing per call. On CPU
    each call is timed with time.perf_counter. On CUDA, work is queued asynchronously and a
    host clock alone measures only the queueing: each timing must cover the device's work
    (CUDA events, or torch.cuda.synchronize() before reading the clock).
    """
    import statistics
    import time

    iters, warmup = int(iters), int(warmup)
    if iters < 1:
        raise ValueError(f"iters must be at least 1, got {iters}")
    on_cuda = _is_cuda(device)
    if on_cuda:
        import torch

        sync = torch.cuda.synchronize
    else:
        def sync():
            return None
    for _ in range(warmup):
        fn()
    timings = []
    for _ in range(iters):
        sync()                                   # nothing queued before the clock starts
        start = time.perf_counter()
        fn()
        sync()                                   # the device's work is part of the call
        timings.append((time.perf_counter() - start) * 1000.0)
    return float(statistics.median(timings))


# ---------------------------------------------------------------- helpers

LABELS = ("gemm", "attention", "data_loading", "launch_overhead", "host_sync", "optimizer")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _is_cuda(device):
    return str(device).startswith("cuda")


def _row(avg):
    """One key_averages() row as a plain dict, times in microseconds."""
    device_type = getattr(avg.device_type, "name", str(avg.device_type)).lower()
    return {"name": avg.key, "count": int(avg.count),
            "self_cpu_us": float(avg.self_cpu_time_total), "cpu_total_us": float(avg.cpu_time_total),
            "self_device_us": float(avg.self_device_time_total), "device_total_us": float(avg.device_time_total),
            "device_type": device_type}


def _patterns(spec):
    """A regular expression, a compiled one, or a list of either, as a list of compiled patterns."""
    if isinstance(spec, (str, re.Pattern)):
        spec = [spec]
    return [re.compile(p) if isinstance(p, str) else p for p in spec]


def _complete_events(trace):
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return [e for e in events if e.get("ph") == "X" and "dur" in e and "ts" in e]


def _step_events(events):
    steps = [e for e in events if e.get("cat") == "user_annotation" and _STEP.match(e["name"])]
    return sorted(steps, key=lambda e: int(_STEP.match(e["name"]).group(1)))


def _clip(intervals, start, end):
    return [(max(a, start), min(b, end)) for a, b in intervals if min(b, end) > max(a, start)]


def _union(intervals):
    """Sorted, disjoint intervals covering the same points."""
    merged = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            if b > merged[-1][1]:
                merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def _length(intervals):
    return sum(b - a for a, b in intervals)


def _subtract(intervals, removed):
    """The parts of disjoint sorted `intervals` not covered by disjoint sorted `removed`."""
    out = []
    for a, b in intervals:
        cursor = a
        for c, d in removed:
            if d <= cursor or c >= b:
                continue
            if c > cursor:
                out.append((cursor, c))
            cursor = max(cursor, d)
            if cursor >= b:
                break
        if cursor < b:
            out.append((cursor, b))
    return out


def _intersect(intervals, other):
    """The parts of disjoint sorted `intervals` covered by disjoint sorted `other`."""
    return _subtract(intervals, _subtract(intervals, other))


def _gpu_idle_ms(events, steps_events):
    """Milliseconds of device-idle time inside the steps, summed over the steps, by what the host did."""
    import bisect

    kernels = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel")
    kernel_starts = [a for a, _ in kernels]
    regions = {phase: _union((e["ts"], e["ts"] + e["dur"]) for e in events
                             if e.get("cat") == "user_annotation" and PHASES[phase].search(e["name"]))
               for phase in ("data_loading", "optimizer")}
    waits = []
    for e in events:
        if e.get("cat") in ("cpu_op", "cuda_runtime") and SYNC_OPS.search(e["name"]):
            end = e["ts"] + e["dur"]
            index = bisect.bisect_left(kernel_starts, end)
            waits.append((end, kernel_starts[index] if index < len(kernel_starts) else float("inf")))
    waits = _union(waits)
    idle_ms = {"data_loading": 0.0, "optimizer": 0.0, "host_sync": 0.0, "launch_overhead": 0.0}
    for step in steps_events:
        start, end = step["ts"], step["ts"] + step["dur"]
        idle = _subtract([(start, end)], _union(_clip(kernels, start, end)))
        for label, cover in (("data_loading", regions["data_loading"]), ("optimizer", regions["optimizer"]),
                             ("host_sync", waits)):
            taken = _intersect(idle, cover)
            idle_ms[label] += _length(taken) / 1000.0
            idle = _subtract(idle, taken)
        idle_ms["launch_overhead"] += _length(idle) / 1000.0
    return idle_ms
