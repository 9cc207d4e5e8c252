"""Hidden suite for exercise 01 (einsum attention). PYTEST_DONT_REWRITE

Oracles are PyTorch's own: torch.softmax, F.scaled_dot_product_attention (with enable_gqa for
grouped-query attention) and torch.nn.MultiheadAttention, all in float64. Shapes are drawn
with all-distinct sizes so that a transposed axis cannot pass by coincidence. How the code is
written (einsum for the scores, no loops over batch or heads) is read from the learner's source
file in this process (`structure.py`), never observed beside the running code.

Order: the source checks and fixed inputs first, the hypothesis tests last, so that an audit
stopping at a mutant's first failing test of its concept rarely pays for the slow ones.
Tolerances: each states the largest error a correct solution shows (the reference, the
alternatives and the independent solution, over seeds 0-4) and the smallest error of the
nearest mutant the test kills, as a multiple of the tolerance.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given
from hypothesis import strategies as st

from grader.suite.checks import GRADING, assert_close, assert_equal, check_array, sibling_module

probes = sibling_module(__file__, "probes")
structure = sibling_module(__file__, "structure")

# float64 in and out, only the order of summation differs: correct solutions reach 3e-4 of this
# tolerance at most; the nearest killed mutants 3e+8 and more (an inf or NaN where a value belongs
# counts as infinitely far).
EXACT = dict(rtol=1e-9, atol=1e-12)
# logits near -1e12 sit on a float64 grid of 1.2e-4: a log-sum-exp softmax is off by up to 0.05 of
# this; a finite stand-in for -inf (-1e9) takes all the weight, 930 times this.
FAR_BELOW_ZERO = dict(rtol=0.0, atol=1e-3)
# torch_attention may compute in float32 on float64 inputs ("float32 or wider"): such a solution
# reaches 0.075 of this, one in float64 3e-10; the nearest killed mutant (a NumPy detour, whose
# gradients are missing) 1e+4 and more.
TORCH = dict(rtol=1e-4, atol=1e-6)
# bf16 and fp16 inputs against float32 SDPA of the same rounded inputs, with scores near 64 where a
# bf16 score is off by up to 0.25: correct solutions (scores upcast before the product) reach 0.15
# / 0.13 of these; the nearest mutant (the score product in bf16 / fp16, upcast after it) 7.6 / 6.8.
LOW_PRECISION = {torch.bfloat16: dict(rtol=0.0, atol=2e-2), torch.float16: dict(rtol=0.0, atol=3e-3)}
# bf16 on CUDA against float32 SDPA, mainly a dtype and device check. Measured with the CPU's bf16
# (no GPU at hand): correct solutions reach 0.28 of this, an inverted mask 92; the precision rule
# is LOW_PRECISION's, as scores of this test's size hide the rounding (the mutants reach 0.28 too).
BF16 = dict(rtol=3e-2, atol=3e-2)


def distinct(n, low=2, high=9):
    """n different sizes, none of them 1, so no axis can stand in for another."""
    return st.lists(st.integers(low, high), min_size=n, max_size=n, unique=True)


def normal(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def t(array):
    return torch.from_numpy(np.array(array))     # a writable copy


def softmax_oracle(x, axis):
    out = torch.softmax(t(x), dim=axis).numpy()
    return np.nan_to_num(out, nan=0.0)           # torch gives NaN on an all -inf slice; the contract says 0


def attention_oracle(q, k, v, mask=None):
    if mask is None:
        return F.scaled_dot_product_attention(t(q), t(k), t(v)).numpy()
    mask = np.broadcast_to(mask, q.shape[:-1] + (k.shape[-2],))
    out = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=t(mask)).numpy()
    return np.where(mask.any(axis=-1, keepdims=True), out, 0.0)   # a query with no kept key outputs zeros


def mha_oracle(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, causal):
    batch, seq, _ = x.shape

    def heads(y, n):
        return y.view(batch, seq, n, -1).transpose(1, 2)

    q, k, v = heads(t(x) @ t(w_q), n_heads), heads(t(x) @ t(w_k), n_kv_heads), heads(t(x) @ t(w_v), n_kv_heads)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return (out.transpose(1, 2).reshape(batch, seq, -1) @ t(w_o)).numpy()


def _mha_inputs(rng, batch, seq, n_heads, n_kv_heads, d_head, d_model):
    scale = d_model ** -0.5
    return (normal(rng, batch, seq, d_model), normal(rng, d_model, n_heads * d_head, scale=scale),
            normal(rng, d_model, n_kv_heads * d_head, scale=scale), normal(rng, d_model, n_kv_heads * d_head, scale=scale),
            normal(rng, n_heads * d_head, d_model, scale=scale))


# ---------------------------------------------------------------- structure, read from the source

def _source(submission, rng):
    """The learner's source, read once attention, torch_attention and multi_head_attention compute
    the right values: the shape of code that does not work yet earns no points (a stub, or a
    function that calls einsum and returns nothing, has no loops either)."""
    q, k, v = normal(rng, 1, 2, 3, 4), normal(rng, 1, 2, 3, 4), normal(rng, 1, 2, 3, 4)
    expected, why = attention_oracle(q, k, v), " (the structure is graded once the values are right)"
    assert_close(submission.attention(q, k, v), expected, what="attention" + why, **EXACT)
    assert_close(submission.torch_attention(t(q), t(k), t(v)), expected, tensor=True,
                 what="torch_attention" + why, **TORCH)
    inputs = _mha_inputs(rng, 1, 3, 2, 2, 2, 4)
    assert_close(submission.multi_head_attention(*inputs, 2), mha_oracle(*inputs, 2, 2, causal=True),
                 what="multi_head_attention" + why, **EXACT)
    try:
        return structure.Source(submission.module_path)
    except (OSError, SyntaxError, ValueError) as exc:
        pytest.fail(f"could not read {submission.module_path.name}: {type(exc).__name__}: {exc}")


@pytest.mark.points(1)
@pytest.mark.concept("Einsum")
@pytest.mark.parametrize("function,library", [("attention", "numpy"), ("torch_attention", "torch")],
                         ids=["attention", "torch_attention"])
def test_scores_are_computed_with_einsum(submission, rng, function, library):
    """attention's scores come out of np.einsum, torch_attention's out of torch.einsum (read from the source)"""
    source = _source(submission, rng)
    assert function in source.functions, f"{function} is not defined as a function in {submission.module_path.name}"
    found, calls = source.scores_einsum(function, library)
    call = "np.einsum" if library == "numpy" else "torch.einsum"
    assert found, (f"{function}'s scores do not come out of {call}: {len(calls)} {call} call(s) in {function} "
                   f"and the functions it calls, none with q and k as operands; write Q K^T as "
                   f'{call}("bhqd,bhkd->bhqk", q, k)')


@pytest.mark.points(2)
@pytest.mark.concept("Einsum")
def test_no_python_loops_over_batch_or_heads(submission, rng):
    """attention, torch_attention and multi_head_attention (and what they call) run no Python loop over data"""
    source = _source(submission, rng)
    loops = source.data_loops(["attention", "torch_attention", "multi_head_attention"])
    assert not loops, (f"{len(loops)} Python loop(s) over data, the first in {loops[0].function} at line "
                       f"{loops[0].line}: `{loops[0].header}`; let einsum and broadcasting handle batch and heads")


# ---------------------------------------------------------------- softmax

@pytest.mark.points(2)
@pytest.mark.concept("Stable softmax")
def test_softmax_survives_huge_logits(submission, rng):
    """logits in the thousands do not overflow: exp is taken after subtracting the maximum"""
    x = normal(rng, 3, 5, 7, scale=1000.0)
    assert_close(submission.softmax(x), softmax_oracle(x, -1), what="softmax(1000 * x)", **EXACT)


@pytest.mark.points(2)
@pytest.mark.concept("Stable softmax")
def test_softmax_minus_infinity_and_empty_slices(submission, rng):
    """-inf entries get probability 0 and an all -inf slice gives zeros, along any axis; -inf is not a
    large negative number, even beside finite logits far below zero"""
    x = normal(rng, 4, 6)
    x[rng.random(x.shape) < 0.3] = -np.inf
    x[1, :] = -np.inf
    x[:, 2] = -np.inf
    for axis in (-1, 0):
        assert_close(submission.softmax(x, axis=axis), softmax_oracle(x, axis),
                     what=f"softmax(x with -inf entries, axis={axis})", **EXACT)
    far = x - 1e12
    assert_close(submission.softmax(far), softmax_oracle(far, -1),
                 what="softmax(x with -inf entries and finite ones near -1e12)", **FAR_BELOW_ZERO)


@pytest.mark.points(1)
@pytest.mark.concept("Stable softmax")
def test_softmax_leaves_the_callers_logits_as_they_were(submission, rng):
    """softmax(x) shifts a new array: the right probabilities, and x, -inf entries and all, the same after the call"""
    x = normal(rng, 4, 6, scale=3.0)
    x[1, 2] = -np.inf
    got = submission.probe(probes.result_and_argument_after, "softmax", x)
    assert_close(got["result"], softmax_oracle(x, -1), what="softmax(x)", **EXACT)
    assert_equal(got["argument"], x, what="x after softmax(x) (the caller's logits, which softmax must not change)")


@pytest.mark.points(1)
@pytest.mark.concept("Stable softmax")
def test_softmax_keeps_the_shape_with_size_one_axes(submission, rng):
    """vectors and arrays with size-1 axes come back in their own shape, along every axis"""
    for shape, axis in (((7,), -1), ((1, 3, 1, 4), -1), ((1, 3, 1, 4), 0), ((1, 3, 1, 4), 2)):
        x = normal(rng, *shape, scale=2.0)
        assert_close(submission.softmax(x, axis=axis), softmax_oracle(x, axis),
                     what=f"softmax(x of shape {shape}, axis={axis})", **EXACT)


@pytest.mark.points(1)
@pytest.mark.concept("Broadcasting")
def test_softmax_of_square_matrices(submission, rng):
    """square inputs, where a (n,) vs (n, 1) slip broadcasts silently instead of failing"""
    for shape, axis in (((5, 5), -1), ((5, 5), 0), ((2, 4, 4), -1), ((2, 4, 4), 1)):
        x = normal(rng, *shape, scale=2.0)
        assert_close(submission.softmax(x, axis=axis), softmax_oracle(x, axis),
                     what=f"softmax(x of shape {shape}, axis={axis})", **EXACT)


# ---------------------------------------------------------------- causal masks

@pytest.mark.points(1)
@pytest.mark.concept("Causal masks")
def test_causal_mask_shape_and_dtype(submission):
    """causal_mask returns a bool array of shape (1, 1, q_len, k_len)"""
    check_array(submission.causal_mask(3, 5), what="causal_mask(3, 5)", shape=(1, 1, 3, 5), dtype=np.bool_)


@pytest.mark.points(2)
@pytest.mark.concept("Causal masks")
def test_decoding_attention_with_causal_mask(submission, rng):
    """attention of the last 3 queries over 8 cached keys with the learner's causal mask"""
    q, k, v = normal(rng, 2, 3, 3, 4), normal(rng, 2, 3, 8, 4), normal(rng, 2, 3, 8, 5)
    expected = attention_oracle(q, k, v, np.tril(np.ones((3, 8), dtype=bool), 5))
    assert_close(submission.attention(q, k, v, submission.causal_mask(3, 8)), expected,
                 what="attention(q, k, v, causal_mask(3, 8))", **EXACT)


