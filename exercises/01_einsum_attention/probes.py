"""Probes of the visible tests: they run beside your module (in the worker during official
grading) and return what your code did, as data: here, gradients, which only exist where the
autograd graph does."""
import torch


def attention_gradients(module, q, k, v, mask, upstream):
    """torch_attention's output on leaf copies of q, k and v, and the gradients of
    sum(output * upstream) with respect to each (None where the output carries no graph)."""
    leaves = [tensor.detach().clone().requires_grad_(True) for tensor in (q, k, v)]
    output = module.torch_attention(*leaves, mask)
    if not (torch.is_tensor(output) and output.requires_grad):
        return {"output": output.detach() if torch.is_tensor(output) else None, "grads": None}
    torch.autograd.backward(output, grad_tensors=upstream)
    return {"output": output.detach(),
            "grads": [leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in leaves]}
