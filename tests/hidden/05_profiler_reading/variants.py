"""Mutants (realistic learner bugs) and alternative correct solutions for exercise 05, as edits
of solutions/05_profiler_reading/profiling.py (the course's) or of independent/profiling.py (an
independent solution, written from the README and stub alone, and bugs planted in it by its
author). Every mutant breaks one rule its README marks. `grader audit 05` grades them all."""
from grader.running.variants import INDEPENDENT, Alternative, Independent, Mutant

COURSE_MUTANTS = [
    Mutant("top_by_total", rule="top.order", note="ranks by total time, the habit of sort_by='cpu_time_total'",
           functions={"top_ops": """
def top_ops(table, k=10, by="self_cpu_us"):
    total = {"self_cpu_us": "cpu_total_us", "self_device_us": "device_total_us"}.get(by, by)
    return sorted(table, key=lambda row: (-row[total], row["name"]))[:k]
"""}),
    Mutant("ties_in_table_order", rule="top.ties", note="ties left in the table's order",
           edits={'key=lambda row: (-row[by], row["name"]))[:k]': 'key=lambda row: -row[by])[:k]'}),
    Mutant("breakdown_of_total_time", rule="breakdown.by_column", note="sums CPU total: nested ops counted again",
           edits={'totals[label] += row[by] / 1000.0':
                  'totals[label] += row[by.replace("self_", "").replace("_us", "_total_us")] / 1000.0'}),
    Mutant("breakdown_every_matching_label", rule="breakdown.first_label",
           note="a row counted under each label it matches",
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
    Mutant("breakdown_in_microseconds", rule="breakdown.ms", note="microseconds reported as milliseconds",
           edits={'totals[label] += row[by] / 1000.0': 'totals[label] += row[by]'}),
    Mutant("warmup_recorded", rule="recording.active_last", note="the warmup calls are profiled too",
           edits={"plan = schedule(wait=0, warmup=warmup, active=steps, repeat=1)":
                  "plan = schedule(wait=0, warmup=0, active=warmup + steps, repeat=1)"}),
    Mutant("shapes_not_recorded", rule="recording.shapes", note="record_shapes left off",
           edits={"on_trace_ready=keep_trace, record_shapes=True)": "on_trace_ready=keep_trace)"}),
    Mutant("steps_numbered_by_position", rule="steps.number",
           note="steps counted from 0, not read from ProfilerStep#N",
           edits={"    for step in _steps(events):\n": "    for index, step in enumerate(_steps(events)):\n",
                  '"step": int(step["name"].split("#")[1])': '"step": index'}),
    Mutant("steps_in_trace_order", rule="steps.order", note="steps taken in the order the events come",
           edits={'    return sorted(steps, key=lambda e: int(e["name"].split("#")[1]))': "    return steps"}),
    Mutant("idle_from_summed_kernels", rule="device.busy_union",
           note="busy time as the sum of kernel durations: overlapping streams counted twice",
           edits={'    return _union(_span(e) for e in events if e.get("cat") == "kernel")':
                  '    return sorted(_span(e) for e in events if e.get("cat") == "kernel")'}),
    Mutant("phases_from_device_annotations_too", rule="device.host_phases",
           note="regions taken from both the host's and the device's annotations",
           edits={'if e.get("cat") == "user_annotation" and pattern.search(e["name"]))':
                  'if "user_annotation" in e.get("cat", "") and pattern.search(e["name"]))'}),
    Mutant("kernel_rows_counted_too", rule="breakdown.host_rows",
           note="sums device time over every row: each kernel counted twice",
           edits={"    for row in _host_rows(table):\n        label = next(": "    for row in table:\n        label = next("}),
    Mutant("cpu_time_read_as_device_time", rule="device.busy_costs",
           note="on a GPU trace, the launching ops' CPU time taken for the GEMMs' cost",
           edits={'column = "self_device_us" if on_device else "self_cpu_us"': 'column = "self_cpu_us"'}),
    Mutant("sync_wait_counted_as_cost", rule="device.sync_not_cost",
           note="the host's wait in a sync taken as lost time even while the device is busy",
           edits={'costs["host_sync"] = idle["host_sync"] * per_step':
                  'costs["host_sync"] = _self_time(table, SYNC_OPS, "self_cpu_us") * per_step'}),
    Mutant("diagnose_by_call_count", rule="diagnose.largest",
           note="the label of the op family called most often",
           functions={"diagnose": """
def diagnose(table, trace):
    families = {"gemm": GEMM_OPS, "attention": ATTENTION_OPS, "host_sync": SYNC_OPS,
                "data_loading": PHASES["data_loading"], "optimizer": PHASES["optimizer"]}
    calls = {label: sum(row["count"] for row in _host_rows(table) if pattern.search(row["name"]))
             for label, pattern in families.items()}
    calls["launch_overhead"] = sum(row["count"] for row in _host_rows(table) if _is_tiny(row)) / 10
    return max(calls, key=calls.get), {f"{label}_calls": float(n) for label, n in calls.items()}
"""}),
    Mutant("data_loading_ignored", rule="diagnose.cpu_phases",
           note="the time spent waiting for data is left out",
           edits={'costs["data_loading"] = idle["data_loading"] * per_step': 'costs["data_loading"] = 0.0',
                  'costs["data_loading"] = statistics.fmean(s["data_loading_ms"] for s in steps)':
                  'costs["data_loading"] = 0.0'}),
    Mutant("timing_without_synchronize", rule="timing.device_work",
           note="a host clock around queued device work",
           functions={"_timed_call_ms": """
def _timed_call_ms(fn, device):
    begin = time.perf_counter()
    fn()
    return (time.perf_counter() - begin) * 1000.0
"""}),
    Mutant("mean_not_median", rule="timing.median", note="the mean follows one slow call",
           edits={"    return statistics.median(timings)": "    return statistics.fmean(timings)"}),
    Mutant("no_warmup_calls", rule="timing.warmup", note="the first, slow calls are timed",
           edits={"    for _ in range(warmup):\n        fn()\n    timings = [": "    timings = ["}),

    # ---- one mutant per README rule not covered above (course)
    Mutant("warmup_outside_the_profiler", rule="recording.step_numbers",
           note="the warmup calls run before the profiler starts: the steps are numbered from 0",
           edits={"    plan = schedule(wait=0, warmup=warmup, active=steps, repeat=1)":
                  "    for _ in range(warmup):\n        step_fn()\n"
                  "    plan = schedule(wait=0, warmup=0, active=steps, repeat=1)",
                  "        for _ in range(warmup + steps):": "        for _ in range(steps):"}),
    Mutant("warmup_calls_not_run", rule="recording.calls",
           note="loops over `steps` only: the schedule's warmup eats into the active steps",
           edits={"        for _ in range(warmup + steps):": "        for _ in range(steps):"}),
    Mutant("step_before_call", rule="recording.step_after_call",
           note="prof.step() before the step function: each recorded step holds the previous call",
           edits={"            step_fn()\n            prof.step()": "            prof.step()\n            step_fn()"}),
    Mutant("no_cuda_activity", rule="recording.cuda_activity", note="profiles the host only, always",
           edits={'activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])':
                  "activities = [ProfilerActivity.CPU]"}),
    Mutant("self_and_total_swapped", rule="recording.columns",
           note="self_cpu_us read from cpu_time_total and the reverse",
           edits={'"self_cpu_us": average.self_cpu_time_total, "cpu_total_us": average.cpu_time_total':
                  '"self_cpu_us": average.cpu_time_total, "cpu_total_us": average.self_cpu_time_total'}),
    Mutant("table_in_milliseconds", rule="recording.microseconds",
           note="the table's times converted to milliseconds",
           edits={'"self_cpu_us": average.self_cpu_time_total, "cpu_total_us": average.cpu_time_total':
                  '"self_cpu_us": average.self_cpu_time_total / 1000, "cpu_total_us": average.cpu_time_total / 1000'}),
    Mutant("device_type_as_enum_text", rule="recording.device_type",
           note='device_type kept as str(DeviceType.CPU), not "cpu"',
           edits={'"device_type": average.device_type.name.lower()}': '"device_type": str(average.device_type)}'}),
    Mutant("trace_as_text", rule="recording.trace", note="the trace returned as the JSON text, not parsed",
           edits={"traces.append(json.loads(path.read_text()))": "traces.append(path.read_text())"}),
    Mutant("top_rows_rounded", rule="top.unchanged", note="the ranked column rounded to 0.1 us for display",
           edits={'    return sorted(table, key=lambda row: (-row[by], row["name"]))[:k]':
                  '    return [dict(row, **{by: round(row[by], 1)})\n'
                  '            for row in sorted(table, key=lambda row: (-row[by], row["name"]))[:k]]'}),
    Mutant("top_host_rows_only", rule="top.every_row", note="ranks the host-side rows only, as breakdown does",
           edits={'    return sorted(table, key=lambda row: (-row[by], row["name"]))[:k]':
                  '    return sorted(_host_rows(table), key=lambda row: (-row[by], row["name"]))[:k]'}),
    Mutant("pattern_string_split", rule="breakdown.patterns",
           note="every label's patterns taken as a list: a string becomes its characters",
           edits={"for p in ([found] if isinstance(found, str) else found)]": "for p in found]"}),
    Mutant("match_not_search", rule="breakdown.search", note="re.match anchors every pattern at the name's start",
           edits={'if any(regex.search(row["name"]) for regex in regexes)), "other")':
                  'if any(regex.match(row["name"]) for regex in regexes)), "other")'}),
    Mutant("unmatched_rows_dropped", rule="breakdown.other",
           note='rows no label matches are skipped: "other" stays 0',
           edits={'if any(regex.search(row["name"]) for regex in regexes)), "other")\n'
                  '        totals[label] += row[by] / 1000.0':
                  'if any(regex.search(row["name"]) for regex in regexes)), None)\n'
                  '        if label is not None:\n            totals[label] += row[by] / 1000.0'}),
    Mutant("other_label_overwritten", rule="breakdown.other_label",
           note='"other" set to the unmatched rows at the end, dropping a label of that name',
           functions={"breakdown": """
def breakdown(table, categories, by="self_cpu_us"):
    patterns = {label: [re.compile(p) for p in ([found] if isinstance(found, str) else found)]
                for label, found in categories.items()}
    totals = {label: 0.0 for label in patterns}
    unmatched = 0.0
    for row in _host_rows(table):
        label = next((label for label, regexes in patterns.items()
                      if any(regex.search(row["name"]) for regex in regexes)), None)
        if label is None:
            unmatched += row[by] / 1000.0
        else:
            totals[label] += row[by] / 1000.0
    totals["other"] = unmatched
    return totals
"""}),
    Mutant("steps_from_any_category", concept="Device time and idle time", rule="steps.one_per_step",
           note="every ProfilerStep#N event is a step, the device's copies (gpu_user_annotation) too",
           edits={'e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")':
                  'e for e in events if e["name"].startswith("ProfilerStep#")'}),
    Mutant("steps_numbered_from_one", rule="steps.number",
           note="steps counted from 1, which agrees with ProfilerStep#N after one warmup step only",
           edits={"    for step in _steps(events):\n": "    for index, step in enumerate(_steps(events), start=1):\n",
                  '"step": int(step["name"].split("#")[1])': '"step": index'}),
    Mutant("wall_in_microseconds", rule="steps.wall", note="the step's duration left in microseconds",
           edits={'"wall_ms": step["dur"] / 1000.0}': '"wall_ms": step["dur"]}'}),
    Mutant("optimizer_phase_by_prefix", rule="steps.phase_patterns",
           note="every Optimizer.* region is the optimizer phase, zero_grad included",
           edits={'"optimizer": re.compile(r"^Optimizer\\.step#"),': '"optimizer": re.compile(r"^Optimizer\\."),'}),
    Mutant("phase_regions_summed", rule="steps.union", note="a phase's regions added up, overlaps counted twice",
           edits={"    return {phase: _union(_span(e) for e in events":
                  "    return {phase: sorted(_span(e) for e in events"}),
    Mutant("phases_not_clipped", rule="steps.clip", note="a region overlapping the step counted whole",
           edits={'row[f"{phase}_ms"] = _length(_clip(intervals, start, end)) / 1000.0':
                  'row[f"{phase}_ms"] = _length([(s, e) for s, e in intervals if s < end and e > start]) / 1000.0'}),
    Mutant("union_in_given_order", rule="steps.any_order",
           note="intervals merged in the order the events come, as if the trace were sorted",
           edits={"    for start, end in sorted(intervals):": "    for start, end in intervals:"}),
    Mutant("copies_make_the_device_busy", rule="device.kernels_only",
           note="copies and fills counted as busy time beside the kernels",
           edits={'if e.get("cat") == "kernel")': 'if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))'}),
    Mutant("busy_fraction_for_idle", rule="device.idle_fraction",
           note="busy / wall reported as the idle fraction",
           edits={'row["device_idle_fraction"] = 1.0 - busy / step["dur"]': 'row["device_idle_fraction"] = busy / step["dur"]'}),
    Mutant("optimizer_self_device_time", rule="device.optimizer_cost",
           note="the Optimizer.step row's self device time, which its kernels never reach",
           edits={'    return sum(row["device_total_us"] for row in _host_rows(table) if PHASES["optimizer"]':
                  '    return sum(row["self_device_us"] for row in _host_rows(table) if PHASES["optimizer"]'}),
    Mutant("all_idle_is_launch_overhead", rule="device.idle_by_host",
           note="an idle device taken to wait for launches, whatever the host was doing",
           functions={"_idle_by_cause": """
def _idle_by_cause(events):
    steps = _union(_span(step) for step in _steps(events))
    idle = _subtract(steps, _kernel_intervals(events))
    return {"data_loading": 0.0, "optimizer": 0.0, "host_sync": 0.0, "launch_overhead": _length(idle)}
"""}),
    Mutant("sync_idle_during_the_call", rule="device.sync_window",
           note="host-sync idle taken while the sync call runs, not after it",
           edits={"    after_sync = _union((end, _next_start(starts, end, steps[-1][1]))\n"
                  '                        for _, end in (_span(e) for e in events if SYNC_OPS.search(e.get("name", ""))))':
                  '    after_sync = _union(_span(e) for e in events if SYNC_OPS.search(e.get("name", "")))'}),
    Mutant("sync_idle_before_data", rule="device.idle_precedence",
           note="idle after a sync claimed as host sync before the DataLoader region is considered",
           edits={"    data_loading = _intersect(idle, host[\"data_loading\"])\n":
                  "    data_loading = _subtract(_intersect(idle, host[\"data_loading\"]), _union(\n"
                  "        (end, _next_start([s for s, _ in kernels], end, steps[-1][1]))\n"
                  "        for _, end in (_span(e) for e in events if SYNC_OPS.search(e.get(\"name\", \"\")))))\n"}),
    Mutant("busy_not_clipped", rule="device.busy_clip", note="kernels counted whole in the step they start in",
           edits={"            busy = _length(_clip(kernels, start, end))":
                  "            busy = _length(k for k in kernels if start <= k[0] < end)"}),
    Mutant("device_keys_only_with_kernels", rule="device.every_step",
           note="the device keys only on steps that hold a kernel",
           edits={"        if kernels:\n": "        if _clip(kernels, start, end):\n"}),
    Mutant("seconds_not_milliseconds", rule="timing.ms", note="perf_counter's seconds returned as they are",
           edits={"        return (time.perf_counter() - begin) * 1000.0": "        return time.perf_counter() - begin"}),
    Mutant("process_time_on_cpu", rule="timing.wall_clock",
           note="time.process_time: the CPU time of the process, blind to sleeps and waits",
           edits={"        begin = time.perf_counter()\n        fn()\n        return (time.perf_counter() - begin) * 1000.0":
                  "        begin = time.process_time()\n        fn()\n        return (time.process_time() - begin) * 1000.0"}),
    Mutant("table_costs_not_per_step", rule="diagnose.per_step",
           note="the table's totals over all steps compared with the phases' time per step",
           edits={"    per_step = 1.0 / (1000.0 * len(steps))": "    per_step = 1.0 / 1000.0"}),
    Mutant("families_by_total_time", rule="diagnose.cpu_self_time",
           note="gemm, attention and host_sync read from the total CPU time: a region around matmuls counts them",
           edits={'column = "self_device_us" if on_device else "self_cpu_us"':
                  'column = "self_device_us" if on_device else "cpu_total_us"',
                  'costs["host_sync"] = _self_time(table, SYNC_OPS, "self_cpu_us") * per_step':
                  'costs["host_sync"] = _self_time(table, SYNC_OPS, "cpu_total_us") * per_step'}),
    Mutant("tiny_by_total_self_time", rule="diagnose.tiny_ops",
           note="a row is tiny when its total self time, not its time per call, is under TINY_OP_US",
           edits={'    return row["count"] > 0 and row["self_cpu_us"] / row["count"] < TINY_OP_US':
                  '    return row["count"] > 0 and row["self_cpu_us"] < TINY_OP_US'}),
    Mutant("sync_ops_counted_as_tiny", rule="diagnose.tiny_no_sync",
           note="the host reads counted among the tiny ops",
           edits={'if _is_tiny(row) and not SYNC_OPS.search(row["name"])) * per_step':
                  "if _is_tiny(row)) * per_step"}),
    Mutant("tiny_ops_exclude_regions", rule="diagnose.tiny_regions",
           note='only ops ("::" in the name) can be tiny; regions left out',
           edits={'if _is_tiny(row) and not SYNC_OPS.search(row["name"])) * per_step':
                  'if _is_tiny(row) and not SYNC_OPS.search(row["name"]) and "::" in row["name"]) * per_step'}),
    Mutant("label_without_evidence", rule="diagnose.evidence", note="returns the label alone",
           edits={"    return max(costs, key=costs.get), evidence": "    return max(costs, key=costs.get)"}),
    Mutant("schedule_repeats", rule="recording.active_last",
           note="the schedule's default repeat=0: the table read after the loop is a new, empty cycle's",
           edits={"plan = schedule(wait=0, warmup=warmup, active=steps, repeat=1)":
                  "plan = schedule(wait=0, warmup=warmup, active=steps)"}),
    Mutant("breakdown_per_step", rule="breakdown.by_column",
           note="the totals divided by the number of steps, as the worked example quotes them",
           edits={"        totals[label] += row[by] / 1000.0":
                  "        steps = next(r['count'] for r in table if r['name'] == 'ProfilerStep*')\n"
                  "        totals[label] += row[by] / 1000.0 / steps"}),
    Mutant("busy_compute_stream_only", rule="device.busy_union",
           note="busy time read from one stream's kernels: the all-reduce beside them is missed",
           edits={'    return _union(_span(e) for e in events if e.get("cat") == "kernel")':
                  '    kernels = [e for e in events if e.get("cat") == "kernel"]\n'
                  '    return _union(_span(e) for e in kernels if e["tid"] == min(k["tid"] for k in kernels))'}),
    Mutant("phases_from_any_category", rule="device.host_phases",
           note="a phase's regions matched by name alone, on the host's track or the device's",
           edits={'if e.get("cat") == "user_annotation" and pattern.search(e["name"]))': 'if pattern.search(e["name"]))'}),
    Mutant("optimizer_idle_left_out", rule="device.idle_by_host",
           note="the optimizer's cost on a GPU is its kernels' time only, not the device's wait for its launches",
           edits={'costs["optimizer"] = (idle["optimizer"] + _optimizer_device_time(table)) * per_step':
                  'costs["optimizer"] = _optimizer_device_time(table) * per_step'}),
    Mutant("sync_idle_until_the_step_ends", rule="device.sync_window",
           note="after a sync, all idle time until the step's end counted as host sync",
           edits={"    after_sync = _union((end, _next_start(starts, end, steps[-1][1]))":
                  "    after_sync = _union((end, steps[-1][1])"}),
    Mutant("warmup_timed_too", rule="timing.warmup", note="every call timed, the warmup calls included",
           functions={"time_ms": """
def time_ms(fn, *, iters=10, warmup=3, device="cpu"):
    timings = [_timed_call_ms(fn, device) for _ in range(warmup + iters)]
    return statistics.median(timings)
"""}),
    Mutant("host_reads_by_item_only", rule="diagnose.cpu_self_time",
           note="host_sync counts aten::item's self time only, not the _local_scalar_dense under it",
           edits={'costs["host_sync"] = _self_time(table, SYNC_OPS, "self_cpu_us") * per_step':
                  'costs["host_sync"] = _self_time(table, re.compile(r"^aten::item$"), "self_cpu_us") * per_step'}),
    Mutant("tiny_threshold_inclusive", rule="diagnose.tiny_ops",
           note="an op of exactly TINY_OP_US per call counted as tiny",
           edits={'row["self_cpu_us"] / row["count"] < TINY_OP_US': 'row["self_cpu_us"] / row["count"] <= TINY_OP_US'}),
]

# Bugs planted in the independent solution by its author.
INDEPENDENT_MUTANTS = [
    Mutant("profile_steps_shapes_not_recorded", rule="recording.shapes", base=INDEPENDENT,
           note="left record_shapes off (the default)",
           edits={"                     record_shapes=True) as prof:":
                  "                     record_shapes=False) as prof:"}),
    Mutant("profile_steps_device_type_uppercase", rule="recording.device_type", base=INDEPENDENT,
           note='stored the DeviceType enum name as is ("CPU"/"CUDA")',
           edits={'device_type = getattr(avg.device_type, "name", str(avg.device_type)).lower()':
                  'device_type = getattr(avg.device_type, "name", str(avg.device_type))'}),
    Mutant("profile_steps_times_in_ms", rule="recording.microseconds", base=INDEPENDENT,
           note="converted the CPU columns to milliseconds",
           edits={'"self_cpu_us": float(avg.self_cpu_time_total), "cpu_total_us": float(avg.cpu_time_total),':
                  '"self_cpu_us": float(avg.self_cpu_time_total) / 1000, "cpu_total_us": float(avg.cpu_time_total) / 1000,'}),
    Mutant("profile_steps_records_warmup", rule="recording.active_last", base=INDEPENDENT,
           note="made the warmup calls part of the active window",
           edits={"schedule=schedule(wait=0, warmup=warmup, active=steps, repeat=1),":
                  "schedule=schedule(wait=0, warmup=0, active=warmup + steps, repeat=1),"}),
    Mutant("profile_steps_records_first_calls", rule="recording.active_last", base=INDEPENDENT,
           note="schedule without warmup: the first `steps` calls are recorded, the warmup calls come after",
           edits={"schedule=schedule(wait=0, warmup=warmup, active=steps, repeat=1),":
                  "schedule=schedule(wait=0, warmup=0, active=steps, repeat=1),"}),
    Mutant("top_ops_ties_reverse_alphabetical", rule="top.ties", base=INDEPENDENT,
           note="sorted descending on (value, name), so ties come out Z to A",
           edits={'ranked = sorted(table, key=lambda row: (-row[by], row["name"]))':
                  'ranked = sorted(table, key=lambda row: (row[by], row["name"]), reverse=True)'}),
    Mutant("top_ops_ignores_by", rule="top.order", base=INDEPENDENT,
           note="always ranks by self CPU time",
           edits={'ranked = sorted(table, key=lambda row: (-row[by], row["name"]))':
                  'ranked = sorted(table, key=lambda row: (-row["self_cpu_us"], row["name"]))'}),
    Mutant("breakdown_counts_device_rows", rule="breakdown.host_rows", base=INDEPENDENT,
           note="summed every row, kernels and the device's region copies included",
           edits={'        if row.get("device_type", "cpu") != "cpu":\n            continue\n':
                  ""}),
    Mutant("breakdown_last_label_wins", rule="breakdown.first_label", base=INDEPENDENT,
           note="a row matching several labels goes to the last one",
           edits={"for label, patterns in compiled.items():":
                  "for label, patterns in reversed(list(compiled.items())):"}),
    Mutant("breakdown_match_not_search", rule="breakdown.search", base=INDEPENDENT,
           note="re.match anchors at the start of the name",
           edits={'if any(pattern.search(row["name"]) for pattern in patterns):':
                  'if any(pattern.match(row["name"]) for pattern in patterns):'}),
    Mutant("steps_sorted_by_name", rule="steps.order", base=INDEPENDENT,
           note="sorted the step events by their name string (#10 before #9)",
           edits={'steps.sort(key=lambda item: (item[0], item[1]["ts"]))':
                  'steps.sort(key=lambda item: item[1]["name"])'}),
    Mutant("phase_durations_summed", rule="steps.union", base=INDEPENDENT,
           note="added up the clipped region durations",
           edits={"covered = _union(_clip(phase_regions[phase], start, end))":
                  "covered = _clip(phase_regions[phase], start, end)"}),
    Mutant("union_assumes_time_order", rule="steps.any_order", base=INDEPENDENT,
           note="merged intervals in trace order without sorting them",
           edits={"for a, b in sorted(intervals):":
                  "for a, b in intervals:"}),
    Mutant("phases_from_device_copies", rule="device.host_phases", base=INDEPENDENT,
           note="took phase regions from every event, the device's annotations included",
           edits={'for e in host_regions if pattern.search(e["name"])]':
                  'for e in events if pattern.search(e["name"])]'}),
    Mutant("busy_includes_device_annotations", rule="device.kernels_only", base=INDEPENDENT,
           note="counted the device's region spans as busy time",
           edits={'kernels = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel"]':
                  'kernels = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in ("kernel", "gpu_user_annotation")]'}),
    Mutant("busy_sums_kernel_durations", rule="device.busy_union", base=INDEPENDENT,
           note="summed clipped kernel durations across streams",
           edits={"busy_us = _length(_union(_clip(kernels, start, end)))":
                  "busy_us = _length(_clip(kernels, start, end))"}),
    Mutant("busy_not_clipped_to_step", rule="device.busy_clip", base=INDEPENDENT,
           note="took the kernels that start in the step, whole",
           edits={"busy_us = _length(_union(_clip(kernels, start, end)))":
                  "busy_us = _length(_union(k for k in kernels if start <= k[0] < end))"}),
    Mutant("device_keys_on_cpu_trace", rule="device.cpu_no_keys", base=INDEPENDENT,
           note="always adds the device keys (busy 0, idle 1 on a CPU)",
           edits={"        if kernels:\n":
                  "        if kernels is not None:\n"}),
    Mutant("sync_idle_claims_data_wait", rule="device.idle_precedence", base=INDEPENDENT,
           note="attributed idle time after a sync before checking the DataLoader region",
           edits={'for label, cover in (("data_loading", regions["data_loading"]), ("optimizer", regions["optimizer"]),':
                  'for label, cover in (("host_sync", waits), ("data_loading", regions["data_loading"]), ("optimizer", regions["optimizer"]),'}),
    Mutant("time_ms_mean", rule="timing.median", base=INDEPENDENT,
           note="returned the mean of the timings",
           edits={"return float(statistics.median(timings))":
                  "return float(statistics.mean(timings))"}),
    Mutant("time_ms_no_sync_after_call", rule="timing.device_work", base=INDEPENDENT,
           note="synchronised before starting the clock but not before reading it",
           edits={"        sync()                                   # the device's work is part of the call\n":
                  ""}),
    Mutant("time_ms_one_warmup_short", rule="timing.warmup", base=INDEPENDENT,
           note="range(1, warmup): one warmup call too few",
           edits={"    for _ in range(warmup):\n        fn()\n":
                  "    for _ in range(1, warmup):\n        fn()\n"}),
    Mutant("tiny_ops_include_sync_ops", rule="diagnose.tiny_no_sync", base=INDEPENDENT,
           note="did not exclude SYNC_OPS from the tiny ops",
           edits={'if not SYNC_OPS.search(row["name"]) and row["count"] > 0':
                  'if row["count"] > 0'}),
    Mutant("tiny_ops_by_total_self_time", rule="diagnose.tiny_ops", base=INDEPENDENT,
           note="compared the row's total self time, not its per-call average, with TINY_OP_US",
           edits={'and row["self_cpu_us"] / row["count"] < TINY_OP_US]':
                  'and row["self_cpu_us"] < TINY_OP_US]'}),
    Mutant("gpu_gemm_by_cpu_time", rule="device.busy_costs", base=INDEPENDENT,
           note="used the self CPU column for GEMMs on a GPU trace too",
           edits={'costs["gemm"] = per_step_ms(named(GEMM_OPS), "self_device_us")':
                  'costs["gemm"] = per_step_ms(named(GEMM_OPS), "self_cpu_us")'}),
    Mutant("gpu_optimizer_self_device_time", rule="device.optimizer_cost", base=INDEPENDENT,
           note="read the Optimizer.step row's self device time (0: its kernels belong to the _foreach ops)",
           edits={'per_step_ms(optimizer_rows, "device_total_us")':
                  'per_step_ms(optimizer_rows, "self_device_us")'}),
]

MUTANTS = COURSE_MUTANTS + INDEPENDENT_MUTANTS

ALTERNATIVES = [
    Independent(note="written from the README, stub and visible tests alone, never the reference or this suite"),
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

# Operator mutants (grader audit 05 --operators) that change nothing the README's contract lets a
# learner observe.
EQUIVALENT = {
    'profile_steps: def profile_steps(step_fn, *, steps=5, warmup=1, device="cpu"): -> def profile_steps(step_fn, *, steps=5, warmup=1, device="XXcpuXX"):':
        'the default device is only compared with "cuda": any other string profiles the host, as "cpu" does',
    'profile_steps: def profile_steps(step_fn, *, steps=5, warmup=1, device="cpu"): -> def profile_steps(step_fn, *, steps=5, warmup=1, device="CPU"):':
        'the default device is only compared with "cuda": any other string profiles the host, as "cpu" does',
    'profile_steps: activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else []) -> activities = None':
        'the profiler\'s default activities are the host\'s plus CUDA where a GPU exists: the README asks for CUDA when device == "cuda" and a CPU step records no device activity either way',
    'profile_steps: activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else []) -> activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if (device == "cuda") or True else [])':
        'asking for CUDA activity on a CPU step too records no device activity: the README asks for CUDA when device == "cuda", never forbids it otherwise',
    'profile_steps: path = Path(folder) / "trace.json" -> path = Path(folder) / "XXtrace.jsonXX"':
        'the name of the temporary file the trace is exported to is never seen',
    'profile_steps: path = Path(folder) / "trace.json" -> path = Path(folder) / "TRACE.JSON"':
        'the name of the temporary file the trace is exported to is never seen',
    'profile_steps: with profile(activities=activities, schedule=plan, on_trace_ready=keep_trace, record_shapes=True) as prof: -> with profile(activities=None, schedule=plan, on_trace_ready=keep_trace, record_shapes=True) as prof:':
        'the profiler\'s default activities are the host\'s plus CUDA where a GPU exists: the README asks for CUDA when device == "cuda" and a CPU step records no device activity either way',
    'profile_steps: with profile(activities=activities, schedule=plan, on_trace_ready=keep_trace, record_shapes=True) as prof: -> with profile(schedule=plan, on_trace_ready=keep_trace, record_shapes=True) as prof:':
        'the profiler\'s default activities are the host\'s plus CUDA where a GPU exists: the README asks for CUDA when device == "cuda" and a CPU step records no device activity either way',
    '_union: if merged and start <= merged[-1][1]: -> if merged and start < merged[-1][1]:':
        'touching intervals merged or not cover the same length; the next kernel start after a sync differs only when the sync ends while a kernel still runs, which a sync (it waits for the queue) never does',
    '_clip: return [(max(s, start), min(e, end)) for s, e in intervals if s < end and e > start] -> return [(max(s, start), min(e, end)) for s, e in intervals if s <= end and e > start]':
        "an interval that starts at the clip's end clips to an empty piece, which adds no length",
    '_clip: return [(max(s, start), min(e, end)) for s, e in intervals if s < end and e > start] -> return [(max(s, start), min(e, end)) for s, e in intervals if s < end and e >= start]':
        "an interval that ends at the clip's start clips to an empty piece, which adds no length",
    '_subtract: if cut_start > start: -> if cut_start >= start:':
        "a cut at the interval's start leaves an empty piece, which adds no length",
    '_subtract: if start < end: -> if start <= end:':
        'an interval cut to its end leaves an empty piece, which adds no length',
    'diagnose: evidence["wall_ms"] = statistics.fmean(s["wall_ms"] for s in steps) -> evidence["XXwall_msXX"] = statistics.fmean(s["wall_ms"] for s in steps)':
        'the README names no evidence key: only the label and numbers under some names are promised',
    'diagnose: evidence["wall_ms"] = statistics.fmean(s["wall_ms"] for s in steps) -> evidence["WALL_MS"] = statistics.fmean(s["wall_ms"] for s in steps)':
        'the README names no evidence key: only the label and numbers under some names are promised',
    'diagnose: evidence["device_idle_fraction"] = statistics.fmean(s["device_idle_fraction"] for s in steps) -> evidence["XXdevice_idle_fractionXX"] = statistics.fmean(s["device_idle_fraction"] for s in steps)':
        'the README names no evidence key: only the label and numbers under some names are promised',
    'diagnose: evidence["device_idle_fraction"] = statistics.fmean(s["device_idle_fraction"] for s in steps) -> evidence["DEVICE_IDLE_FRACTION"] = statistics.fmean(s["device_idle_fraction"] for s in steps)':
        'the README names no evidence key: only the label and numbers under some names are promised',
    '_is_tiny: return row["count"] > 0 and row["self_cpu_us"] / row["count"] < TINY_OP_US -> return row["count"] >= 0 and row["self_cpu_us"] / row["count"] < TINY_OP_US':
        'a key_averages() row counts one call at least: a row of count 0 has no time per call and never occurs',
    '_idle_by_cause: for _, end in (_span(e) for e in events if SYNC_OPS.search(e.get("name", "")))) -> for _, end in (_span(e) for e in events if SYNC_OPS.search(e.get("name", None))))':
        'every complete event carries a name (the README lists it among the fields the readers get): the default is never read',
    '_idle_by_cause: for _, end in (_span(e) for e in events if SYNC_OPS.search(e.get("name", "")))) -> for _, end in (_span(e) for e in events if SYNC_OPS.search(e.get("name", ))))':
        'every complete event carries a name (the README lists it among the fields the readers get): the default is never read',
    '_idle_by_cause: for _, end in (_span(e) for e in events if SYNC_OPS.search(e.get("name", "")))) -> for _, end in (_span(e) for e in events if SYNC_OPS.search(e.get("name", "XXXX"))))':
        'every complete event carries a name (the README lists it among the fields the readers get): the default is never read',
    'time_ms: def time_ms(fn, *, iters=10, warmup=3, device="cpu"): -> def time_ms(fn, *, iters=10, warmup=3, device="XXcpuXX"):':
        'the default device is only compared with "cuda": any other string times on the host clock, as "cpu" does',
    'time_ms: def time_ms(fn, *, iters=10, warmup=3, device="cpu"): -> def time_ms(fn, *, iters=10, warmup=3, device="CPU"):':
        'the default device is only compared with "cuda": any other string times on the host clock, as "cpu" does',
    '_timed_call_ms: return (time.perf_counter() - begin) * 1000.0 -> return (time.perf_counter() - begin) * 1001.0':
        'a timing 0.1% long is within the noise of any measured call (the round trip to the witness alone is up to 0.6 ms of a 10 ms call): no grading of a wall-clock time can tell',
}
