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
