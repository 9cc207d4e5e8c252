"""What the attack suite measures around a grading run: the course tree before and after, every
process the run started (alive or orphaned), the peak memory of the trusted processes, the
workers' cgroups, and connections that reach the host.

Orphans are caught by making the test process a child subreaper for the duration of a run: a
process of the run that loses its parent (a daemon that double-forked, a pool child whose CLI
was killed) is adopted by the test process instead of init, so it stays visible as a
descendant and can be checked for, reaped and, if it outlived the run, killed.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import COURSE
from grader.isolation import sandbox, uid_jail
from grader.session import seeds

PR_SET_CHILD_SUBREAPER = 36
SAMPLE_EVERY_S = 0.1
_LIBC = ctypes.CDLL(None, use_errno=True)


# ---------------------------------------------------------------- the course tree

def course_fingerprint() -> dict[str, tuple]:
    """The course tree and its git folder, once the course has its secret and, where the grader
    runs as root, is sealed: its first grading makes the secret (a fresh clone has none) and its
    first uid-level grading seals it, here or in a test on another worker (`-n 2`), which is no
    change a grading may be blamed for."""
    seeds.course_secret()
    if os.geteuid() == 0:
        uid_jail.seal()
    return fingerprint(COURSE.root, git_dir_outside(COURSE.root))


def fingerprint(root: Path, extra_dirs: tuple[Path, ...] = ()) -> dict[str, tuple]:
    """Every entry under `root` (ignored files included): its type and mode, and the sha256 of a
    file's bytes or a link's target. A virtual environment (a folder holding `pyvenv.cfg`) is
    large, so its entries are fingerprinted by their stat (size, mtime, ctime, inode), which
    any write changes too."""
    entries: dict[str, tuple] = {}
    for base in (Path(root), *extra_dirs):
        for folder, dirs, files in os.walk(base):
            folder_path = Path(folder)
            stat_only = any((parent / "pyvenv.cfg").is_file() for parent in (folder_path, *folder_path.parents)
                            if parent.is_relative_to(base))
            for name in dirs + files:
                path = folder_path / name
                info = path.lstat()
                key = str(path)
                if stat_only:
                    entries[key] = ("stat", info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
                elif stat.S_ISLNK(info.st_mode):
                    entries[key] = ("link", os.readlink(path))
                elif stat.S_ISREG(info.st_mode):
                    entries[key] = ("file", info.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
                else:
                    entries[key] = ("other", info.st_mode)
            dirs[:] = [d for d in dirs if not (folder_path / d).is_symlink()]
    return entries


def device_fingerprint() -> dict[str, tuple]:
    """The host's device nodes that the sandbox gives its jails: mode, times and ctime (which
    even a chmod or touch to the same values changes)."""
    entries = {}
    for node in sandbox.DEVICE_NODES:
        try:
            info = os.stat(node)
        except OSError:
            continue
        entries[node] = ("device", info.st_mode, info.st_mtime_ns, info.st_ctime_ns)
    return entries


def differences(before: dict, after: dict) -> list[str]:
    changed = [f"changed: {k}" for k in before.keys() & after.keys() if before[k] != after[k]]
    return sorted(changed + [f"removed: {k}" for k in before.keys() - after.keys()]
                  + [f"added: {k}" for k in after.keys() - before.keys()])


def git_dir_outside(root: Path) -> tuple[Path, ...]:
    """The repository's own git folder when it lies outside `root` (a worktree); inside, the
    walk of `root` covers it."""
    try:
        found = subprocess.run(["git", "-C", str(root), "rev-parse", "--absolute-git-dir"], capture_output=True,
                               text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return (Path(found),) if found and not Path(found).is_relative_to(root) else ()


# ---------------------------------------------------------------- processes

def _stat_fields(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2:].split()
    return rest[0], int(rest[1])


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def descendants(of: int) -> dict[int, str]:
    """Every living (non-zombie) descendant of `of`: pid -> state."""
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None:
                states[int(entry)] = fields[0]
                children.setdefault(fields[1], []).append(int(entry))
    found, todo = {}, list(children.get(of, []))
    while todo:
        pid = todo.pop()
        if states.get(pid) not in (None, "Z", "X"):
            found[pid] = states[pid]
        todo += children.get(pid, [])
    return found


def peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def reap_adopted() -> None:
    """Collect the exit status of adopted orphans that died (zombie children of this process)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and fields[1] == os.getpid() and fields[0] == "Z":
                try:
                    os.waitpid(int(entry), os.WNOHANG)
                except ChildProcessError:
                    pass


