"""Mutants (realistic learner bugs) and alternative correct solutions for exercise 01, as edits of
solutions/01_einsum_attention/attention.py (the course's) or of independent/attention.py (written
from the README and stub alone, by someone who never saw the reference or this suite).
Each mutant breaks one rule its README marks. `grader audit 01` grades them all."""
from grader.running.variants import INDEPENDENT, Alternative, Independent, Mutant

COURSE_MUTANTS = [
    # ------------------------------------------------------------ Broadcasting, Stable softmax
    Mutant("broadcast_slip", rule="softmax.keepdims",
           note="sum without keepdims: (n, n) / (n,) broadcasts silently",
           edits={"total = e.sum(axis=axis, keepdims=True)": "total = e.sum(axis=axis)"}),
    Mutant("softmax_shifts_in_place", rule="softmax.input_unchanged",
           note="x -= max: the right probabilities, and the caller's logits rewritten",
           edits={"    e = np.exp(x - row_max)\n": "    x -= row_max\n    e = np.exp(x)\n"}),
    Mutant("softmax_without_max", rule="softmax.stable", note="exp of raw logits overflows",
           edits={"    e = np.exp(x - row_max)": "    e = np.exp(x)"}),
    Mutant("nan_on_fully_masked_row", rule="softmax.all_neg_inf",
           note="the textbook stable softmax: -inf - -inf = NaN",
           edits={"    row_max = np.where(np.isneginf(row_max), 0.0, row_max)   # all -inf: shift by 0, not by -inf\n": "",
                  "return e / np.where(total == 0, 1.0, total)": "return e / total"}),
    Mutant("neg_inf_as_large_negative", rule="softmax.neg_inf",
           note="-inf replaced by -1e9 (empty slices handled apart): finite logits below -1e9 lose to it",
           functions={"softmax": """
def softmax(x, axis=-1):
    x = np.asarray(x)
    empty = np.isneginf(x).all(axis=axis, keepdims=True)
    x = np.where(np.isneginf(x), -1e9, x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return np.where(empty, 0.0, e / e.sum(axis=axis, keepdims=True))
"""}),
    Mutant("softmax_squeezes", rule="softmax.shape",
           note="squeezes the result, dropping the input's own size-1 axes",
           edits={"return e / np.where(total == 0, 1.0, total)": "return (e / np.where(total == 0, 1.0, total)).squeeze()"}),
    Mutant("softmax_ignores_axis", rule="softmax.axis", note="always normalises the last axis",
           edits={"row_max = x.max(axis=axis, keepdims=True)": "row_max = x.max(axis=-1, keepdims=True)",
                  "total = e.sum(axis=axis, keepdims=True)": "total = e.sum(axis=-1, keepdims=True)"}),
    Mutant("softmax_in_float32", rule="softmax.dtype",
           note="computes in float32 to save memory: off by 1e-7 from a float64 softmax",
           edits={"    x = np.asarray(x)\n    row_max": "    x = np.asarray(x, dtype=np.float32)\n    row_max"}),
    # ------------------------------------------------------------ Heads
    Mutant("split_without_transpose", rule="heads.split_columns",
           note="reshape straight to (b, h, s, d)",
           functions={"split_heads": """
def split_heads(x, n_heads):
    batch, seq, width = x.shape
    return x.reshape(batch, n_heads, seq, width // n_heads)
"""}),
    Mutant("split_heads_interleaved", rule="heads.split_columns",
           note="(d, h) instead of (h, d): head j gets columns j, j + h, ...",
           edits={"return x.reshape(batch, seq, n_heads, width // n_heads).transpose(0, 2, 1, 3)":
                  "return x.reshape(batch, seq, width // n_heads, n_heads).transpose(0, 3, 1, 2)"}),
    Mutant("split_forgets_transpose", rule="heads.split_shape",
           note="stops at (b, s, h, d)",
           edits={"return x.reshape(batch, seq, n_heads, width // n_heads).transpose(0, 2, 1, 3)":
                  "return x.reshape(batch, seq, n_heads, width // n_heads)"}),
    Mutant("merge_in_wrong_order", rule="heads.merge", note="d before h when flattening",
           edits={"return x.transpose(0, 2, 1, 3).reshape(batch, seq, n_heads * d_head)":
                  "return x.transpose(0, 2, 3, 1).reshape(batch, seq, n_heads * d_head)"}),
    # ------------------------------------------------------------ Einsum
    Mutant("heads_summed_in_einsum", rule="einsum.batch_axes",
           note="k's head axis gets its own letter: every query head sees the sum of all key heads",
           edits={'scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale':
                  'scores = np.einsum("bhqd,bgkd->bhqk", q, k) * scale'}),
    Mutant("loop_over_batch_and_heads", rule="einsum.no_loops", note="right numbers, but a Python loop per (b, h)",
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
    Mutant("mha_loop_over_heads", rule="einsum.no_loops",
           note="right numbers, but multi_head_attention attends one head at a time",
           functions={"multi_head_attention": """
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads=None, causal=True):
    n_kv_heads = n_kv_heads or n_heads
    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_kv_heads)
    v = split_heads(x @ w_v, n_kv_heads)
    group = n_heads // n_kv_heads
    seq = x.shape[1]
    mask = causal_mask(seq, seq) if causal else None
    heads = [attention(q[:, j:j + 1], k[:, j // group:j // group + 1], v[:, j // group:j // group + 1], mask)
             for j in range(n_heads)]
    return merge_heads(np.concatenate(heads, axis=1)) @ w_o
"""}),
    Mutant("matmul_not_einsum", rule="einsum.numpy", note="right numbers, but the exercise is einsum",
           edits={'scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale': "scores = (q @ k.swapaxes(-1, -2)) * scale",
                  'return np.einsum("bhqk,bhkv->bhqv", weights, v)': "return weights @ v"}),
    Mutant("torch_matmul_not_einsum", rule="einsum.torch",
           note="right numbers, but torch_attention's scores come from @",
           edits={'scores = torch.einsum("bhqd,bhkd->bhqk", q.to(wide), k.to(wide)) * scale':
                  "scores = (q.to(wide) @ k.to(wide).transpose(-1, -2)) * scale"}),
    # ------------------------------------------------------------ Scaled dot-product attention
    Mutant("no_scale", rule="attention.scale", note="forgot the 1/sqrt(d)",
           edits={'scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale':
                  'scores = np.einsum("bhqd,bhkd->bhqk", q, k)'}),
    Mutant("softmax_over_queries", rule="attention.key_axis",
           note="softmax over the wrong axis",
           edits={"weights = softmax(scores, axis=-1)": "weights = softmax(scores, axis=-2)"}),
    Mutant("output_heads_after_queries", rule="attention.shape",
           note="returns (b, q, h, d_v), ready to merge, instead of (b, h, q, d_v)",
           edits={'return np.einsum("bhqk,bhkv->bhqv", weights, v)': 'return np.einsum("bhqk,bhkv->bqhv", weights, v)',
                  "return merge_heads(attention(q, k, v, mask)) @ w_o":
                  "return attention(q, k, v, mask).reshape(x.shape[0], seq, -1) @ w_o"}),
    Mutant("attention_in_float32", rule="attention.dtype",
           note="q, k and v cast to float32 first",
           edits={"    scale = 1.0 / math.sqrt(q.shape[-1])\n    scores = np.einsum":
                  "    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))\n"
                  "    scale = 1.0 / math.sqrt(q.shape[-1])\n    scores = np.einsum"}),
    # ------------------------------------------------------------ Masks
    Mutant("mask_after_softmax", rule="mask.before_softmax", note="zeroing probabilities instead of masking scores",
           edits={"""    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
""": """    weights = softmax(scores, axis=-1)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
"""}),
    Mutant("masked_scores_zero", rule="mask.minus_inf", note="a masked score of 0 still gets probability",
           edits={"scores = np.where(mask, scores, -np.inf)": "scores = np.where(mask, scores, 0.0)"}),
    Mutant("mask_inverted", rule="mask.keep", note="True read as 'masked out', as torch.nn.MultiheadAttention does",
           edits={"scores = np.where(mask, scores, -np.inf)": "scores = np.where(mask, -np.inf, scores)"}),
    Mutant("mask_by_boolean_index", rule="mask.broadcast",
           note="scores[~mask] = -inf: boolean indexing needs the full (b, h, q, k) shape",
           edits={"        scores = np.where(mask, scores, -np.inf)\n":
                  "        scores = scores.copy()\n        scores[~mask] = -np.inf\n"}),
    # ------------------------------------------------------------ Causal masks
    Mutant("causal_top_left", rule="causal.offset", note="tril(ones(q, k)) ignores the cache offset",
           edits={"offset = k_len - q_len": "offset = 0"}),
    Mutant("causal_mask_float", rule="causal.shape",
           note="np.tril(np.ones(...)) is float: right pattern, wrong dtype",
           functions={"causal_mask": """
def causal_mask(q_len, k_len):
    return np.tril(np.ones((q_len, k_len)), k_len - q_len)[None, None]
"""}),
    Mutant("causal_offset_clamped", rule="causal.more_queries",
           note="clamps the offset at 0: more queries than keys are aligned to the start",
           edits={"offset = k_len - q_len": "offset = max(k_len - q_len, 0)"}),
    # ------------------------------------------------------------ Multi-head and grouped-query attention
    Mutant("gqa_interleaved", rule="mha.gqa_groups", note="tile instead of repeat",
           edits={"k = np.repeat(k, group, axis=1)": "k = np.tile(k, (1, group, 1, 1))",
                  "v = np.repeat(v, group, axis=1)": "v = np.tile(v, (1, group, 1, 1))"}),
    Mutant("always_causal", rule="mha.causal", note="ignores causal=False",
           edits={"mask = causal_mask(seq, seq) if causal else None": "mask = causal_mask(seq, seq)"}),
    Mutant("weights_transposed", rule="mha.projections",
           note="x @ w.T, the (out, in) layout of torch.nn.Linear's weight",
           edits={"q = split_heads(x @ w_q, n_heads)": "q = split_heads(x @ w_q.T, n_heads)",
                  "k = split_heads(x @ w_k, n_kv_heads)": "k = split_heads(x @ w_k.T, n_kv_heads)",
                  "v = split_heads(x @ w_v, n_kv_heads)": "v = split_heads(x @ w_v.T, n_kv_heads)",
                  "return merge_heads(attention(q, k, v, mask)) @ w_o": "return merge_heads(attention(q, k, v, mask)) @ w_o.T"}),
    Mutant("kv_default_one", rule="mha.kv_default",
           note="n_kv_heads=None read as one shared kv head (multi-query attention)",
           edits={"n_kv_heads = n_kv_heads or n_heads": "n_kv_heads = n_kv_heads or 1"}),
    # ------------------------------------------------------------ Attention in torch
    Mutant("torch_mask_inverted", rule="torch.same_contract",
           note="torch's MultiheadAttention convention: True = masked out",
           edits={"scores = scores.masked_fill(~mask, float(\"-inf\"))": "scores = scores.masked_fill(mask, float(\"-inf\"))",
                  "has_key = mask.any(dim=-1, keepdim=True)": "has_key = (~mask).any(dim=-1, keepdim=True)"}),
    Mutant("torch_through_numpy", rule="torch.differentiable", note="detours through NumPy: no gradients",
           functions={"torch_attention": """
def torch_attention(q, k, v, mask=None):
    out = attention(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(),
                    None if mask is None else mask.numpy())
    return torch.from_numpy(out).to(v.dtype)
"""}),
    Mutant("torch_scores_rounded", rule="torch.float32",
           note="the score product in bf16, upcast after it: the scores are already rounded",
           edits={'scores = torch.einsum("bhqd,bhkd->bhqk", q.to(wide), k.to(wide)) * scale':
                  'scores = torch.einsum("bhqd,bhkd->bhqk", q, k).to(wide) * scale'}),
    Mutant("torch_nan_on_empty_rows", rule="torch.empty_query_output",
           note="softmax of an all -inf row is NaN",
           edits={"""        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~has_key, 0.0)    # keep the softmax finite on empty rows ...
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * has_key                   # ... and zero those rows afterwards
""": """    weights = torch.softmax(scores, dim=-1)
"""}),
    Mutant("torch_additive_mask", rule="torch.empty_query_grads",
           note="a -inf bias added to the scores, NaN replaced after the softmax: the NaN flows back through the sum",
           edits={"""        scores = scores.masked_fill(~mask, float("-inf"))
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~has_key, 0.0)    # keep the softmax finite on empty rows ...
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * has_key                   # ... and zero those rows afterwards
""": """        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
"""}),
]

# Bugs the independent author planted in their own solution, each a single edit of it.
INDEPENDENT_MUTANTS = [
    Mutant("softmax_global_max", rule="softmax.stable", base=INDEPENDENT,
           note="subtracts the global max of the whole array instead of the max along the axis",
           edits={"m = np.max(x, axis=axis, keepdims=True)": "m = np.max(x, keepdims=True)"}),
    Mutant("softmax_sum_keepdims_last_axis", rule="softmax.keepdims", base=INDEPENDENT,
           note="sums without keepdims and re-adds the axis last: for axis != -1 a square input is divided wrongly",
           edits={"total = np.sum(e, axis=axis, keepdims=True)": "total = np.expand_dims(np.sum(e, axis=axis), -1)"}),
    Mutant("softmax_all_neginf_gives_nan", rule="softmax.all_neg_inf", base=INDEPENDENT,
           note="divides by the sum without special-casing an all -inf slice (0/0 = NaN)",
           edits={"return np.where(has_mass, e / np.where(has_mass, total, 1), 0).astype(x.dtype)":
                  "return (e / total).astype(x.dtype)"}),
    Mutant("split_heads_direct_reshape", rule="heads.split_columns", base=INDEPENDENT,
           note="reshapes straight to (b, h, s, d) without the transpose",
           edits={"return x.reshape(batch, seq, n_heads, d_head).swapaxes(1, 2)":
                  "return x.reshape(batch, n_heads, seq, d_head)"}),
    Mutant("causal_mask_top_left", rule="causal.offset", base=INDEPENDENT,
           note="plain tril anchored at the top left, ignores the KV-cache offset",
           edits={"(j <= k_len - q_len + i)": "(j <= i)"}),
    Mutant("causal_mask_offset_sign", rule="causal.offset", base=INDEPENDENT,
           note="shift with the wrong sign (q_len - k_len)",
           edits={"(j <= k_len - q_len + i)": "(j <= q_len - k_len + i)"}),
    Mutant("causal_mask_excludes_diagonal", rule="causal.self", base=INDEPENDENT,
           note="strict inequality: a query may not attend to itself",
           edits={"(j <= k_len": "(j < k_len"}),
    Mutant("attention_scale_by_value_dim", rule="attention.scale", base=INDEPENDENT,
           note="scales by the square root of v's last axis (d_v) instead of the query/key head dimension d",
           edits={"    d = q.shape[-1]\n    scores = np.einsum": "    d = v.shape[-1]\n    scores = np.einsum"}),
    Mutant("attention_softmax_over_queries", rule="attention.key_axis", base=INDEPENDENT,
           note="softmax over the query axis",
           edits={"weights = softmax(scores, axis=-1)": "weights = softmax(scores, axis=-2)"}),
    Mutant("mask_large_negative_not_inf", rule="mask.empty_query", base=INDEPENDENT,
           note="fills masked scores with -1e9 instead of -inf, so a fully masked query averages all values",
           edits={"scores = np.where(mask, scores, -np.inf)": "scores = np.where(mask, scores, -1e9)"}),
    Mutant("mask_scores_set_to_zero", rule="mask.minus_inf", base=INDEPENDENT,
           note="masked scores set to 0 instead of -inf",
           edits={"scores = np.where(mask, scores, -np.inf)": "scores = np.where(mask, scores, 0)"}),
    Mutant("einsum_batch_leak", rule="einsum.batch_axes", base=INDEPENDENT,
           note="gives k's batch axis its own letter, so einsum sums keys over the batch",
           edits={'np.einsum("bhqd,bhkd->bhqk", q, k)': 'np.einsum("bhqd,xhkd->bhqk", q, k)'}),
    Mutant("scores_matmul_not_einsum", rule="einsum.numpy", base=INDEPENDENT,
           note="computes the numpy scores with @ instead of np.einsum (same values)",
           edits={'np.einsum("bhqd,bhkd->bhqk", q, k)': "(q @ k.swapaxes(-1, -2))"}),
    Mutant("gqa_tile_interleaves", rule="mha.gqa_groups", base=INDEPENDENT,
           note="expands kv heads with np.tile (interleaved) instead of np.repeat",
           edits={"k = np.repeat(k, group, axis=1)\n    v = np.repeat(v, group, axis=1)":
                  "k = np.tile(k, (1, group, 1, 1))\n    v = np.tile(v, (1, group, 1, 1))"}),
    Mutant("mha_default_not_causal", rule="mha.causal_default",
           base=INDEPENDENT, note="default causal=False, so a call without the argument is bidirectional",
           edits={"n_kv_heads=None, causal=True):": "n_kv_heads=None, causal=False):"}),
    Mutant("torch_bf16_softmax_not_upcast", rule="torch.float32", base=INDEPENDENT,
           note="never upcasts: bf16/fp16 scores go through the softmax in half precision",
           edits={"    q, k = q.to(score_dtype), k.to(score_dtype)\n": ""}),
    Mutant("torch_output_float32", rule="torch.output_dtype", base=INDEPENDENT,
           note="keeps the last product in float32 instead of casting the weights back to v's dtype",
           edits={"weights.to(v.dtype), v)": "weights, v.to(weights.dtype))"}),
    Mutant("torch_masked_row_not_zeroed", rule="torch.empty_query_output", base=INDEPENDENT,
           note="keeps fully masked rows finite but forgets to zero them: the query outputs the mean of v",
           edits={"weights = torch.where(keep_row, weights, 0.0)": "pass"}),
    Mutant("torch_numpy_softmax_detour", rule="torch.differentiable", base=INDEPENDENT,
           note="reuses the NumPy softmax via .numpy(): forward right, no gradient to q and k",
           edits={"weights = torch.softmax(scores, dim=-1)":
                  "weights = torch.from_numpy(softmax(scores.detach().numpy(), axis=-1))"}),
]

MUTANTS = COURSE_MUTANTS + INDEPENDENT_MUTANTS

ALTERNATIVES = [
    Independent(),
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
    Alternative("ellipsis_scores_matmul_output", note="scores as an einsum over `...`, the output product with @",
                edits={'scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale':
                       'scores = np.einsum("...qd,...kd->...qk", q, k) * scale',
                       'return np.einsum("bhqk,bhkv->bhqv", weights, v)': "return weights @ v"}),
    Alternative("scores_in_a_helper", note="the scores einsum in a helper, against a pre-transposed k; output by matmul",
                edits={"def attention(q, k, v, mask=None):": '''def _scores(query, key_t):
    return np.einsum("bhqd,bhdk->bhqk", query, key_t)


def attention(q, k, v, mask=None):''',
                       'scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale':
                       "scores = _scores(q, np.swapaxes(k, -1, -2)) * scale",
                       'return np.einsum("bhqk,bhkv->bhqv", weights, v)': "return np.matmul(weights, v)"}),
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
    Alternative("helper_with_a_comprehension", note="a helper of the learner's own, used by no graded function, that "
                "loops over its argument in a comprehension (only the graded functions' loops count)",
                edits={"""def causal_mask(q_len, k_len):
""": """def shapes(*arrays):
    return [np.shape(a) for a in arrays]


def causal_mask(q_len, k_len):
"""}),
    Alternative("projections_in_a_loop", note="the three projections in a comprehension over a written-out tuple",
                edits={"""    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_kv_heads)
    v = split_heads(x @ w_v, n_kv_heads)
""": """    q, k, v = (split_heads(x @ w, n) for w, n in zip((w_q, w_k, w_v), (n_heads, n_kv_heads, n_kv_heads)))
"""}),
    Alternative("softmax_nan_to_num", note="the NaN of an all -inf slice replaced after the division",
                functions={"softmax": '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return np.nan_to_num(e / e.sum(axis=axis, keepdims=True))
'''}),
    Alternative("tri_mask", note="np.tri with a diagonal offset",
                functions={"causal_mask": """
def causal_mask(q_len, k_len):
    return np.tri(q_len, k_len, k_len - q_len, dtype=bool)[None, None]
"""}),
    Alternative("torch_float32_throughout", note="every dtype computed in float32 (float64 too), cast back to v's",
                edits={"wide = torch.promote_types(q.dtype, torch.float32)": "wide = torch.float32",
                       'return torch.einsum("bhqk,bhkv->bhqv", weights.to(v.dtype), v)':
                       'return torch.einsum("bhqk,bhkv->bhqv", weights, v.to(wide)).to(v.dtype)'}),
    Alternative("torch_finfo_min", note="masked scores at the dtype's minimum, not -inf; empty rows zeroed after",
                functions={"torch_attention": '''
def torch_attention(q, k, v, mask=None):
    wide = torch.promote_types(q.dtype, torch.float32)
    scores = torch.einsum("bhqd,bhkd->bhqk", q.to(wide), k.to(wide)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(wide).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask.any(dim=-1, keepdim=True)
    return torch.einsum("bhqk,bhkv->bhqv", weights.to(v.dtype), v)
'''}),
    Alternative("torch_where_after_softmax", note="NaN rows replaced after the softmax (the mask filled, not added)",
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


# Operator mutants (grader audit 01 --operators) that no test can kill, each with the reason: they
# change nothing a learner could observe.
EQUIVALENT = {
    'softmax: row_max = np.where(np.isneginf(row_max), 0.0, row_max) -> row_max = np.where(np.isneginf(row_max), 1.0, row_max)':
        "an all -inf row's shift only has to be finite: exp(-inf - c) is 0 for any finite c",
    'softmax: return e / np.where(total == 0, 1.0, total) -> return e / np.where(total == 0, 2.0, total)':
        'the divisor changes only where every exponential is 0, and 0 / c is 0 for any c but 0',
    'split_heads: raise ValueError(f"last axis {width} is not divisible by n_heads={n_heads}") -> raise ValueError(None)':
        'the README leaves a width that does not divide to the learner (raising is a habit, not a rule)',
    'attention: scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale -> scores = np.einsum("BHQD,BHKD->BHQK", q, k) * scale':
        'einsum reads upper-case letters as labels as it does lower-case ones',
    'attention: weights = softmax(scores, axis=-1) -> weights = softmax(scores, )':
        "softmax's axis defaults to -1",
    'attention: return np.einsum("bhqk,bhkv->bhqv", weights, v) -> return np.einsum("BHQK,BHKV->BHQV", weights, v)':
        'einsum reads upper-case letters as labels as it does lower-case ones',
    'multi_head_attention: raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={n_kv_heads}") -> raise ValueError(None)':
        "the README guarantees n_heads is a multiple of n_kv_heads: what happens otherwise is the learner's",
    'multi_head_attention: group = n_heads // n_kv_heads -> group = n_heads / n_kv_heads':
        'n_heads is always a multiple of n_kv_heads (the README), and np.repeat takes 2.0 as 2',
    'torch_attention: scores = torch.einsum("bhqd,bhkd->bhqk", q.to(wide), k.to(wide)) * scale -> scores = torch.einsum("BHQD,BHKD->BHQK", q.to(wide), k.to(wide)) * scale':
        'einsum reads upper-case letters as labels as it does lower-case ones',
    'torch_attention: scores = scores.masked_fill(~mask, float("-inf")) -> scores = scores.masked_fill(~mask, float("-INF"))':
        'float() reads -inf in any case',
    'torch_attention: scores = scores.masked_fill(~has_key, 0.0) -> scores = scores.masked_fill(~has_key, 1.0)':
        'a row with no key is filled only to keep its softmax finite (any constant does), and is zeroed after',
    'torch_attention: return torch.einsum("bhqk,bhkv->bhqv", weights.to(v.dtype), v) -> return torch.einsum("BHQK,BHKV->BHQV", weights.to(v.dtype), v)':
        'einsum reads upper-case letters as labels as it does lower-case ones',
}
