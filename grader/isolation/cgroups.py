"""Cgroups for the workers and for each grading's own process, made below the grader's own
cgroup, and the memory the grader may use.

A worker's cgroup is a child of the cgroup the grader itself runs in (`/proc/self/cgroup`, found
on the mounts of `/proc/self/mountinfo`), never a child of the hierarchy's root: the limits set
around the grader (a container, a systemd slice, a batch scheduler's job) then bind its workers
too, as the kernel applies every ancestor's limit. On cgroup v1 each controller (memory, pids,
cpu) has its own hierarchy and the grader its own place in each. On cgroup v2 a child can only
use the memory and pids controllers where the grader's cgroup may enable them for its children
(the subtree is delegated to it); elsewhere no cgroup is made and the worker falls back to
rlimits (`grader.isolation.sandbox.Limits.rlimits`).

A grading's own process (its tests, and what they read of the files learner code wrote) moves
into a memory cgroup of its own beside its workers' (`Cgroup.enter`), so that a test that swells
ends its own task, never a neighbour's. The grader's own cgroup is the one it was in when it first
asked (`_home`): a process that moved on still makes its workers' cgroups, and measures its box,
from there.

The grader's memory budget (`memory_budget`) is the smallest memory limit on the way from its own
cgroup up to the root (v1 `memory.limit_in_bytes`, v2 `memory.max`), and never more than the
machine's memory.
"""
from __future__ import annotations

import functools
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CPU_PERIOD_US = 100_000
PARENT_NAME = "grader"          # the folder below the grader's own cgroup that holds its workers' cgroups
_NO_LIMIT = 1 << 60             # v1 writes "unlimited" as a page-rounded 2^63 - 1


@dataclass(frozen=True)
class Mount:
    """A cgroup file system as this process sees it."""
    point: Path                 # where it is mounted
    root: str                   # the cgroup at the mount point, as /proc/self/cgroup names cgroups
    version: str                # "v1" or "v2"
    controllers: frozenset[str]  # v1: the controllers of this hierarchy