# ---------------------------------------------------------------- scaled dot-product attention and masks

@pytest.mark.points(1)
@pytest.mark.concept("Stable softmax")
def test_attention_with_huge_scores(submission, rng):
    """scores in the thousands give finite attention outputs"""
    q, k, v = normal(rng, 1, 2, 4, 8, scale=40.0), normal(rng, 1, 2, 6, 8, scale=40.0), normal(rng, 1, 2, 6, 3)
    assert_close(submission.attention(q, k, v), attention_oracle(q, k, v), what="attention with large scores", **EXACT)


MASK_SHAPES = ["bhqk", "1hqk", "b1qk", "bh1k", "bhq1", "11qk", "b11k", "b1q1", "111k", "hqk", "1qk", "qk", "1k", "k", "q1"]


@pytest.mark.points(3)
@pytest.mark.concept("Masks")
def test_attention_with_masks_of_every_broadcastable_shape(submission, rng):
    """boolean masks of every shape that broadcasts to (b, h, q_len, k_len); True keeps"""
    size = {"b": 2, "h": 3, "q": 4, "k": 5, "1": 1}
    q, k, v = normal(rng, 2, 3, 4, 6), normal(rng, 2, 3, 5, 6), normal(rng, 2, 3, 5, 7)
    for template in MASK_SHAPES:
        mask = rng.random([size[c] for c in template]) < 0.6
        assert_close(submission.attention(q, k, v, mask), attention_oracle(q, k, v, mask),
                     what=f"attention with a mask of shape {mask.shape}", **EXACT)


