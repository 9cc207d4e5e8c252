"""Hidden suite for exercise 05 (reading torch.profiler output). PYTEST_DONT_REWRITE

Three kinds of profile are read. Six CPU scenarios (scenarios.py) are built with sizes drawn
from the run's seed and profiled here by trusted code; the shipped CUDA fixtures
(datasets/profiles, built by datasets/profiles_build.py) cover device times, kernels and idle
time; and constructed.py builds traces and profiles that make observable the README rules no
recording shows (regions of one phase that overlap, steps past #9, kernels running past their
step, ...). The oracles are the profiler's own data: key_averages() rows, the trace's events
(step spans, interval unions by a sweep over their endpoints, kernel durations), and each
input's construction. Traces reach the learner's readers reduced to their complete events (ph,
cat, name, pid, tid, ts, dur), which is all a reader needs and keeps the wire light.

Every other input comes from the run's seed too: the constructed traces and profiles, the sizes
of the tiny profiled steps, the counts of steps, warmup calls and timed calls, and the durations
the timing witnesses sleep or queue (the `rng` fixture, and hypothesis's examples, which
`examples_from_the_seed` draws from the seed). A grading's feedback states those durations;
another submission meets other ones.

Tests run cheapest first: profile_steps on tiny steps, the readers on constructed inputs and
shipped profiles, time_ms, and last the six scenarios (profiled once per process). `grader
audit` stops a mutant's grading at the first failure of its concept, so the cheap checks settle
most verdicts.
"""
import functools
import gzip
import json
import math
import numbers
import re
import statistics
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader.course import COURSE
from grader.suite.checks import (
    GRADING,
    ConceptError,
    examples_from_the_seed,  # noqa: F401  (autouse: hypothesis examples from the seed)
    sibling_module,
)

probes = sibling_module(__file__, "probes")
scenarios = sibling_module(__file__, "scenarios")
witnesses = sibling_module(__file__, "witnesses")
constructed = sibling_module(__file__, "constructed")

# Every tolerance states the largest error a correct solution showed (the reference, the
# independent solution and the alternatives in variants.py, on every input of the suite) and the
# smallest error of the nearest mutant (measured on seed 0).
# close(): breakdown and step_breakdown values in ms. Correct: at most 1.4e-13 ms (the same floats
# summed in another order); nearest mutant: 0.34 ms (kernels counted whole in the step they start in).
REL_TOL = 1e-7
ABS_TOL_MS = 1e-6
# total >= self - TRACE_TOL_US, per row of a recorded table. Correct: total never fell below self
# (0 us); nearest mutant (self and total swapped): 96 us below.
TRACE_TOL_US = 0.5
MARGIN = 3.0        # a scenario's dominant cost is at least this many times the next one
ATTEMPTS = 3        # profiles of a scenario until one shows its construction by MARGIN

CONCEPT_RECORDING = "Recording a profile"
CONCEPT_SELF = "Self and total time"
CONCEPT_STEPS = "Steps and phases"
CONCEPT_DEVICE = "Device time and idle time"
CONCEPT_TIMING = "Asynchronous timing"
CONCEPT_DIAGNOSIS = "Diagnosis"

LABELS = ("gemm", "attention", "data_loading", "launch_overhead", "host_sync", "optimizer")
CUDA_FIXTURES = [f"cuda_{label}" for label in LABELS]
PHASE_PREFIXES = {"data_loading": "enumerate(DataLoader)", "optimizer": "Optimizer.step#"}
PHASE_NAMES = {"forward": "forward", "backward": "backward"}
GEMM = re.compile(r"^aten::(mm|addmm|bmm|baddbmm|addmv|mv|matmul|linear)$")
SYNC = re.compile(r"^(aten::item|aten::_local_scalar_dense|cuda(Stream|Device|Event)Synchronize)$")
SYNC_NAMES = ("aten::item", "aten::_local_scalar_dense", "cudaStreamSynchronize", "cudaDeviceSynchronize",
              "cudaEventSynchronize")
CATEGORIES = {"gemm": [r"^aten::(mm|addmm|bmm|matmul|linear)$"], "attention": "attention",
              "host reads": [r"^aten::item$", r"^aten::_local_scalar_dense$"],
              "annotations": r"^(ProfilerStep|forward|backward|enumerate\(DataLoader\)|Optimizer)",
              "elementwise": [r"^aten::(add|mul|sub|div|sigmoid|square|pow|mean|sum)_?$"]}


# ---------------------------------------------------------------- profiles
# Both kinds are built once per process: a pool process grades many submissions (and the audit
# many variants) with one seed, and the data handed to learner code is copied on the wire.

def slim(trace):
    """The trace as the readers get it: complete events, the fields a reader needs."""
    keep = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
    return {"traceEvents": [{k: e[k] for k in keep if k in e} for e in trace["traceEvents"] if e.get("ph") == "X"]}


@functools.cache
def shipped_profiles():
    profiles = {}
    for name in [*CUDA_FIXTURES, "cpu_train_step"]:
        table = json.loads((COURSE.datasets / "profiles" / f"{name}.table.json").read_text())["rows"]
        with gzip.open(COURSE.datasets / "profiles" / f"{name}.trace.json.gz") as stream:
            profiles[name] = (table, slim(json.load(stream)))
    return profiles


