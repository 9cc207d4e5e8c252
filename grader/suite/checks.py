"""Assertions for the suites, with feedback that teaches without leaking.

A failure says what was checked, expected vs got for shape and dtype, the first (or worst)
mismatching index with both values there, and the error size; never the whole hidden input
or output.
"""
from __future__ import annotations

import functools
import os
import pickle
from typing import TYPE_CHECKING

import numpy as np
import pytest

from grader.processes.forks import Fork
from grader.worker.loading import sibling_module  # noqa: F401  (the suites' import)

if TYPE_CHECKING:
    from hypothesis import settings

    GRADING: settings       # built by __getattr__ on first use


def __getattr__(name: str):
    """`GRADING`, the settings of every hypothesis test in the suites: the same examples on
    every run (derandomized), no example database written into the course tree, no per-example
    deadline on slow machines, and no shrinking: a smaller failing input serves a reader of
    hypothesis's own report, which a learner never sees (hidden inputs stay hidden), while each
    shrinking step calls the learner's code once more (in official grading, a round trip to its
    worker): hundreds of calls for a module that fails on every input. Built on first use, so
    suites without hypothesis never import it."""
    if name != "GRADING":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from hypothesis import HealthCheck, Phase, settings
    global GRADING
    GRADING = settings(derandomize=True, database=None, deadline=None, max_examples=25,
                       phases=[Phase.explicit, Phase.generate],
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                              HealthCheck.differing_executors])
    return GRADING


@pytest.fixture(autouse=True)     # a suite imports it to have it
def examples_from_the_seed(request, seed):
    """hypothesis's examples drawn from the grading's seed and the test's id, not the same ones at
    every grading (GRADING's derandomize): hypothesis reads the seed a test carries each time the
    test is called, as its @seed decorator leaves it."""
    test = request.function
    if getattr(test, "is_hypothesis_test", False):
        test._hypothesis_internal_use_seed = f"{seed}:{request.node.nodeid}"


class ConceptError(AssertionError):
    """A failure that names the concept it found broken, for a test that checks several
    things in causal order (the first difference decides which README section to reread)."""

    def __init__(self, concept: str, message: str):
        super().__init__(message)
        self.concept = concept


class OracleFailed(RuntimeError):
    """An oracle run by `in_fork` raised, or its process died before it answered."""


def in_fork(oracle):
    """`oracle`, run in a child forked from the test's process each time it is called: what it
    imports and allocates (a trainer, a library only this oracle uses, the heap they leave
    fragmented) goes back to the box when the child ends, instead of staying in the grading's
    process for the rest of the task, beside the learner's worker. Its result crosses back
    pickled (trusted to trusted), so it must be data; keep a cache around the wrapped function,
    not inside it. An exception in the child is raised here as OracleFailed with its text."""
    @functools.wraps(oracle)
    def run(*args, **kwargs):
        read_end, write_end = os.pipe()

        def answer() -> int:                       # in the child: answer, then vanish without cleanup
            os.close(read_end)
            try:
                reply = ("value", oracle(*args, **kwargs))
            except BaseException as exc:           # noqa: BLE001 (every failure is the parent's to report)
                reply = ("error", f"{type(exc).__name__}: {exc}")
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(reply, out)
            return 0
        child = Fork.start(answer)
        os.close(write_end)
        try:
            with os.fdopen(read_end, "rb") as answer_pipe:
                data = answer_pipe.read()
        finally:                                   # also when the test's time runs out meanwhile
            child.end_now()
        try:
            kind, value = pickle.loads(data)
        except Exception:                          # noqa: BLE001 (nothing, or half an answer)
            raise OracleFailed(f"the oracle {oracle.__name__} died before it answered") from None
        if kind == "error":
            raise OracleFailed(f"the oracle {oracle.__name__} raised {value}")
        return value
    return run


