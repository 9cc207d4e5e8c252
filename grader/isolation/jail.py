"""What a task's worker host runs in: one protocol for every isolation level.

A jail holds the bytes of the learner's module where its worker reads them, the cgroup and
resource limits it runs under, and the command, folder and environment it starts with; it says
which processes are its own, what it keeps on the host's disk beyond the shared folders, and
cleans everything up on `close`. `grader.isolation.worker_host.WorkerHost` asks nothing else of a
level: a new level is a class of this protocol and a line in `open_jail`.

- `NoJail` (level "none"): the module where it was submitted, a scratch folder as the worker's
  working directory, the cgroup if the box gives one (else address-space limits).
- `grader.isolation.uid_jail.UidJail` (level "uid"): a uid of its own, a private copy of the module.
- `grader.isolation.sandbox.SandboxJail` (level "sandbox"): bubblewrap's namespaces and read-only
  binds, a copy of the module inside.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Protocol

from grader.course import Course
from grader.isolation import cgroups
from grader.isolation.sandbox import LEARNER_OOM_SCORE_ADJ, WORKER_ENV, Limits, SandboxJail
from grader.isolation.uid_jail import UidJail


class Jail(Protocol):
    module_path: Path                   # where the worker reads the learner's module
    cgroup: cgroups.Cgroup
    cwd: str                            # the worker's working directory, as the host starts it

    @property
    def rlimits(self) -> dict[str, int]: ...
    @property
    def become(self) -> dict[str, int] | None: ...      # the uid and gid the zygote takes, if any
    def command(self, argv: list[str]) -> list[str]: ...
    def environment(self) -> dict[str, str]: ...
    def processes(self) -> list[int] | None: ...        # None: the host's own descendants
    def disk_paths(self) -> list[str]: ...              # kept on the host's disk beyond the shared folders
    def grant_writable(self) -> None: ...               # before a call: the shared folders' new entries
    def exit_code(self, code: int) -> int: ...          # the zygote's, as its launcher reported it
    def close(self) -> None: ...


class NoJail:
    """Level "none": the learner's module runs where it is, as this process's user."""

    become = None

    def __init__(self, module_path: Path, limits: Limits):
        self.module_path = Path(module_path)
        self.cwd = tempfile.mkdtemp(prefix="grader-worker-")
        self.limits = limits
        self.cgroup = limits.cgroup(Path(self.cwd).name)

    @property
    def rlimits(self) -> dict[str, int]:
        return self.limits.rlimits(self.cgroup)

    def command(self, argv: list[str]) -> list[str]:
        return self.cgroup.wrap(argv, oom_score_adj=LEARNER_OOM_SCORE_ADJ)

    def environment(self) -> dict[str, str]:
        return {**os.environ, **WORKER_ENV}

    def processes(self) -> list[int] | None:
        return None

    def disk_paths(self) -> list[str]:
        return []

    def grant_writable(self) -> None:
        pass

    def exit_code(self, code: int) -> int:
        return code

    def close(self) -> None:
        self.cgroup.kill_all()
        shutil.rmtree(self.cwd, ignore_errors=True)


def open_jail(level: str, module_path: Path, module_bytes: bytes, *, course: Course, probe_files: list[Path],
              writable_dirs: list[Path], limits: Limits, commit: str | None) -> Jail:
    """The jail of a task's worker host at `level` ("sandbox", "uid" or "none")."""
    if level == "sandbox":
        return SandboxJail(module_bytes, Path(module_path).name, course=course, probe_files=probe_files,
                           writable_dirs=writable_dirs, limits=limits, commit=commit)
    if level == "uid":
        return UidJail(module_bytes, Path(module_path).name, writable_dirs=writable_dirs, limits=limits,
                       commit=commit)
    return NoJail(module_path, limits)