@pytest.mark.points(2)
@pytest.mark.concept("Masks")
def test_attention_fully_masked_query_outputs_zeros(submission, rng):
    """a query whose keys are all masked outputs zeros, and the other queries are unaffected"""
    q, k, v = normal(rng, 1, 2, 4, 6), normal(rng, 1, 2, 5, 6), normal(rng, 1, 2, 5, 3)
    mask = rng.random((1, 2, 4, 5)) < 0.7
    mask[0, :, :, 0] = True            # every query keeps a key ...
    mask[0, 1, 2, :] = False           # ... but this one
    assert_close(submission.attention(q, k, v, mask), attention_oracle(q, k, v, mask),
                 what="attention with one fully masked query", **EXACT)


@pytest.mark.points(1)
@pytest.mark.concept("Einsum")
def test_no_leakage_across_batch_or_heads(submission, rng):
    """each (batch, head) pair attends only within itself: it equals attention computed on it alone"""
    q, k, v = normal(rng, 3, 2, 4, 5), normal(rng, 3, 2, 6, 5), normal(rng, 3, 2, 6, 5)
    together = submission.attention(q, k, v)
    check_array(together, what="attention(q, k, v)", shape=(3, 2, 4, 5))
    for i in range(3):
        for j in range(2):
            alone = (slice(i, i + 1), slice(j, j + 1))
            assert_close(together[alone], attention_oracle(q[alone], k[alone], v[alone]),
                         what=f"batch element {i}, head {j} of attention(q, k, v)", **EXACT)


