"""The rules exercise 05's README states, each marked in both READMEs (`<!-- rule: id -->`) and
broken by at least one mutant in variants.py that the hidden suite kills."""
from grader.running.contracts import Rule

RECORDING = "Recording a profile"
SELF = "Self and total time"
STEPS = "Steps and phases"
DEVICE = "Device time and idle time"
TIMING = "Asynchronous timing"
DIAGNOSIS = "Diagnosis"

RULES = [
    Rule("recording.step_numbers", RECORDING, "ProfilerStep#N counts every step, the warmup ones included"),
    Rule("recording.calls", RECORDING, "profile_steps calls step_fn warmup + steps times"),
    Rule("recording.active_last", RECORDING, "the schedule's active steps are the last `steps` calls"),
    Rule("recording.step_after_call", RECORDING, "prof.step() after each call: call k runs inside ProfilerStep#k"),
    Rule("recording.shapes", RECORDING, "record_shapes=True: ops carry their input shapes"),
    Rule("recording.cuda_activity", RECORDING, "CUDA activity is recorded when device == 'cuda'"),
    Rule("recording.columns", RECORDING, "one row per key_averages() entry: name, count, self and total CPU and "
                                         "device times, each in its own column"),
    Rule("recording.microseconds", RECORDING, "the table's times are microseconds, as key_averages() reports them"),
    Rule("recording.device_type", RECORDING, "device_type is 'cpu' for host-side rows, 'cuda' for device activity"),
    Rule("recording.trace", RECORDING, "the trace is the parsed Chrome trace (a dict) of the active steps only"),

    Rule("top.order", SELF, "top_ops: the k rows with the largest value in column `by`, largest first"),
    Rule("top.ties", SELF, "top_ops: ties broken by name, alphabetical"),
    Rule("top.unchanged", SELF, "top_ops returns the table's rows unchanged"),
    Rule("top.every_row", SELF, "top_ops ranks every row, the device-side rows included"),
    Rule("breakdown.patterns", SELF, "a label maps to a regular expression (a string) or a list of them"),
    Rule("breakdown.first_label", SELF, "each host-side row counts once, for the first matching label in dict order"),
    Rule("breakdown.search", SELF, "a pattern matches anywhere in the name (re.search, not re.match)"),
    Rule("breakdown.other", SELF, "rows no label matches count for 'other', a key always returned"),
    Rule("breakdown.other_label", SELF, "a label named 'other' shares its key with the unmatched rows"),
    Rule("breakdown.by_column", SELF, "breakdown sums column `by` (self time), adding up to its host-side total"),
    Rule("breakdown.ms", SELF, "breakdown returns milliseconds"),

    Rule("steps.one_per_step", STEPS, "one step per ProfilerStep#N event of cat user_annotation (not the device's "
                                      "copies)"),
    Rule("steps.order", STEPS, "steps ordered by N as a number"),
    Rule("steps.number", STEPS, "`step` is N read from the event's name, not its position"),
    Rule("steps.wall", STEPS, "wall_ms is the step event's duration in milliseconds"),
    Rule("steps.phase_patterns", STEPS, "the phases' regions are PHASES: Optimizer.zero_grad# is not the optimizer"),
    Rule("steps.union", STEPS, "overlapping or nested regions of one phase count once (their union)"),
    Rule("steps.clip", STEPS, "a region sticking out of its step counts only inside the step"),
    Rule("steps.any_order", STEPS, "events come in any order"),

    Rule("device.kernels_only", DEVICE, "only kernels make the device busy: not copies, fills or the device's "
                                        "copies of the regions"),
    Rule("device.busy_union", DEVICE, "busy time is the union of the kernel intervals, streams overlapping"),
    Rule("device.idle_fraction", DEVICE, "device_idle_fraction is 1 - busy / wall"),
    Rule("device.host_phases", DEVICE, "phases come from the host's regions, not the device's copies"),
    Rule("device.busy_costs", DEVICE, "on a GPU, gemm and attention are the self device time of their ops"),
    Rule("device.optimizer_cost", DEVICE, "on a GPU, the optimizer's busy time is the device_total_us of the "
                                          "host-side Optimizer.step# row"),
    Rule("device.idle_by_host", DEVICE, "idle time goes to what the host was doing: data, optimizer, host sync, "
                                        "else launches"),
    Rule("device.sync_window", DEVICE, "host-sync idle runs from the end of a sync call until the next kernel"),
    Rule("device.idle_precedence", DEVICE, "where two causes apply, the first wins: data, optimizer, host sync, "
                                           "launches"),
    Rule("device.sync_not_cost", DEVICE, "a sync costs only the device idle time after it, not the host's wait"),
    Rule("device.busy_clip", DEVICE, "device_busy_ms is clipped to the step's span"),
    Rule("device.every_step", DEVICE, "on a kernel trace every step has the device keys, one without kernels too"),
    Rule("device.cpu_no_keys", DEVICE, "on a CPU trace the device keys are absent"),
    Rule("breakdown.host_rows", DEVICE, "breakdown counts host-side rows only, so each kernel counts once"),

    Rule("timing.warmup", TIMING, "time_ms calls fn warmup times untimed, then iters times timed"),
    Rule("timing.median", TIMING, "time_ms returns the median of the timings"),
    Rule("timing.ms", TIMING, "time_ms returns milliseconds"),
    Rule("timing.device_work", TIMING, "on CUDA each timing includes the device's queued work"),
    Rule("timing.wall_clock", TIMING, "on CPU, wall-clock time (perf_counter), not the process's CPU time"),

    Rule("diagnose.largest", DIAGNOSIS, "each label is a cost in ms per step; the largest wins"),
    Rule("diagnose.per_step", DIAGNOSIS, "table times are divided by the number of steps; phases are per-step means"),
    Rule("diagnose.cpu_phases", DIAGNOSIS, "on a CPU, data_loading and optimizer are the time in those phases"),
    Rule("diagnose.cpu_self_time", DIAGNOSIS, "on a CPU, host_sync, gemm and attention are the self CPU time of "
                                              "their ops"),
    Rule("diagnose.tiny_ops", DIAGNOSIS, "launch_overhead: rows whose average self CPU time per call is under "
                                         "TINY_OP_US"),
    Rule("diagnose.tiny_no_sync", DIAGNOSIS, "sync ops are not tiny ops"),
    Rule("diagnose.tiny_regions", DIAGNOSIS, "every host-side row is a tiny-op candidate, regions included"),
    Rule("diagnose.evidence", DIAGNOSIS, "diagnose returns (label, evidence): a non-empty dict from str to numbers"),
]