@functools.cache
def scenario_profiles(seed):
    """The six CPU scenarios, sized from the run's seed and profiled by trusted code; each one
    re-profiled (at most ATTEMPTS times) until it shows its construction by MARGIN, so a burst of
    load on a shared machine cannot hand the readers a profile that says something else."""
    rng = np.random.default_rng([seed, 5])
    sizes = scenarios.draw_sizes(rng)
    profiles = {}
    for label, build in scenarios.BUILDERS.items():
        step = build(**sizes[label], seed=int(rng.integers(1 << 30)))
        for _ in range(ATTEMPTS):
            table, trace = scenarios.record(step)
            costs = cpu_costs(table, trace)
            runner_up = max(ms for other, ms in costs.items() if other != label)
            if costs[label] >= MARGIN * runner_up:
                break
        profiles[label] = (table, slim(trace))
    return profiles


@pytest.fixture
def fixtures():
    return shipped_profiles()


def integer(rng, low, high):
    """An int in [low, high], both included."""
    return int(rng.integers(low, high + 1))


@pytest.fixture
def cpu_profiles(seed):
    return scenario_profiles(seed)


# ---------------------------------------------------------------- oracles

def host_rows(table):
    return [row for row in table if row["device_type"] == "cpu"]


def expected_top(table, k, by):
    return [row["name"] for row in sorted(table, key=lambda row: (-row[by], row["name"]))[:k]]


def expected_breakdown(table, categories, by):
    compiled = {label: [re.compile(p) for p in ([found] if isinstance(found, str) else found)]
                for label, found in categories.items()}
    result = dict.fromkeys([*categories, "other"], 0.0)
    for row in host_rows(table):
        label = next((label for label, patterns in compiled.items() if any(p.search(row["name"]) for p in patterns)),
                     "other")
        result[label] += row[by] / 1000.0
    return result


def covered_us(intervals, start, end):
    """Length of the union of `intervals` inside [start, end): a sweep over their endpoints."""
    points = sorted(point for s, e in intervals if min(e, end) > max(s, start)
                    for point in ((max(s, start), 1), (min(e, end), -1)))
    depth, covered, last = 0, 0.0, None
    for time_, change in points:
        if depth > 0:
            covered += time_ - last
        depth, last = depth + change, time_
    return covered


def events_of(trace):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def phase_of(name):
    for phase, prefix in PHASE_PREFIXES.items():
        if name.startswith(prefix):
            return phase
    return next((phase for phase, exact in PHASE_NAMES.items() if name == exact), None)


def expected_steps(trace):
    events = events_of(trace)
    regions = {phase: [] for phase in ("data_loading", "forward", "backward", "optimizer")}
    for e in events:
        if e.get("cat") == "user_annotation" and phase_of(e["name"]):
            regions[phase_of(e["name"])].append((e["ts"], e["ts"] + e["dur"]))
    kernels = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel"]
    steps = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
                   key=lambda e: int(e["name"].split("#")[1]))
    rows = []
    for step in steps:
        start, end = step["ts"], step["ts"] + step["dur"]
        row = {"step": int(step["name"].split("#")[1]), "wall_ms": step["dur"] / 1000.0}
        row.update({f"{phase}_ms": covered_us(spans, start, end) / 1000.0 for phase, spans in regions.items()})
        if kernels:
            row["device_busy_ms"] = covered_us(kernels, start, end) / 1000.0
            row["device_idle_fraction"] = 1.0 - row["device_busy_ms"] / row["wall_ms"]
        rows.append(row)
    return rows


def cpu_costs(table, trace):
    """The diagnosis' costs of a CPU profile (ms per step), by the rules of the contract."""
    steps = expected_steps(trace)
    per_step = 1.0 / (1000.0 * len(steps))
    hosts = host_rows(table)

    def self_time(pattern):
        return sum(row["self_cpu_us"] for row in hosts if pattern.search(row["name"])) * per_step

    tiny = [row for row in hosts if row["count"] and row["self_cpu_us"] / row["count"] < 50.0
            and not SYNC.search(row["name"])]
    return {"gemm": self_time(GEMM), "attention": self_time(re.compile("attention")),
            "data_loading": np.mean([s["data_loading_ms"] for s in steps]),
            "optimizer": np.mean([s["optimizer_ms"] for s in steps]),
            "host_sync": self_time(SYNC), "launch_overhead": sum(row["self_cpu_us"] for row in tiny) * per_step}


def close(got, expected):
    return isinstance(got, numbers.Real) and math.isclose(got, expected, rel_tol=REL_TOL, abs_tol=ABS_TOL_MS)


def describe_rows(names, limit=6):
    return ", ".join(names[:limit]) + (" ..." if len(names) > limit else "")


def check_top(submission, table, k, by, what):
    got = submission.top_ops(table, k=k, by=by)
    assert isinstance(got, list) and all(isinstance(row, dict) for row in got), \
        f"top_ops({what}, k={k}, by={by!r}) must return a list of the table's rows (dicts), got {type(got).__name__}"
    names, expected = [row.get("name") for row in got], expected_top(table, k, by)
    assert names == expected, (f"top_ops({what}, k={k}, by={by!r}): expected the rows [{describe_rows(expected)}], "
                               f"got [{describe_rows(names)}]: sort by that column, largest first")
    changed = [row["name"] for row in got if row not in table]
    assert not changed, f"top_ops must return the rows unchanged; these came back altered: {changed[:3]}"


