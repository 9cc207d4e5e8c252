"""The isolation level for hosts that deny namespaces but run the grader as root (`"level":
"uid"`): the containers Gradescope and PrairieLearn grade in, whose seccomp or AppArmor profiles
refuse the user namespaces bubblewrap needs.

Each task's zygote is started as root inside its cgroup, and then, before it imports anything,
becomes a uid and gid of its own (`allocate_uid`: never another host's, never a user of the
machine), with no supplementary groups, no capabilities and `no_new_privs`
(`grader.worker.zygote.become`); its workers are its forks. A different uid is what keeps it from
signalling, tracing or reading the memory of the grading's processes or of another submission's
workers, and file permissions do the rest:

- what it may read: the Python environment, `datasets/`, the task's probe files and the worker's
  side of the grader (all world-readable), and its private folder: a copy of the learner's module
  (and a `.git` holding its commit alone) in a folder it cannot write, which its group alone may enter, so
  that another submission's worker, which sees its zygote's command line, cannot open it; and a
  home and temporary folder of its own;
- what it may write: those two folders, and the pytest folders of its own grading, whose entries
  the trusted side gives to its uid before each call (`grant_writable`);
- what it may neither read nor write: everything that decides a grade, sealed by `seal` before
  any worker starts (readable by their owner only): the hidden suites but for their probe files,
  the references, the course's git history and secret, the results folders; the grading's own
  temporary folders are its owner's (0700) and only traversable where its worker must reach its
  pytest folder; the grader's code and the running entrypoint are root's and not writable by
  others (`seal` refuses to grade where they are).

There is no network namespace: instead a seccomp filter refuses the worker new sockets of any
family (`grader.worker.zygote.refuse_sockets`), so it reaches no network and no local service.
What any user may write (the host's `/tmp`, `/dev/shm`) it may write too, within RLIMIT_FSIZE per
file: in a platform's container, a disk it fills is its own grading's.
Processes are found and ended by uid, which a daemon cannot leave: every process of the host's uid
is paused between calls and killed when the host closes, cgroup or not; without a cgroup the
process count is capped by RLIMIT_NPROC, which counts per uid.
"""
from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from grader.course import COURSE
from grader.isolation.cgroups import read_text
from grader.isolation.sandbox import (
    LEARNER_OOM_SCORE_ADJ,
    Limits,
    python_paths,
    shared_temp_root,
    worker_environment,
    worker_runtime,
)
from grader.processes.forks import Fork
from grader.session.intake import head_only_repository

log = logging.getLogger(__name__)

UID_BASE = 0x5000_0000          # far above any user of a machine and the usual subordinate-id ranges
UIDS_PER_PROCESS = 64           # hosts one grading process may start in its life before uids repeat
SECRET_MODE = 0o600             # a sealed file: its owner's alone
TRAVERSE_ONLY_MODE = 0o711      # a sealed folder others must pass through: entered, never listed
SHARED_ROOTS = ("/", "/var", "/run", "/dev")   # whose world-writable folders (/tmp, /run/lock, ...) any uid may fill
SYSV_IPC = {"shm": "shmctl", "msg": "msgctl", "sem": "semctl"}     # /proc/sysvipc/<kind>, and what removes one
IPC_RMID = 0
_LIBC = ctypes.CDLL(None, use_errno=True)
_allocated = 0


def availability() -> tuple[bool, str]:
    """(True, "") where workers can run as a uid of their own: Linux, and a grader run by root."""
    if sys.platform != "linux":
        return False, f"the uid level needs Linux; this is {sys.platform}"
    if os.geteuid() != 0:
        return False, "the uid level needs a grader run by root, which can give each worker a uid of its own"
    try:
        import pyseccomp
        pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)      # made, not loaded: can the worker make one?
    except Exception as exc:       # noqa: BLE001 (not installed, or no libseccomp)
        return False, f"the uid level cuts the network with a seccomp filter, and none can be made here " \
                      f"({type(exc).__name__}: {str(exc)[:200]})"
    if shared_temp_root() is None:
        return False, "no temporary folder here may be entered by other users, for the worker's own folders"
    hidden_from_others = _not_reachable_by_others([*python_paths(), COURSE.datasets, worker_runtime()])
    if hidden_from_others:
        return False, f"the worker's uid could not reach {hidden_from_others}, which other users may not enter " \
                      "(the Python environment, the course's data and the worker's code must be readable by all)"
    return True, ""


def _not_reachable_by_others(paths) -> Path | None:
    """The first folder on the way to one of `paths` that users other than its owner may not
    enter (or `paths` read), or None."""
    for path in map(Path, paths):
        for folder in (path, *path.parents):
            mode = os.stat(folder).st_mode
            if not mode & stat.S_IXOTH or (folder == path and stat.S_ISDIR(mode) and not mode & stat.S_IROTH):
                return folder
    return None


def allocate_uid() -> int:
    """A uid (and gid) no other worker host alive uses: this process's pid, unique among the
    living, and a count of the hosts it started."""
    global _allocated
    _allocated += 1
    return UID_BASE + (os.getpid() % (1 << 22)) * UIDS_PER_PROCESS + _allocated % UIDS_PER_PROCESS


