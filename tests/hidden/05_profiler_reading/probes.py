"""Trusted probes for the hidden suite of exercise 05: they build step functions and callables
from data, run the learner's profile_steps / time_ms beside them (in the worker during official
grading), and return data only."""
import contextlib
import time

import torch

from grader.core.loading import sibling_module

scenarios = sibling_module(__file__, "scenarios")


def profile_counting_calls(module, steps, warmup, size):
    """profile_steps on a step that runs three known ops (mm, sigmoid, sum) inside a region
    naming the call (`call#k`, k counting from 0), and counts its calls."""
    gen = torch.Generator().manual_seed(size)
    a, b = torch.randn(size, size + 1, generator=gen), torch.randn(size + 1, size + 2, generator=gen)
    calls = 0

    def step():
        nonlocal calls
        with torch.profiler.record_function(f"call#{calls}"):
            torch.mm(a, b).sigmoid().sum()
        calls += 1

    with scenarios.one_thread():
        result = module.profile_steps(step, steps=steps, warmup=warmup)
    table, trace = result if isinstance(result, (tuple, list)) and len(result) == 2 else (result, None)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    complete = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    steps_ = [e for e in complete
              if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]

    def step_around(event):
        return next((s["name"] for s in steps_
                     if s["ts"] <= event["ts"] and event["ts"] + event["dur"] <= s["ts"] + s["dur"]), None)

    return {"calls": calls, "table": table, "trace_is_dict": isinstance(trace, dict),
            "steps": [e["name"] for e in steps_],
            "recorded_calls": sorted((e["name"], step_around(e)) for e in complete
                                     if str(e.get("name", "")).startswith("call#")),
            "mm_inputs": [e.get("args", {}).get("Input Dims") for e in complete if e.get("name") == "aten::mm"],
            "mm_events": sum(e.get("name") == "aten::mm" for e in complete),
            "trace_us": {"aten::mm": sum(e["dur"] for e in complete if e.get("name") == "aten::mm"),
                         "ProfilerStep*": sum(e["dur"] for e in steps_)}}


def profile_asking_for_cuda(module):
    """profile_steps(device="cuda") with the activities it asks torch.profiler.profile for
    recorded. Without a GPU the device is simulated (torch.cuda's synchronize and events) and
    the profiler records the host only, which is all this machine has."""
    asked = []
    original_init = torch.profiler.profile.__init__
    real_cuda = torch.cuda.is_available()

    def recording_init(self, *args, **kwargs):
        activities = kwargs.get("activities")
        asked.append({"activities": None if activities is None else sorted(str(a) for a in activities),
                      "use_cuda": kwargs.get("use_cuda")})
        if not real_cuda:
            kwargs.pop("use_cuda", None)
            if activities is not None:
                kwargs["activities"] = [a for a in activities if a != torch.profiler.ProfilerActivity.CUDA]
        original_init(self, *args, **kwargs)

    a = torch.ones(16, 16)
    torch.profiler.profile.__init__ = recording_init
    try:
        with contextlib.nullcontext() if real_cuda else simulated_cuda(SimulatedStream()):
            module.profile_steps(lambda: a @ a, steps=2, warmup=1, device="cuda")
    finally:
        torch.profiler.profile.__init__ = original_init
    return asked


def _sleeper(first_ms, first_calls, then_ms, outlier_call=None, outlier_ms=None):
    """A function that sleeps `first_ms` on its `first_calls` first calls, `outlier_ms` on call
    number `outlier_call` (from 1) and `then_ms` otherwise, and measures each of its calls itself:
    a timing around a call can only be longer than what the call measured inside."""
    durations = []

    def fn():
        call = len(durations) + 1
        ms = outlier_ms if call == outlier_call else first_ms if call <= first_calls else then_ms
        begin = time.perf_counter()
        time.sleep(ms / 1000.0)
        durations.append((time.perf_counter() - begin) * 1000.0)

    return fn, durations


def time_sleeps(module, base_ms, outlier_ms, iters, warmup):
    """time_ms of a function that sleeps `base_ms`, except on its first timed call (`outlier_ms`)."""
    fn, durations = _sleeper(base_ms, 0, base_ms, outlier_call=warmup + 1, outlier_ms=outlier_ms)
    return {"ms": module.time_ms(fn, iters=iters, warmup=warmup), "calls": len(durations), "durations_ms": durations}


