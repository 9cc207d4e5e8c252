"""Mutants (realistic learner bugs) and alternative correct solutions for exercise 05, as edits
of solutions/05_profiler_reading/profiling.py. `grader audit 05` grades them all."""
from grader.running.variants import Alternative, Mutant

MUTANTS = [
    Mutant("top_by_total", "Self and total time", note="ranks by total time, the habit of sort_by='cpu_time_total'",
           functions={"top_ops": """
def top_ops(table, k=10, by="self_cpu_us"):
    total = {"self_cpu_us": "cpu_total_us", "self_device_us": "device_total_us"}.get(by, by)
    return sorted(table, key=lambda row: (-row[total], row["name"]))[:k]
"""}),
    Mutant("ties_in_table_order", "Self and total time", note="ties left in the table's order",
           edits={'key=lambda row: (-row[by], row["name"]))[:k]': 'key=lambda row: -row[by])[:k]'}),
    Mutant("breakdown_of_total_time", "Self and total time", note="sums CPU total: nested ops counted again",
           edits={'totals[label] += row[by] / 1000.0':
                  'totals[label] += row[by.replace("self_", "").replace("_us", "_total_us")] / 1000.0'}),
    Mutant("breakdown_every_matching_label", "Self and total time", note="a row counted under each label it matches",
           functions={"breakdown": """
def breakdown(table, categories, by="self_cpu_us"):
    patterns = {label: [re.compile(p) for p in ([found] if isinstance(found, str) else found)]
                for label, found in categories.items()}
    totals = {label: 0.0 for label in patterns}
    totals["other"] = 0.0
    for row in _host_rows(table):
        labels = [label for label, regexes in patterns.items() if any(regex.search(row["name"]) for regex in regexes)]
        for label in labels or ["other"]:
            totals[label] += row[by] / 1000.0
    return totals
"""}),
    Mutant("breakdown_in_microseconds", "Self and total time", note="microseconds reported as milliseconds",
           edits={'totals[label] += row[by] / 1000.0': 'totals[label] += row[by]'}),
    Mutant("warmup_recorded", "Recording a profile", note="the warmup calls are profiled too",
           edits={"plan = schedule(wait=0, warmup=warmup, active=steps, repeat=1)":
                  "plan = schedule(wait=0, warmup=0, active=warmup + steps, repeat=1)"}),
    Mutant("shapes_not_recorded", "Recording a profile", note="record_shapes left off",
           edits={"on_trace_ready=keep_trace, record_shapes=True)": "on_trace_ready=keep_trace)"}),
    Mutant("steps_numbered_by_position", "Steps and phases", note="steps counted from 0, not read from ProfilerStep#N",
           edits={"    for step in _steps(events):\n": "    for index, step in enumerate(_steps(events)):\n",
                  '"step": int(step["name"].split("#")[1])': '"step": index'}),
    Mutant("steps_in_trace_order", "Steps and phases", note="steps taken in the order the events come",
           edits={'    return sorted(steps, key=lambda e: int(e["name"].split("#")[1]))': "    return steps"}),
    Mutant("idle_from_summed_kernels", "Device time and idle time",
           note="busy time as the sum of kernel durations: overlapping streams counted twice",
           edits={'    return _union(_span(e) for e in events if e.get("cat") == "kernel")':
                  '    return sorted(_span(e) for e in events if e.get("cat") == "kernel")'}),
    Mutant("phases_from_device_annotations_too", "Device time and idle time",
           note="regions taken from both the host's and the device's annotations",
           edits={'if e.get("cat") == "user_annotation" and pattern.search(e["name"]))':
                  'if "user_annotation" in e.get("cat", "") and pattern.search(e["name"]))'}),
    Mutant("kernel_rows_counted_too", "Device time and idle time",
           note="sums device time over every row: each kernel counted twice",
           edits={"    for row in _host_rows(table):\n        label = next(": "    for row in table:\n        label = next("}),
    Mutant("cpu_time_read_as_device_time", "Device time and idle time",
           note="on a GPU trace, the launching ops' CPU time taken for the GEMMs' cost",
           edits={'column = "self_device_us" if on_device else "self_cpu_us"': 'column = "self_cpu_us"'}),
    Mutant("sync_wait_counted_as_cost", "Device time and idle time",
           note="the host's wait in a sync taken as lost time even while the device is busy",
           edits={'costs["host_sync"] = idle["host_sync"] * per_step':
                  'costs["host_sync"] = _self_time(table, SYNC_OPS, "self_cpu_us") * per_step'}),
    Mutant("diagnose_by_call_count", "Diagnosis", note="the label of the op family called most often",
           functions={"diagnose": """
def diagnose(table, trace):
    families = {"gemm": GEMM_OPS, "attention": ATTENTION_OPS, "host_sync": SYNC_OPS,
                "data_loading": PHASES["data_loading"], "optimizer": PHASES["optimizer"]}
    calls = {label: sum(row["count"] for row in _host_rows(table) if pattern.search(row["name"]))
             for label, pattern in families.items()}
    calls["launch_overhead"] = sum(row["count"] for row in _host_rows(table) if _is_tiny(row)) / 10
    return max(calls, key=calls.get), {f"{label}_calls": float(n) for label, n in calls.items()}
"""}),
    Mutant("data_loading_ignored", "Diagnosis", note="the time spent waiting for data is left out",
           edits={'costs["data_loading"] = idle["data_loading"] * per_step': 'costs["data_loading"] = 0.0',
                  'costs["data_loading"] = statistics.fmean(s["data_loading_ms"] for s in steps)':
                  'costs["data_loading"] = 0.0'}),
    Mutant("timing_without_synchronize", "Asynchronous timing", note="a host clock around queued device work",
           functions={"_timed_call_ms": """
def _timed_call_ms(fn, device):
    begin = time.perf_counter()
    fn()
    return (time.perf_counter() - begin) * 1000.0
"""}),
    Mutant("mean_not_median", "Asynchronous timing", note="the mean follows one slow call",
           edits={"    return statistics.median(timings)": "    return statistics.fmean(timings)"}),
    Mutant("no_warmup_calls", "Asynchronous timing", note="the first, slow calls are timed",
           edits={"    for _ in range(warmup):\n        fn()\n    timings = [": "    timings = ["}),
]

