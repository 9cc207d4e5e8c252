"""Trusted probes for the hidden suite of exercise 01: they run beside the learner's module
(in the worker during official grading), observe it, and return data only."""
import sys

import numpy as np
import torch


def einsum_calls(module, function, *args):
    """How many times np.einsum and torch.einsum run during one call of `function`."""
    counts = {"numpy": 0, "torch": 0}
    originals = (np.einsum, torch.einsum)

    def counting(kind, original):
        def wrapper(*a, **kw):
            counts[kind] += 1
            return original(*a, **kw)
        return wrapper

    np.einsum, torch.einsum = counting("numpy", originals[0]), counting("torch", originals[1])
    try:
        getattr(module, function)(*args)
    finally:
        np.einsum, torch.einsum = originals
    return counts


def lines_executed(module, function, *args):
    """How many lines of the learner's file run during one call of `function`: a count that
    grows with batch or heads betrays a Python loop over them."""
    filename = module.__file__
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename == filename else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        getattr(module, function)(*args)
    finally:
        sys.settrace(previous)
    return count


def torch_attention_backward(module, q, k, v, mask, grad_output):
    """Output of torch_attention and the gradients of <output, grad_output> w.r.t. q, k, v."""
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    output = module.torch_attention(*leaves, mask)
    if not isinstance(output, torch.Tensor) or not output.requires_grad:
        return {"output": output if isinstance(output, torch.Tensor) else None, "grads": None}
    (output * grad_output).sum().backward()
    grads = [leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in leaves]
    return {"output": output.detach(), "grads": grads}


def torch_attention_on_cuda(module, q, k, v, mask):
    """torch_attention on CUDA tensors of q's dtype; the result comes back to the CPU as float32."""
    moved = [t.cuda() for t in (q, k, v)]
    output = module.torch_attention(*moved, None if mask is None else mask.cuda())
    return {"dtype": str(output.dtype), "device": output.device.type, "output": output.float().cpu()}
