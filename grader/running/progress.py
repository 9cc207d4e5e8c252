"""How far a long batch has come: graded of total, how many the scheduler ended (`NOT_FINISHED`),
running and pending where the executor knows them, the rate since this run started and the
time left at that rate. On a terminal, one live line (rich); elsewhere (a Slurm job's log, a
pod's, CI), a plain line every `PLAIN_EVERY_S` and one at the end.
"""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.text import Text

from grader.running.executors import not_finished

PLAIN_EVERY_S = 30.0       # a log gets a line this often at most: 1,000 submissions make no 1,000 lines


@dataclass
class Counts:
    total: int
    done: int = 0                  # graded: their reports are in
    failed: int = 0                # ended by the scheduler before their grading did (`--resume` grades them)
    running: int | None = None     # None: the executor does not say
    pending: int | None = None


def line(counts: Counts, elapsed_s: float, done_here: int) -> str:
    """The progress line: `done_here` units ended during `elapsed_s` (resumed ones did not)."""
    parts = [f"done {counts.done}/{counts.total}"]
    if counts.running is not None:
        parts.append(f"running {counts.running}, pending {counts.pending}")
    if counts.failed:
        parts.append(f"failed {counts.failed} (ended by the scheduler)")
    if done_here and elapsed_s > 0:
        rate = done_here / elapsed_s
        parts.append(f"{rate * 60:.1f}/min")
        left = counts.total - counts.done - counts.failed
        if left:
            parts.append(f"ETA {_duration(left / rate)}")
    return " | ".join(parts)     # ASCII: a log may not be UTF-8


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class BatchProgress:
    """`planned(kept, to_grade)` once the batch knows, `finished(report)` as each report comes
    in, `queue(running, pending)` as the executor polls; a context manager around the batch."""

    def __init__(self, total: int = 0, console: Console | None = None, clock=time.monotonic):
        self.counts = Counts(total)
        self.console = console or Console(highlight=False)
        self._clock, self._start, self._done_here = clock, clock(), 0
        self._last_plain: float | None = None
        self._last_text: str | None = None
        self._lock = threading.Lock()
        self._live = Live(self, console=self.console, refresh_per_second=2, transient=False) \
            if self.console.is_terminal else None

    def __rich__(self) -> Text:          # the live line, redrawn with a fresh rate and ETA; plain text, never markup
        return Text(self.text())

    def text(self) -> str:
        return line(self.counts, self._clock() - self._start, self._done_here)

    def __enter__(self):
        if self._live:
            self._live.start()
        return self

    def __exit__(self, *exc):
        if self._live:
            self._live.stop()
        else:
            self._plain(force=True)

    def planned(self, kept: int, to_grade: int) -> None:
        with self._lock:
            self.counts = Counts(kept + to_grade, done=kept)
            self._start = self._clock()
        self._changed()

    def finished(self, report) -> None:
        with self._lock:
            self._done_here += 1
            if report is not None and not_finished(report):
                self.counts.failed += 1
            else:
                self.counts.done += 1
            if self.counts.pending is not None:      # until the next poll says otherwise
                self.counts.running = max(0, (self.counts.running or 0) - 1)
        self._changed()

    def queue(self, running: int, pending: int) -> None:
        with self._lock:
            self.counts.running, self.counts.pending = running, pending
        self._changed()

    def _changed(self) -> None:
        if self._live:
            self._live.refresh()
        else:
            self._plain()

    def _plain(self, force: bool = False) -> None:
        now, text = self._clock(), self.text()
        if text == self._last_text:
            return
        if force or self._last_plain is None or now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain, self._last_text = now, text
            print(text, file=sys.stderr, flush=True)