def check_breakdown(got, expected, what):
    assert isinstance(got, dict) and set(got) == set(expected), \
        (f"{what}: expected a dict with the keys {sorted(expected)}, got "
         f"{sorted(got) if isinstance(got, dict) else type(got).__name__}")
    wrong = {label: (got[label], ms) for label, ms in expected.items() if not close(got[label], ms)}
    label, (value, ms) = next(iter(wrong.items()), (None, (None, None)))
    assert not wrong, (f"{what}: {label!r} is {value!r} ms, expected {ms:.6g} ms "
                       f"({len(wrong)} of {len(expected)} labels differ)")


def check_steps(got, expected, what):
    assert isinstance(got, list) and len(got) == len(expected), \
        f"{what}: expected a list of {len(expected)} steps, got {len(got) if isinstance(got, list) else type(got).__name__}"
    for got_row, row in zip(got, expected):
        assert isinstance(got_row, dict), f"{what}: each step must be a dict, got {type(got_row).__name__}"
        assert got_row.get("step") == row["step"], \
            (f"{what}: steps come in the trace's order, numbered by ProfilerStep#N: expected step {row['step']}, "
             f"got {got_row.get('step')!r}")
        for key, value in row.items():
            if key != "step":
                assert close(got_row.get(key), value), \
                    f"{what}, step {row['step']}: {key} is {got_row.get(key)!r}, expected {value:.6g}"


def check_no_device_keys(got, what):
    """A CPU trace has no kernels: its steps carry no device keys (a rule of the device section)."""
    extra = [key for row in got if isinstance(row, dict) for key in ("device_busy_ms", "device_idle_fraction")
             if key in row]
    if extra:
        raise ConceptError(CONCEPT_DEVICE, f"{what}: a trace without kernels has no {extra[0]}; "
                                           "step_breakdown adds the device keys only when the trace holds kernels")


def reordered(table, rng):
    """The same table with its rows in another order: readers must not care."""
    return [table[i] for i in rng.permutation(len(table))]


def shuffled(trace, rng):
    """The same trace with its events in another order, its clock moved and its steps renumbered
    as after a longer warmup, across #9 -> #10: readers must not care, and must read N from the name."""
    shift = float(rng.integers(1_000, 1_000_000))
    numbers_ = sorted({int(e["name"].split("#")[1]) for e in trace["traceEvents"]
                       if e["name"].startswith("ProfilerStep#")})
    offset = int(rng.integers(11 - len(numbers_), 10)) - numbers_[0]

    def moved(event):
        name = event["name"]
        if name.startswith("ProfilerStep#"):
            name = f"ProfilerStep#{int(name.split('#')[1]) + offset}"
        return dict(event, ts=event["ts"] + shift, name=name)

    events = [moved(e) for e in trace["traceEvents"]]
    return {"traceEvents": [events[i] for i in rng.permutation(len(events))]}


def check_diagnosis(got, label, what):
    assert isinstance(got, (tuple, list)) and len(got) == 2, \
        f"diagnose must return (label, evidence), got {type(got).__name__}"
    answer, evidence = got
    assert isinstance(evidence, dict) and evidence and all(isinstance(k, str) for k in evidence), \
        "the evidence must be a non-empty dict keyed by str: the numbers the decision rests on"
    not_numbers = {k: v for k, v in evidence.items() if not isinstance(v, numbers.Real)}
    assert not not_numbers, \
        f"the evidence maps names to numbers; expected a number for each key, got {dict(list(not_numbers.items())[:3])}"
    assert answer in LABELS, f"diagnose answered {answer!r}, which is not one of {list(LABELS)}"
    numbers_ = {k: round(v, 3) for k, v in evidence.items() if isinstance(v, numbers.Real)}
    assert answer == label, f"{what}: diagnose answered {answer!r}; its construction is {label!r} (evidence: {numbers_})"


# ---------------------------------------------------------------- recording a profile
# profile_steps, on tiny steps: fast once the profiler has started (the visible suite starts it)

@pytest.mark.points(3)
@pytest.mark.concept(CONCEPT_RECORDING)
@pytest.mark.timeout(180)
@pytest.mark.parametrize("steps,warmup", [(3, 2), (2, 1)], ids=["3-after-2", "2-after-1"])
def test_profile_steps_records_only_the_active_steps(submission, rng, steps, warmup):
    """profile_steps runs warmup + steps calls and records only the last `steps` of them"""
    got = submission.probe(probes.profile_counting_calls, steps, warmup, integer(rng, 24, 64))
    assert got["calls"] == warmup + steps, \
        f"profile_steps(steps={steps}, warmup={warmup}) called step_fn {got['calls']} times, expected {warmup + steps}"
    assert isinstance(got["table"], list) and all(isinstance(r, dict) and "name" in r for r in got["table"]), \
        "the table must be a list of dicts, one per key_averages() row, each with a 'name'"
    counts = {row["name"]: row.get("count") for row in got["table"]}
    for op in ("aten::mm", "aten::sigmoid", "ProfilerStep*"):
        assert counts.get(op) == steps, \
            (f"the step runs {op} once per call: with {steps} active steps its row must count {steps}, got "
             f"{counts.get(op)!r}; warmup calls are run but never recorded")
    assert got["trace_is_dict"], "the trace must be the parsed Chrome-trace JSON: a dict with 'traceEvents'"
    numbers_ = sorted(int(name.split("#")[1]) for name in got["steps"])
    assert len(numbers_) == steps and numbers_ == list(range(numbers_[0], numbers_[0] + steps)), \
        f"the trace must hold the {steps} active steps only, one ProfilerStep#N each; it holds {sorted(got['steps'])}"
    assert got["mm_events"] == steps, f"the trace holds {got['mm_events']} aten::mm events, expected {steps}"


