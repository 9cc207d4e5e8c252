"""Visible tests for exercise 01. Run: pytest exercises/01_einsum_attention

One or more checks per README section, each aimed at the bug people make there, against
PyTorch's own attention (F.scaled_dot_product_attention, nn.MultiheadAttention). The graded
suite checks much more (other shapes, every mask shape, extreme logits, drawn sizes); a pass
here is a start, not a grade.
"""
import ast

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from grader.course import COURSE
from grader.suite.checks import assert_close, assert_equal, check_array, sibling_module

# Seconds for a test of quick calls: its own work is milliseconds, but the first test of a task also
# waits for the worker that runs your module to start (4 s on a 2-core machine at load 2, several
# times that on a loaded one).
QUICK = 30

# by path: a notebook has no __file__
probes = sibling_module(COURSE.exercises / "01_einsum_attention" / "test_attention.py", "probes")

TOL = dict(rtol=1e-9, atol=1e-12)   # float64 throughout: only summation order differs
TORCH_TOL = dict(rtol=1e-4, atol=1e-6)   # torch_attention may compute in float32 ("float32 or wider")
# logits near -1e10 sit on a float64 grid of 1.9e-6: a log-sum-exp softmax is off by about that; a
# finite stand-in for -inf (-1e9, say) takes all the weight, off by 0.7.
FAR_BELOW_ZERO = dict(rtol=0.0, atol=1e-5)
# bf16 inputs with scores near 60, against float32 attention of the same rounded inputs: scores
# upcast before the product stay within ~0.01; scores rounded to bf16 first are off by 0.1 and more.
BF16_TOL = dict(rtol=0.0, atol=3e-2)


def normal(seed, *shape, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def sdpa(q, k, v, mask=None):
    """The oracle: torch's attention in float64, with the README's convention that a query with
    no kept key outputs zeros."""
    q, k, v = (torch.from_numpy(np.array(x)) for x in (q, k, v))
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v).numpy()
    keep = torch.from_numpy(np.broadcast_to(mask, q.shape[:-1] + k.shape[-2:-1]).copy())
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    return torch.where(keep.any(-1, keepdim=True), out, torch.zeros(())).numpy()


# ---------------------------------------------------------------- softmax and broadcasting

@pytest.mark.points(0.5)
@pytest.mark.concept("Stable softmax")
@pytest.mark.timeout(QUICK)
def test_softmax_rows_sum_to_one(submission):
    """softmax of a small matrix matches exp(x) / sum(exp(x)) row by row"""
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    expected = np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)
    assert_close(submission.softmax(x), expected, what="softmax(x)", **TOL)


@pytest.mark.points(0.5)
@pytest.mark.concept("Stable softmax")
@pytest.mark.timeout(QUICK)
def test_softmax_ignores_minus_infinity(submission):
    """-inf gets probability 0, also beside finite logits near -1e10 (-inf is not a large negative number), and an
    all -inf row gives zeros, not NaN"""
    x = np.array([[0.0, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf]])
    assert_close(submission.softmax(x), np.array([[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]]), what="softmax(x)", **TOL)
    far = np.array([-1e10, -np.inf, -1e10 - 1.0])
    expected = np.array([1.0, 0.0, np.exp(-1.0)]) / (1.0 + np.exp(-1.0))
    assert_close(submission.softmax(far), expected, what="softmax([-1e10, -inf, -1e10 - 1])", **FAR_BELOW_ZERO)


