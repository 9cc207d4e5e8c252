"""Visible tests for exercise 05. Run: pytest exercises/05_profiler_reading

They read the profiles shipped in datasets/profiles (a real CPU training step and synthetic CUDA
profiles) and record one tiny profile of their own. The graded suite checks much more: six
scenarios profiled on your machine with sizes you cannot know in advance, every CUDA profile,
shuffled traces, ties, overlapping labels, timing on an asynchronous device.
"""
import functools
import gzip
import json
import math

import pytest

from grader.course import COURSE
from grader.suite.checks import shown
from grader.worker.loading import sibling_module

# Seconds for a test of quick calls: its own work is milliseconds, but the first test of a task also
# waits for the worker that runs your module to start (4 s on a 2-core machine at load 2, several
# times that on a loaded one).
QUICK = 30

# by path: a notebook has no __file__
probes = sibling_module(COURSE.exercises / "05_profiler_reading" / "test_profiling.py", "probes")


@functools.cache
def load(name):
    """A shipped profile: its table, and its trace reduced to what a reader needs (the complete
    events' ph, cat, name, pid, tid, ts and dur), as the graded suite passes it too."""
    table = json.loads((COURSE.datasets / "profiles" / f"{name}.table.json").read_text())["rows"]
    with gzip.open(COURSE.datasets / "profiles" / f"{name}.trace.json.gz") as stream:
        events = json.load(stream)["traceEvents"]
    keep = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
    return table, {"traceEvents": [{k: e[k] for k in keep if k in e} for e in events if e.get("ph") == "X"]}


@pytest.mark.points(1)
@pytest.mark.concept("Self and total time")
@pytest.mark.timeout(QUICK)
def test_top_ops_ranks_by_self_time(submission):
    """the three heaviest rows by self CPU time of the shipped CPU training step"""
    table, _ = load("cpu_train_step")
    expected = [row["name"] for row in sorted(table, key=lambda row: -row["self_cpu_us"])[:3]]
    got = [row["name"] for row in submission.top_ops(table, k=3)]
    assert got == expected, f"top_ops(cpu_train_step's table, k=3): expected {shown(expected)}, got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("Self and total time")
@pytest.mark.timeout(QUICK)
def test_breakdown_adds_up_to_the_total_self_time(submission):
    """the labels plus "other" add up to the table's self CPU time, in milliseconds"""
    table, _ = load("cpu_train_step")
    got = submission.breakdown(table, {"gemm": [r"^aten::(mm|addmm)$"], "attention": "attention"})
    total_ms = sum(row["self_cpu_us"] for row in table) / 1000
    assert set(got) == {"gemm", "attention", "other"}, \
        f"breakdown(cpu_train_step's table, ...)'s keys: expected ['attention', 'gemm', 'other'], got {shown(sorted(got))}"
    parts = sum(got.values())
    assert abs(parts - total_ms) < 1e-6 * total_ms, \
        f"breakdown(cpu_train_step's table, ...): expected parts summing to the table's {shown(total_ms)} ms, got {shown(parts)}"
    gemm_ms = sum(row["self_cpu_us"] for row in table if row["name"] in ("aten::mm", "aten::addmm")) / 1000
    assert abs(got["gemm"] - gemm_ms) < 1e-6 * gemm_ms, \
        f"breakdown(cpu_train_step's table, ...)['gemm']: expected {shown(gemm_ms)} ms, got {shown(got['gemm'])}"


