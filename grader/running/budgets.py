"""What one grading asks of a scheduler (a Slurm job, a Kubernetes pod): the figures the sandbox
and the README's memory table already state, turned into requests, in one place.
"""
from __future__ import annotations

import math

from grader.isolation.sandbox import Limits
from grader.running.runner import RUN_LIMIT_S

# The measured peak of a full grading's process tree is 1076 MB (all five tasks, the reference:
# `benchmarks/containers.py`, docs/instructor/sandbox.md); half as much
# again is room for a module that allocates more than the reference before its workers' limit,
# fitted to the box, stops it.
GRADING_MEMORY_MB = 1536
# Time for a job to start its Python and import the grader before the first grading begins.
JOB_START_S = 5 * 60


def cpus(gradings: int = 1) -> int:
    """Cores for `gradings` at once: each task's workers share Limits.cpus cores while the
    trusted side waits on them."""
    return max(1, math.ceil(gradings * Limits().cpus))


def memory_mb(gradings: int = 1) -> int:
    return gradings * GRADING_MEMORY_MB


def time_limit_min(submissions: int, gradings: int = 1, limit_s: float = RUN_LIMIT_S) -> int:
    """Whole minutes (as Slurm counts them) for `submissions` graded `gradings` at a time, each
    within its `limit_s`: a backstop, far above what a grading takes."""
    rounds = math.ceil(submissions / max(1, gradings))
    return math.ceil((rounds * limit_s + JOB_START_S) / 60)
