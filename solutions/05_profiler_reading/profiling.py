"""Exercise 05: reading torch.profiler output (reference solution).

A profile comes as two pieces of data: the table (one row per `key_averages()` entry) and the
trace (the Chrome-trace JSON of the recorded steps). The readers below take that data and
return data; only `profile_steps` and `time_ms` run anything.
"""
import bisect
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

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
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    traces = []

    def keep_trace(prof):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "trace.json"
            prof.export_chrome_trace(str(path))
            traces.append(json.loads(path.read_text()))

    plan = schedule(wait=0, warmup=warmup, active=steps, repeat=1)
    with profile(activities=activities, schedule=plan, on_trace_ready=keep_trace, record_shapes=True) as prof:
        for _ in range(warmup + steps):
            step_fn()
            prof.step()
    table = [_row(average) for average in prof.key_averages()]
    return table, traces[-1]


def _row(average):
    return {"name": average.key, "count": average.count,
            "self_cpu_us": average.self_cpu_time_total, "cpu_total_us": average.cpu_time_total,
            "self_device_us": average.self_device_time_total, "device_total_us": average.device_time_total,
            "device_type": average.device_type.name.lower()}


def top_ops(table, k=10, by="self_cpu_us"):
    """The `k` rows of `table` with the largest value in column `by`, largest first.

    Ties are broken by name (alphabetical). Returns the rows themselves (dicts), unchanged.
    """
    return sorted(table, key=lambda row: (-row[by], row["name"]))[:k]


def breakdown(table, categories, by="self_cpu_us"):
    """Milliseconds of self time per category, plus "other", summing to the table's total.

    `categories` maps a label to a regular expression or a list of them; a row belongs to the
    first label (in the dict's order) with a pattern that `re.search`es its name, and to
    "other" when none does (a label named "other" adds to that same key). Only host-side
    rows (`device_type == "cpu"`) count: on a GPU table every kernel's time is also the self
    device time of the op that launched it, so adding the kernel rows would count it twice.
    `by` is "self_cpu_us" or "self_device_us". Returns {label: ms for every label in
    `categories`, "other": ms}; the values add up to the total of column `by` over the
    host-side rows, in milliseconds.
    """
    patterns = {label: [re.compile(p) for p in ([found] if isinstance(found, str) else found)]
                for label, found in categories.items()}
    totals = {label: 0.0 for label in patterns}
    totals["other"] = 0.0
    for row in _host_rows(table):
        label = next((label for label, regexes in patterns.items()
                      if any(regex.search(row["name"]) for regex in regexes)), "other")
        totals[label] += row[by] / 1000.0
    return totals


def _host_rows(table):
    return [row for row in table if row["device_type"] == "cpu"]


def step_breakdown(trace):
    """Per profiled step, where its wall time goes.

    Steps are the host's `ProfilerStep#N` events (cat "user_annotation"). Returns a list
    ordered by N, one dict per step: `step` (N), `wall_ms` (the step event's duration) and
    `data_loading_ms`, `forward_ms`, `backward_ms`, `optimizer_ms`: the time inside the step
    covered by the host's regions of that phase (cat "user_annotation"): the profiler's own
    `enumerate(DataLoader)...` and `Optimizer.step#...` regions and the scenario's
    `record_function("forward")` / `record_function("backward")`; overlapping regions of one
    phase count once, and a region counts only inside its step. When the trace holds kernels
    (cat "kernel", a CUDA trace) every step also has `device_busy_ms`, the union of the kernel
    intervals clipped to the step's span (copies are not kernels), and `device_idle_fraction`,
    1 - busy / wall.
    """
    events = _complete_events(trace)
    kernels = _kernel_intervals(events)
    regions = _phase_regions(events)
    rows = []
    for step in _steps(events):
        start, end = _span(step)
        row = {"step": int(step["name"].split("#")[1]), "wall_ms": step["dur"] / 1000.0}
        for phase, intervals in regions.items():
            row[f"{phase}_ms"] = _length(_clip(intervals, start, end)) / 1000.0
        if kernels:
            busy = _length(_clip(kernels, start, end))
            row["device_busy_ms"] = busy / 1000.0
            row["device_idle_fraction"] = 1.0 - busy / step["dur"]
        rows.append(row)
    return rows


def _complete_events(trace):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def _kernel_intervals(events):
    """When the device was busy: the union of the kernels' [start, end) intervals, any stream."""
    return _union(_span(e) for e in events if e.get("cat") == "kernel")


def _phase_regions(events):
    """Per phase, the union of the host's regions of that phase (the device's copies of the
    annotations, cat "gpu_user_annotation", are left out)."""
    return {phase: _union(_span(e) for e in events if e.get("cat") == "user_annotation" and pattern.search(e["name"]))
            for phase, pattern in PHASES.items()}


def _steps(events):
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    return sorted(steps, key=lambda e: int(e["name"].split("#")[1]))


def _span(event):
    return event["ts"], event["ts"] + event["dur"]


# Interval arithmetic on sorted, disjoint (start, end) lists.

