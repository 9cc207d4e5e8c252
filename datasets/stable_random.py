"""Random choices built only on `random.Random(seed).random()`.

Python guarantees that `random()` produces the same sequence for the same seed in every version, but
not `shuffle`, `choice`, `randint` or `choices`, and numpy's generators may change streams between
releases. Building every data file from these helpers is what makes rebuilds bit-for-bit.
"""
from __future__ import annotations

import random


def categorical(rng: random.Random, weights: list[float]) -> int:
    """Index drawn with probability proportional to weights (inverse CDF, one `random()` call)."""
    u = rng.random() * sum(weights)
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if u < acc:
            return i
    return len(weights) - 1  # the last cumulative sum can round just below the total


def randint(rng: random.Random, low: int, high: int) -> int:
    """Uniform integer in [low, high], both included."""
    return low + min(int(rng.random() * (high - low + 1)), high - low)


def shuffled(rng: random.Random, items) -> list:
    """A new list in Fisher-Yates order."""
    out = list(items)
    for i in range(len(out) - 1, 0, -1):
        j = randint(rng, 0, i)
        out[i], out[j] = out[j], out[i]
    return out