@pytest.mark.points(0.5)
@pytest.mark.concept(CONCEPT_RECORDING)
@pytest.mark.timeout(180)
def test_profile_steps_defaults(submission, rng):
    """profile_steps(step_fn) with its defaults: 1 warmup call, then 5 recorded ones"""
    got = submission.probe(probes.profile_counting_calls, None, None, integer(rng, 24, 64), True)
    numbers_ = sorted(int(name.split("#")[1]) for name in got["steps"])
    assert got["calls"] == 6 and numbers_ == [1, 2, 3, 4, 5], \
        (f"profile_steps(step_fn) defaults to steps=5, warmup=1: expected 6 calls and ProfilerStep#1..#5 in the "
         f"trace, got {got['calls']} calls and {sorted(got['steps'])}")


@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_RECORDING)
@pytest.mark.timeout(180)
def test_profile_steps_records_the_last_calls_each_in_its_step(submission, rng):
    """the recorded calls are the last `steps`, call k inside ProfilerStep#k: prof.step() after each call"""
    steps, warmup = integer(rng, 2, 4), integer(rng, 1, 3)
    got = submission.probe(probes.profile_counting_calls, steps, warmup, integer(rng, 24, 64))
    numbers_ = sorted(int(name.split("#")[1]) for name in got["steps"])
    expected = list(range(warmup, warmup + steps))
    assert numbers_ == expected, \
        (f"with warmup={warmup} the trace's steps are ProfilerStep#{expected[0]}..#{expected[-1]} (N counts every "
         f"call, the warmup calls included, all under the one profiler); got {sorted(got['steps'])}")
    recorded = [tuple(pair) for pair in got["recorded_calls"]]
    expected_calls = [(f"call#{k}", f"ProfilerStep#{k}") for k in expected]
    assert recorded == expected_calls, \
        (f"the step function marks each call (call#k, k from 0): the trace must hold the last {steps} calls, "
         f"call#k inside ProfilerStep#k; it holds {recorded} (call, step around it). prof.step() closes a step: "
         "call it after the step function, not before")


@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_RECORDING)
@pytest.mark.timeout(180)
def test_profile_steps_table_rows(submission, rng):
    """each table row carries the profiler's columns in microseconds; no device time on a CPU run"""
    got = submission.probe(probes.profile_counting_calls, integer(rng, 2, 4), 1, integer(rng, 24, 64))
    keys = {"name", "count", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "device_type"}
    for row in got["table"]:
        assert keys <= set(row), f"row {row.get('name')!r} lacks {sorted(keys - set(row))}"
        assert row["device_type"] == "cpu", f"a CPU-only run has host rows only; {row['name']!r} says {row['device_type']!r}"
        assert row["self_device_us"] == 0 and row["device_total_us"] == 0, \
            f"a CPU-only run has no device time, but {row['name']!r} reports {row['self_device_us']} us of it"
        assert row["cpu_total_us"] >= row["self_cpu_us"] - TRACE_TOL_US, \
            f"{row['name']!r}: total time {row['cpu_total_us']} is less than its self time {row['self_cpu_us']}"
    step_row = next(row for row in got["table"] if row["name"] == "ProfilerStep*")
    children = sum(row["self_cpu_us"] for row in got["table"])
    # The profiler's own sums. Correct: equal (0 relative error); nearest mutant (self and total
    # swapped): the sum of the totals is over 3 times the steps' self time.
    assert math.isclose(step_row["cpu_total_us"], children, rel_tol=1e-3, abs_tol=1.0), \
        (f"the steps' total time ({step_row['cpu_total_us']:.1f}) must equal the sum of every row's self time "
         f"({children:.1f}): read self_cpu_time_total and cpu_time_total, in microseconds")
    # The table and the trace come from the same events. Correct: 1e-14 relative (floats summed
    # in another order); nearest mutant (milliseconds): 0.999 relative.
    rows = {row["name"]: row for row in got["table"]}
    for name, trace_us in got["trace_us"].items():
        assert math.isclose(rows[name]["cpu_total_us"], trace_us, rel_tol=1e-3), \
            (f"{name}'s cpu_total_us is {rows[name]['cpu_total_us']:.6g}, but its events in the trace last "
             f"{trace_us:.6g} us in all: the table's columns are in microseconds, as key_averages() reports them")


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_RECORDING)
@pytest.mark.timeout(180)
def test_profile_steps_records_shapes(submission, rng):
    """the trace's ops carry their input shapes (record_shapes=True)"""
    n = integer(rng, 16, 64)
    got = submission.probe(probes.profile_counting_calls, 2, 1, n)
    dims = [[n, n + 1], [n + 1, n + 2]]
    assert got["mm_inputs"] and all(found == dims for found in got["mm_inputs"]), \
        f"aten::mm of a ({n}, {n + 1}) by ({n + 1}, {n + 2}) product must carry 'Input Dims' {dims}; got {got['mm_inputs'][:1]}"


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_RECORDING)
@pytest.mark.timeout(180)
def test_profile_steps_on_cuda_asks_for_device_activity(submission):
    """profile_steps(device="cuda") asks the profiler for CUDA activity (device simulated without a GPU)"""
    asked = submission.probe(probes.profile_asking_for_cuda, witness=witnesses.SimulatedDevice())
    assert asked, "profile_steps(device='cuda') must record with torch.profiler.profile"
    for call in asked:
        activities = call["activities"]
        assert activities is None or any("CUDA" in a for a in activities) or call["use_cuda"], \
            (f"profile_steps(device='cuda') profiled with activities {activities}: add ProfilerActivity.CUDA, "
             "or the kernels and device times are never recorded")