def processes_with(marker: str) -> dict[int, str]:
    """Every process on the machine whose command line holds `marker`."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            line = cmdline(int(entry))
            if marker in line:
                found[int(entry)] = line
    return found


@dataclass
class Watch:
    """Processes of one run, sampled while it runs: the peak memory of each trusted process
    (everything not sandboxed: the CLI and its pool), and the jails it made."""
    tmp_dir: Path
    peak_mb: dict[str, float] = field(default_factory=dict)     # "pid cmdline" -> peak RSS
    jails: set[str] = field(default_factory=set)                # names of the jails' folders (= cgroups)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Watch:
        if _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            for pid in descendants(os.getpid()):
                line = cmdline(pid)
                if "grader.cli" in line or "grader.running.pool" in line:
                    key = f"{pid} {line[:120]}"
                    self.peak_mb[key] = max(self.peak_mb.get(key, 0.0), peak_rss_mb(pid))
            for pattern in ("grader-jail-*", "grader-pool-*/grader-jail-*"):     # a pool process's own temporary folder
                self.jails.update(p.name for p in self.tmp_dir.glob(pattern))
            self._stop.wait(SAMPLE_EVERY_S)

    def survivors(self, grace_s: float = 30.0) -> dict[int, str]:
        """Descendants still alive `grace_s` after the run ended (the pool's children may take a
        moment to exit once their CLI is gone); they are killed before returning, and the
        test process stops adopting orphans."""
        deadline = time.monotonic() + grace_s
        while True:
            reap_adopted()
            alive = descendants(os.getpid())
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        report = {pid: cmdline(pid) for pid in alive}
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
        reap_adopted()
        _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        return report


def leftover_cgroups(jails: set[str]) -> list[str]:
    """cgroups of this run's jails that still exist (each jail's cgroup is named after its folder)."""
    parents = [Path("/sys/fs/cgroup/grader"), Path("/sys/fs/cgroup/memory/grader"), Path("/sys/fs/cgroup/pids/grader"),
               Path("/sys/fs/cgroup/cpu/grader")]
    return [str(parent / name) for parent in parents for name in jails if (parent / name).exists()]


# ---------------------------------------------------------------- the host's network

class Listener:
    """TCP (IPv4 and IPv6, all addresses) and abstract unix sockets on the host, counting every
    connection that reaches them."""

    def __init__(self, abstract_name: str):
        self.connections: list[str] = []
        self.sockets = []
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("0.0.0.0", 0))
        self.port = tcp.getsockname()[1]
        self.sockets.append(tcp)
        try:
            tcp6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            tcp6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            tcp6.bind(("::", self.port))
            self.sockets.append(tcp6)
        except OSError:
            pass                  # no IPv6 here
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind("\0" + abstract_name)
        self.sockets.append(unix)
        self.abstract_name = abstract_name
        for sock in self.sockets:
            sock.listen(16)
            threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def _accept(self, sock) -> None:
        while True:
            try:
                conn, address = sock.accept()
            except OSError:
                return
            self.connections.append(f"{sock.family.name} from {address!r}")
            conn.close()

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def host_addresses() -> list[str]:
    """This machine's own non-loopback addresses (where a listener on 0.0.0.0 answers too)."""
    addresses = set()
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))      # no packet is sent: this only picks a route
        addresses.add(probe.getsockname()[0])
    except OSError:
        pass
    finally:
        probe.close()
    return sorted(a for a in addresses if not a.startswith("127."))