class UidJail:
    """One task's worker host at the uid level: its private folder, its uid, its cgroup (the
    level "uid" of `grader.isolation.jail.Jail`)."""

    def __init__(self, module_bytes: bytes, module_name: str, *, writable_dirs: list[Path], limits: Limits,
                 commit: str | None = None):
        self.limits = limits
        self.uid = allocate_uid()
        kill_uid(self.uid)                 # whatever a killed grading left under this uid goes first
        remove_leftovers_of(self.uid)
        self.private = Path(tempfile.mkdtemp(prefix="grader-uid-", dir=shared_temp_root()))
        os.chmod(self.private, 0o711)
        # The bytes graded: readable by this host's uid alone (through its group), writable by none of
        # it. Its path is on the zygote's command line, which every uid can see.
        submission = self.private / "submission"
        submission.mkdir()
        self.module_path = submission / module_name
        self.module_path.write_bytes(module_bytes)
        if commit is not None:             # its code may record its commit: the commit alone, not its history
            head_only_repository(submission, commit)
        _readable_by_group_only(submission, self.uid)
        self.home = self.private / "home"
        self.home.mkdir(mode=0o700)
        os.chown(self.home, self.uid, self.uid)
        self.cwd = str(self.home)
        self.writable_dirs = [Path(d) for d in writable_dirs]
        self.runtime = worker_runtime()
        self.cgroup = limits.cgroup(self.private.name)

    def command(self, argv: list[str]) -> list[str]:
        return self.cgroup.wrap(argv, oom_score_adj=LEARNER_OOM_SCORE_ADJ)

    def environment(self) -> dict[str, str]:
        # The submission's `.git` belongs to root, not the worker's uid: git refuses a repository
        # another user owns unless told it is safe (git config's safe.directory, here as git's
        # own command-line configuration), and the learner's `git rev-parse HEAD` would print nothing.
        return {**worker_environment(home=str(self.home), pythonpath=str(self.runtime)),
                "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
                "GIT_CONFIG_VALUE_0": str(self.module_path.parent)}

    @property
    def become(self) -> dict[str, int]:
        return {"uid": self.uid, "gid": self.uid}

    @property
    def rlimits(self) -> dict[str, int]:
        limits = self.limits.rlimits(self.cgroup)
        if not self.cgroup.paths:
            limits["NPROC"] = self.limits.processes
        limits["MSGQUEUE"] = 0        # no POSIX message queue: one would outlive the worker, open to any uid
        return limits

    def disk_paths(self) -> list[str]:
        """What the worker's uid keeps on the host's disk beyond the shared folders: its home (no
        tmpfs here, as the sandbox has) and everything it owns where any user may write."""
        return [str(self.home), *owned_in_world_writable(self.uid)]

    def processes(self) -> list[int] | None:
        """Every process of this host's uid, wherever it was reparented."""
        return processes_of(self.uid)

    def exit_code(self, code: int) -> int:
        return code

    def grant_writable(self) -> None:
        """Give the worker's uid what the trusted side made in the shared folders since the last
        call (pytest's folder of each test is made by root, 0700): the same folders a sandboxed
        worker may write."""
        for folder in self.writable_dirs:
            for root, dirs, files in os.walk(folder):
                for name in [root, *(os.path.join(root, entry) for entry in dirs + files)]:
                    try:
                        info = os.lstat(name)
                        if info.st_uid != self.uid:
                            os.lchown(name, self.uid, self.uid)
                    except OSError as exc:
                        log.debug("%s stays its owner's: %s", name, exc)
                        continue

    def close(self) -> None:
        self.cgroup.kill_all()
        kill_uid(self.uid)
        remove_leftovers_of(self.uid)
        shutil.rmtree(self.private, ignore_errors=True)