def _mounts() -> list[Mount]:
    mounts = []
    for line in (read_text("/proc/self/mountinfo") or "").splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        after = fields[fields.index("-") + 1:]
        if len(after) < 3 or after[0] not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(after[2].split(","))
        version = "v2" if after[0] == "cgroup2" else "v1"
        mounts.append(Mount(Path(_unescape(fields[4])), _unescape(fields[3]), version,
                            options if version == "v1" else frozenset()))
    return mounts


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline or backslash in a path as an octal escape."""
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _membership() -> dict[str, str]:
    """The cgroup of this process per v1 controller, and under "" its v2 cgroup."""
    found = {}
    for line in (read_text("/proc/self/cgroup") or "").splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _dir_of(mount: Mount, path: str) -> Path | None:
    """The folder of cgroup `path` on `mount`; None where the mount does not show it (a path
    outside the mount's root, as `/..` from inside another cgroup namespace)."""
    root = mount.root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    return mount.point / path[len(root):].lstrip("/")


def own_dir(controller: str) -> tuple[str, Path] | None:
    """(version, folder) of this process's cgroup that holds `controller`: its v1 hierarchy where
    one has it, else the v2 cgroup where that cgroup can use it. None where no mounted hierarchy
    has the controller."""
    membership, mounts = _membership(), _mounts()
    for mount in mounts:
        if mount.version == "v1" and controller in mount.controllers and controller in membership:
            folder = _dir_of(mount, membership[controller])
            if folder is not None and folder.is_dir():
                return "v1", folder
    for mount in mounts:
        if mount.version == "v2" and "" in membership:
            folder = _dir_of(mount, membership[""])
            if folder is not None and controller in (read_text(folder / "cgroup.controllers") or "").split():
                return "v2", folder
    return None


@functools.cache
def _home(controller: str) -> tuple[str, Path] | None:
    """`own_dir(controller)` as this process (or the parent it was forked from) first asked,
    before it moved into a cgroup made below it."""
    return own_dir(controller)


@dataclass(frozen=True)
class Budget:
    """The memory of the box this process runs in."""
    limit_bytes: int        # the most it and everything it starts may use together
    held_bytes: int         # what the box holds now that the kernel cannot reclaim (anonymous and shared memory)


def memory_budget() -> Budget | None:
    """The box: the smallest memory limit from this process's own memory cgroup up to the root
    of the hierarchy, and what that cgroup holds now; the machine's memory where no cgroup limits
    less. None where neither can be read."""
    machine = _machine_memory()
    best = Budget(*machine) if machine else None
    place = _home("memory")
    if place is not None:
        version, folder = place
        mount_point = next((m.point for m in _mounts() if folder.is_relative_to(m.point)), folder)
        for level in (folder, *folder.parents):
            if not level.is_relative_to(mount_point):
                break
            limit = _limit_value(read_text(level / ("memory.limit_in_bytes" if version == "v1" else "memory.max")))
            if limit is not None and (best is None or limit < best.limit_bytes):
                best = Budget(limit, _held(level, version))
    return best


def _held(folder: Path, version: str) -> int:
    """Anonymous and shared memory charged to a cgroup and everything below it."""
    stat = dict(line.split()[:2] for line in (read_text(folder / "memory.stat") or "").splitlines() if " " in line)
    keys = ("total_rss", "total_shmem") if version == "v1" else ("anon", "shmem")
    return sum(int(stat.get(key, 0)) for key in keys)


def _limit_value(text: str | None) -> int | None:
    if text is None or text.strip() in ("", "max"):
        return None
    value = int(text.strip())
    return value if value < _NO_LIMIT else None


def _machine_memory() -> tuple[int, int] | None:
    """(total, in use and not reclaimable) of the machine's memory."""
    info = {line.split(":")[0]: int(line.split()[1]) * 1024
            for line in (read_text("/proc/meminfo") or "").splitlines() if len(line.split()) >= 2}
    if "MemTotal" not in info:
        return None
    return info["MemTotal"], info["MemTotal"] - info.get("MemAvailable", info["MemTotal"])


class Cgroup:
    """A cgroup below the grader's own: memory, and the process count where `processes` is given
    (a worker host's; a grading's own process has none), and CPU where `cpus` is given and the cpu
    controller is there too. No paths where none can be made (`kind` is then None)."""

    def __init__(self, name: str, memory_bytes: int, processes: int | None = None, cpus: float | None = None):
        self.paths: list[Path] = []
        self.cpu_limited = False
        self.kind: str | None = None
        memory, pids = _parent("memory"), _parent("pids") if processes is not None else None
        if memory is None or (processes is not None and (pids is None or memory[0] != pids[0])):
            return
        self.kind = memory[0]
        quota = f"{max(1000, int(cpus * CPU_PERIOD_US))}" if cpus is not None else None
        if self.kind == "v2":
            path = memory[1] / name
            if _try_mkdir(path) and _write(path / "memory.max", memory_bytes) \
                    and (processes is None or _write(path / "pids.max", processes)):
                _write(path / "memory.swap.max", 0)
                _write(path / "memory.oom.group", 1)        # one process over the limit ends the whole cgroup
                self.cpu_limited = quota is not None and _write(path / "cpu.max", f"{quota} {CPU_PERIOD_US}")
                self.paths = [path]
            else:
                _try_rmdir(path)
        else:
            paths = [memory[1] / name] + ([pids[1] / name] if pids is not None else [])
            if all(_try_mkdir(p) for p in paths) and _write(paths[0] / "memory.limit_in_bytes", memory_bytes) \
                    and (processes is None or _write(paths[1] / "pids.max", processes)):
                _write(paths[0] / "memory.memsw.limit_in_bytes", memory_bytes)   # no swap beyond it, where swap is counted
                self.paths = paths
                cpu = _parent("cpu") if quota is not None else None
                cpu_path = cpu[1] / name if cpu is not None and cpu[0] == "v1" else None
                if cpu_path is not None and _try_mkdir(cpu_path) and _write(cpu_path / "cpu.cfs_period_us", CPU_PERIOD_US) \
                        and _write(cpu_path / "cpu.cfs_quota_us", quota):
                    self.paths.append(cpu_path)
                    self.cpu_limited = True
                elif cpu_path is not None:
                    _try_rmdir(cpu_path)
            else:
                for path in paths:
                    _try_rmdir(path)
        if not self.paths:
            self.kind = None

    def enter(self) -> None:
        """Move this process into the cgroup: what it allocates from now on counts against it."""
        for controller in ("memory", "pids", "cpu"):
            _home(controller)           # where it came from, for the cgroups it makes next
        for path in self.paths:
            _write(path / "cgroup.procs", os.getpid())

    def wrap(self, argv: list[str], oom_score_adj: int | None = None) -> list[str]:
        """`argv`, started from inside this cgroup: a shell puts itself into it (and, given
        `oom_score_adj`, marks itself as the kernel's choice when memory runs out), then becomes
        `argv`, so every process the command starts is born inside, with no window in which one
        could escape the limits."""
        steps = [f'echo $$ > "${i + 1}"' for i in range(len(self.paths))]
        if oom_score_adj is not None:
            steps.append(f"echo {int(oom_score_adj)} > /proc/self/oom_score_adj")
        if not steps:
            return argv
        files = [str(p / "cgroup.procs") for p in self.paths]
        return ["/bin/sh", "-c", f'{" && ".join(steps)} && shift {len(files)} && exec "$@"', "grader-worker",
                *files, *argv]

    def memory_exceeded(self) -> bool:
        """Did the kernel kill a process of this cgroup for memory?"""
        for path in self.paths:
            for name in ("memory.events", "memory.oom_control"):
                text = read_text(path / name)
                if text and any(line.startswith("oom_kill ") and line.split()[1] != "0" for line in text.splitlines()):
                    return True
        return False

    def processes(self) -> list[int]:
        """The pids in this cgroup (none where no cgroup could be made)."""
        return _pids(self.paths[0]) if self.paths else []

    def kill_all(self, timeout_s: float = 5.0) -> None:
        """SIGKILL every process in the cgroup until none is left, then remove it."""
        deadline = time.monotonic() + timeout_s
        for path in self.paths:
            while time.monotonic() < deadline:
                pids = _pids(path)
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.01)
            _try_rmdir(path)
        self.paths = []