def to_numpy(value) -> np.ndarray:
    """An array or tensor as a NumPy array (bfloat16 widened to float32)."""
    if hasattr(value, "detach"):
        tensor = value.detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":
            tensor = tensor.float()
        return tensor.numpy()
    return np.asarray(value)


def check_array(got, *, what: str, shape=None, dtype=None, tensor: bool = False) -> None:
    """Type, shape and (optionally) dtype of a result."""
    __tracebackhide__ = True     # the message says it all; the test's line says where
    expected_type = "a torch tensor" if tensor else "a NumPy array"
    is_right_type = hasattr(got, "detach") if tensor else isinstance(got, np.ndarray)
    assert is_right_type, f"{what}: expected {expected_type}, got {type(got).__name__}"
    if shape is not None:
        assert tuple(got.shape) == tuple(shape), f"{what}: expected shape {tuple(shape)}, got {tuple(got.shape)}"
    if dtype is not None:
        assert got.dtype == dtype, f"{what}: expected dtype {dtype}, got {got.dtype}"


def assert_close(got, expected, *, what: str, rtol: float, atol: float, tensor: bool = False) -> None:
    """Same shape, no NaN where the reference has none, values within atol + rtol * |expected|."""
    __tracebackhide__ = True     # the message says it all; the test's line says where
    check_array(got, what=what, shape=np.shape(expected), tensor=tensor)
    g = to_numpy(got).astype(np.float64)
    e = to_numpy(expected).astype(np.float64)
    bad_nan = np.isnan(g) & ~np.isnan(e)
    if bad_nan.any():
        index = _index(np.argwhere(bad_nan)[0])
        raise AssertionError(f"{what}: got NaN at index {index} ({int(bad_nan.sum())} NaN values in all) "
                             f"where the reference is {e[index]:.6g}")
    bad_inf = np.isinf(g) & ~np.isinf(e)
    if bad_inf.any():
        index = _index(np.argwhere(bad_inf)[0])
        raise AssertionError(f"{what}: got {g[index]} at index {index} where the reference is finite "
                             f"({e[index]:.6g}): an overflow?")
    with np.errstate(invalid="ignore"):
        error = np.abs(g - e)
        error = np.where(np.isnan(e) | (np.isinf(e) & (g == e)), 0.0, error)
        excess = error - (atol + rtol * np.abs(e))
    if (excess > 0).any():
        index = _index(np.unravel_index(np.argmax(excess), excess.shape))
        raise AssertionError(
            f"{what}: {int((excess > 0).sum())} of {excess.size} values differ from the reference "
            f"(tolerance {atol:g} + {rtol:g} * |reference|){_at('the worst', index)}: "
            f"got {g[index]:.10g}, expected {e[index]:.10g}, max abs error {np.max(error):.3g}")


def assert_equal(got, expected, *, what: str, tensor: bool = False) -> None:
    """Exact equality (masks, ids, counts), reporting the first mismatching index."""
    __tracebackhide__ = True     # the message says it all; the test's line says where
    check_array(got, what=what, shape=np.shape(expected), tensor=tensor)
    g, e = to_numpy(got), to_numpy(expected)
    mismatch = g != e
    if mismatch.any():
        index = _index(np.argwhere(mismatch)[0])
        raise AssertionError(f"{what}: {int(mismatch.sum())} of {mismatch.size} entries differ"
                             f"{_at('the first', index)}: got {plain(g[index])}, expected {plain(e[index])}")


def _index(position) -> tuple[int, ...]:
    return tuple(int(i) for i in position)


def _at(which: str, index: tuple[int, ...]) -> str:
    """Where in a result a mismatch lies ("; the first at index (0, 2)"); nothing for a single value."""
    return f"; {which} at index {index}" if index else ""


def plain(value) -> str:
    """A value as the learner would write it: 8.0 and True, not np.float64(8.0) and np.True_."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def shown(value, limit: int = 120) -> str:
    """`plain(value)` in at most `limit` characters, with a mark where the rest was left out."""
    text = plain(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