# ---------------------------------------------------------------- self and total time

@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_SELF)
def test_top_ops_by_self_time_puts_leaf_ops_first(submission, fixtures, rng):
    """by self time the GEMMs lead, not ProfilerStep* and forward whose totals contain them"""
    table = reordered(fixtures["cpu_train_step"][0], rng)
    got = [row["name"] for row in submission.top_ops(table, k=3, by="self_cpu_us")]
    assert "ProfilerStep*" not in got and got == expected_top(table, 3, "self_cpu_us"), \
        (f"top_ops(by='self_cpu_us') gave {got}: a step's or a region's total contains its ops; its self time "
         "is only what no child accounts for")
    by_default, expected = [row["name"] for row in submission.top_ops(table)], expected_top(table, 10, "self_cpu_us")
    assert by_default == expected, \
        (f"top_ops(table) defaults to k=10, by='self_cpu_us': expected [{describe_rows(expected, 10)}], "
         f"got [{describe_rows(by_default, 12)}]")


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_SELF)
def test_breakdown_label_named_other_shares_its_key(submission, fixtures, rng):
    """a label named "other" shares its key with the rows that no label matches: both add up there"""
    table = reordered(fixtures["cpu_train_step"][0], rng)
    categories = {"gemm": GEMM.pattern, "other": [r"^aten::(add|mul|div)_?$"], "attention": "attention"}
    check_breakdown(submission.breakdown(table, categories), expected_breakdown(table, categories, "self_cpu_us"),
                    'breakdown with a label named "other"')


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_SELF)
@GRADING
@given(order=st.permutations(["mm", "aten", "other ops"]))
def test_breakdown_counts_a_row_for_its_first_label_only(submission, fixtures, order):
    """a row that matches several labels counts once, for the first of them in the dict's order"""
    table, _ = fixtures["cpu_train_step"]
    patterns = {"mm": r"mm", "aten": [r"^aten::"], "other ops": [r"::", r"Backward"]}
    categories = {label: patterns[label] for label in order}
    check_breakdown(submission.breakdown(table, categories), expected_breakdown(table, categories, "self_cpu_us"),
                    f"breakdown with overlapping labels in the order {list(order)}")


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_SELF)
@GRADING
@given(values=st.lists(st.integers(0, 4), min_size=3, max_size=12), k=st.integers(1, 12), data=st.data())
def test_top_ops_breaks_ties_by_name(submission, values, k, data):
    """rows with equal values come out in alphabetical order of their names"""
    names = data.draw(st.permutations([f"op_{chr(97 + i)}" for i in range(len(values))]), label="names")
    table = [{"name": name, "count": 1, "self_cpu_us": float(v), "cpu_total_us": float(v), "self_device_us": 0.0,
              "device_total_us": 0.0, "device_type": "cpu"} for name, v in zip(names, values)]
    check_top(submission, table, k, "self_cpu_us", "a table with ties")


# ---------------------------------------------------------------- steps and phases

@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_STEPS)
def test_step_breakdown_of_constructed_traces(submission, rng):
    """regions of one phase that overlap or nest count once; a region past its step counts inside it only"""
    for _ in range(4):
        trace = constructed.trace(rng, device=False)
        what = ("step_breakdown of a constructed trace (steps numbered across #9 -> #10, regions of one phase "
                "overlapping, nested and running past their step, events in any order)")
        got = submission.step_breakdown(trace)
        check_steps(got, expected_steps(trace), what)
        check_no_device_keys(got, what)


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_STEPS)
def test_steps_keep_the_profilers_numbers(submission, fixtures):
    """steps are numbered N as in ProfilerStep#N: the unrecorded warmup step was #0"""
    _, trace = fixtures["cuda_data_loading"]
    got = submission.step_breakdown(trace)
    numbers_ = [row.get("step") for row in got] if isinstance(got, list) else got
    expected = [row["step"] for row in expected_steps(trace)]
    assert numbers_ == expected, \
        f"the steps are {expected} (ProfilerStep#N; the schedule's warmup step #0 was not recorded), got {numbers_}"


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_STEPS)
def test_step_breakdown_reads_events_in_any_order(submission, fixtures, rng):
    """the same trace with its events shuffled and its clock moved gives the same steps"""
    _, trace = fixtures["cpu_train_step"]
    moved = shuffled(trace, rng)
    check_steps(submission.step_breakdown(moved), expected_steps(moved), "step_breakdown of a shuffled trace")


# ---------------------------------------------------------------- device time and idle time

@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_DEVICE)
def test_device_busy_of_constructed_traces(submission, rng):
    """only kernels make the device busy, clipped to each step; every step of a kernel trace has the keys"""
    for _ in range(4):
        trace = constructed.trace(rng, device=True)
        check_steps(submission.step_breakdown(trace), expected_steps(trace),
                    "step_breakdown of a constructed GPU trace (two streams overlapping, kernels running past their "
                    "step, copies and fills between kernels, the device's copies of the regions, a step without "
                    "kernels)")


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_DEVICE)
@pytest.mark.parametrize("label", list(constructed.GPU_PROFILES))
def test_diagnose_constructed_gpu_profiles(submission, rng, label):
    """idle time inside Optimizer.step is the optimizer's cost, beside its kernels' device time"""
    table, trace = constructed.GPU_PROFILES[label](rng)
    what = {"optimizer": "a constructed GPU profile whose optimizer launches one tiny kernel per parameter"}[label]
    check_diagnosis(submission.diagnose(table, trace), label, what)