@pytest.mark.points(1)
@pytest.mark.concept("Steps and phases")
@pytest.mark.timeout(QUICK)
def test_step_breakdown_of_the_cpu_profile(submission):
    """three steps, numbered as in ProfilerStep#N, each with its wall time and phases"""
    _, trace = load("cpu_train_step")
    got = submission.step_breakdown(trace)
    walls = {int(e["name"].split("#")[1]): e["dur"] / 1000 for e in trace["traceEvents"]
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    steps = [row["step"] for row in got]
    assert steps == sorted(walls), \
        f"step_breakdown(cpu_train_step's trace)'s steps: expected {shown(sorted(walls))}, got {shown(steps)}"
    for row in got:
        assert abs(row["wall_ms"] - walls[row["step"]]) < 1e-6, (f"step_breakdown(cpu_train_step's trace), step "
                                                                 f"{shown(row['step'])}'s wall_ms: expected "
                                                                 f"{shown(walls[row['step']])}, got {shown(row['wall_ms'])}")
        phases = row["data_loading_ms"] + row["forward_ms"] + row["backward_ms"] + row["optimizer_ms"]
        assert 0 < phases <= row["wall_ms"], (f"step {shown(row['step'])}'s four phases: expected above 0 and at most "
                                              f"its wall_ms {shown(row['wall_ms'])}, got {shown(phases)} ms in all")


@pytest.mark.points(1)
@pytest.mark.concept("Device time and idle time")
@pytest.mark.timeout(QUICK)
def test_device_idle_of_a_cuda_profile(submission):
    """a GPU fed by a slow DataLoader is idle most of each step"""
    _, trace = load("cuda_data_loading")
    got = submission.step_breakdown(trace)
    for row in got:
        assert 0.5 < row["device_idle_fraction"] < 1.0, (f"step_breakdown(cuda_data_loading's trace), step "
                                                         f"{shown(row['step'])}'s device_idle_fraction: expected between "
                                                         f"0.5 and 1.0, got {shown(row['device_idle_fraction'])}")
        busy = row["wall_ms"] * (1 - row["device_idle_fraction"])
        assert abs(row["device_busy_ms"] - busy) < 1e-6, \
            (f"step_breakdown(cuda_data_loading's trace), step {shown(row['step'])}'s device_busy_ms: expected "
             f"wall_ms * (1 - device_idle_fraction) = {shown(busy)}, got {shown(row['device_busy_ms'])}")


@pytest.mark.points(1)
@pytest.mark.concept("Diagnosis")
@pytest.mark.timeout(QUICK)
def test_diagnose_the_shipped_profiles(submission):
    """the CPU training step is GEMM-bound; the CUDA one waits for its DataLoader"""
    for name, expected in (("cpu_train_step", "gemm"), ("cuda_data_loading", "data_loading")):
        label, evidence = submission.diagnose(*load(name))
        assert label == expected, \
            f"diagnose(the shipped {name}): expected {shown(expected)}, got {shown(label)} (evidence {shown(evidence, 200)})"


@pytest.mark.points(1)
@pytest.mark.concept("Recording a profile")
@pytest.mark.timeout(180)
def test_profile_steps_leaves_out_the_warmup(submission):
    """3 active steps after 1 warmup: the step runs 4 times, aten::mm is counted 3 times"""
    got = submission.probe(probes.three_steps_after_one)
    assert got["calls"] == 4, \
        f"profile_steps(step_fn, steps=3, warmup=1) ran step_fn: expected 4 times (1 warmup + 3), got {shown(got['calls'])}"
    counts = {row["name"]: row["count"] for row in got["table"]}
    assert counts.get("aten::mm") == 3, \
        f"profile_steps(step_fn, steps=3, warmup=1)'s aten::mm count: expected 3, got {shown(counts.get('aten::mm'))}"
    assert len(got["steps"]) == 3, \
        f"profile_steps(step_fn, steps=3, warmup=1)'s trace: expected 3 ProfilerStep events, got {shown(got['steps'])}"


@pytest.mark.points(1)
@pytest.mark.concept("Asynchronous timing")
@pytest.mark.timeout(QUICK)
def test_time_ms_of_a_sleep(submission):
    """time_ms of a 10 ms sleep is about 10 ms"""
    got = submission.probe(probes.time_a_sleep)
    assert 9.5 <= got <= 40, f"time_ms(a 10 ms sleep, iters=3, warmup=1): expected between 9.5 and 40 ms, got {shown(got)}"


# ---------------------------------------------------------------- constructed profiles

def row(name, count=1, self_cpu=0.0, self_device=0.0, device_type="cpu", cpu_total=None, device_total=None):
    return {"name": name, "count": count, "self_cpu_us": self_cpu, "cpu_total_us": cpu_total or self_cpu,
            "self_device_us": self_device, "device_total_us": device_total or self_device, "device_type": device_type}


def event(name, ts, dur, cat="user_annotation", pid=1, tid=1):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def cpu_profile(rows, steps=2, data_us=0):
    """A CPU profile whose table and trace agree: `steps` steps, each opening with `data_us` of
    DataLoader, then its share of every row's calls (cpu_op events of the row's average self time),
    one after the other."""
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    ops = [[] for _ in range(steps)]
    for r in rows:
        for call in range(r["count"]):
            ops[call % steps].append((r["name"], r["self_cpu_us"] / r["count"]))
    events, start = [], 1_000.0
    for k, calls in enumerate(ops):
        length = data_us + sum(dur for _, dur in calls) + 100.0
        events.append(event(f"ProfilerStep#{k + 1}", start, length))
        cursor = start
        if data_us:
            events.append(event(loader, cursor, data_us))
            cursor += data_us
        for name, dur in calls:
            events.append(event(name, cursor, dur, cat="cpu_op"))
            cursor += dur
        start += length
    return rows, {"traceEvents": events}


@pytest.mark.points(1)
@pytest.mark.concept("Self and total time")
@pytest.mark.timeout(QUICK)
def test_top_ops_ties_by_name_and_every_row_takes_part(submission):
    """equal self times are ordered by name; device-side rows (a kernel) rank by their device time; the rows come
    back unchanged"""
    table = [row("aten::relu", 4, 120.0), row("aten::add", 2, 120.0), row("aten::mul", 1, 80.0),
             row("void gemm_kernel<128>", 3, 0.0, 900.0, "cuda"), row("aten::mm", 3, 40.0, 880.0)]
    got = submission.top_ops(table, k=3)
    names = [r["name"] for r in got]
    assert names == ["aten::add", "aten::relu", "aten::mul"], \
        (f"top_ops(table, k=3): expected ['aten::add', 'aten::relu', 'aten::mul'], got {shown(names)}: "
         "largest self CPU time first, ties by name")
    assert got[0] == table[1], \
        f"top_ops(table, k=3)[0]: expected the row unchanged, {shown(table[1], 160)}, got {shown(got[0], 160)}"
    by_device = [r["name"] for r in submission.top_ops(table, k=2, by="self_device_us")]
    assert by_device == ["void gemm_kernel<128>", "aten::mm"], \
        (f"top_ops(table, k=2, by='self_device_us'): expected ['void gemm_kernel<128>', 'aten::mm'], got {shown(by_device)}: "
         "every row takes part, the kernel's own row too")


@pytest.mark.points(1)
@pytest.mark.concept("Self and total time")
@pytest.mark.timeout(QUICK)
def test_breakdown_first_label_wins_and_device_time_counts_once(submission):
    """a row matching two labels counts for the first; patterns are searched anywhere in the name; a label named
    'other' shares its key; by self device time only the host-side rows count"""
    table = [row("aten::addmm", 2, 3000.0, 5000.0), row("aten::mm", 1, 1000.0, 2000.0), row("aten::gelu", 4, 500.0),
             row("aten::dropout", 1, 250.0), row("ampere_sgemm_64x64", 3, 0.0, 7000.0, "cuda")]
    got = submission.breakdown(table, {"gemm": [r"mm$"], "add": "add", "other": "gelu"})
    want = {"gemm": 4.0, "add": 0.0, "other": 0.75}
    assert set(got) == set(want) and all(math.isclose(got[k], v, abs_tol=1e-9) for k, v in want.items()), \
        f"breakdown(table, {{'gemm': ['mm$'], 'add': 'add', 'other': 'gelu'}}) in ms: expected {shown(want)}, got {shown(got)}"
    device = submission.breakdown(table, {"gemm": r"mm"}, by="self_device_us")
    assert math.isclose(device["gemm"], 7.0) and math.isclose(device["other"], 0.0), \
        (f"breakdown(table, {{'gemm': 'mm'}}, by='self_device_us'): expected {{'gemm': 7.0, 'other': 0.0}}, got "
         f"{shown(device)}: the kernel row repeats the ops' device time")


@pytest.mark.points(1)
@pytest.mark.concept("Steps and phases")
@pytest.mark.timeout(QUICK)
def test_step_breakdown_of_a_constructed_trace(submission):
    """steps #10 and #9 given out of order, regions of one phase nested or overlapping (their union counts), a
    DataLoader region starting before its step (clipped), zero_grad outside the optimizer phase"""
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    events = [event("ProfilerStep#10", 2000, 1000), event("forward", 2200, 300), event("forward", 2000, 300),
              event("backward", 2500, 400), event("aten::mm", 2050, 100, cat="cpu_op"),
              event("ProfilerStep#9", 1000, 1000), event(loader, 900, 200), event("forward", 1100, 300),
              event("forward", 1200, 100), event("backward", 1400, 400), event("Optimizer.step#AdamW.step", 1800, 150),
              event("Optimizer.zero_grad#AdamW.zero_grad", 1950, 40)]
    got = submission.step_breakdown({"traceEvents": events})
    expected = [{"step": 9, "wall_ms": 1.0, "data_loading_ms": 0.1, "forward_ms": 0.3, "backward_ms": 0.4,
                 "optimizer_ms": 0.15},
                {"step": 10, "wall_ms": 1.0, "data_loading_ms": 0.0, "forward_ms": 0.5, "backward_ms": 0.4,
                 "optimizer_ms": 0.0}]
    steps = [r.get("step") for r in got]
    assert steps == [9, 10], f"step_breakdown(trace)'s steps: expected [9, 10], got {shown(steps)}: ordered by N as a number"
    for mine, want in zip(got, expected):
        wrong = {k: mine.get(k) for k, v in want.items() if not math.isclose(mine.get(k, math.nan), v, abs_tol=1e-9)}
        assert not wrong, \
            f"step_breakdown(trace), step {want['step']}: expected {shown({k: want[k] for k in wrong})}, got {shown(wrong)}"
        assert "device_busy_ms" not in mine, (f"step_breakdown(trace), step {want['step']}: expected no device keys (a CPU "
                                              f"trace has no kernels), got device_busy_ms {shown(mine['device_busy_ms'])}")


@pytest.mark.points(1)
@pytest.mark.concept("Device time and idle time")
@pytest.mark.timeout(QUICK)
def test_device_busy_is_the_union_of_kernels_in_the_step(submission):
    """kernels on two streams overlap (their union counts), a copy does not make the device busy, a kernel running
    past its step counts in each step for its part there, a step without kernels is all idle; the device's copy of a
    region is not a phase"""
    device = dict(pid=2, tid=7)
    events = [event("ProfilerStep#3", 0, 1000), event("forward", 50, 100),
              event("ProfilerStep#4", 1000, 500), event("ProfilerStep#5", 1500, 300),
              event("forward", 0, 1000, cat="gpu_user_annotation", **device),
              event("gemm_a", 100, 200, cat="kernel", **device), event("gemm_b", 600, 500, cat="kernel", **device),
              event("nccl_allreduce", 200, 200, cat="kernel", pid=2, tid=8),
              event("Memcpy HtoD", 400, 200, cat="gpu_memcpy", **device)]
    got = {r.get("step"): r for r in submission.step_breakdown({"traceEvents": events})}
    assert sorted(got) == [3, 4, 5], f"step_breakdown(trace)'s steps: expected [3, 4, 5], got {shown(sorted(got))}"
    for step, busy, wall in ((3, 0.7, 1.0), (4, 0.1, 0.5), (5, 0.0, 0.3)):
        assert math.isclose(got[step].get("device_busy_ms", math.nan), busy, abs_tol=1e-9), \
            f"step_breakdown(trace), step {step}'s device_busy_ms: expected {busy}, got {shown(got[step].get('device_busy_ms'))}"
        assert math.isclose(got[step].get("device_idle_fraction", math.nan), 1 - busy / wall, abs_tol=1e-9), \
            (f"step_breakdown(trace), step {step}'s device_idle_fraction: expected {shown(round(1 - busy / wall, 9))}, "
             f"got {shown(got[step].get('device_idle_fraction'))}")
    assert math.isclose(got[3]["forward_ms"], 0.1, abs_tol=1e-9), \
        (f"step_breakdown(trace), step 3's forward_ms: expected 0.1, got {shown(got[3]['forward_ms'])}: phases come from "
         "the host's regions, not the device's copy")


@pytest.mark.points(1)
@pytest.mark.concept("Recording a profile")
@pytest.mark.timeout(180)
def test_call_k_runs_inside_profiler_step_k(submission):
    """2 warmup calls, 3 recorded: the calls numbered 2, 3 and 4 each inside ProfilerStep#2, #3 and #4; the table's
    aten::mm time in microseconds, as the trace's durations; host rows marked 'cpu'"""
    got = submission.probe(probes.numbered_calls, 3, 2)
    assert got["calls"] == 5, \
        f"profile_steps(step_fn, steps=3, warmup=2) ran step_fn: expected 5 times (2 warmup + 3), got {shown(got['calls'])}"
    events = [e for e in got["trace"]["traceEvents"] if e.get("ph") == "X"]
    steps = {e["name"]: e for e in events if e["name"].startswith("ProfilerStep#") and e.get("cat") == "user_annotation"}
    calls = {e["name"]: e for e in events if e["name"].startswith("call-")}
    assert sorted(calls) == ["call-2", "call-3", "call-4"], \
        (f"profile_steps(step_fn, steps=3, warmup=2)'s trace: expected the calls ['call-2', 'call-3', 'call-4'], "
         f"got {shown(sorted(calls))}")
    for k in (2, 3, 4):
        step, call = steps.get(f"ProfilerStep#{k}"), calls[f"call-{k}"]
        assert step is not None, \
            f"call-{k}: expected inside ProfilerStep#{k}, got the steps {shown(sorted(steps))}: prof.step() after each call"
        assert step["ts"] <= call["ts"] and call["ts"] + call["dur"] <= step["ts"] + step["dur"], \
            (f"call-{k}: expected within ProfilerStep#{k}, 0 to {step['dur']:.1f} us from its start, got "
             f"{call['ts'] - step['ts']:.1f} to {call['ts'] + call['dur'] - step['ts']:.1f} us: prof.step() after each call")
    rows = {r["name"]: r for r in got["table"]}
    mm = rows.get("aten::mm")
    traced = sum(e["dur"] for e in events if e["name"] == "aten::mm")
    assert mm is not None, f"profile_steps's table: expected a row named aten::mm, got the rows {shown(sorted(rows))}"
    assert mm["count"] == 3, f"profile_steps's aten::mm row: expected count 3 (the 3 recorded calls), got {shown(mm['count'])}"
    assert math.isclose(mm["cpu_total_us"], traced, rel_tol=0.05, abs_tol=2), \
        (f"profile_steps's aten::mm row: expected cpu_total_us within 5% of the trace's {traced:.4g} us, got "
         f"{mm['cpu_total_us']:.4g}: the table in microseconds, as the trace")
    assert all(r.get("device_type") == "cpu" for r in got["table"]), \
        (f"profile_steps's table on a CPU: expected every row's device_type 'cpu', got "
         f"{shown(sorted({str(r.get('device_type')) for r in got['table']}))}")


@pytest.mark.points(1)
@pytest.mark.concept("Asynchronous timing")
@pytest.mark.timeout(QUICK)
def test_time_ms_is_the_median_after_the_warmup(submission):
    """three slow warmup calls (40 ms), then timed calls of 3, 3 and 80 ms: the median, about 3 ms, after 6 calls"""
    got = submission.probe(probes.time_uneven_sleeps, [40, 40, 40, 3, 3, 80], 3, 3)
    assert got["calls"] == 6, \
        f"time_ms(fn, iters=3, warmup=3) ran fn: expected 6 times (3 warmup + 3 timed), got {shown(got['calls'])}"
    assert 2.9 <= got["ms"] <= 12, (f"time_ms(fn, iters=3, warmup=3): expected between 2.9 and 12 ms, got {shown(got['ms'])}: "
                                    "the timed calls slept 3, 3 and 80 ms, so the median is about 3 "
                                    "(their mean is 29; timing the warmup too gives a median of 22)")


@pytest.mark.points(1)
@pytest.mark.concept("Diagnosis")
@pytest.mark.timeout(QUICK)
def test_diagnose_constructed_cpu_profiles(submission):
    """steps mostly waiting in the DataLoader; thousands of 10-us ops; .item() calls dominating: data_loading,
    launch_overhead, host_sync"""
    cases = {"data_loading": cpu_profile([row("aten::mm", 4, 3000.0), row("aten::add", 4, 400.0)], data_us=8000),
             "launch_overhead": cpu_profile([row("aten::mul", 1200, 12_000.0), row("aten::mm", 2, 4000.0)]),
             "host_sync": cpu_profile([row("aten::item", 20, 14_000.0), row("aten::mm", 4, 2000.0)])}
    for expected, (table, trace) in cases.items():
        label, evidence = submission.diagnose(table, trace)
        assert label == expected, (f"diagnose(a profile built for {expected}): expected {shown(expected)}, got "
                                   f"{shown(label)} (evidence {shown(evidence, 200)})")
        assert isinstance(evidence, dict) and evidence, \
            f"diagnose(a profile built for {expected})'s evidence: expected a non-empty dict, got {shown(evidence)}"
