"""Probes of the visible tests: they run beside your module (in the worker during official
grading) and return what they observed, as data."""
import time

import torch


def three_steps_after_one(module):
    """profile_steps on a step that runs one matmul; returns what came back and how often the step ran."""
    a, b, calls = torch.ones(8, 9), torch.ones(9, 10), []

    def step():
        calls.append(1)
        torch.mm(a, b)

    table, trace = module.profile_steps(step, steps=3, warmup=1)
    steps = [e["name"] for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    return {"calls": len(calls), "table": table, "steps": steps}


def time_a_sleep(module):
    """time_ms of a 10 ms sleep."""
    return module.time_ms(lambda: time.sleep(0.01), iters=3, warmup=1)


def numbered_calls(module, steps, warmup):
    """profile_steps on a step that opens a region named after its call number (from 0) and runs
    one matmul; returns how often the step ran, the table and the trace."""
    from torch.profiler import record_function
    a, b, calls = torch.ones(16, 12), torch.ones(12, 20), []

    def step():
        with record_function(f"call-{len(calls)}"):
            calls.append(1)
            torch.mm(a, b)

    table, trace = module.profile_steps(step, steps=steps, warmup=warmup)
    return {"calls": len(calls), "table": table, "trace": trace}


def time_uneven_sleeps(module, sleeps_ms, iters, warmup):
    """time_ms of a function whose k-th call sleeps sleeps_ms[k] milliseconds; returns the result
    and the number of calls."""
    calls = []

    def sleep():
        time.sleep(sleeps_ms[min(len(calls), len(sleeps_ms) - 1)] / 1000)
        calls.append(1)

    return {"ms": module.time_ms(sleep, iters=iters, warmup=warmup), "calls": len(calls)}