@pytest.mark.points(0.5)
@pytest.mark.concept(CONCEPT_DEVICE)
@pytest.mark.parametrize("sync_name", SYNC_NAMES, ids=[name.replace("aten::", "aten-") for name in SYNC_NAMES])
def test_diagnose_idle_after_each_sync_call(submission, rng, sync_name):
    """the device's wait after a sync is host_sync, whichever of the SYNC_OPS names the sync call has"""
    table, trace = constructed.syncs_between_launches(rng, sync_name)
    check_diagnosis(submission.diagnose(table, trace), "host_sync",
                    f"a constructed GPU profile whose host waits in {sync_name} after each burst of kernels, then "
                    "idles the device in Python")


@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_DEVICE)
def test_breakdown_of_device_time_counts_each_kernel_once(submission, fixtures, rng):
    """by self device time, the labels add up to the kernels' and copies' time in the trace"""
    categories = {"gemm": [r"^aten::(mm|addmm)$"], "attention": "attention", "optimizer": "_foreach_"}
    for name in ("cuda_gemm", "cuda_attention", "cuda_optimizer"):
        table, trace = reordered(fixtures[name][0], rng), fixtures[name][1]
        got = submission.breakdown(table, categories, by="self_device_us")
        check_breakdown(got, expected_breakdown(table, categories, "self_device_us"),
                        f"breakdown(by='self_device_us') of the {name} table")
        device_ms = sum(e["dur"] for e in events_of(trace) if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")) / 1e3
        # Correct: 1e-15 relative (the fixture's table is built from its trace); nearest mutant
        # (unmatched rows dropped): 9% short; every row counted: 3.3 times over.
        assert math.isclose(sum(got.values()), device_ms, rel_tol=1e-6), \
            (f"the {name} labels add up to {sum(got.values()):.6g} ms of device time; the trace's kernels and "
             f"copies last {device_ms:.6g} ms: each kernel's time appears twice in a GPU table (its own row and "
             "its launching op's self device time); count host-side rows only")


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_DEVICE)
def test_phases_come_from_the_hosts_annotations(submission, fixtures, rng):
    """a GPU trace repeats each annotation on the device (gpu_user_annotation): phases use the host's"""
    trace = shuffled(fixtures["cuda_host_sync"][1], rng)
    check_steps(submission.step_breakdown(trace), expected_steps(trace), "step_breakdown of the cuda_host_sync fixture")


@pytest.mark.points(3)
@pytest.mark.concept(CONCEPT_DEVICE)
@pytest.mark.timeout(120)
def test_device_busy_is_the_union_of_kernels(submission, fixtures, rng):
    """device busy time is the union of kernel intervals (streams overlap) and idle is the rest"""
    for name in CUDA_FIXTURES:
        trace = shuffled(fixtures[name][1], rng)
        check_steps(submission.step_breakdown(trace), expected_steps(trace), f"step_breakdown of the {name} fixture")


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_DEVICE)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("label", LABELS)
def test_diagnose_cuda_profiles(submission, fixtures, rng, label):
    """diagnose names the dominant cost of a CUDA profile: device busy time by kernel, idle time by host activity"""
    table, trace = fixtures[f"cuda_{label}"]
    got = submission.diagnose(table, shuffled(trace, rng))
    check_diagnosis(got, label, f"the cuda_{label} fixture")


# ---------------------------------------------------------------- diagnosis

@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_DIAGNOSIS)
@pytest.mark.parametrize("label", list(constructed.CPU_PROFILES))
def test_diagnose_constructed_cpu_profiles(submission, rng, label):
    """costs are self time in ms per step; tiny rows: every host-side row with little self time per call"""
    table, trace = constructed.CPU_PROFILES[label](rng)
    what = {"launch_overhead": "a constructed CPU profile whose layers each wrap one tiny op in a record_function",
            "data_loading": "a constructed CPU profile of 5 to 7 steps, each waiting for its DataLoader",
            "gemm": "a constructed CPU profile whose attention is a record_function around matmuls and a softmax",
            "host_sync": "a constructed CPU profile of losses read back one .item() at a time"}[label]
    check_diagnosis(submission.diagnose(table, trace), label, what)


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_DIAGNOSIS)
@pytest.mark.parametrize("leader", ["gemm", "data_loading"])
def test_diagnose_compares_costs_in_ms_per_step(submission, rng, leader):
    """the table's totals per step and the phases' mean per step, both in ms, compared as they are"""
    for count in (1, integer(rng, 3, 6)):
        table, trace = constructed.loader_beside_gemm(rng, count=count, leader=leader)
        check_diagnosis(submission.diagnose(table, trace), leader,
                        f"a constructed CPU profile of {count} step(s), each waiting for its DataLoader about as long "
                        f"as its matmul runs ({leader} is {constructed.RATIO_GAP:.0e} ahead): the matmul's table time "
                        "divided by the steps, in ms, against the mean data-loading phase, in ms")


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_DIAGNOSIS)
def test_diagnose_tiny_rows_called_once(submission, rng):
    """a row called once is tiny when its one call is: a one-step profile of layers each in a region of its own name"""
    table, trace = constructed.named_layers_one_step(rng)
    check_diagnosis(submission.diagnose(table, trace), "launch_overhead",
                    "a constructed one-step CPU profile whose layers each wrap one tiny op in a record_function named "
                    "after the layer (one call per row)")


