"""The worker's own side: processes that import one learner module and answer calls.

`python -m grader.worker.zygote` starts a *zygote*, usually inside the sandbox, started by
`grader.isolation.worker_host` (the trusted side). The zygote caps its own resources (rlimits
given by the trusted side; with no capabilities it cannot raise them again), imports the heavy
libraries the learner's module and the probes use (a fixed allow-list, never learner code), and
then waits on a control socket. For each request it forks a worker: the child receives its own
channel (two pipe ends passed over the socket), imports the learner's module and serves calls
until the channel closes or it is killed. A worker that crashed or hung is replaced by another
fork in milliseconds instead of a fresh interpreter importing torch again.

This is the only part of the grader that learner code shares a process with: it imports
nothing but `dispatch`, `wire` and `loading`. The zygote never runs learner code; a worker may
harm the zygote (they share a uid), which costs only that learner's own later workers: the
trusted side then starts a new sandbox.
"""
from __future__ import annotations

import ctypes
import errno
import faulthandler
import importlib
import json
import logging
import os
import resource
import select
import signal
import socket
import sys
from pathlib import Path

from grader.worker import wire
from grader.worker.dispatch import answer, asking_over
from grader.worker.loading import StudentImportError, load_module

log = logging.getLogger(__name__)

PROBE_ERROR_CHARS = 400      # the zygote's first message stays within one control-socket read
STACK_SIGNAL = signal.SIGUSR2  # a worker given it writes its threads' stacks on its channel (`WorkerHost.stack_of`)
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
_LIBC = ctypes.CDLL(None, use_errno=True)
PRELOADABLE = ("numpy", "torch", "transformers", "peft", "trl", "datasets", "safetensors", "matplotlib",
               "pandas", "polars", "accelerate")


def give_back_freed_memory() -> None:
    """What a call freed goes back to the box (glibc keeps freed heap in its arenas unless
    asked), so that a worker that served many tests is no bigger than the work in flight."""
    trim = getattr(_LIBC, "malloc_trim", None)       # glibc's; other C libraries return memory on their own
    if trim is not None:
        trim(0)


def apply_rlimits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))


def serve(module_path: Path, channel: wire.Channel) -> None:
    # A call past its time limit is asked where it is before the worker is killed: the dump goes
    # on the channel, whose messages end there (`WorkerHost.stack_of`). faulthandler writes from
    # its C signal handler, so a loop that never returns to Python's eval loop is sampled too.
    faulthandler.register(STACK_SIGNAL, file=channel.write_fd, all_threads=True)
    try:
        module = load_module(module_path)
    except StudentImportError as exc:
        channel.send({"ready": False, "error": str(exc)})
        return
    channel.send({"ready": True})
    ask = asking_over(channel)
    while True:
        try:
            header, blobs = channel.receive()
        except wire.ChannelClosed:
            return
        channel.send(*answer(module, module_path, header, blobs, ask))
        give_back_freed_memory()


def zygote(module_path: Path, control: socket.socket, preload: list[str], probe_files: list[str]) -> None:
    for name in preload:
        if name in PRELOADABLE:
            try:
                importlib.import_module(name)
            except Exception as exc:       # a broken library surfaces when the learner's module imports it
                log.debug("%s not preloaded: %s", name, exc)
    # The probes are loaded here, before any learner code exists: whether one fails to load is the
    # course's word, which a worker (that could replace or break a probe) cannot change.
    probe_errors = {}
    for path in probe_files:
        try:
            load_module(Path(path))
        except StudentImportError as exc:
            probe_errors[path] = str(exc)[:PROBE_ERROR_CHARS]
    control.send(json.dumps({"up": True, "probe_errors": probe_errors}).encode())
    while True:
        _report_exits(control)
        try:
            ready, _, _ = select.select([control], [], [], 0.05)
            if not ready:
                continue
            message, fds, _, _ = socket.recv_fds(control, 4096, 2)
        except OSError:
            return
        if not message:
            return
        request = json.loads(message)
        if request.get("op") == "kill":
            _signal(request.get("pid"), signal.SIGKILL)
        elif request.get("op") == "stack":
            _signal(request.get("pid"), STACK_SIGNAL)
        elif request.get("op") == "fork" and len(fds) == 2:
            _fork(module_path, control, fds)


def _fork(module_path: Path, control: socket.socket, fds: list[int]) -> None:
    zygote_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent(zygote_pid)
        control.close()
        try:
            serve(module_path, wire.Channel(*fds))
        finally:
            os._exit(0)
    for fd in fds:
        os.close(fd)
    control.send(json.dumps({"pid": pid}).encode())


def _report_exits(control: socket.socket) -> None:
    """Reap finished workers, and in the sandbox (where the zygote is the first process) the
    orphans it adopts, and tell the trusted side how each ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        control.send(json.dumps({"exited": pid, "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                                 "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}).encode())


def _signal(pid, sig: int) -> None:
    if isinstance(pid, int) and pid > 1:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies. A process that is not paused notices its
    channel closing and ends itself, but one paused between calls (SIGSTOP) never would: outside
    a sandbox (whose pid namespace ends with it) nothing else would end it after a killed grader."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:      # the parent died before the request took effect
        os._exit(1)


def become(identity: dict | None) -> None:
    """At the uid isolation level, this zygote is started as root and becomes its own uid and
    gid here, before it imports anything: no supplementary groups, no capabilities left (a uid
    other than 0 holds none), and no way to gain any (`no_new_privs`: no set-uid program, no file
    capability). Every worker it forks is that uid too."""
    if identity is None:
        return
    os.setgroups([])
    os.setresgid(identity["gid"], identity["gid"], identity["gid"])
    os.setresuid(identity["uid"], identity["uid"], identity["uid"])
    if _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or os.getuid() == 0:
        raise SystemExit("the zygote could not give up root")


def refuse_sockets() -> None:
    """At the uid level there is no network namespace: a seccomp filter (libseccomp, through
    pyseccomp) refuses this process and everything it starts new sockets of any family, and
    io_uring (which could make them), so learner code reaches no network, no abstract unix socket
    and no local service. The channels it was handed (pipes, a socketpair) still work."""
    import pyseccomp as sc
    rules = sc.SyscallFilter(defaction=sc.ALLOW)
    for call in ("socket", "io_uring_setup"):
        rules.add_rule(sc.ERRNO(errno.EACCES), call)
    rules.load()


def main(argv: list[str]) -> None:
    identity = json.loads(argv[5])
    become(identity)                       # first: a change of credentials clears the parent-death signal
    if identity is not None:
        refuse_sockets()
    die_with_parent(os.getppid())
    module_path, control_fd = Path(argv[0]), int(argv[1])
    rlimits, preload, probe_files = json.loads(argv[2]), json.loads(argv[3]), json.loads(argv[4])
    apply_rlimits(rlimits)
    zygote(module_path, socket.socket(fileno=control_fd), preload, probe_files)


if __name__ == "__main__":
    main(sys.argv[1:])