# ---------------------------------------------------------------- multi-head and grouped-query attention

def _torch_mha(x, w_q, w_k, w_v, w_o, n_heads, causal):
    d_model, seq = x.shape[-1], x.shape[1]
    module = torch.nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat([t(w_q.T), t(w_k.T), t(w_v.T)]))
        module.out_proj.weight.copy_(t(w_o.T))
        blocked = ~torch.ones(seq, seq, dtype=torch.bool).tril() if causal else None   # True = may NOT attend
        return module(t(x), t(x), t(x), attn_mask=blocked, need_weights=False)[0].numpy()


@pytest.mark.points(3)
@pytest.mark.concept("Multi-head and grouped-query attention")
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_multi_head_attention_matches_torch_module(submission, rng, causal):
    """multi_head_attention equals torch.nn.MultiheadAttention with the same weights"""
    batch, seq, n_heads, d_head = 2, 5, 3, 4
    x, w_q, w_k, w_v, w_o = _mha_inputs(rng, batch, seq, n_heads, n_heads, d_head, n_heads * d_head)
    got = submission.multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, causal=causal)
    assert_close(got, _torch_mha(x, w_q, w_k, w_v, w_o, n_heads, causal),
                 what=f"multi_head_attention(causal={causal})", **EXACT)


@pytest.mark.points(1)
@pytest.mark.concept("Multi-head and grouped-query attention")
def test_multi_head_attention_is_causal_by_default(submission, rng):
    """called without `causal`, multi_head_attention is causal"""
    batch, seq, n_heads, d_head = 2, 6, 2, 3
    x, w_q, w_k, w_v, w_o = _mha_inputs(rng, batch, seq, n_heads, n_heads, d_head, 5)
    got = submission.multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads)
    assert_close(got, mha_oracle(x, w_q, w_k, w_v, w_o, n_heads, n_heads, causal=True),
                 what="multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads) (causal by default)", **EXACT)


