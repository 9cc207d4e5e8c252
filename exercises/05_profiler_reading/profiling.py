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
    raise NotImplementedError('see README.md, section "Recording a profile"')


def top_ops(table, k=10, by="self_cpu_us"):
    """The `k` rows of `table` with the largest value in column `by`, largest first.

    Ties are broken by name (alphabetical). Returns the rows themselves (dicts), unchanged.
    """
    raise NotImplementedError('see README.md, section "Self and total time"')


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
    raise NotImplementedError('see README.md, section "Self and total time"')


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
    raise NotImplementedError('see README.md, section "Steps and phases"')


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
    raise NotImplementedError('see README.md, section "Diagnosis"')


def time_ms(fn, *, iters=10, warmup=3, device="cpu"):
    """Median wall time of one call of `fn`, in milliseconds.

    Calls `fn` `warmup` times untimed, then `iters` times timed, one timing per call. On CPU
    each call is timed with time.perf_counter. On CUDA, work is queued asynchronously and a
    host clock alone measures only the queueing: each timing must cover the device's work
    (CUDA events, or torch.cuda.synchronize() before reading the clock).
    """
    raise NotImplementedError('see README.md, section "Asynchronous timing"')