def _union(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _clip(intervals, start, end):
    return [(max(s, start), min(e, end)) for s, e in intervals if s < end and e > start]


def _intersect(first, second):
    return _union(piece for s, e in second for piece in _clip(first, s, e))


def _subtract(intervals, removed):
    result = []
    for start, end in intervals:
        for cut_start, cut_end in _clip(removed, start, end):
            if cut_start > start:
                result.append((start, cut_start))
            start = max(start, cut_end)
        if start < end:
            result.append((start, end))
    return result


def _length(intervals):
    return sum(end - start for start, end in intervals)


def diagnose(table, trace):
    """Say which cost dominates the profiled steps: returns `(label, evidence)`.

    `label` is one of "gemm", "attention", "data_loading", "launch_overhead", "host_sync",
    "optimizer"; `evidence` is a dict of the numbers the decision rests on (str -> float:
    the milliseconds per step of every label, plus whatever else you measured).

    Every label is a cost in milliseconds per step and the largest one wins.

    CPU trace (no kernels): data_loading and optimizer are the time in those phases
    (`step_breakdown`); host_sync the self CPU time of SYNC_OPS; gemm and attention the self
    CPU time of GEMM_OPS and ATTENTION_OPS; launch_overhead the self CPU time of tiny rows
    (host-side rows, regions included, whose average self CPU time per call is under
    TINY_OP_US; sync ops excluded). Table times are divided by the number of steps.

    CUDA trace: every moment of a step is device-busy or device-idle. Busy time goes to gemm
    and attention by the self device time of their ops, and to optimizer by the device time
    of the ops inside Optimizer.step. Idle time goes to what the host was doing meanwhile,
    the first of these that applies: inside a DataLoader region -> data_loading, inside an
    Optimizer.step region -> optimizer, from the end of a sync call (SYNC_OPS) until the next
    kernel starts -> host_sync (after a sync the device has nothing queued), any other idle
    time -> launch_overhead (the device waits for kernels to be launched).
    """
    steps = step_breakdown(trace)
    per_step = 1.0 / (1000.0 * len(steps))               # microseconds in total -> ms per step
    on_device = "device_idle_fraction" in steps[0]
    column = "self_device_us" if on_device else "self_cpu_us"
    costs = {"gemm": _self_time(table, GEMM_OPS, column) * per_step,
             "attention": _self_time(table, ATTENTION_OPS, column) * per_step}
    if on_device:
        idle = _idle_by_cause(_complete_events(trace))
        costs["data_loading"] = idle["data_loading"] * per_step
        costs["host_sync"] = idle["host_sync"] * per_step
        costs["launch_overhead"] = idle["launch_overhead"] * per_step
        costs["optimizer"] = (idle["optimizer"] + _optimizer_device_time(table)) * per_step
    else:
        costs["data_loading"] = statistics.fmean(s["data_loading_ms"] for s in steps)
        costs["optimizer"] = statistics.fmean(s["optimizer_ms"] for s in steps)
        costs["host_sync"] = _self_time(table, SYNC_OPS, "self_cpu_us") * per_step
        costs["launch_overhead"] = sum(row["self_cpu_us"] for row in _host_rows(table)
                                       if _is_tiny(row) and not SYNC_OPS.search(row["name"])) * per_step
    evidence = {f"{label}_ms": ms for label, ms in costs.items()}
    evidence["wall_ms"] = statistics.fmean(s["wall_ms"] for s in steps)
    if on_device:
        evidence["device_idle_fraction"] = statistics.fmean(s["device_idle_fraction"] for s in steps)
    return max(costs, key=costs.get), evidence


def _self_time(table, pattern, column):
    return sum(row[column] for row in _host_rows(table) if pattern.search(row["name"]))


def _is_tiny(row):
    return row["count"] > 0 and row["self_cpu_us"] / row["count"] < TINY_OP_US


def _optimizer_device_time(table):
    return sum(row["device_total_us"] for row in _host_rows(table) if PHASES["optimizer"].search(row["name"]))


def _idle_by_cause(events):
    """Device-idle microseconds inside the profiled steps, split by what the host was doing."""
    kernels = _kernel_intervals(events)
    steps = _union(_span(step) for step in _steps(events))
    idle = _subtract(steps, kernels)
    host = _phase_regions(events)
    data_loading = _intersect(idle, host["data_loading"])
    optimizer = _subtract(_intersect(idle, host["optimizer"]), data_loading)
    starts = [start for start, _ in kernels]
    after_sync = _union((end, _next_start(starts, end, steps[-1][1]))
                        for _, end in (_span(e) for e in events if SYNC_OPS.search(e.get("name", ""))))
    host_sync = _subtract(_intersect(idle, after_sync), _union(data_loading + optimizer))
    explained = _union(data_loading + optimizer + host_sync)
    return {"data_loading": _length(data_loading), "optimizer": _length(optimizer),
            "host_sync": _length(host_sync), "launch_overhead": _length(_subtract(idle, explained))}


def _next_start(starts, after, default):
    index = bisect.bisect_left(starts, after)
    return starts[index] if index < len(starts) else default


def time_ms(fn, *, iters=10, warmup=3, device="cpu"):
    """Median wall time of one call of `fn`, in milliseconds.

    Calls `fn` `warmup` times untimed, then `iters` times timed, one timing per call. On CPU
    each call is timed with time.perf_counter. On CUDA, work is queued asynchronously and a
    host clock alone measures only the queueing: each timing must cover the device's work
    (CUDA events, or torch.cuda.synchronize() before reading the clock).
    """
    for _ in range(warmup):
        fn()
    timings = [_timed_call_ms(fn, device) for _ in range(iters)]
    return statistics.median(timings)


def _timed_call_ms(fn, device):
    if device != "cuda":
        begin = time.perf_counter()
        fn()
        return (time.perf_counter() - begin) * 1000.0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()                  # events are recorded in the stream: they time the device's work
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)
