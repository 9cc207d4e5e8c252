"""Visible tests for exercise 01. Run: pytest exercises/01_einsum_attention

They check the basics quickly; the graded suite checks much more (other shapes, masks,
extreme logits, grouped-query attention, gradients). A pass here is a start, not a grade.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from grader.core.checks import assert_close, assert_equal

TOL = dict(rtol=1e-9, atol=1e-12)   # float64 throughout: only summation order differs
TORCH_TOL = dict(rtol=1e-4, atol=1e-6)   # torch_attention may compute in float32 ("float32 or wider")


@pytest.mark.points(1)
@pytest.mark.concept("Stable softmax")
def test_softmax_rows_sum_to_one(submission):
    """softmax of a small matrix matches exp(x) / sum(exp(x)) row by row"""
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    expected = np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)
    assert_close(submission.softmax(x), expected, what="softmax(x)", **TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Stable softmax")
def test_softmax_ignores_minus_infinity(submission):
    """-inf gets probability 0, and an all -inf row gives zeros, not NaN"""
    x = np.array([[0.0, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf]])
    assert_close(submission.softmax(x), np.array([[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]]), what="softmax(x)", **TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Heads: reshape and transpose")
def test_split_heads_shape_and_round_trip(submission):
    """split_heads gives (batch, heads, seq, d_head) and merge_heads undoes it"""
    x = np.arange(2 * 3 * 8, dtype=np.float64).reshape(2, 3, 8)
    heads = submission.split_heads(x, 4)
    assert_equal(heads[0, 1, 2], x[0, 2, 2:4], what="split_heads(x, 4)[0, 1, 2] (head 1 of token 2)")
    assert_equal(submission.merge_heads(heads), x, what="merge_heads(split_heads(x, 4))")


@pytest.mark.points(1)
@pytest.mark.concept("Causal masks")
def test_causal_mask_square(submission):
    """causal_mask(3, 3) is lower triangular with shape (1, 1, 3, 3)"""
    expected = np.tril(np.ones((3, 3), dtype=bool))[None, None]
    assert_equal(submission.causal_mask(3, 3), expected, what="causal_mask(3, 3)")


@pytest.mark.points(1)
@pytest.mark.concept("Scaled dot-product attention")
def test_attention_matches_pytorch(submission):
    """attention agrees with torch's scaled_dot_product_attention on a small causal case"""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 4, 8)) for _ in range(3))
    mask = np.tril(np.ones((4, 4), dtype=bool))[None, None]
    expected = F.scaled_dot_product_attention(*(torch.from_numpy(t) for t in (q, k, v)),
                                              attn_mask=torch.from_numpy(mask)).numpy()
    assert_close(submission.attention(q, k, v, mask), expected, what="attention(q, k, v, mask)", **TOL)


@pytest.mark.points(1)
@pytest.mark.concept("Attention in torch")
def test_torch_attention_matches_numpy_version(submission):
    """torch_attention returns a tensor that agrees with scaled_dot_product_attention"""
    q, k, v = torch.randn(3, 2, 2, 3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    expected = F.scaled_dot_product_attention(q, k, v)
    assert_close(submission.torch_attention(q, k, v), expected, what="torch_attention(q, k, v)", tensor=True, **TORCH_TOL)
