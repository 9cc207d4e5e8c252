"""The trusted side's handle on a task's workers: launching their zygote (sandboxed or not),
forking workers from it, the channel to each, a bounded record of what they print, and making
sure nothing of them survives.

`WorkerHost` is the single place a worker process is launched (see `grader.worker.zygote` for the
zygote it runs). Output (stdout and stderr) comes through a pipe that a thread drains
continuously, keeping only a bounded tail in memory and a bounded log on disk, so that printing
can neither block a worker nor fill the grader's memory or disk.

Nothing the zygote says is trusted: a worker's pid is used only to ask the zygote to kill it, and
the proof that it died is its channel closing. When that proof does not come, the whole host
(jail, cgroup, every process in it) is killed instead.
"""
from __future__ import annotations

import ast
import json
import logging
import os
import platform
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import COURSE, Course
from grader.isolation.cgroups import read_text
from grader.isolation.jail import Jail, open_jail
from grader.isolation.sandbox import Limits
from grader.schema.report import OUT_OF_MEMORY
from grader.worker import wire
from grader.worker.dispatch import MAX_QUESTIONS, is_question, witness_answer

log = logging.getLogger(__name__)

TAIL_BYTES = 64 << 10          # what is kept in memory of a worker's output
LOG_BYTES = 1 << 20            # what is kept on disk of it
PAUSE_LIMIT_S = 2.0            # stopping a worker's processes takes milliseconds; past this, kill it
SCRATCH_ENTRIES = 100_000      # files and folders a worker may keep in its scratch folders
STACK_WAIT_S = 0.5             # how long a worker asked where it is has to answer (well within a call's margin)
STACK_BYTES = 64 << 10         # what is read of its answer
_STOPPED = ("T", "t", "Z", "X")   # of a thread: stopped, traced and stopped, exited, dead
# The system calls that create a process (fork, vfork, clone, clone3), by architecture: a parent
# blocked in one of them with its child stopped waits for that child (vfork) and cannot stop itself.
_FORK_SYSCALLS = {"x86_64": {57, 58, 56, 435}, "aarch64": {220, 435}}.get(platform.machine(), set())


@dataclass(frozen=True)
class WorkerSpec:
    """How a task's workers are started: at which isolation level ("sandbox", "uid" or "none",
    see `grader.session.plugin`), and what they may see."""
    level: str
    limits: Limits = field(default_factory=Limits)
    course: Course = COURSE
    probe_files: tuple[Path, ...] = ()
    writable_dirs: tuple[Path, ...] = ()


class ScratchFull(Exception):
    """The worker keeps more in its scratch folders than its limits allow."""


def printed_since(tail: bytes | str, total: int, mark: int) -> str:
    """What was printed since `mark` of an output `total` long so far, of which `tail` is the end
    kept: the whole of it, or what `tail` holds of it with a mark that the rest was cut."""
    start = max(mark, total - len(tail))
    part = tail[len(tail) - (total - start):] if total > start else tail[:0]
    text = part.decode("utf-8", "replace") if isinstance(part, bytes) else part
    return f"(earlier output cut)\n{text}" if start > mark else text