@pytest.mark.points(3)
@pytest.mark.concept("Multi-head and grouped-query attention")
@pytest.mark.parametrize("n_heads,n_kv_heads,causal", [(6, 2, True), (6, 3, True), (4, 1, True), (6, 2, False)],
                         ids=["6q-2kv", "6q-3kv", "4q-1kv", "6q-2kv-bidirectional"])
def test_grouped_query_attention_matches_sdpa(submission, rng, n_heads, n_kv_heads, causal):
    """query head j uses key/value head j // (n_heads // n_kv_heads), as SDPA's enable_gqa"""
    batch, seq, d_head, d_model = 2, 7, 5, 11
    x, w_q, w_k, w_v, w_o = _mha_inputs(rng, batch, seq, n_heads, n_kv_heads, d_head, d_model)
    expected = mha_oracle(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, causal=causal)
    got = submission.multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads=n_kv_heads, causal=causal)
    assert_close(got, expected, what=f"multi_head_attention(n_heads={n_heads}, n_kv_heads={n_kv_heads}, "
                 f"causal={causal})", **EXACT)


# ---------------------------------------------------------------- attention in torch

@pytest.mark.points(2)
@pytest.mark.concept("Attention in torch")
def test_torch_attention_forward_with_masks(submission, rng):
    """torch_attention agrees with SDPA, unmasked and with broadcast masks, fully masked rows giving zeros"""
    q, k, v = normal(rng, 2, 3, 4, 6), normal(rng, 2, 3, 5, 6), normal(rng, 2, 3, 5, 7)
    padding = rng.random((2, 1, 4, 5)) < 0.6
    padding[1, 0, 3, :] = False
    for mask in (None, padding, rng.random((1, 3, 4, 5)) < 0.6, rng.random((4, 5)) < 0.6):
        got = submission.torch_attention(t(q), t(k), t(v), None if mask is None else t(mask))
        shape = "no mask" if mask is None else f"a mask of shape {mask.shape}"
        assert_close(got, attention_oracle(q, k, v, mask), tensor=True, what=f"torch_attention with {shape}", **TORCH)


@pytest.mark.points(1)
@pytest.mark.concept("Attention in torch")
def test_torch_attention_keeps_the_dtype_of_v(submission):
    """the output has v's dtype: float32 in, float32 out; bfloat16 in, bfloat16 out"""
    gen = torch.Generator().manual_seed(3)
    for dtype in (torch.float32, torch.bfloat16):
        q, k, v = (torch.randn(1, 2, 3, 4, generator=gen).to(dtype) for _ in range(3))
        got = submission.torch_attention(q, k, v)
        check_array(got, what=f"torch_attention on {dtype} inputs", shape=(1, 2, 3, 4), dtype=dtype, tensor=True)