# ---------------------------------------------------------------- asynchronous timing

# The functions time_ms times run in this process (witnesses.py), which counts and times their
# calls itself: a timing around a call is never shorter than the call the witness timed, and the
# round trip from a worker to this process adds up to 0.6 ms to it (on a loaded machine too).

def check_calls(witness, iters: int, warmup: int) -> None:
    """time_ms(iters, warmup) called the witness's function warmup + iters times."""
    assert witness.calls == iters + warmup, \
        f"time_ms(iters={iters}, warmup={warmup}) called fn {witness.calls} times, expected {iters + warmup}"


def timed_calls(sleeper, iters: int, warmup: int) -> list[float]:
    """The sleeper's timings of the calls time_ms should have timed."""
    check_calls(sleeper, iters, warmup)
    return sleeper.durations_ms[warmup:]


@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_TIMING)
@pytest.mark.timeout(60)
def test_time_ms_is_the_median(submission, rng):
    """time_ms returns the median of the timed calls: one slow call does not move it"""
    iters, warmup = int(rng.choice([5, 7])), integer(rng, 1, 3)
    then_ms, outlier_ms = float(integer(rng, 6, 14)), float(integer(rng, 150, 300))
    sleeper = witnesses.Sleeper(then_ms, 0, then_ms, outlier_call=warmup + integer(rng, 1, iters), outlier_ms=outlier_ms)
    got = submission.probe(probes.time_calls, iters, warmup, witness=sleeper)
    assert isinstance(got, numbers.Real), f"time_ms must return a number of milliseconds, got {got!r}"
    median = statistics.median(timed_calls(sleeper, iters, warmup))
    # Correct: 0.01 to 0.6 ms above the calls' own median (0.1 in-process), however loaded the
    # machine; nearest mutants: the mean, at least 20 ms above (7 calls of 6 ms and one of
    # 150 ms); seconds, at least 6 ms below.
    assert median - 0.05 <= got <= median + 3.0, \
        (f"{iters - 1} calls sleep {then_ms:g} ms and one {outlier_ms:g} ms: the median is {median:.4g} ms, got "
         f"{got:.4g}; the mean follows the outlier, and seconds are not milliseconds")


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_TIMING)
@pytest.mark.timeout(60)
def test_time_ms_runs_warmup_then_iters(submission, rng):
    """time_ms calls fn warmup + iters times"""
    for iters, warmup in ((integer(rng, 2, 8), integer(rng, 1, 4)) for _ in range(2)):
        sleeper = witnesses.Sleeper(1.0, 0, 1.0)
        submission.probe(probes.time_calls, iters, warmup, witness=sleeper)
        check_calls(sleeper, iters, warmup)
    sleeper = witnesses.Sleeper(1.0, 0, 1.0)
    submission.probe(probes.time_calls_by_default, witness=sleeper)
    assert sleeper.calls == 13, f"time_ms(fn) defaults to warmup=3, iters=10: expected 13 calls of fn, got {sleeper.calls}"


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_TIMING)
@pytest.mark.timeout(60)
def test_time_ms_leaves_the_warmup_calls_untimed(submission, rng):
    """slow warmup calls are not timed: a few slow warmup calls, then as many or fewer fast ones time the fast ones"""
    # No more timed calls than warmup calls: timed together, the slow ones would decide the median.
    warmup = integer(rng, 2, 4)
    iters, slow_ms, fast_ms = integer(rng, 2, warmup), float(integer(rng, 30, 50)), float(integer(rng, 15, 40)) / 10
    sleeper = witnesses.Sleeper(slow_ms, warmup, fast_ms)
    got = submission.probe(probes.time_calls, iters, warmup, witness=sleeper)
    median = statistics.median(timed_calls(sleeper, iters, warmup))
    # Correct: 0.01 to 0.3 ms above the timed calls' own median; nearest mutant (the warmup calls
    # timed too): the median of all the timings, at least halfway to the slow ones, 14 ms above
    # and more; seconds: 1.5 ms below and more.
    assert isinstance(got, numbers.Real) and median - 0.05 <= got <= median + 3.0, \
        (f"after {warmup} slow warmup calls ({slow_ms:g} ms) come {iters} timed calls of {median:.3g} ms: time_ms "
         f"must report that, got {got!r}; the warmup calls are run, never timed")


@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_TIMING)
@pytest.mark.timeout(60)
def test_time_ms_waits_for_queued_device_work(submission, rng):
    """on an asynchronous device (CUDA, here simulated) the timing covers the queued work, not just the call"""
    work_ms, iters, warmup = float(integer(rng, 20, 40)), integer(rng, 3, 6), integer(rng, 1, 3)
    device = witnesses.SimulatedDevice(work_ms=work_ms)
    begin = time.perf_counter()
    got = submission.probe(probes.time_simulated_cuda, iters, warmup, witness=device)
    waited_ms = (time.perf_counter() - begin) * 1000.0
    # Correct: 0.01 to 0.6 ms above the work (the simulated device never finishes early); nearest
    # mutants (no synchronize, or none after the call): under 1 ms, the queueing alone. The band
    # reaches 50 ms above the work for a loaded machine.
    assert isinstance(got, numbers.Real) and work_ms - 2.0 <= got <= work_ms + 50.0, \
        (f"each call returns at once and queues {work_ms:g} ms of device work: time_ms(device='cuda') must report "
         f"about {work_ms:g} ms, got {got!r}; time with CUDA events or synchronize before reading the clock")
    check_calls(device, iters, warmup)
    # A timing that covers each call's device work cannot end before the timed work is done: at
    # least iters x the work on this process's clock (correct: the warmup's work on top).
    assert waited_ms >= iters * work_ms, \
        (f"time_ms returned {waited_ms:.0f} ms after it was called, before the {iters} x {work_ms:g} ms of device "
         "work it timed could be done: it never waited for the device")


