"""Trusted probes for the hidden suite of exercise 05: they build step functions from data, run
the learner's profile_steps / time_ms beside them (in the worker during official grading), and
return data only. What time_ms times is a witness's (witnesses.py): its calls run in the test's
process, and only the witness's own count and clock judge the answer."""
import contextlib

import torch

from grader.worker.loading import sibling_module

scenarios = sibling_module(__file__, "scenarios")


def profile_counting_calls(module, steps, warmup, size, defaults=False):
    """profile_steps on a step that runs three known ops (mm, sigmoid, sum) inside a region
    naming the call (`call#k`, k counting from 0), and counts its calls. With `defaults`,
    profile_steps is called with its own steps and warmup (`steps` and `warmup` are unused)."""
    gen = torch.Generator().manual_seed(size)
    a, b = torch.randn(size, size + 1, generator=gen), torch.randn(size + 1, size + 2, generator=gen)
    calls = 0

    def step():
        nonlocal calls
        with torch.profiler.record_function(f"call#{calls}"):
            torch.mm(a, b).sigmoid().sum()
        calls += 1

    with scenarios.one_thread():
        result = module.profile_steps(step) if defaults else module.profile_steps(step, steps=steps, warmup=warmup)
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


def profile_asking_for_cuda(module, device):
    """profile_steps(device="cuda") with the activities it asks torch.profiler.profile for
    recorded. Without a GPU the device is simulated (torch.cuda's synchronize and events, asking
    the test's `device`) and the profiler records the host only, which is all this machine has."""
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
        with contextlib.nullcontext() if real_cuda else simulated_cuda(device):
            module.profile_steps(lambda: a @ a, steps=2, warmup=1, device="cuda")
    finally:
        torch.profiler.profile.__init__ = original_init
    return asked


def time_calls(module, function, iters, warmup):
    """time_ms of the test's function: each call runs in the test's process (a witness), which
    counts and times the calls itself."""
    return module.time_ms(function.call, iters=iters, warmup=warmup)


def time_calls_by_default(module, function):
    """time_ms of the test's function with time_ms's own iters and warmup."""
    return module.time_ms(function.call)


class SimulatedStream:
    """torch.cuda's stream, standing in for the test's simulated device."""

    def __init__(self, device):
        self.device = device

    def synchronize(self):
        self.device.synchronize()

    def query(self):
        return self.device.query()

    def wait_stream(self, other):
        pass

    def wait_event(self, event):
        pass


def simulated_event_class(device):
    class SimulatedEvent:
        """torch.cuda.Event: record() marks the moment the queued work before it is done."""

        def __init__(self, enable_timing=False, blocking=False, interprocess=False, **_):
            self.enable_timing, self.number = enable_timing, None

        def record(self, stream=None):
            self.number = device.record()

        def synchronize(self):
            device.event_synchronize(self.number)

        def query(self):
            return self.number is not None and device.event_query(self.number)

        def wait(self, stream=None):
            pass

        def elapsed_time(self, end):
            if not (self.enable_timing and end.enable_timing):
                raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
            return device.elapsed_ms(self.number, end.number)

    return SimulatedEvent


@contextlib.contextmanager
def simulated_cuda(device):
    """Point torch.cuda's timing entry points at the test's simulated device for the duration."""
    stream = SimulatedStream(device)
    patches = {(torch.cuda, "synchronize"): lambda device=None: stream.synchronize(),
               (torch.cuda, "Event"): simulated_event_class(device),
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
        for owner, name in patches:
            if (owner, name) in originals:
                setattr(owner, name, originals[(owner, name)])
            else:
                delattr(owner, name)


def time_simulated_cuda(module, device, iters, warmup):
    """time_ms(device="cuda") of a function that only queues work on the test's simulated device."""
    with simulated_cuda(device):
        return module.time_ms(device.enqueue, iters=iters, warmup=warmup, device="cuda")


# ---------------------------------------------------------------- GPU machines only

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