def _large_scores(dtype):
    """q and k share four features of 8: every raw score carries 256 (softmax ignores a common
    offset) plus a spread of ~3.5, so the weights stay spread while a bf16 score near 256 is
    rounded to a multiple of 2. Scores rounded before the softmax show it; fp32 scores do not."""
    gen = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 3, 8, 16, generator=gen), torch.randn(2, 3, 12, 16, generator=gen)
    q[..., :4] = k[..., :4] = 8.0
    v = torch.randn(2, 3, 12, 5, generator=gen)
    return [x.to(dtype) for x in (q, k, v)]


@pytest.mark.points(2)
@pytest.mark.concept("Attention in torch")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_torch_attention_low_precision_scores_in_float32(submission, dtype):
    """bf16 and fp16 inputs with large scores stay as accurate as float32 scores allow"""
    q, k, v = _large_scores(dtype)
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    got = submission.torch_attention(q, k, v)
    check_array(got, what=f"torch_attention on {dtype} inputs", shape=expected.shape, dtype=dtype, tensor=True)
    assert_close(got, expected, tensor=True, what=f"torch_attention on {dtype} inputs with scores near 64 "
                 "(the scores are rounded before the softmax?)", **LOW_PRECISION[dtype])


@pytest.mark.points(3)
@pytest.mark.concept("Attention in torch")
def test_torch_attention_gradients_match_sdpa(submission, rng):
    """gradients with respect to q, k and v equal those of F.scaled_dot_product_attention"""
    q, k, v = (torch.tensor(normal(rng, 2, 2, 4, 5)) for _ in range(3))
    mask = torch.tensor(rng.random((2, 1, 4, 4)) < 0.6)
    mask[..., 0] = True                                       # every query keeps a key
    grad_output = torch.tensor(normal(rng, 2, 2, 4, 5))
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    expected = F.scaled_dot_product_attention(*leaves, attn_mask=mask)
    (expected * grad_output).sum().backward()
    got = submission.probe(probes.torch_attention_backward, q, k, v, mask, grad_output)
    assert got["grads"] is not None, \
        "torch_attention's output does not require grad: is the graph cut (numpy, .detach(), .item())?"
    for name, grad, leaf in zip("qkv", got["grads"], leaves):
        assert_close(grad, leaf.grad, what=f"d(loss)/d{name} through torch_attention", tensor=True, **TORCH)


@pytest.mark.points(1)
@pytest.mark.concept("Attention in torch")
def test_torch_attention_fully_masked_rows_have_zero_gradients(submission, rng):
    """a fully masked query gives zero output and finite, zero gradients, not NaN"""
    q, k, v = (torch.tensor(normal(rng, 1, 1, 3, 4)) for _ in range(3))
    mask = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    mask[0, 0, 1] = False
    got = submission.probe(probes.torch_attention_backward, q, k, v, mask, torch.ones(1, 1, 3, 4, dtype=torch.float64))
    assert got["grads"] is not None, "torch_attention's output does not require grad"
    assert_close(got["output"][0, 0, 1], torch.zeros(4), what="output of the fully masked query", tensor=True, **TORCH)
    for name, grad in zip("qkv", got["grads"]):
        assert torch.isfinite(grad).all(), f"d(loss)/d{name} has NaN or inf: a fully masked row leaks NaN into backward"
    assert_close(got["grads"][0][0, 0, 1], torch.zeros(4), what="d(loss)/dq of the fully masked query", tensor=True, **TORCH)


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.concept("Attention in torch")
def test_torch_attention_bf16_on_cuda(submission):
    """bf16 on CUDA stays within bf16 rounding of the float32 reference, and stays bf16"""
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 4, 64, 32, generator=gen) for _ in range(3))
    mask = torch.ones(64, 64, dtype=torch.bool).tril()
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    got = submission.probe(probes.torch_attention_on_cuda, *(x.bfloat16() for x in (q, k, v)), mask)
    assert got["dtype"] == "torch.bfloat16" and got["device"] == "cuda", \
        f"torch_attention on bf16 CUDA tensors returned {got['dtype']} on {got['device']}"
    assert_close(got["output"], expected, what="torch_attention in bf16 on CUDA", tensor=True, **BF16)


