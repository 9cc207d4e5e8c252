"""A child forked from a warm trusted process, watched and reaped: the one way the grader's
parents (a pool process and its sessions, an audit's collected session and its trees, the
watcher and its checks, a test and the oracle it runs apart) start a child and see it end.

A fork runs `body` and exits with what it returns (3, pytest's "internal error", if it raises):
no cleanup of the parent's state runs in it. It dies with its parent (`die_with_parent`), so a
parent killed by its own watchdog leaves no child behind. The parent holds a pidfd, which it can
wait on beside the pipes it reads (`waiting_on`), and a deadline: `reap` kills a child past it
and says so, which needs nothing of the child (no reply, no signal handler), so a child that
loops, is stopped, or swallowed every exception still ends on time.
"""
from __future__ import annotations

import math
import os
import select
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from grader.worker.zygote import die_with_parent

INTERNAL_ERROR = 3


@dataclass(frozen=True)
class Ending:
    """How a fork ended."""
    code: int | None = None         # its exit status, when it exited
    signal: str | None = None       # the signal that killed it, by name
    overdue: bool = False           # killed by its parent, past its deadline

    @property
    def exited(self) -> bool:
        return self.code is not None

    def __str__(self) -> str:
        if self.overdue:
            return "ran past its time limit"
        if self.signal:
            return f"was killed by signal {self.signal}"
        return f"exited with code {self.code}"


class Fork:
    """A child of this process running `body` (see `start`), until `reap` has its ending."""

    def __init__(self, pid: int, limit_s: float = math.inf):
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.deadline = time.monotonic() + limit_s
        self.ending: Ending | None = None

    @classmethod
    def start(cls, body: Callable[[], int], limit_s: float = math.inf) -> Fork:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = INTERNAL_ERROR
            try:
                die_with_parent(parent)
                code = body()
            finally:
                os._exit(code)
        return cls(pid, limit_s)

    @property
    def overdue(self) -> bool:
        return time.monotonic() >= self.deadline

    def has_ended(self) -> bool:
        return self.ending is not None or bool(select.select([self.pidfd], [], [], 0)[0])

    def kill(self) -> None:
        if self.ending is None:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def reap(self) -> Ending:
        """Its ending: waited for, unless it is past its deadline (then killed first, and said so)."""
        if self.ending is not None:
            return self.ending
        overdue = not self.has_ended() and self.overdue
        if overdue:
            self.kill()
        _, status = os.waitpid(self.pid, 0)
        os.close(self.pidfd)
        if overdue:
            self.ending = Ending(overdue=True)
        elif os.WIFSIGNALED(status):
            self.ending = Ending(signal=signal.Signals(os.WTERMSIG(status)).name)
        else:
            self.ending = Ending(code=os.WEXITSTATUS(status))
        return self.ending

    def end_now(self) -> Ending:
        """Killed, whatever it was doing, and reaped."""
        self.kill()
        return self.reap()


def waiting_on(forks: Iterable[Fork], wait_s: float = math.inf, also: Iterable[int] = ()) -> tuple[list[Fork], list[int]]:
    """Wait up to `wait_s` (never past the earliest deadline) until a fork ends or a file
    descriptor of `also` can be read: the forks that ended or are past their deadline, and the
    descriptors ready."""
    forks, also = list(forks), list(also)
    now = time.monotonic()
    timeout = min([wait_s, *(fork.deadline - now for fork in forks)])
    ready, _, _ = select.select([fork.pidfd for fork in forks] + also, [], [],
                                None if timeout == math.inf else max(0.0, timeout))
    due = [fork for fork in forks if fork.pidfd in ready or fork.overdue]
    return due, [fd for fd in also if fd in ready]
