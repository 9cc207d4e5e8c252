"""A pool of long-lived pytest processes, each running one grading after another.

Every grading is still its own `pytest.main` session with its own score report; the process
around it is reused so that torch, the suites and their oracles are imported once per pool
process instead of once per submission. Only course code runs in these processes: learner
code runs in the session's workers (or in-process when a trusted caller asks for it, as the
audit does for the course's own mutants).

Parent and child talk over the child's stdin and its original stdout, one JSON line each way
per grading, the reply carrying the job's nonce: a line that does not (written by anything but
the child's own loop) is ignored. pytest's own output goes to each grading's log file. A child
that dies takes only the grading in flight with it: the parent starts a fresh child for the
rest. The parent's deadline is the watchdog: it needs nothing from the child (no signal, no
reply) to end a grading that runs too long, and SIGKILL ends a child even when it is stopped.

Each child (and the workers it starts) runs torch on one thread (OMP_NUM_THREADS=1, unless
the caller set it); parallelism comes from grading several submissions at once. OpenMP threads
spin while they wait: as soon as anything else wants the same cores (another grading, a busy
machine), two threads per process run many times slower than one, while the suites' small
models gain little from a second thread on an idle machine.
"""
from __future__ import annotations

import contextlib
import gc
import json
import os
import secrets
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from grader.tasks import COURSE_ROOT

DIED = "died"          # exit status of a grading whose process died under it
TIMED_OUT = "timeout"


class PytestPool:
    def __init__(self, size: int):
        self.size = max(1, size)

    def run(self, jobs: list[tuple[list[str], Path]], limit_s: float, on_done=None, stream=None) -> list:
        """Run `pytest.main(args)` for each (args, log_path); return their exit codes in order.
        `on_done(index, code)` is called as each ends; `stream(text)` receives each log's output
        as it grows (one job at a time)."""
        codes: list = [None] * len(jobs)
        queue = list(enumerate(jobs))
        lock = threading.Lock()

        def serve():
            child = None
            while True:
                with lock:
                    if not queue:
                        break
                    index, (args, log_path) = queue.pop(0)
                child = child or _Child()
                codes[index] = child.run(args, log_path, limit_s, stream)
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
    def __init__(self):
        env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **os.environ}
        self.process = subprocess.Popen([sys.executable, "-m", "grader.running.pool"], cwd=COURSE_ROOT, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, args: list[str], log_path: Path, limit_s: float, stream):
        nonce = secrets.token_hex(16)
        try:
            self.process.stdin.write(json.dumps({"args": args, "log": str(log_path), "nonce": nonce}) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return DIED
        deadline = time.monotonic() + limit_s
        shown = 0
        while True:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.2)
            if stream:
                shown = _echo_new(log_path, shown, stream)
            if ready:
                line = self.process.stdout.readline()
                if not line:
                    return DIED
                code = _exit_code(line, nonce)
                if code is not None:
                    if stream:
                        _echo_new(log_path, shown, stream)
                    return code
            if time.monotonic() > deadline:
                return TIMED_OUT

    def kill(self):
        self.process.kill()
        self.process.wait()

    def close(self):
        self.process.stdin.close()      # it exits on its own; its teardown need not hold us up


def _exit_code(line: str, nonce: str):
    """The exit code a reply line carries for this job, or None for any other line."""
    try:
        reply = json.loads(line)
    except ValueError:
        return None
    if not isinstance(reply, dict) or reply.get("nonce") != nonce or not isinstance(reply.get("exit"), int):
        return None
    return reply["exit"]


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
    replies = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)           # stray writes to fd 1 or 2 (C code, subprocesses) must not
    os.dup2(devnull, 2)           # reach the reply pipe or the user's terminal
    for line in sys.stdin:
        request = json.loads(line)
        # What survived the last grading (modules, caches) lives on: freeze it, so the garbage
        # collection each pytest session ends with scans only that session's objects.
        gc.freeze()
        with open(request["log"], "w", encoding="utf-8") as log, \
                contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            code = pytest.main(request["args"])
        replies.write(json.dumps({"exit": int(code), "nonce": request["nonce"]}) + "\n")
        replies.flush()


if __name__ == "__main__":
    _serve()