# ---------------------------------------------------------------- drawn shapes (hypothesis): the slowest, last

@pytest.mark.points(2)
@pytest.mark.concept("Stable softmax")
@GRADING
@given(sizes=distinct(4), rank=st.integers(1, 4), data=st.data())
def test_softmax_matches_torch_along_any_axis(submission, sizes, rank, data):
    """softmax agrees with torch.softmax for every rank and axis"""
    shape = tuple(sizes[:rank])
    axis = data.draw(st.integers(-rank, rank - 1), label="axis")
    x = normal(np.random.default_rng(sum(shape)), *shape, scale=3.0)
    assert_close(submission.softmax(x, axis=axis), softmax_oracle(x, axis),
                 what=f"softmax(x of shape {shape}, axis={axis})", **EXACT)


@pytest.mark.points(2)
@pytest.mark.concept("Heads: reshape and transpose")
@GRADING
@given(sizes=distinct(4))
def test_split_heads_matches_view_then_transpose(submission, sizes):
    """split_heads equals torch's x.view(b, s, h, d).transpose(1, 2)"""
    batch, seq, n_heads, d_head = sizes
    x = np.arange(batch * seq * n_heads * d_head, dtype=np.float64).reshape(batch, seq, n_heads * d_head)
    expected = t(x).view(batch, seq, n_heads, d_head).transpose(1, 2).numpy()
    assert_equal(submission.split_heads(x, n_heads), expected,
                 what=f"split_heads(x of shape {x.shape}, n_heads={n_heads})")


@pytest.mark.points(2)
@pytest.mark.concept("Heads: reshape and transpose")
@GRADING
@given(sizes=distinct(4))
def test_merge_heads_matches_transpose_then_reshape(submission, sizes):
    """merge_heads equals torch's x.transpose(1, 2).reshape(b, s, h * d)"""
    batch, n_heads, seq, d_head = sizes
    x = np.arange(batch * n_heads * seq * d_head, dtype=np.float64).reshape(batch, n_heads, seq, d_head)
    expected = t(x).transpose(1, 2).reshape(batch, seq, n_heads * d_head).numpy()
    assert_equal(submission.merge_heads(x), expected, what=f"merge_heads(x of shape {x.shape})")


@pytest.mark.points(2)
@pytest.mark.concept("Causal masks")
@GRADING
@given(q_len=st.integers(1, 8), k_len=st.integers(1, 12))
@example(q_len=6, k_len=2)
def test_causal_mask_aligns_queries_to_the_end(submission, q_len, k_len):
    """query i sits at position k_len - q_len + i (cached decoding), for q_len below, at and above k_len"""
    expected = torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)[None, None].numpy()
    assert_equal(submission.causal_mask(q_len, k_len), expected, what=f"causal_mask({q_len}, {k_len})")


@pytest.mark.points(3)
@pytest.mark.concept("Scaled dot-product attention")
@GRADING
@given(sizes=distinct(6))
def test_attention_matches_sdpa(submission, sizes):
    """attention agrees with F.scaled_dot_product_attention on shapes with distinct sizes"""
    batch, heads, q_len, k_len, d, d_v = sizes
    rng = np.random.default_rng(sum(sizes))
    q, k, v = normal(rng, batch, heads, q_len, d), normal(rng, batch, heads, k_len, d), normal(rng, batch, heads, k_len, d_v)
    assert_close(submission.attention(q, k, v), attention_oracle(q, k, v),
                 what=f"attention(q {q.shape}, k {k.shape}, v {v.shape})", **EXACT)