@pytest.mark.points(1)
@pytest.mark.concept("Stable softmax")
@pytest.mark.timeout(QUICK)
def test_softmax_of_huge_logits_along_any_axis(submission):
    """logits in the hundreds, positive and negative, along axis 1 and the last: no overflow, float64 in and out,
    the input's shape (size-1 axes kept)"""
    for x, axis in ((normal(11, 3, 4, 2, scale=700.0), 1), (normal(11, 3, 4, 2, scale=700.0), -1),
                    (normal(15, 2, 1, 5, scale=300.0), 1)):
        got = submission.softmax(x, axis=axis)
        check_array(got, what=f"softmax(700 * x, axis={axis})", shape=x.shape, dtype=np.float64)
        assert_close(got, torch.softmax(torch.from_numpy(x), dim=axis).numpy(), what=f"softmax(700 * x, axis={axis})",
                     **TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Broadcasting")
@pytest.mark.timeout(QUICK)
def test_softmax_of_square_inputs(submission):
    """square slices, where dividing by a sum without keepdims lines up with the wrong axis and fails nothing"""
    for x, axis in ((normal(12, 6, 6, scale=2.0), 0), (normal(13, 6, 6, scale=2.0), -1), (normal(14, 3, 3, 3), 1)):
        assert_close(submission.softmax(x, axis=axis), torch.softmax(torch.from_numpy(x), dim=axis).numpy(),
                     what=f"softmax(x of shape {x.shape}, axis={axis})", **TOL)


# ---------------------------------------------------------------- heads and einsum

@pytest.mark.points(1)
@pytest.mark.concept("Heads: reshape and transpose")
@pytest.mark.timeout(QUICK)
def test_split_heads_shape_and_round_trip(submission):
    """split_heads gives (batch, heads, seq, d_head) and merge_heads undoes it"""
    x = np.arange(2 * 3 * 8, dtype=np.float64).reshape(2, 3, 8)
    heads = submission.split_heads(x, 4)
    assert_equal(heads[0, 1, 2], x[0, 2, 2:4], what="split_heads(x, 4)[0, 1, 2] (head 1 of token 2)")
    assert_equal(submission.merge_heads(heads), x, what="merge_heads(split_heads(x, 4))")


@pytest.mark.points(1)
@pytest.mark.concept("Einsum")
@pytest.mark.timeout(QUICK)
def test_batch_elements_and_heads_do_not_mix(submission):
    """changing batch element 1 and head 2 changes nothing in the other (batch, head) pairs"""
    q, k, v = normal(21, 2, 3, 5, 4), normal(22, 2, 3, 2, 4), normal(23, 2, 3, 2, 3)
    before = submission.attention(q, k, v)
    assert_close(before, sdpa(q, k, v), what="attention(q, k, v)", **TOL)
    for b, h in ((1, slice(None)), (slice(None), 2)):
        changed = [x.copy() for x in (q, k, v)]
        for x in changed:
            x[b, h] *= -3.0
        after = submission.attention(*changed)
        untouched = (slice(0, 1), slice(None)) if b == 1 else (slice(None), slice(0, 2))
        assert_close(after[untouched], before[untouched], what="attention of the (batch, head) pairs whose inputs "
                     f"did not change, after changing {'batch element 1' if b == 1 else 'head 2'}", **TOL)


def _calls_and_loops(path):
    """Per top-level function: the top-level functions it names, whether it calls an einsum, and the
    loops over data it runs (a loop over a collection written out in the source, or over range() of
    constants, is not over data)."""
    tree = ast.parse(path.read_bytes())     # bytes: Python honours a PEP 263 coding line
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}

    def written_out(node):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "range":
                return all(isinstance(arg, ast.Constant) for arg in node.args)
            return node.func.id in ("zip", "enumerate", "reversed") and all(map(written_out, node.args))
        return False

    found = {}
    for name, node in functions.items():
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        einsum = any(isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) == "einsum"
                     for n in ast.walk(node))
        loops = [(n.iter if isinstance(n, ast.comprehension) else n).lineno     # a comprehension has no line
                 for n in ast.walk(node) if isinstance(n, ast.While)
                 or (isinstance(n, (ast.For, ast.comprehension)) and not written_out(n.iter))]
        found[name] = (names & set(functions), einsum, loops)
    return found


def _reached(found, start):
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in found and name not in seen:
            seen.add(name)
            todo += found[name][0]
    return seen


@pytest.mark.points(1)
@pytest.mark.concept("Einsum")
@pytest.mark.timeout(QUICK)
def test_einsum_and_no_loops_over_batch_or_heads(submission):
    """read from your source, once attention and torch_attention compute the right values: they (or what they call)
    call einsum; they and multi_head_attention run no Python loop over data"""
    q, k, v = normal(24, 1, 2, 3, 4), normal(25, 1, 2, 3, 4), normal(26, 1, 2, 3, 4)
    why = " (the source is read once the values are right)"
    assert_close(submission.attention(q, k, v), sdpa(q, k, v), what="attention" + why, **TOL)
    assert_close(submission.torch_attention(*(torch.from_numpy(x) for x in (q, k, v))), sdpa(q, k, v), tensor=True,
                 what="torch_attention" + why, **TORCH_TOL)
    found = _calls_and_loops(submission.module_path)
    for function in ("attention", "torch_attention"):
        assert function in found, f"{submission.module_path.name} defines no function {function}"
        assert any(found[name][1] for name in _reached(found, function)), \
            f"{function} computes with no einsum call (np.einsum / torch.einsum): the exercise is einsum"
    for function in ("attention", "torch_attention", "multi_head_attention"):
        for name in sorted(_reached(found, function)):
            assert not found[name][2], (f"{name} (used by {function}) loops over data at line {found[name][2][0]}: let "
                                        "einsum and broadcasting handle batch and heads")


# ---------------------------------------------------------------- masks and attention

@pytest.mark.points(0.5)
@pytest.mark.concept("Causal masks")
@pytest.mark.timeout(QUICK)
def test_causal_mask_square(submission):
    """causal_mask(3, 3) is lower triangular with shape (1, 1, 3, 3)"""
    expected = np.tril(np.ones((3, 3), dtype=bool))[None, None]
    assert_equal(submission.causal_mask(3, 3), expected, what="causal_mask(3, 3)")