class WorkerOutput:
    """What a worker printed: a running byte count, the last TAIL_BYTES in memory and the first
    LOG_BYTES in a log file."""

    def __init__(self, log_path: Path):
        self.log_path = Path(log_path)
        self.total = 0
        self._tail = bytearray()
        self._logged = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._lock = threading.Lock()
        self._sources: list[int] = []

    def attach(self, fd: int) -> None:
        """Drain `fd` from now on, in a thread, until it closes."""
        os.set_blocking(fd, False)
        with self._lock:
            self._sources.append(fd)
        threading.Thread(target=self._drain_forever, args=(fd,), daemon=True).start()

    def mark(self) -> int:
        self.catch_up()
        return self.total

    def since(self, mark: int) -> str:
        """The text printed since `mark` (its tail, if more was printed than is kept)."""
        self.catch_up()
        with self._lock:
            return printed_since(bytes(self._tail), self.total, mark)

    def catch_up(self) -> None:
        """Read whatever is waiting in the pipes now, so a test sees what was printed before its
        call returned."""
        with self._lock:
            for fd in list(self._sources):
                self._read_available(fd)

    def _drain_forever(self, fd: int) -> None:
        while True:
            try:
                select.select([fd], [], [], 1.0)
            except (OSError, ValueError):
                break
            with self._lock:
                if fd not in self._sources or not self._read_available(fd):
                    break
        with self._lock:
            if fd in self._sources:
                self._sources.remove(fd)
                os.close(fd)

    def _read_available(self, fd: int) -> bool:
        """Read until the pipe is empty; False once it is closed."""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not chunk:
                return False
            self._keep(chunk)

    def _keep(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._tail += chunk
        del self._tail[:-TAIL_BYTES]
        if self._logged < LOG_BYTES:
            room = LOG_BYTES - self._logged
            piece = chunk[:room] + (b"\n[... output beyond 1 MiB not logged]\n" if len(chunk) > room else b"")
            with open(self.log_path, "ab") as log:
                log.write(piece)
            self._logged += len(piece)


class Worker:
    """One forked worker: its channel, and what the zygote said of it (pid, how it ended)."""

    def __init__(self, host: WorkerHost, channel: wire.Channel):
        self.host, self.channel = host, channel
        self.started = time.monotonic()
        self.pid: int | None = None
        self.exit: dict | None = None

    def request(self, header: dict, blobs: list[bytes], deadline: float, witness=None) -> tuple[dict, list[bytes]]:
        """Send a request and wait for its reply, answering the questions a witnessed probe puts
        to `witness` on the way (see `dispatch`): at most MAX_QUESTIONS, and all of them with the
        reply within one message's size limits."""
        self.host.check_scratch()
        self.channel.send(header, blobs, deadline)
        allowance = wire.Allowance()
        for _ in range(MAX_QUESTIONS + 1):
            message, message_blobs = self.receive(deadline, allowance)
            if not is_question(message):
                return message, message_blobs
            self.channel.send(*witness_answer(witness, message, message_blobs), deadline=deadline)
        raise wire.WireError(f"it asked more than {MAX_QUESTIONS} questions in one call")

    def receive(self, deadline: float, allowance: wire.Allowance | None = None) -> tuple[dict, list[bytes]]:
        return self.channel.receive(deadline, self.host.check_scratch, allowance)

    def exit_description(self, wait_s: float = 1.0) -> str:
        """How the worker ended; a worker whose pipe just closed gets a moment to finish dying."""
        if self.host.memory_exceeded():
            return f"{OUT_OF_MEMORY} (limit {self.host.limits.memory_mb} MB)"
        self.host.read_messages(until=lambda: self.exit is not None, wait_s=wait_s)
        if self.exit is None:
            return "it stopped answering" if self.host.alive() else f"its sandbox ended ({self.host.exit_description()})"
        if self.exit.get("signal"):
            return f"killed by signal {_signal_name(self.exit['signal'])}"
        return f"exit code {self.exit.get('code')}"

    def kill(self) -> None:
        self.host.end(self)


class WorkerHost:
    """A task's zygote, in its own jail (or none), forking workers for the learner's module."""

    def __init__(self, module_path: Path, module_bytes: bytes, spec: WorkerSpec, output: WorkerOutput,
                 commit: str | None = None):
        self.spec = spec
        self._workers: list[Worker] = []
        self._awaiting_pid: list[Worker] = []
        self._up = False            # the zygote said it started (before it forked anything)
        self.probe_errors: dict[str, str] = {}      # probe file -> why it did not load, in the zygote
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        out_r, out_w = os.pipe()
        self.limits = spec.limits.fitted()          # the box as it is now, as this task starts
        preload = sorted(_imported_libraries(module_bytes, spec.probe_files))
        self.jail: Jail = open_jail(spec.level, Path(module_path), module_bytes, course=spec.course,
                                    probe_files=list(spec.probe_files), writable_dirs=list(spec.writable_dirs),
                                    limits=self.limits, commit=commit)
        self.cgroup = self.jail.cgroup
        argv = _argv(self.jail.module_path, theirs.fileno(), self.jail.rlimits, preload, spec.probe_files,
                     become=self.jail.become)
        command, cwd, env = self.jail.command(argv), self.jail.cwd, self.jail.environment()
        # Its input is an empty pipe, not /dev/null: a file this process opened would be the
        # host's, reachable (chmod, touch) through /proc/<pid>/fd from inside the sandbox.
        empty_r, empty_w = os.pipe()
        os.close(empty_w)
        try:
            self.process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), stdin=empty_r,
                                            stdout=out_w, stderr=out_w, cwd=cwd, env=env, start_new_session=True)
        finally:
            theirs.close()
            os.close(out_w)
            os.close(empty_r)
        output.attach(out_r)
        self.control = ours
        self.started = time.monotonic()

    def spawn(self) -> Worker:
        """Ask the zygote for a new worker; its first message ("ready" or an import error) comes
        on its channel once the zygote has forked it."""
        self.resume()
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        os.set_blocking(to_child_w, False)        # a worker that stops reading cannot hold a write
        worker = Worker(self, wire.Channel(to_parent_r, to_child_w))
        try:
            socket.send_fds(self.control, [json.dumps({"op": "fork"}).encode()], [to_child_r, to_parent_w])
        except OSError as exc:   # the zygote is gone: the worker's channel reports it as closed
            log.debug("no fork asked of the zygote: %s", exc)
        finally:
            os.close(to_child_r)
            os.close(to_parent_w)
        self._workers.append(worker)
        self._awaiting_pid.append(worker)
        return worker

    def end(self, worker: Worker) -> None:
        """Kill one worker, and pause what is left of the host (the zygote, and anything the
        worker left running in the jail) until the next `spawn`; what ran meanwhile may have left
        strays in the shared folders, which go too (`remove_strays`). The proof of its death is its
        channel closing; without that proof within a second, the whole host is killed."""
        self.resume()
        self._ask_zygote("kill", worker, wait_s=1.0)
        if not _closes_within(worker.channel.read_fd, 1.0):
            self.close()
        worker.channel.close()
        if worker in self._workers:
            self._workers.remove(worker)
        if self.alive():
            self.pause()
        remove_strays(self.spec.writable_dirs)

    def stack_of(self, worker: Worker) -> str:
        """Where `worker`'s threads are, as faulthandler writes them on its channel when the
        zygote signals it (`zygote.STACK_SIGNAL`): asked of a call past its time limit, just
        before the worker is killed. Text the worker wrote, at most STACK_BYTES of it, read for
        at most STACK_WAIT_S; "" when it could not be asked."""
        if not self._ask_zygote("stack", worker, wait_s=STACK_WAIT_S):
            return ""
        return _read_for(worker.channel.read_fd, STACK_WAIT_S, STACK_BYTES).decode("utf-8", "replace")

    def _ask_zygote(self, op: str, worker: Worker, wait_s: float) -> bool:
        """Ask the zygote to `op` ("kill", "stack") `worker`, once it has said the worker's pid
        (within `wait_s`); False when it could not be asked."""
        self.read_messages(until=lambda: worker.pid is not None or not self.alive(), wait_s=wait_s)
        if worker.pid is None or not self.alive():
            return False
        try:
            self.control.send(json.dumps({"op": op, "pid": worker.pid}).encode())
        except OSError as exc:
            log.debug("no %s of worker %s asked of the zygote: %s", op, worker.pid, exc)
            return False
        return True

    def read_messages(self, until, wait_s: float) -> None:
        """Read what the zygote says (pids of new workers, how workers ended) until `until()`
        holds or `wait_s` has passed."""
        deadline = time.monotonic() + wait_s
        while not until():
            remaining = deadline - time.monotonic()
            try:
                ready, _, _ = select.select([self.control], [], [], max(remaining, 0))
                message = self.control.recv(4096) if ready else None
            except (OSError, ValueError):
                return
            if message is None:
                return
            if not message:
                return
            self._note(message)

    def _note(self, message: bytes) -> None:
        try:
            news = json.loads(message)
        except ValueError:
            return
        if not isinstance(news, dict):
            return
        if news.get("up") is True and not self._up:     # its first message, sent before any fork
            self._up = True
            errors = news.get("probe_errors")
            self.probe_errors = {str(k): str(v) for k, v in errors.items()} if isinstance(errors, dict) else {}
        elif isinstance(news.get("pid"), int) and self._awaiting_pid:
            self._awaiting_pid.pop(0).pid = news["pid"]
        elif "exited" in news:
            for worker in self._workers:
                if worker.pid == news["exited"]:
                    worker.exit = news

    def started_up(self) -> bool:
        """Whether the zygote got as far as serving forks. A host that ended before that failed on
        the course's side (its sandbox, its interpreter, the grader's files): no learner code had
        run in it yet."""
        self.read_messages(until=lambda: self._up, wait_s=0.5)
        return self._up

    def check_scratch(self) -> None:
        """The folders the workers share with the tests are on the host's disk, which no sandbox
        limit covers (nor, at the uid level, its home and what it puts in /tmp): what they keep
        there is measured before each call and while it runs, and a worker over the limit is
        stopped (ScratchFull) before it fills the disk."""
        used, entries = _usage([*self.spec.writable_dirs, *self.jail.disk_paths()])
        if used > self.spec.limits.scratch_mb << 20 or entries > SCRATCH_ENTRIES:
            raise ScratchFull(f"it keeps {used >> 20} MB in {entries} files in the folders it may write; the limit "
                              f"is {self.spec.limits.scratch_mb} MB and {SCRATCH_ENTRIES} files")

    def pause(self) -> bool:
        """Stop every process of the host, zygote and workers (SIGSTOP), until `resume`, and see
        every thread of each stopped (`_paused`): between calls, learner code runs not at all, so
        nothing it left behind (a thread, a child) can race the tests' own file writes or reads
        (planting a link where a test is about to write), or compete with them for the CPU. False
        when they could not be stopped in time (the host is then killed)."""
        deadline = time.monotonic() + PAUSE_LIMIT_S
        while time.monotonic() < deadline:
            running = [pid for pid in self._processes() if not _paused(pid)]
            if not running:
                return True
            for pid in running:
                _signal(pid, signal.SIGSTOP)
            os.sched_yield()           # the stop takes effect when each process next runs: a few microseconds
        self.close()
        return False

    def resume(self) -> None:
        for pid in self._processes():
            _signal(pid, signal.SIGCONT)

    def _processes(self) -> list[int]:
        """The host's processes: its cgroup's; else, at the uid level, every process of its uid;
        else the launched process and its descendants (in the sandbox, every process is one:
        orphans are adopted by the zygote, its first process)."""
        if self.cgroup.paths:
            return self.cgroup.processes()
        own = self.jail.processes()
        return own if own is not None else _descendants_and_self(self.process.pid)

    def grant_writable(self) -> None:
        """Before a call: at the uid level, the shared folders' new entries become the worker's."""
        self.jail.grant_writable()

    def alive(self) -> bool:
        return self.process.poll() is None

    def memory_exceeded(self) -> bool:
        return self.cgroup.memory_exceeded()

    def exit_description(self, wait_s: float = 0.0) -> str:
        try:
            code = self.process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return "still running"
        code = self.jail.exit_code(code)
        if code < 0:
            return f"killed by signal {_signal_name(-code)}"
        return f"exit code {code}"

    def close(self) -> None:
        """End the zygote, every worker and everything they started, at once."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        self.jail.close()
        for worker in self._workers:
            worker.channel.close()
        self._workers.clear()
        self.control.close()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _argv(module_path: Path, control_fd: int, rlimits: dict, preload: list[str], probe_files,
          become: dict | None = None) -> list[str]:
    return [sys.executable, "-m", "grader.worker.zygote", str(module_path), str(control_fd), json.dumps(rlimits),
            json.dumps(preload), json.dumps([str(p) for p in probe_files]), json.dumps(become)]


def _imported_libraries(module_bytes: bytes, probe_files) -> set[str]:
    """The top-level packages the learner's module and the probes import, which the zygote
    imports ahead (it keeps only those on its allow-list)."""
    names: set[str] = set()
    sources = [module_bytes, *(Path(p).read_bytes() for p in probe_files)]
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _read_for(fd: int, seconds: float, limit: int) -> bytes:
    """What arrives on the pipe `fd` within `seconds`, up to `limit` bytes; done early once a
    first piece has come and a tenth of a second passes with nothing more."""
    deadline, data = time.monotonic() + seconds, b""
    while len(data) < limit:
        wait = deadline - time.monotonic()
        if data:
            wait = min(wait, 0.1)
        try:
            ready, _, _ = select.select([fd], [], [], max(wait, 0))
            chunk = os.read(fd, limit - len(data)) if ready else b""
        except (OSError, ValueError):
            break
        if not chunk:
            break
        data += chunk
    return data


def _closes_within(fd: int, seconds: float) -> bool:
    """True once every writer of the pipe `fd` is gone (reads give EOF), within `seconds`."""
    if fd < 0:
        return True
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        try:
            ready, _, _ = select.select([fd], [], [], max(remaining, 0))
        except (OSError, ValueError):
            return True
        if not ready:
            return False
        try:
            if not os.read(fd, 1 << 16):
                return True
        except OSError:
            return True


def _state(task: str) -> str | None:
    """The state letter of a process or thread, from its folder in /proc."""
    text = read_text(f"{task}/stat")
    return text[text.rindex(")") + 2] if text else None


def _paused(pid: int) -> bool:
    """Every thread of `pid` stopped, or unable to run before it stops. Each thread is asked on
    its own: a process whose first thread has exited reads as a zombie in `/proc/<pid>/stat`
    while its other threads run on."""
    return all(_thread_paused(pid, thread) for thread in _threads(pid))     # none once it is gone


def _thread_paused(pid: int, thread: str) -> bool:
    """Stopped or gone, or blocked in the system call that creates a child (fork, vfork,
    posix_spawn) with our SIGSTOP pending and its children stopped. A vfork parent waits there
    until its child execs or exits, so with the child stopped first it never reaches the stopped
    state itself; it leaves the call only when `resume` continues the child, and then stops before
    running anything (a fork not yet complete is undone by the pending signal)."""
    state = _state(thread)
    if state is None or state in _STOPPED:
        return True
    if state != "D" or _syscall(thread) not in _FORK_SYSCALLS or not _stop_pending(pid):
        return False
    children = _thread_children(thread)
    return bool(children) and all(_paused(child) for child in children)


def _stop_pending(pid: int) -> bool:
    for line in (read_text(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("ShdPnd:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGSTOP - 1)))
    return False


def _syscall(thread: str) -> int | None:
    """The system call a thread is blocked in (None where the kernel does not say)."""
    fields = (read_text(f"{thread}/syscall") or "").split()
    return int(fields[0]) if fields and fields[0].lstrip("-").isdigit() else None


def _threads(pid: int) -> list[str]:
    """The /proc folders of the threads of `pid` (none once it is gone)."""
    folder = f"/proc/{pid}/task"
    try:
        return [f"{folder}/{thread}" for thread in os.listdir(folder)]
    except OSError:
        return []


def _thread_children(thread: str) -> list[int]:
    return [int(c) for c in (read_text(f"{thread}/children") or "").split()]


def _children(pid: int) -> list[int]:
    return [child for thread in _threads(pid) for child in _thread_children(thread)]


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _descendants_and_self(root: int) -> list[int]:
    """`root` and every process below it, from the kernel's lists of each thread's children."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += _children(pid)
    return found