@functools.cache
def _parent(controller: str) -> tuple[str, Path] | None:
    """(version, folder) below which this process makes its workers' cgroups for `controller`:
    `PARENT_NAME` below its own cgroup, made on first use (stale children of killed graders are
    swept then); None where it cannot be made, or on v2 where the controller cannot be enabled
    for children there."""
    place = _home(controller)
    if place is None:
        return None
    version, own = place
    parent = own / PARENT_NAME
    if not _try_mkdir(parent):
        return None
    if version == "v2":
        wanted = {"memory", "pids", "cpu"} if controller == "cpu" else {"memory", "pids"}
        for folder in (own, parent):
            for name in sorted(wanted):
                _write(folder / "cgroup.subtree_control", f"+{name}")
            enabled = set((read_text(folder / "cgroup.subtree_control") or "").split())
            if controller not in enabled:
                _try_rmdir(parent)
                return None
    _sweep(parent)
    return version, parent


def _pids(path: Path) -> list[int]:
    return [int(p) for p in (read_text(path / "cgroup.procs") or "").split()]


def _sweep(parent: Path, older_than_s: float = 600.0) -> None:
    """Remove the empty cgroups of graders that were killed before they could clean up (only
    old ones: a young empty one may be about to receive its first process)."""
    for child in parent.glob("*"):
        try:
            if child.is_dir() and time.time() - child.stat().st_mtime > older_than_s:
                child.rmdir()
        except OSError as exc:
            log.debug("left the cgroup %s: %s", child, exc)


def _try_mkdir(path: Path) -> bool:
    try:
        path.mkdir(exist_ok=True)
        return True
    except OSError:
        return False


def _try_rmdir(path: Path) -> None:
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:           # busy: its last process is still being reaped
            time.sleep(0.02)


def _write(path: Path, value) -> bool:
    try:
        path.write_text(str(value))
        return True
    except OSError:
        return False


def read_text(path: Path | str) -> str | None:
    """The file's text, or None where it cannot be read (a process or cgroup that is gone).
    Plain system calls: pausing a worker reads a few files of /proc per thread at every call."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")
