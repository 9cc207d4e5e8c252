"""Timing that stays meaningful on a shared machine."""
from __future__ import annotations

import statistics
import time


class Stopwatch:
    """Accumulates wall-clock and process CPU time (all threads) over the spans it runs (one span per
    training step), so evaluation in between is left out.

    When other jobs share the CPUs the wall-clock total stretches. The median span does not, as long as
    the machine was quiet for at least half of the steps, so `seconds_at_median_pace` (median step time
    x steps) estimates what the run takes on an idle machine."""

    def __init__(self):
        self.wall = self.cpu = 0.0
        self.spans: list[float] = []

    def __enter__(self) -> Stopwatch:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        span = time.perf_counter() - self._wall
        self.spans.append(span)
        self.wall += span
        self.cpu += time.process_time() - self._cpu

    def facts(self, prefix: str = "") -> dict:
        median = statistics.median(self.spans) if self.spans else 0.0
        return {f"{prefix}seconds": round(self.wall, 1), f"{prefix}cpu_seconds": round(self.cpu, 1),
                f"{prefix}seconds_at_median_pace": round(median * len(self.spans), 1)}
