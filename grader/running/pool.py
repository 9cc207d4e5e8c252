"""A pool of long-lived pytest processes, each running one grading after another.

A grading is one `pytest.main` session per task, each with its own score report (the runner
combines them). The pool process imports the libraries every suite needs (pytest, numpy, torch,
transformers: seconds of CPU) once, and runs each session in a child forked from it: what a
task's session imports and computes beyond that (its suites, their oracles and caches, peft or
trl) dies with the child, so a grading holds one task's memory at a time, and a task whose
session is killed (out of memory, say) costs that task alone, never the tasks after it. Only
course code runs in these processes: learner code runs in the session's workers (or in-process
when a trusted caller asks for it, as the audit does for the course's own mutants).

Parent and child talk over the child's stdin and its original stdout, one JSON line each way
per grading, the reply carrying the job's nonce: a line that does not (written by anything but
the child's own loop) is ignored. pytest's own output goes to each grading's log file. A child
that dies takes only the grading in flight with it: the parent starts a fresh child for the
rest. The parent's deadline is the watchdog: it needs nothing from the child (no signal, no
reply) to end a grading that runs too long, and SIGKILL ends a child even when it is stopped.

Each pool process (and the workers it starts) runs torch on one thread, unless the caller set
otherwise (`grader.running.threads`). Given a memory ceiling, each session runs in a memory cgroup of
its own (`grader.isolation.cgroups.Cgroup.enter`): a test that swells on what learner code wrote
ends its own task's session, and the gradings beside it keep their memory.
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.course import COURSE
from grader.isolation.cgroups import Cgroup
from grader.isolation.sandbox import CONCURRENT_GRADINGS_ENV, shared_temp_root, trust_this_process, worker_runtime
from grader.processes.forks import Fork
from grader.running.threads import ONE_THREAD_ENV

DIED = "died"          # exit status of a grading whose process died under it
TIMED_OUT = "timeout"
SESSION_DIED = "session died"     # exit status of one task's session killed under its pool process
PRELOAD_ENV = "GRADER_POOL_PRELOAD"   # "0": a pool process that imports no library ahead of its session
BASE_LIBRARIES = ("numpy", "torch", "transformers", "transformers.models.llama.modeling_llama", "hypothesis",
                  "grader.session.plugin")


class PytestPool:
    def __init__(self, size: int, concurrent: int | None = None, session_memory_mb: int | None = None):
        """`size` pool processes; `concurrent`: the gradings that run at once across them, where a
        session forks several (`grader.session.variant_forks`; by default one per pool process), so
        that each grading knows how many share the box; `session_memory_mb`: the most each session
        may hold, where a cgroup can be made (None: no ceiling of its own)."""
        self.size = max(1, size)
        self.concurrent = concurrent
        self.session_memory_mb = session_memory_mb

    def run(self, jobs: list[tuple[list[list[str]], Path]], limit_s: float, on_done=None, stream=None) -> list:
        """Run each job, a list of pytest argument lists (one session each, in order) with its log
        path, within `limit_s`; return per job the exit codes of its sessions (a session killed
        under its pool process counts as SESSION_DIED), or DIED / TIMED_OUT for a job whose pool
        process died or ran out of time. `on_done(index, codes)` is called as each job ends;
        `stream(text)` receives each log's output as it grows (one job at a time)."""
        codes: list = [None] * len(jobs)
        queue = list(enumerate(jobs))
        lock = threading.Lock()
        env = {CONCURRENT_GRADINGS_ENV: str(self.concurrent or min(self.size, len(jobs)))}
        # The libraries every suite needs pay off imported once when a pool process serves several
        # sessions; a single one (`grader check NN`) imports only what its own task needs.
        session_count = sum(len(sessions) for sessions, _ in jobs)
        env[PRELOAD_ENV] = "1" if session_count > 1 else "0"

        def serve():
            child = None
            while True:
                with lock:
                    if not queue:
                        break
                    index, (sessions, log_path) = queue.pop(0)
                child = child or _Child(env)
                codes[index] = child.run(sessions, log_path, limit_s, stream, self.session_memory_mb)
                if codes[index] in (DIED, TIMED_OUT):
                    child.kill()
                    child = None
                if on_done:
                    on_done(index, codes[index])
            if child:
                child.close()

        servers = [threading.Thread(target=serve) for _ in range(min(self.size, len(jobs)))]
        for server in servers:
            server.start()
        for server in servers:
            server.join()
        return codes