def _usage(folders) -> tuple[int, int]:
    """Bytes on disk and number of entries under `folders` (links are not followed)."""
    used = entries = 0
    for _, info in _entries(folders, limit=SCRATCH_ENTRIES + 1):
        entries += 1
        used += info.st_blocks * 512
    return used, entries


def remove_strays(folders) -> list[str]:
    """Remove, from the folders learner code shares with the tests, every entry that would take a
    test's read or write elsewhere: a link that leads out of them (to a course file, another
    learner's folder, `/dev/zero`), and anything that is not a file, a folder or a link (a named
    pipe a read would hang on, a socket). The trusted side calls it whenever learner code has
    stopped running, before any test touches those folders again; it returns what it removed, as
    `path -> where it led`."""
    roots = [Path(folder).resolve() for folder in folders]
    removed = []
    for path, info in list(_entries(folders)):        # all of them: a stray hides nowhere
        if stat.S_ISLNK(info.st_mode):
            target = Path(path).resolve()
            if any(target.is_relative_to(root) for root in roots):
                continue
            what = str(target)
        elif stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
            continue
        else:
            what = "a named pipe" if stat.S_ISFIFO(info.st_mode) else "a socket or device"
        try:
            os.unlink(path)
        except OSError as exc:
            log.debug("stray %s stays: %s", path, exc)
            continue
        removed.append(f"{path} -> {what}")
    return removed


def _entries(folders, limit: int | None = None):
    """(path, lstat result) of everything under `folders`, links not followed (at most `limit`);
    a path that is a file is counted itself."""
    count = 0
    todo = []
    for path in map(str, folders):
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            todo.append(path)
        else:
            yield path, info
            count += 1
    while todo:
        try:
            with os.scandir(todo.pop()) as listing:
                for entry in listing:
                    info = entry.stat(follow_symlinks=False)
                    yield entry.path, info
                    count += 1
                    if count == limit:
                        return
                    if stat.S_ISDIR(info.st_mode):
                        todo.append(entry.path)
        except OSError as exc:          # removed while it was being measured
            log.debug("not measured: %s", exc)
            continue