@pytest.mark.points(1)
@pytest.mark.concept("Causal masks")
@pytest.mark.timeout(QUICK)
def test_causal_mask_of_cached_decoding(submission):
    """2 new queries over 5 cached keys sit at positions 3 and 4; 4 queries over 2 keys: the first two see nothing"""
    decode = submission.causal_mask(2, 5)
    check_array(decode, what="causal_mask(2, 5)", shape=(1, 1, 2, 5), dtype=np.bool_)
    assert_equal(decode[0, 0], np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=bool), what="causal_mask(2, 5)")
    assert_equal(submission.causal_mask(4, 2)[0, 0], np.array([[0, 0], [0, 0], [1, 0], [1, 1]], dtype=bool),
                 what="causal_mask(4, 2)")


@pytest.mark.points(0.5)
@pytest.mark.concept("Scaled dot-product attention")
@pytest.mark.timeout(QUICK)
def test_attention_matches_pytorch(submission):
    """attention agrees with torch's scaled_dot_product_attention on a small causal case"""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 4, 8)) for _ in range(3))
    mask = np.tril(np.ones((4, 4), dtype=bool))[None, None]
    expected = F.scaled_dot_product_attention(*(torch.from_numpy(t) for t in (q, k, v)),
                                              attn_mask=torch.from_numpy(mask)).numpy()
    assert_close(submission.attention(q, k, v, mask), expected, what="attention(q, k, v, mask)", **TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Scaled dot-product attention")
@pytest.mark.timeout(QUICK)
def test_attention_scales_by_the_key_dimension_over_the_keys(submission):
    """4 queries over 6 keys, d=5, d_v=2: scaled by 1/sqrt(5), softmax over the keys, output (b, h, 4, 2) float64"""
    q, k, v = normal(31, 2, 3, 4, 5), normal(32, 2, 3, 6, 5, scale=2.0), normal(33, 2, 3, 6, 2)
    got = submission.attention(q, k, v)
    check_array(got, what="attention(q, k, v)", shape=(2, 3, 4, 2), dtype=np.float64)
    assert_close(got, sdpa(q, k, v), what="attention(q, k, v) with d=5 and d_v=2", **TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Masks")
@pytest.mark.timeout(QUICK)
def test_attention_with_padding_head_and_2d_masks(submission):
    """a padding mask (b, 1, 1, k), a per-head mask (1, h, q, k) and a (q, k) mask, True = keep; a query with no kept
    key outputs zeros"""
    q, k, v = normal(41, 3, 2, 5, 4), normal(42, 3, 2, 4, 4), normal(43, 3, 2, 4, 3)
    padding = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=bool)[:, None, None, :]
    per_head = np.random.default_rng(44).random((1, 2, 5, 4)) < 0.5
    per_head[0, 1, 3] = False                       # this query keeps no key
    plain = np.random.default_rng(45).random((5, 4)) < 0.7
    for mask in (padding, per_head, plain):
        assert_close(submission.attention(q, k, v, mask), sdpa(q, k, v, mask),
                     what=f"attention with a mask of shape {mask.shape}", **TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Multi-head and grouped-query attention")
@pytest.mark.timeout(QUICK)
def test_multi_head_attention_against_torch_module(submission):
    """3 heads of 2 over d_model=6: nn.MultiheadAttention with the same weights, causal when not told, and with
    causal=False"""
    x = normal(51, 2, 4, 6)
    w_q, w_k, w_v, w_o = (normal(52 + i, 6, 6, scale=0.4) for i in range(4))
    module = torch.nn.MultiheadAttention(6, 3, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.from_numpy(np.concatenate([w_q.T, w_k.T, w_v.T])))
        module.out_proj.weight.copy_(torch.from_numpy(w_o.T))
        tokens = torch.from_numpy(x)
        future = torch.ones(4, 4, dtype=torch.bool).triu(1)           # nn.MultiheadAttention: True = may NOT attend
        causal = module(tokens, tokens, tokens, attn_mask=future, need_weights=False)[0].numpy()
        full = module(tokens, tokens, tokens, need_weights=False)[0].numpy()
    assert_close(submission.multi_head_attention(x, w_q, w_k, w_v, w_o, 3), causal,
                 what="multi_head_attention(x, ..., 3) (causal by default)", **TOL)
    assert_close(submission.multi_head_attention(x, w_q, w_k, w_v, w_o, 3, causal=False), full,
                 what="multi_head_attention(x, ..., 3, causal=False)", **TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Multi-head and grouped-query attention")
@pytest.mark.timeout(QUICK)
def test_grouped_query_attention_shares_kv_heads_in_consecutive_groups(submission):
    """4 query heads over 2 key/value heads: heads 0-1 use kv head 0, heads 2-3 kv head 1, as SDPA's enable_gqa"""
    x = normal(61, 1, 5, 7)
    w_q, w_k, w_v, w_o = normal(62, 7, 12, scale=0.4), normal(63, 7, 6, scale=0.4), normal(64, 7, 6), normal(65, 12, 7)
    def heads(y, n):
        return torch.from_numpy(y).reshape(1, 5, n, 3).transpose(1, 2)
    out = F.scaled_dot_product_attention(heads(x @ w_q, 4), heads(x @ w_k, 2), heads(x @ w_v, 2), is_causal=True,
                                         enable_gqa=True)
    expected = out.transpose(1, 2).reshape(1, 5, 12).numpy() @ w_o
    got = submission.multi_head_attention(x, w_q, w_k, w_v, w_o, 4, n_kv_heads=2)
    assert_close(got, expected, what="multi_head_attention(..., n_heads=4, n_kv_heads=2)", **TOL)


# ---------------------------------------------------------------- torch

@pytest.mark.points(0.5)
@pytest.mark.concept("Attention in torch")
@pytest.mark.timeout(QUICK)
def test_torch_attention_matches_numpy_version(submission):
    """torch_attention returns a tensor that agrees with scaled_dot_product_attention"""
    q, k, v = torch.randn(3, 2, 2, 3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    expected = F.scaled_dot_product_attention(q, k, v)
    assert_close(submission.torch_attention(q, k, v), expected, what="torch_attention(q, k, v)", tensor=True, **TORCH_TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Attention in torch")
@pytest.mark.timeout(QUICK)
def test_torch_attention_gradients_and_a_fully_masked_query(submission):
    """gradients equal SDPA's; a query with no kept key outputs zeros and gets zero, finite gradients"""
    generator = torch.Generator().manual_seed(71)
    q, k, v = (torch.randn(1, 2, 3, 4, dtype=torch.float64, generator=generator) for _ in range(3))
    upstream = torch.randn(1, 2, 3, 4, dtype=torch.float64, generator=generator)
    mask = torch.tensor([[True, True, False], [True, False, True], [False, False, False]])
    got = submission.probe(probes.attention_gradients, q, k, v, mask, upstream)
    assert got["grads"] is not None, "torch_attention's output carries no graph: stay in torch (no .numpy(), no .detach())"
    assert_close(got["output"][:, :, 2], torch.zeros(1, 2, 4), what="output of the query with no kept key", tensor=True,
                 **TORCH_TOL)
    for name, grad in zip("qkv", got["grads"]):
        assert torch.isfinite(grad).all(), f"d/d{name} holds NaN or inf: the fully masked row leaks into backward"
    kept = mask[:2]                                  # the rows SDPA defines
    leaves = [x[:, :, :2].clone().requires_grad_(True) for x in (q,)] + [x.clone().requires_grad_(True) for x in (k, v)]
    expected = F.scaled_dot_product_attention(*leaves, attn_mask=kept)
    torch.autograd.backward(expected, grad_tensors=upstream[:, :, :2])
    assert_close(got["grads"][0][:, :, :2], leaves[0].grad, what="d/dq of the queries that keep keys", tensor=True,
                 **TORCH_TOL)
    assert_close(got["grads"][0][:, :, 2], torch.zeros(1, 2, 4), what="d/dq of the fully masked query", tensor=True,
                 **TORCH_TOL)
    for name, grad, leaf in zip("kv", got["grads"][1:], leaves[1:]):
        assert_close(grad, leaf.grad, what=f"d/d{name}", tensor=True, **TORCH_TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Attention in torch")
@pytest.mark.timeout(QUICK)
def test_torch_attention_in_bf16_with_large_scores(submission):
    """bf16 inputs whose scores are near 60: the output stays bf16 and as accurate as float32 scores allow"""
    generator = torch.Generator().manual_seed(81)
    q, k = torch.randn(1, 2, 6, 8, generator=generator), torch.randn(1, 2, 9, 8, generator=generator)
    q[..., :2] = k[..., :2] = 9.0                   # a common offset of 162 / sqrt(8) in every score
    v = torch.randn(1, 2, 9, 3, generator=generator)
    q, k, v = (x.bfloat16() for x in (q, k, v))
    got = submission.torch_attention(q, k, v)
    check_array(got, what="torch_attention on bf16 inputs", shape=(1, 2, 6, 3), dtype=torch.bfloat16, tensor=True)
    assert_close(got, F.scaled_dot_product_attention(q.float(), k.float(), v.float()), tensor=True,
                 what="torch_attention on bf16 inputs with large scores (upcast q and k before the score product)",
                 **BF16_TOL)