def processes_of(uid: int) -> list[int]:
    """The pids whose real uid is `uid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            status = read_text(f"/proc/{entry}/status") or ""
            line = next((row for row in status.splitlines() if row.startswith("Uid:")), "")
            if line and int(line.split()[1]) == uid:
                found.append(int(entry))
    return found


def kill_uid(uid: int, timeout_s: float = 5.0) -> None:
    """SIGKILL every process of `uid` until none is left: a child of ours becomes that uid and
    signals all it may (kill(-1) reaches exactly the processes of its own uid)."""
    deadline = time.monotonic() + timeout_s
    while processes_of(uid) and time.monotonic() < deadline:
        Fork.start(partial(_kill_all_as, uid)).reap()
        time.sleep(0.01)


def _kill_all_as(uid: int) -> int:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    os.kill(-1, signal.SIGKILL)
    return 0


def owned_in_world_writable(uid: int) -> list[str]:
    """The entries `uid` owns in the folders where every user may write: those at the top of
    the shared roots (the host's /tmp, /var/tmp, /dev/shm, which holds memory, /run/lock, and
    whatever else a container has), and in every world-writable folder below them that another
    user made."""
    owned, folders = [], world_writable_folders()
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    info = _lstat(entry)
                    if info is None:
                        continue
                    if info.st_uid == uid:
                        owned.append(entry.path)
                    elif _world_writable_folder(info):
                        folders.append(entry.path)
        except OSError as exc:
            log.debug("%s not searched for files of uid %d: %s", folder, uid, exc)
            continue
    return owned


def world_writable_folders() -> list[str]:
    """The folders at the top of the shared roots that every user may write to."""
    found = []
    for root in SHARED_ROOTS:
        try:
            with os.scandir(root) as entries:
                found += [entry.path for entry in entries
                          if (info := _lstat(entry)) is not None and _world_writable_folder(info)]
        except OSError as exc:
            log.debug("%s not searched for shared folders: %s", root, exc)
    return found


def _world_writable_folder(info: os.stat_result) -> bool:
    return stat.S_ISDIR(info.st_mode) and bool(info.st_mode & stat.S_IWOTH)


def _lstat(entry: os.DirEntry) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:
        return None


def sysv_ipc_of(uid: int) -> list[tuple[str, int]]:
    """The System V shared memory segments, message queues and semaphore sets `uid` created or
    owns, as (kind, id): they outlive every process, and any uid may open one by its key."""
    found = []
    for kind in SYSV_IPC:
        header, *rows = (read_text(f"/proc/sysvipc/{kind}") or "").splitlines() or [""]
        columns = header.split()
        for row in rows:
            values = dict(zip(columns, row.split()))
            if str(uid) in (values.get("uid"), values.get("cuid")):
                found.append((kind, int(values[columns[1]])))       # shmid, msqid or semid
    return found


def remove_leftovers_of(uid: int) -> None:
    """What a worker of `uid` left where every user may reach it goes, all of it: files where
    every user may write (it could write nowhere else outside its private folder) and System V
    IPC objects. It can leave no POSIX message queue (`rlimits`: none of its bytes allowed)."""
    for path in owned_in_world_writable(uid):
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError as exc:
            log.debug("%s of uid %d stays: %s", path, uid, exc)
            continue
    for kind, ident in sysv_ipc_of(uid):
        remove = getattr(_LIBC, SYSV_IPC[kind])
        if (remove(ident, 0, IPC_RMID) if kind == "sem" else remove(ident, IPC_RMID, None)) != 0:
            log.debug("System V %s %d of uid %d stays: errno %d", kind, ident, uid, ctypes.get_errno())


def _readable_by_group_only(tree: Path, gid: int) -> None:
    """Every folder and file of `tree` this process's, of group `gid`, which may read them; no
    other user may even enter."""
    for root, _dirs, files in os.walk(tree):
        os.chown(root, -1, gid)
        os.chmod(root, 0o750)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chown(path, -1, gid)
                os.chmod(path, 0o440)


# ---------------------------------------------------------------- sealing what decides a grade

class SealError(RuntimeError):
    """What decides a grade cannot be kept from the worker's uid here."""


def seal(*extra: Path) -> None:
    """Make what decides a grade unreadable to every uid but its owner's (root, or the instructor
    who runs the grader as root): the hidden suites' files but for their probe files, the
    references, the course's git history and secret, and `extra` (results folders, the batch's
    submissions). Refuse where the grader's own code could be rewritten by another uid."""
    probes = {p.resolve() for task in COURSE.tasks() for p in task.probe_files()}
    secret_files = [p for p in COURSE.hidden.rglob("*") if p.is_file() and not p.is_symlink() and p.resolve() not in probes] \
        if COURSE.hidden.is_dir() else []
    for path in secret_files:
        _restrict(path, SECRET_MODE)
    hidden = COURSE.hidden
    for folder in [hidden, *(p for p in hidden.rglob("*") if p.is_dir() and not p.is_symlink())] if hidden.is_dir() else []:
        _restrict(folder, TRAVERSE_ONLY_MODE)      # a probe is reached by its path; what else is there, not listed
    for folder in (COURSE.solutions, COURSE.root / ".git", *extra):
        if folder.exists() and not folder.is_symlink():
            _restrict(folder, 0o700 if folder.is_dir() else SECRET_MODE)
    if COURSE.secret_file.exists():        # the course secret, where it is kept
        _restrict(COURSE.secret_file, SECRET_MODE)
    _check_not_writable_by_others(Path(__file__).resolve().parent.parent)


def _restrict(path: Path, mode: int) -> None:
    current = stat.S_IMODE(os.lstat(path).st_mode)
    if current & 0o077:
        os.chmod(path, current & mode)


def _check_not_writable_by_others(package: Path) -> None:
    """The grader the trusted side imports, and the folders above it: a worker that could write
    them would grade the next test itself."""
    for path in [*package.rglob("*.py"), package, *package.parents]:
        info = os.lstat(path)
        sticky_dir = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
        if info.st_mode & 0o002 and not sticky_dir:
            raise SealError(f"{path} is writable by every user: a worker running as its own uid could change "
                            "the grader that grades it")
