"""Mutants (realistic learner bugs) and alternative correct solutions for exercise 01, as
edits of solutions/01_einsum_attention/attention.py. `grader audit 01` grades them all."""
from grader.running.variants import Alternative, Mutant

MUTANTS = [
    Mutant("no_scale", "Scaled dot-product attention", note="forgot the 1/sqrt(d)",
           edits={'scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale':
                  'scores = np.einsum("bhqd,bhkd->bhqk", q, k)'}),
    Mutant("softmax_over_queries", "Scaled dot-product attention", note="softmax over the wrong axis",
           edits={"weights = softmax(scores, axis=-1)": "weights = softmax(scores, axis=-2)"}),
    Mutant("softmax_without_max", "Stable softmax", note="exp of raw logits overflows",
           edits={"    e = np.exp(x - row_max)": "    e = np.exp(x)"}),
    Mutant("nan_on_fully_masked_row", "Stable softmax", note="the textbook stable softmax: -inf - -inf = NaN",
           edits={"    row_max = np.where(np.isneginf(row_max), 0.0, row_max)   # all -inf: shift by 0, not by -inf\n": "",
                  "return e / np.where(total == 0, 1.0, total)": "return e / total"}),
    Mutant("broadcast_slip", "Broadcasting", note="sum without keepdims: (n, n) / (n,) broadcasts silently",
           edits={"total = e.sum(axis=axis, keepdims=True)": "total = e.sum(axis=axis)"}),
    Mutant("mask_after_softmax", "Masks", note="zeroing probabilities instead of masking scores",
           edits={"""    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
""": """    weights = softmax(scores, axis=-1)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
"""}),
    Mutant("masked_scores_zero", "Masks", note="a masked score of 0 still gets probability",
           edits={"scores = np.where(mask, scores, -np.inf)": "scores = np.where(mask, scores, 0.0)"}),
    Mutant("split_without_transpose", "Heads: reshape and transpose", note="reshape straight to (b, h, s, d)",
           functions={"split_heads": """
def split_heads(x, n_heads):
    batch, seq, width = x.shape
    return x.reshape(batch, n_heads, seq, width // n_heads)
"""}),
    Mutant("merge_in_wrong_order", "Heads: reshape and transpose", note="d before h when flattening",
           edits={"return x.transpose(0, 2, 1, 3).reshape(batch, seq, n_heads * d_head)":
                  "return x.transpose(0, 2, 3, 1).reshape(batch, seq, n_heads * d_head)"}),
    Mutant("causal_top_left", "Causal masks", note="tril(ones(q, k)) ignores the cache offset",
           edits={"offset = k_len - q_len": "offset = 0"}),
    Mutant("gqa_interleaved", "Multi-head and grouped-query attention", note="tile instead of repeat",
           edits={"k = np.repeat(k, group, axis=1)": "k = np.tile(k, (1, group, 1, 1))",
                  "v = np.repeat(v, group, axis=1)": "v = np.tile(v, (1, group, 1, 1))"}),
    Mutant("always_causal", "Multi-head and grouped-query attention", note="ignores causal=False",
           edits={"mask = causal_mask(seq, seq) if causal else None": "mask = causal_mask(seq, seq)"}),
    Mutant("loop_over_batch_and_heads", "Einsum", note="right numbers, but a Python loop per (b, h)",
           functions={"attention": """
def attention(q, k, v, mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = np.zeros(q.shape[:-1] + v.shape[-1:])
    if mask is not None:
        mask = np.broadcast_to(mask, q.shape[:-1] + k.shape[-2:-1])
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = np.einsum("qd,kd->qk", q[b, h], k[b, h]) * scale
            if mask is not None:
                scores = np.where(mask[b, h], scores, -np.inf)
            out[b, h] = softmax(scores, axis=-1) @ v[b, h]
    return out
"""}),
    Mutant("matmul_not_einsum", "Einsum", note="right numbers, but the exercise is einsum",
           edits={'scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale': "scores = (q @ k.swapaxes(-1, -2)) * scale",
                  'return np.einsum("bhqk,bhkv->bhqv", weights, v)': "return weights @ v"}),
    Mutant("torch_nan_on_empty_rows", "Attention in torch", note="softmax of an all -inf row is NaN",
           edits={"""        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~has_key, 0.0)    # keep the softmax finite on empty rows ...
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * has_key                   # ... and zero those rows afterwards
""": """    weights = torch.softmax(scores, dim=-1)
"""}),
    Mutant("torch_through_numpy", "Attention in torch", note="detours through NumPy: no gradients",
           functions={"torch_attention": """
def torch_attention(q, k, v, mask=None):
    out = attention(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(),
                    None if mask is None else mask.numpy())
    return torch.from_numpy(out).to(v.dtype)
"""}),
]

ALTERNATIVES = [
    Alternative("log_sum_exp_softmax", note="softmax as exp(x - logsumexp(x))",
                functions={"softmax": """
def softmax(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    lse = np.where(np.isneginf(lse), 0.0, lse)
    return np.exp(x - lse)
"""}),
    Alternative("einsum_everywhere", note="heads moved with einsum / swapaxes, optimize=True contractions",
                functions={"split_heads": """
def split_heads(x, n_heads):
    batch, seq, width = x.shape
    return np.einsum("bshd->bhsd", x.reshape(batch, seq, n_heads, width // n_heads))
""", "merge_heads": """
def merge_heads(x):
    batch, n_heads, seq, d_head = x.shape
    return np.swapaxes(x, 1, 2).reshape(batch, seq, -1)
"""}, edits={'np.einsum("bhqd,bhkd->bhqk", q, k)': 'np.einsum("bhqd,bhkd->bhqk", q, k, optimize=True)',
             'np.einsum("bhqk,bhkv->bhqv", weights, v)': 'np.einsum("bhqk,bhkv->bhqv", weights, v, optimize=True)'}),
    Alternative("grouped_queries", note="GQA by grouping query heads instead of repeating k and v",
                functions={"multi_head_attention": """
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads=None, causal=True):
    n_kv = n_kv_heads or n_heads
    group = n_heads // n_kv
    batch, seq, _ = x.shape
    q = split_heads(x @ w_q, n_heads)
    q = q.reshape(batch, n_kv, group, seq, q.shape[-1])
    k, v = split_heads(x @ w_k, n_kv), split_heads(x @ w_v, n_kv)
    scores = np.einsum("bngqd,bnkd->bngqk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(causal_mask(seq, seq)[:, :, None], scores, -np.inf)
    out = np.einsum("bngqk,bnkd->bngqd", softmax(scores), v)
    return merge_heads(out.reshape(batch, n_heads, seq, -1)) @ w_o
"""}),
    Alternative("tri_mask", note="np.tri with a diagonal offset",
                functions={"causal_mask": """
def causal_mask(q_len, k_len):
    return np.tri(q_len, k_len, k_len - q_len, dtype=bool)[None, None]
"""}),
    Alternative("torch_where_after_softmax", note="NaN rows replaced after the softmax",
                functions={"torch_attention": """
def torch_attention(q, k, v, mask=None):
    scores = torch.einsum("bhqd,bhkd->bhqk", q.float() if q.dtype != torch.float64 else q,
                          k.float() if k.dtype != torch.float64 else k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.where(torch.isnan(weights), torch.zeros_like(weights), weights)
    return torch.einsum("bhqk,bhkv->bhqv", weights.to(v.dtype), v)
"""}),
]