# ---------------------------------------------------------------- the six scenarios, profiled on this machine

@pytest.mark.points(3)
@pytest.mark.concept(CONCEPT_SELF)
def test_top_ops_follows_the_profile(submission, cpu_profiles, fixtures):
    """top_ops ranks a real table's rows by the asked column, as key_averages().table(sort_by=...) does"""
    for label, (table, _) in cpu_profiles.items():
        for by in ("self_cpu_us", "cpu_total_us"):
            check_top(submission, table, 5, by, f"the {label} scenario's table")
    table, _ = fixtures["cpu_train_step"]
    check_top(submission, table, len(table), "self_cpu_us", "the shipped CPU training step's table")
    table, _ = fixtures["cuda_gemm"]
    check_top(submission, table, 8, "self_device_us", "the shipped CUDA table")


@pytest.mark.points(3)
@pytest.mark.concept(CONCEPT_SELF)
def test_breakdown_matches_the_table(submission, cpu_profiles, fixtures):
    """breakdown sums each row's self time into the first matching label, in milliseconds"""
    for label, (table, _) in [*cpu_profiles.items(), ("training step", fixtures["cpu_train_step"])]:
        got = submission.breakdown(table, CATEGORIES)
        check_breakdown(got, expected_breakdown(table, CATEGORIES, "self_cpu_us"), f"breakdown of the {label} table")


@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_SELF)
def test_breakdown_adds_up_to_the_steps(submission, cpu_profiles):
    """the self times add up to the steps' wall time: nested ops are not counted twice"""
    for label, (table, trace) in cpu_profiles.items():
        got = submission.breakdown(table, {"gemm": GEMM.pattern, "sync": SYNC.pattern})
        steps_ms = sum(e["dur"] for e in events_of(trace) if e["name"].startswith("ProfilerStep#")) / 1000.0
        total = sum(got.values()) if isinstance(got, dict) else float("nan")
        # Correct: 4e-16 relative (one thread: its self times tile its steps exactly); nearest
        # mutant (totals divided by the steps): 50% short; total times: 3.8 times over.
        assert math.isclose(total, steps_ms, rel_tol=1e-3, abs_tol=0.01), \
            (f"breakdown of the {label} scenario adds up to {total:.4g} ms, but its steps last {steps_ms:.4g} ms "
             "in the trace: self times tile the steps exactly once (a total time counts its children again)")


@pytest.mark.points(3)
@pytest.mark.concept(CONCEPT_STEPS)
def test_step_breakdown_matches_the_trace(submission, cpu_profiles, fixtures, artifacts):
    """per step: wall time and the time covered by each phase's regions, in milliseconds"""
    for label, (_, trace) in [("training step", fixtures["cpu_train_step"]), *cpu_profiles.items()]:
        got = submission.step_breakdown(trace)
        if label == "training step":     # the shipped recording: the learner's reading of a public trace
            artifacts["step_breakdown"] = {"profile": "datasets/profiles/cpu_train_step", "steps": got}
        check_steps(got, expected_steps(trace), f"step_breakdown of the {label} trace")
        check_no_device_keys(got, f"step_breakdown of the {label} trace")


@pytest.mark.points(1)
@pytest.mark.concept(CONCEPT_DIAGNOSIS)
@pytest.mark.parametrize("label", LABELS)
def test_diagnose_cpu_scenarios(submission, cpu_profiles, label):
    """diagnose names the cost a CPU scenario was built around"""
    table, trace = cpu_profiles[label]
    check_diagnosis(submission.diagnose(table, trace), label, f"the {label} scenario (profiled on this CPU)")


# ---------------------------------------------------------------- GPU machines only

@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.concept(CONCEPT_DEVICE)
@pytest.mark.timeout(300)
def test_profile_steps_on_cuda_records_device_time(submission):
    """on a GPU, profile_steps(device='cuda') records kernels and device times, and the readers use them"""
    got = submission.probe(probes.profile_cuda_matmuls, 4096, 6)
    table, trace = got["table"], got["trace"]
    mm = [row for row in table if row["name"] == "aten::mm" and row["device_type"] == "cpu"]
    assert mm and mm[0]["self_device_us"] > 0, "aten::mm must carry the device time of the GEMM kernels it launched"
    assert any(row["device_type"] == "cuda" for row in table), "a CUDA profile has rows for the kernels themselves"
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) >= 18, f"3 steps of 6 matmuls launch at least 18 kernels; the trace holds {len(kernels)}"
    check_steps(submission.step_breakdown(trace), expected_steps(trace), "step_breakdown of a real CUDA trace")
    check_diagnosis(submission.diagnose(table, trace), "gemm", "a real CUDA profile of a matmul chain")