def time_slow_warmup(module, warmup_ms, base_ms, iters, warmup):
    """time_ms of a function whose `warmup` first calls sleep `warmup_ms` (the one-time costs of
    a first call) and the rest `base_ms`."""
    fn, durations = _sleeper(warmup_ms, warmup, base_ms)
    return {"ms": module.time_ms(fn, iters=iters, warmup=warmup), "calls": len(durations), "durations_ms": durations}


class SimulatedStream:
    """A stand-in for a CUDA stream on a machine without one: work is queued by the host,
    which returns at once, and runs later, in order, on the stream's own clock."""

    def __init__(self):
        self.free_at = time.perf_counter()

    def enqueue(self, seconds):
        self.free_at = max(self.free_at, time.perf_counter()) + seconds

    def synchronize(self):
        time.sleep(max(0.0, self.free_at - time.perf_counter()))

    def query(self):
        return time.perf_counter() >= self.free_at

    def wait_stream(self, other):
        pass


def simulated_event_class(stream):
    class SimulatedEvent:
        """torch.cuda.Event: record() marks the moment the queued work before it is done."""

        def __init__(self, enable_timing=False, blocking=False, interprocess=False, **_):
            self.enable_timing, self.at = enable_timing, None

        def record(self, stream_=None):
            self.at = max(time.perf_counter(), stream.free_at)

        def synchronize(self):
            time.sleep(max(0.0, self.at - time.perf_counter()))

        def query(self):
            return self.at is not None and time.perf_counter() >= self.at

        def wait(self, stream_=None):
            pass

        def elapsed_time(self, end):
            if not (self.enable_timing and end.enable_timing):
                raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
            if not end.query():
                raise RuntimeError("CUDA error: device not ready")     # as cudaEventElapsedTime
            return (end.at - self.at) * 1000.0

    return SimulatedEvent


@contextlib.contextmanager
def simulated_cuda(stream):
    """Point torch.cuda's timing entry points at a simulated stream for the duration."""
    patches = {(torch.cuda, "synchronize"): lambda device=None: stream.synchronize(),
               (torch.cuda, "Event"): simulated_event_class(stream),
               (torch.cuda, "current_stream"): lambda device=None: stream,
               (torch.cuda, "default_stream"): lambda device=None: stream,
               (torch.cuda, "is_available"): lambda: True}
    if hasattr(torch, "accelerator"):
        patches[(torch.accelerator, "synchronize")] = lambda device=None: stream.synchronize()
    originals = {key: getattr(*key) for key in patches if hasattr(*key)}
    for (owner, name), value in patches.items():
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name), value in patches.items():
            if (owner, name) in originals:
                setattr(owner, name, originals[(owner, name)])
            else:
                delattr(owner, name)


def time_simulated_cuda(module, work_ms, iters, warmup):
    """time_ms(device="cuda") of a function that only queues `work_ms` of device work."""
    stream = SimulatedStream()
    calls = 0

    def fn():
        nonlocal calls
        calls += 1
        stream.enqueue(work_ms / 1000.0)

    with simulated_cuda(stream):
        ms = module.time_ms(fn, iters=iters, warmup=warmup, device="cuda")
    return {"ms": ms, "calls": calls}


# ---------------------------------------------------------------- GPU machines only

def time_cuda_matmuls(module, size, repeats, iters):
    """time_ms of a chain of matmuls on CUDA, beside CUDA-event timing and an unsynchronized
    host timing of the same function."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(size, size, device="cuda", generator=gen)

    def fn():
        x = a
        for _ in range(repeats):
            x = x @ a
        return x

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    events, unsynchronized = [], []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        events.append(start.elapsed_time(end))
    for _ in range(iters):
        torch.cuda.synchronize()
        begin = time.perf_counter()
        fn()                                     # no synchronize: only the launches are timed
        unsynchronized.append((time.perf_counter() - begin) * 1000.0)
    torch.cuda.synchronize()
    return {"learner_ms": module.time_ms(fn, iters=iters, warmup=3, device="cuda"),
            "events_ms": sorted(events)[iters // 2], "unsynchronized_ms": sorted(unsynchronized)[iters // 2]}


def profile_cuda_matmuls(module, size, depth):
    """profile_steps(device="cuda") of a chain of large matmuls on the GPU."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(size, size, device="cuda", generator=gen)
    weights = [torch.randn(size, size, device="cuda", generator=gen) / size ** 0.5 for _ in range(depth)]

    def step():
        y = x
        for w in weights:
            y = y @ w
        return y

    table, trace = module.profile_steps(step, steps=3, warmup=1, device="cuda")
    return {"table": table, "trace": {"traceEvents": [e for e in trace["traceEvents"] if e.get("ph") == "X"]}}
