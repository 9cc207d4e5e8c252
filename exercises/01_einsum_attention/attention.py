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
    never NaN. Returns an array of the same shape as `x`; float64 in, float64 out.
    """
    raise NotImplementedError('see README.md, section "Stable softmax"')


def split_heads(x, n_heads):
    """(batch, seq, n_heads * d_head) -> (batch, n_heads, seq, d_head).

    Head j holds columns j * d_head ... (j + 1) * d_head - 1 of the last axis.
    """
    raise NotImplementedError('see README.md, section "Heads: reshape and transpose"')


def merge_heads(x):
    """(batch, n_heads, seq, d_head) -> (batch, seq, n_heads * d_head): the inverse of split_heads."""
    raise NotImplementedError('see README.md, section "Heads: reshape and transpose"')


def causal_mask(q_len, k_len):
    """Boolean mask of shape (1, 1, q_len, k_len), True where a query may attend to a key.

    Query i sits at absolute position k_len - q_len + i (the last q_len positions of the
    sequence, as in cached decoding) and may attend to every key at or before its position.
    """
    raise NotImplementedError('see README.md, section "Causal masks"')


def attention(q, k, v, mask=None):
    """Scaled dot-product attention.

    q: (b, h, q_len, d), k: (b, h, k_len, d), v: (b, h, k_len, d_v) -> (b, h, q_len, d_v).
    Scores are computed with np.einsum and scaled by 1 / sqrt(d). `mask` is boolean and
    broadcastable to (b, h, q_len, k_len); True means keep. A query with no kept key
    outputs zeros. float64 in, float64 out.
    """
    raise NotImplementedError('see README.md, section "Scaled dot-product attention"')


def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads=None, causal=True):
    """Multi-head self-attention of x (b, s, d_model) -> (b, s, d_model).

    Projections are x @ w: w_q (d_model, n_heads * d_head), w_k and w_v
    (d_model, n_kv_heads * d_head), w_o (n_heads * d_head, d_model). With
    n_kv_heads < n_heads (grouped-query attention) query head j uses key/value head
    j // (n_heads // n_kv_heads), as Hugging Face's repeat_kv; n_kv_heads=None means
    n_kv_heads = n_heads. `causal` applies causal_mask(s, s).
    """
    raise NotImplementedError('see README.md, section "Multi-head and grouped-query attention"')


def torch_attention(q, k, v, mask=None):
    """`attention` for torch tensors, with torch.einsum; differentiable.

    Same shapes and mask convention as `attention` (the mask a torch bool tensor). The scores
    and the softmax run in float32 or wider: bf16 and fp16 q and k are upcast before the score
    product (bf16 on CUDA is the common case); the output has v's dtype. A query with no kept
    key outputs zeros, and its gradients are zeros, not NaN.
    """
    raise NotImplementedError('see README.md, section "Attention in torch"')
