"""Visible tests for exercise 05. Run: pytest exercises/05_profiler_reading

They read the profiles shipped in datasets/profiles (a real CPU training step and synthetic CUDA
profiles) and record one tiny profile of their own. The graded suite checks much more: six
scenarios profiled on your machine with sizes you cannot know in advance, every CUDA profile,
shuffled traces, ties, overlapping labels, timing on an asynchronous device.
"""
import functools
import gzip
import json

import pytest
import torch

from grader.worker.loading import sibling_module
from grader.tasks import DATASETS

probes = sibling_module(__file__, "probes")


@functools.cache
def load(name):
    """A shipped profile: its table, and its trace reduced to what a reader needs (the complete
    events' ph, cat, name, pid, tid, ts and dur), as the graded suite passes it too."""
    table = json.loads((DATASETS / "profiles" / f"{name}.table.json").read_text())["rows"]
    with gzip.open(DATASETS / "profiles" / f"{name}.trace.json.gz") as stream:
        events = json.load(stream)["traceEvents"]
    keep = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
    return table, {"traceEvents": [{k: e[k] for k in keep if k in e} for e in events if e.get("ph") == "X"]}


@pytest.mark.points(1)
@pytest.mark.concept("Self and total time")
def test_top_ops_ranks_by_self_time(submission):
    """the three heaviest rows by self CPU time of the shipped CPU training step"""
    table, _ = load("cpu_train_step")
    expected = [row["name"] for row in sorted(table, key=lambda row: -row["self_cpu_us"])[:3]]
    got = [row["name"] for row in submission.top_ops(table, k=3)]
    assert got == expected, f"top_ops(table, k=3): expected {expected}, got {got}"


@pytest.mark.points(1)
@pytest.mark.concept("Self and total time")
def test_breakdown_adds_up_to_the_total_self_time(submission):
    """the labels plus "other" add up to the table's self CPU time, in milliseconds"""
    table, _ = load("cpu_train_step")
    got = submission.breakdown(table, {"gemm": [r"^aten::(mm|addmm)$"], "attention": "attention"})
    total_ms = sum(row["self_cpu_us"] for row in table) / 1000
    assert set(got) == {"gemm", "attention", "other"}, f"expected the keys gemm, attention, other; got {sorted(got)}"
    assert abs(sum(got.values()) - total_ms) < 1e-6 * total_ms, f"the parts add up to {sum(got.values())}, not {total_ms} ms"
    gemm_ms = sum(row["self_cpu_us"] for row in table if row["name"] in ("aten::mm", "aten::addmm")) / 1000
    assert abs(got["gemm"] - gemm_ms) < 1e-6 * gemm_ms, f"gemm: expected {gemm_ms} ms, got {got['gemm']}"


@pytest.mark.points(1)
@pytest.mark.concept("Steps and phases")
def test_step_breakdown_of_the_cpu_profile(submission):
    """three steps, numbered as in ProfilerStep#N, each with its wall time and phases"""
    _, trace = load("cpu_train_step")
    got = submission.step_breakdown(trace)
    walls = {int(e["name"].split("#")[1]): e["dur"] / 1000 for e in trace["traceEvents"]
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    assert [row["step"] for row in got] == sorted(walls), f"expected steps {sorted(walls)}, got {[r['step'] for r in got]}"
    for row in got:
        assert abs(row["wall_ms"] - walls[row["step"]]) < 1e-6, f"step {row['step']}: wall_ms {row['wall_ms']}"
        phases = row["data_loading_ms"] + row["forward_ms"] + row["backward_ms"] + row["optimizer_ms"]
        assert 0 < phases <= row["wall_ms"], f"step {row['step']}: the phases cover {phases} ms of {row['wall_ms']}"


@pytest.mark.points(1)
@pytest.mark.concept("Device time and idle time")
def test_device_idle_of_a_cuda_profile(submission):
    """a GPU fed by a slow DataLoader is idle most of each step"""
    _, trace = load("cuda_data_loading")
    got = submission.step_breakdown(trace)
    for row in got:
        assert 0.5 < row["device_idle_fraction"] < 1.0, f"step {row['step']}: idle fraction {row['device_idle_fraction']}"
        assert abs(row["device_busy_ms"] - row["wall_ms"] * (1 - row["device_idle_fraction"])) < 1e-6


@pytest.mark.points(1)
@pytest.mark.concept("Diagnosis")
def test_diagnose_the_shipped_profiles(submission):
    """the CPU training step is GEMM-bound; the CUDA one waits for its DataLoader"""
    for name, expected in (("cpu_train_step", "gemm"), ("cuda_data_loading", "data_loading")):
        label, evidence = submission.diagnose(*load(name))
        assert label == expected, f"{name}: expected {expected!r}, got {label!r} (evidence {evidence})"


@pytest.mark.points(1)
@pytest.mark.concept("Recording a profile")
@pytest.mark.timeout(180)
def test_profile_steps_leaves_out_the_warmup(submission):
    """3 active steps after 1 warmup: the step runs 4 times, aten::mm is counted 3 times"""
    got = submission.probe(probes.three_steps_after_one)
    assert got["calls"] == 4, f"step_fn ran {got['calls']} times, expected 4 (1 warmup + 3 active)"
    counts = {row["name"]: row["count"] for row in got["table"]}
    assert counts.get("aten::mm") == 3, f"aten::mm counted {counts.get('aten::mm')} times, expected 3"
    assert len(got["steps"]) == 3, f"the trace holds {got['steps']}, expected 3 ProfilerStep events"


@pytest.mark.points(1)
@pytest.mark.concept("Asynchronous timing")
def test_time_ms_of_a_sleep(submission):
    """time_ms of a 10 ms sleep is about 10 ms"""
    got = submission.probe(probes.time_a_sleep)
    assert 9.5 <= got <= 40, f"time_ms of a 10 ms sleep gave {got} ms"
