"""Trusted probes for the hidden suite of exercise 01: they run beside the learner's module
(in the worker during official grading), observe it, and return data only."""
import torch


def result_and_argument_after(module, function, argument):
    """What `module.function(argument)` returned, and the argument as it is after the call (the
    caller's array, which the test compares with the one it sent)."""
    result = getattr(module, function)(argument)
    return {"result": result, "argument": argument}


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
