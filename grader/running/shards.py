"""Slices of a batch, for graders that each take one: a Kubernetes Indexed Job's pods, a Slurm
array's tasks, or machines started by hand.

`--shard I/N` grades the I-th of N slices, counted from 0 as Kubernetes (JOB_COMPLETION_INDEX)
and Slurm (SLURM_ARRAY_TASK_ID) count; `--shard N` reads I from those variables. The slices are
cut from the submissions sorted by absolute path, so every shard cuts the same list however its
shell ordered the arguments, and each submission falls in exactly one slice; consecutive blocks
whose sizes differ by at most one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

INDEX_VARIABLES = ("JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID")     # read in this order


class ShardError(ValueError):
    """A --shard that names no slice."""


@dataclass(frozen=True)
class Shard:
    index: int          # from 0
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def select(self, paths: list[Path]) -> list[int]:
        """The positions in `paths` of this shard's submissions, in sorted order."""
        order = sorted(range(len(paths)), key=lambda i: sort_key(paths[i]))
        start, end = self.index * len(order) // self.count, (self.index + 1) * len(order) // self.count
        return order[start:end]


def sort_key(path: Path) -> str:
    return os.path.normpath(os.path.abspath(path))


def parse(text: str, environ=os.environ) -> Shard:
    """`I/N`, or `N` with I from INDEX_VARIABLES."""
    index_text, slash, count_text = text.rpartition("/")
    if not slash:
        from_environ = next((environ[name] for name in INDEX_VARIABLES if environ.get(name, "").strip()), None)
        if from_environ is None:
            raise ShardError(f"--shard {text}: give I/N, or set {' or '.join(INDEX_VARIABLES)} to the index")
        index_text = from_environ
    try:
        index, count = int(index_text), int(count_text)
    except ValueError:
        raise ShardError(f"--shard {text}: I/N takes whole numbers, I from 0 (got index {index_text!r})") from None
    if count < 1 or not 0 <= index < count:
        raise ShardError(f"--shard {text}: the index counts from 0 to N-1 = {count - 1}, and N >= 1")
    return Shard(index, count)