# ---------------------------------------------------------------- the CLI

@dataclass
class CliRun:
    returncode: int
    output: str
    wall_s: float


def run_cli(args: list, env: dict, cwd: Path, timeout_s: float, level: str = "sandbox") -> CliRun:
    """The grader's CLI as an instructor runs it; at `level` "uid", where no namespace can be
    made (under `no_namespaces.py`'s seccomp filter), so that it grades at the uid level."""
    started = time.monotonic()
    done = subprocess.run([*launcher(level), sys.executable, "-m", "grader.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, errors="replace", timeout=timeout_s)
    return CliRun(done.returncode, done.stdout + done.stderr, time.monotonic() - started)


# ---------------------------------------------------------------- how the suite runs the grader

LEVELS = ("sandbox", "uid")          # the isolation levels official grading may use
NO_NAMESPACES = Path(__file__).with_name("no_namespaces.py")


def launcher(level: str) -> list[str]:
    """What a command is started through to grade at `level`."""
    return [] if level == "sandbox" else [sys.executable, "-I", str(NO_NAMESPACES)]   # -I: its own pyseccomp


def sandbox_skip_reason() -> str | None:
    """Why attacks on the sandbox mean nothing here (None where a sandbox can be made)."""
    from grader.isolation import sandbox
    available, why = sandbox.availability()
    return None if available else f"no sandbox can be made here, so attacks on it mean nothing: {why}"


def level_skip_reason(level: str) -> str | None:
    """Why gradings at `level` cannot be had here (None where they can)."""
    if level == "sandbox":
        return sandbox_skip_reason()
    probe = subprocess.run([*launcher(level), sys.executable, "-c",
                            "from grader.isolation import levels; print(*levels.strongest(), sep='|')"],
                           capture_output=True, text=True, timeout=120)
    got = probe.stdout.strip().split("|", 1)
    if probe.returncode != 0 or got[0] != level:
        return f"no grading at the {level} level here: {(probe.stdout + probe.stderr).strip()[-400:]}"
    return None


def grading_env(work: Path, **extra: str) -> dict[str, str]:
    """The environment the CLI runs in: the caller's without GRADER_* settings, a wide terminal
    (no wrapped lines to parse), temporary files in `work/tmp` (where the jails' folders can be
    watched), and trusted processes that write no bytecode or hypothesis cache into the course,
    so that any write there is an attack's."""
    (work / "tmp").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    env.update(TMPDIR=str(work / "tmp"), PYTHONDONTWRITEBYTECODE="1", COLUMNS="400",
               HYPOTHESIS_STORAGE_DIRECTORY=str(work / "hypothesis"), **extra)
    return env


def work_folder(name: str) -> Path:
    """A folder for a grading's files that workers of another uid may enter (not list): in the
    system's temporary folder, since pytest's own (/tmp/pytest-of-<user>) is its owner's alone,
    and every new pytest session on the machine makes it so again. The caller removes it."""
    folder = Path(tempfile.mkdtemp(prefix=f"l1-{name}-", dir=sandbox.shared_temp_root()))
    os.chmod(folder, 0o711)
    return folder


def show(request, line: str) -> None:
    """A figure on the terminal, past pytest's capture."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if capture is not None and reporter is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("\n" + line)


def new_marker() -> str:
    import secrets
    return f"l1-security-{secrets.token_hex(8)}"


def tries_as(uid: int, attempt) -> str:
    """What `attempt()` did in a child that became `uid` (gid the same, no other groups), as the
    uid level runs learner code: "done", "refused" (PermissionError) or what else it raised."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            attempt()
            said = b"done"
        except PermissionError:
            said = b"refused"
        except BaseException as exc:                 # noqa: BLE001 - reported, then the child ends
            said = type(exc).__name__.encode()
        os.write(write, said)
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as result:
        return result.read().decode()
