"""Exercise 01: attention, written as einsum (reference solution).

Shapes are named as in the README: b batch, h heads, q query positions, k key positions,
d head dimension. NumPy first; `torch_attention` is the same contract in torch.
"""
import math

import numpy as np
import torch


def softmax(x, axis=-1):
    """Softmax of `x` along `axis`, numerically stable for any finite logits.

    Entries equal to -inf get probability 0; a slice that is entirely -inf gives all zeros,
    never NaN. Returns an array of the same shape as `x`; float64 in, float64 out.
    """
    x = np.asarray(x)
    row_max = x.max(axis=axis, keepdims=True)
    row_max = np.where(np.isneginf(row_max), 0.0, row_max)   # all -inf: shift by 0, not by -inf
    e = np.exp(x - row_max)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)               # all -inf: 0 / 1 = 0, not 0 / 0


def split_heads(x, n_heads):
    """(batch, seq, n_heads * d_head) -> (batch, n_heads, seq, d_head).

    Head j holds columns j * d_head ... (j + 1) * d_head - 1 of the last axis.
    """
    batch, seq, width = x.shape
    if width % n_heads:
        raise ValueError(f"last axis {width} is not divisible by n_heads={n_heads}")
    return x.reshape(batch, seq, n_heads, width // n_heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    """(batch, n_heads, seq, d_head) -> (batch, seq, n_heads * d_head): the inverse of split_heads."""
    batch, n_heads, seq, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, n_heads * d_head)


def causal_mask(q_len, k_len):
    """Boolean mask of shape (1, 1, q_len, k_len), True where a query may attend to a key.

    Query i sits at absolute position k_len - q_len + i (the last q_len positions of the
    sequence, as in cached decoding) and may attend to every key at or before its position.
    """
    offset = k_len - q_len
    query_pos = np.arange(q_len)[:, None] + offset
    key_pos = np.arange(k_len)[None, :]
    return (key_pos <= query_pos)[None, None]


def attention(q, k, v, mask=None):
    """Scaled dot-product attention.

    q: (b, h, q_len, d), k: (b, h, k_len, d), v: (b, h, k_len, d_v) -> (b, h, q_len, d_v).
    Scores are computed with np.einsum and scaled by 1 / sqrt(d). `mask` is boolean and
    broadcastable to (b, h, q_len, k_len); True means keep. A query with no kept key
    outputs zeros. float64 in, float64 out.
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return np.einsum("bhqk,bhkv->bhqv", weights, v)


def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads=None, causal=True):
    """Multi-head self-attention of x (b, s, d_model) -> (b, s, d_model).

    Projections are x @ w: w_q (d_model, n_heads * d_head), w_k and w_v
    (d_model, n_kv_heads * d_head), w_o (n_heads * d_head, d_model). With
    n_kv_heads < n_heads (grouped-query attention) query head j uses key/value head
    j // (n_heads // n_kv_heads), as Hugging Face's repeat_kv; n_kv_heads=None means
    n_kv_heads = n_heads. `causal` applies causal_mask(s, s).
    """
    n_kv_heads = n_kv_heads or n_heads
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={n_kv_heads}")
    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_kv_heads)
    v = split_heads(x @ w_v, n_kv_heads)
    group = n_heads // n_kv_heads
    k = np.repeat(k, group, axis=1)        # heads 0..group-1 share kv head 0, and so on
    v = np.repeat(v, group, axis=1)
    seq = x.shape[1]
    mask = causal_mask(seq, seq) if causal else None
    return merge_heads(attention(q, k, v, mask)) @ w_o


def torch_attention(q, k, v, mask=None):
    """`attention` for torch tensors, with torch.einsum; differentiable.

    Same shapes and mask convention as `attention` (the mask a torch bool tensor). The scores
    and the softmax run in float32 or wider: bf16 and fp16 q and k are upcast before the score
    product (bf16 on CUDA is the common case); the output has v's dtype. A query with no kept
    key outputs zeros, and its gradients are zeros, not NaN.
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    wide = torch.promote_types(q.dtype, torch.float32)     # bf16/fp16 scores would be rounded before exp
    scores = torch.einsum("bhqd,bhkd->bhqk", q.to(wide), k.to(wide)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~has_key, 0.0)    # keep the softmax finite on empty rows ...
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * has_key                   # ... and zero those rows afterwards
    return torch.einsum("bhqk,bhkv->bhqv", weights.to(v.dtype), v)