class _Child:
    def __init__(self, env: dict):
        # Its temporary folder, which the parent removes: a pool process that is killed (or not
        # waited for) cleans up nothing, and its jails', worker runtime's and sessions' folders
        # would stay. Entered, never listed, by the uid level's workers on their way to theirs.
        self.temp = tempfile.mkdtemp(prefix="grader-pool-", dir=shared_temp_root())
        os.chmod(self.temp, 0o711)
        env = {**ONE_THREAD_ENV, **os.environ, **env, "TMPDIR": self.temp}
        self.process = subprocess.Popen([sys.executable, "-m", "grader.running.pool"], cwd=COURSE.root, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdin is not None and self.process.stdout is not None      # both are pipes
        self.stdin, self.stdout = self.process.stdin, self.process.stdout

    def run(self, sessions: list[list[str]], log_path: Path, limit_s: float, stream, memory_mb: int | None):
        nonce = secrets.token_hex(16)
        request = {"sessions": sessions, "log": str(log_path), "nonce": nonce, "memory_mb": memory_mb}
        try:
            self.stdin.write(json.dumps(request) + "\n")
            self.stdin.flush()
        except (BrokenPipeError, OSError):
            return DIED
        deadline = time.monotonic() + limit_s
        shown = 0
        while True:
            ready, _, _ = select.select([self.stdout], [], [], 0.2)
            if stream:
                shown = _echo_new(log_path, shown, stream)
            if ready:
                line = self.stdout.readline()
                if not line:
                    return DIED
                codes = _exit_codes(line, nonce, len(sessions))
                if codes is not None:
                    if stream:
                        _echo_new(log_path, shown, stream)
                    return codes
            if time.monotonic() > deadline:
                return TIMED_OUT

    def kill(self):
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.temp, ignore_errors=True)

    def close(self):
        self.stdin.close()      # it exits on its own; its teardown need not hold us up
        shutil.rmtree(self.temp, ignore_errors=True)        # every session it ran has ended


def _exit_codes(line: str, nonce: str, sessions: int) -> list | None:
    """The sessions' exit codes a reply line carries for this job, or None for any other line."""
    try:
        reply = json.loads(line)
    except ValueError:
        return None
    if not isinstance(reply, dict) or reply.get("nonce") != nonce:
        return None
    codes = reply.get("exits")
    if not isinstance(codes, list) or len(codes) != sessions or \
            not all(isinstance(c, int) or (isinstance(c, str) and c.startswith(SESSION_DIED)) for c in codes):
        return None
    return codes


def _echo_new(log_path: Path, shown: int, stream) -> int:
    try:
        with open(log_path, "rb") as log:
            log.seek(shown)
            data = log.read()
    except OSError:
        return shown
    if data:
        stream(data.decode("utf-8", "replace"))
    return shown + len(data)


def _serve() -> None:
    import pytest
    for name in BASE_LIBRARIES if os.environ.get(PRELOAD_ENV) != "0" else ():   # imported once and shared
        importlib.import_module(name)
    worker_runtime()     # made here, once: a session's own would outlive it (a forked child ends by os._exit)
    replies = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)           # stray writes to fd 1 or 2 (C code, subprocesses) must not
    os.dup2(devnull, 2)           # reach the reply pipe or the user's terminal
    trust_this_process()
    for line in sys.stdin:
        request = json.loads(line)
        # What the pool process holds lives on in every session: freeze it, so the garbage
        # collection each session ends with scans only that session's objects, and the pages
        # it shares with its children stay shared.
        gc.freeze()
        Path(request["log"]).write_text("", encoding="utf-8")
        codes = [_session(pytest, args, request["log"], replies, request["memory_mb"]) for args in request["sessions"]]
        replies.write(json.dumps({"exits": codes, "nonce": request["nonce"]}) + "\n")
        replies.flush()


def _session(pytest, args: list[str], log_path: str, replies, memory_mb: int | None) -> int | str:
    """One pytest session in a child of this process, holding at most `memory_mb` where given:
    its exit code, or SESSION_DIED and how."""
    cgroup = Cgroup(f"grading-{os.getpid()}-{secrets.token_hex(4)}", memory_mb << 20) if memory_mb else None

    def body() -> int:
        if cgroup is not None:
            cgroup.enter()
        replies.close()
        with open(log_path, "a", encoding="utf-8") as log, \
                contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            return int(pytest.main(args))
    ending = Fork.start(body).reap()          # a pool process killed by its watchdog takes its session with it
    out_of_memory = cgroup is not None and cgroup.memory_exceeded()
    if cgroup is not None:
        cgroup.kill_all()          # what the session left in it (its workers have cgroups of their own)
    if ending.code is not None:
        return ending.code
    return f"{SESSION_DIED}: " + (f"ran out of its own memory (limit {memory_mb} MB)" if out_of_memory else str(ending))


if __name__ == "__main__":
    from grader import logs
    logs.configure()
    _serve()
