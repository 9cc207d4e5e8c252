"""Exercise 01: attention, written as einsum.

Fill in every function below; README.md explains each one. Shapes are named as in the
README: b batch, h heads, q query positions, k key positions, d head dimension.
Run the visible tests with:  pytest exercises/01_einsum_attention
"""
import math

import numpy as np
import torch


def softmax(x, axis=-1):
    """Softmax of `x` along `axis`, numerically stable for any finite logits.

    Entries equal to -inf get probability 0; a slice that is entirely -inf gives all zeros,
    never NaN. Returns an array of the same shape as `x`.
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    # An all -inf slice has max -inf and -inf - (-inf) is NaN: shift such a slice by 0 instead.
    m = np.where(np.isneginf(m), 0, m).astype(x.dtype)
    e = np.exp(x - m)
    total = np.sum(e, axis=axis, keepdims=True)
    # The total is 0 only for an all -inf slice, which gives all zeros.
    has_mass = total > 0
    return np.where(has_mass, e / np.where(has_mass, total, 1), 0).astype(x.dtype)


def split_heads(x, n_heads):
    """(batch, seq, n_heads * d_head) -> (batch, n_heads, seq, d_head).

    Head j holds columns j * d_head ... (j + 1) * d_head - 1 of the last axis.
    """
    batch, seq, width = x.shape
    if width % n_heads:
        raise ValueError(f"last axis {width} is not divisible by n_heads={n_heads}")
    d_head = width // n_heads
    # Split the last axis first (head j keeps its adjacent columns), then move heads before seq.
    return x.reshape(batch, seq, n_heads, d_head).swapaxes(1, 2)


def merge_heads(x):
    """(batch, n_heads, seq, d_head) -> (batch, seq, n_heads * d_head): the inverse of split_heads."""
    batch, n_heads, seq, d_head = x.shape
    return x.swapaxes(1, 2).reshape(batch, seq, n_heads * d_head)


def causal_mask(q_len, k_len):
    """Boolean mask of shape (1, 1, q_len, k_len), True where a query may attend to a key.

    Query i sits at absolute position k_len - q_len + i (the last q_len positions of the
    sequence, as in cached decoding) and may attend to every key at or before its position.
    """
    i = np.arange(q_len)[:, None]
    j = np.arange(k_len)[None, :]
    return (j <= k_len - q_len + i)[None, None]


def attention(q, k, v, mask=None):
    """Scaled dot-product attention.

    q: (b, h, q_len, d), k: (b, h, k_len, d), v: (b, h, k_len, d_v) -> (b, h, q_len, d_v).
    Scores are computed with np.einsum and scaled by 1 / sqrt(d). `mask` is boolean and
    broadcastable to (b, h, q_len, k_len); True means keep. A query with no kept key
    outputs zeros.
    """
    d = q.shape[-1]
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        scores = np.where(mask, scores, -np.inf).astype(scores.dtype)
    weights = softmax(scores, axis=-1)
    return np.einsum("bhqk,bhkv->bhqv", weights, v)


def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads=None, causal=True):
    """Multi-head self-attention of x (b, s, d_model) -> (b, s, d_model).

    Projections are x @ w: w_q (d_model, n_heads * d_head), w_k and w_v
    (d_model, n_kv_heads * d_head), w_o (n_heads * d_head, d_model). With
    n_kv_heads < n_heads (grouped-query attention) query head j uses key/value head
    j // (n_heads // n_kv_heads), as Hugging Face's repeat_kv. `causal` applies
    causal_mask(s, s).
    """
    if n_kv_heads is None:
        n_kv_heads = n_heads
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={n_kv_heads}")
    seq = x.shape[1]
    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_kv_heads)
    v = split_heads(x @ w_v, n_kv_heads)
    group = n_heads // n_kv_heads
    # Consecutive groups: kv head i serves query heads i*group ... (i+1)*group - 1 (repeat_kv).
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    mask = causal_mask(seq, seq) if causal else None
    out = attention(q, k, v, mask)
    return merge_heads(out) @ w_o


def torch_attention(q, k, v, mask=None):
    """`attention` for torch tensors, with torch.einsum; differentiable.

    Same shapes and mask convention as `attention`. The softmax runs in float32 or wider:
    bf16 and fp16 scores are upcast (bf16 on CUDA is the common case); the output has v's
    dtype. A query with no kept key outputs zeros, and its gradients are zeros, not NaN.
    """
    d = q.shape[-1]
    # Scores and softmax in float32 or wider: bf16/fp16 are upcast before the product, so the
    # scores are never rounded to a half-precision mantissa before the exponentials.
    score_dtype = torch.promote_types(torch.promote_types(q.dtype, k.dtype), torch.float32)
    q, k = q.to(score_dtype), k.to(score_dtype)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d)
    keep_row = None
    if mask is not None:
        mask = torch.as_tensor(mask, dtype=torch.bool, device=scores.device)
        scores = scores.masked_fill(~mask, float("-inf"))
        # A query with no kept key: keep its row finite (all 0) so neither pass makes NaN.
        keep_row = mask.any(dim=-1, keepdim=True)
        scores = torch.where(keep_row, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))
    weights = torch.softmax(scores, dim=-1)
    if keep_row is not None:
        weights = torch.where(keep_row, weights, 0.0)
    return torch.einsum("bhqk,bhkv->bhqv", weights.to(v.dtype), v)