ALTERNATIVES = [
    Alternative("pandas_tables", note="top_ops and breakdown with pandas",
                functions={"top_ops": """
def top_ops(table, k=10, by="self_cpu_us"):
    import pandas as pd
    frame = pd.DataFrame(table)
    order = frame.sort_values([by, "name"], ascending=[False, True], kind="stable").index[:k]
    return [table[i] for i in order]
""", "breakdown": """
def breakdown(table, categories, by="self_cpu_us"):
    import pandas as pd
    frame = pd.DataFrame(table)
    frame = frame[frame["device_type"] == "cpu"].copy()
    frame["label"] = "other"
    unlabelled = pd.Series(True, index=frame.index)
    for label, found in categories.items():
        patterns = [found] if isinstance(found, str) else list(found)
        hit = frame["name"].apply(lambda name: any(re.search(p, name) for p in patterns)) & unlabelled
        frame.loc[hit, "label"] = label
        unlabelled &= ~hit
    sums = frame.groupby("label")[by].sum() / 1000.0
    return {label: float(sums.get(label, 0.0)) for label in [*categories, "other"]}
"""}),
    Alternative("trace_events_and_sweeps", note="step phases by a sweep line; the CPU diagnosis from the "
                "trace's events (self time = duration minus children, per thread) instead of key_averages",
                functions={"step_breakdown": """
def step_breakdown(trace):
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]

    def covered(kind, start, end):
        points = []
        for e in events:
            if kind(e):
                s, t = max(e["ts"], start), min(e["ts"] + e["dur"], end)
                if s < t:
                    points += [(s, 1), (t, -1)]
        points.sort()
        depth, total, last = 0, 0.0, start
        for moment, change in points:
            if depth:
                total += moment - last
            depth, last = depth + change, moment
        return total

    has_kernels = any(e.get("cat") == "kernel" for e in events)
    rows = []
    for step in sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
                       key=lambda e: int(e["name"].split("#")[1])):
        start, end = step["ts"], step["ts"] + step["dur"]
        row = {"step": int(step["name"].split("#")[1]), "wall_ms": step["dur"] / 1000}
        for phase, pattern in PHASES.items():
            row[phase + "_ms"] = covered(lambda e, p=pattern: e.get("cat") == "user_annotation" and p.search(e["name"]),
                                         start, end) / 1000
        if has_kernels:
            busy = covered(lambda e: e.get("cat") == "kernel", start, end)
            row["device_busy_ms"], row["device_idle_fraction"] = busy / 1000, 1 - busy / step["dur"]
        rows.append(row)
    return rows
""", "diagnose": """
def diagnose(table, trace):
    steps = step_breakdown(trace)
    if "device_idle_fraction" in steps[0]:
        return _diagnose_on_device(table, trace, steps)
    self_us = {}
    events = sorted((e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")),
                    key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    stack = []
    for e in events:
        while stack and (stack[-1]["tid"] != e["tid"] or e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]):
            stack.pop()
        self_us[id(e)] = e["dur"]
        if stack:
            self_us[id(stack[-1])] -= e["dur"]
        stack.append(e)
    calls, spent = {}, {}
    for e in events:
        calls[e["name"]] = calls.get(e["name"], 0) + 1
        spent[e["name"]] = spent.get(e["name"], 0.0) + self_us[id(e)]
    n = len(steps)

    def family(pattern):
        return sum(us for name, us in spent.items() if pattern.search(name)) / 1000 / n

    costs = {"gemm": family(GEMM_OPS), "attention": family(ATTENTION_OPS), "host_sync": family(SYNC_OPS),
             "launch_overhead": sum(us for name, us in spent.items()
                                    if us / calls[name] < TINY_OP_US and not SYNC_OPS.search(name)) / 1000 / n,
             "data_loading": sum(s["data_loading_ms"] for s in steps) / n,
             "optimizer": sum(s["optimizer_ms"] for s in steps) / n}
    return max(costs, key=costs.get), {label + "_ms": ms for label, ms in costs.items()}


def _diagnose_on_device(table, trace, steps):
    per_step = 1.0 / (1000.0 * len(steps))
    idle = _idle_by_cause(_complete_events(trace))
    costs = {"gemm": _self_time(table, GEMM_OPS, "self_device_us") * per_step,
             "attention": _self_time(table, ATTENTION_OPS, "self_device_us") * per_step,
             "data_loading": idle["data_loading"] * per_step, "host_sync": idle["host_sync"] * per_step,
             "launch_overhead": idle["launch_overhead"] * per_step,
             "optimizer": (idle["optimizer"] + _optimizer_device_time(table)) * per_step}
    return max(costs, key=costs.get), {label + "_ms": ms for label, ms in costs.items()}
"""}),
    Alternative("synchronize_and_wait_stage", note="time_ms with synchronize around a host clock; the schedule "
                "waits through the warmup calls instead of warming up",
                edits={"plan = schedule(wait=0, warmup=warmup, active=steps, repeat=1)":
                       "plan = schedule(wait=warmup, warmup=0, active=steps, repeat=1)"},
                functions={"time_ms": """
def time_ms(fn, *, iters=10, warmup=3, device="cpu"):
    def wait_for_device():
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(warmup):
        fn()
    timings = []
    for _ in range(iters):
        wait_for_device()
        begin = time.perf_counter()
        fn()
        wait_for_device()
        timings.append((time.perf_counter() - begin) * 1000.0)
    timings.sort()
    middle = len(timings) // 2
    return timings[middle] if len(timings) % 2 else (timings[middle - 1] + timings[middle]) / 2
"""}),
]
