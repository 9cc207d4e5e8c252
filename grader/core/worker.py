"""The worker: a separate process that imports one learner module and answers calls.

The test process never runs learner code in official grading; it sends a call (a function
name, or a trusted probe, plus data arguments) and receives data back. The learner's stdout
and stderr go to a log file, so nothing they print can corrupt the protocol, and a crash,
`sys.exit` or hang costs one test, not the run.

`worker_command` and `worker_env` are the single place that launches a worker, so a sandbox
(dropped privileges, no network, rlimits) can wrap it later.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.core import wire
from grader.core.loading import StudentImportError, describe, load_module, missing_function, plain_error

_OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
    "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg",
}


def worker_command(module_path: Path, read_fd: int, write_fd: int) -> list[str]:
    return [sys.executable, "-m", "grader.core.worker", str(module_path), str(read_fd), str(write_fd)]


def worker_env() -> dict[str, str]:
    return {**os.environ, **_OFFLINE_ENV}


class WorkerProcess:
    """The test side's handle on one running worker."""

    def __init__(self, module_path: Path, log_path: Path):
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        self.workdir = tempfile.TemporaryDirectory(prefix="grader-worker-")
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                worker_command(module_path, to_child_r, to_parent_w),
                pass_fds=(to_child_r, to_parent_w), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.workdir.name, env=worker_env(),
                start_new_session=True)   # its own process group: kill() reaches its children too
        os.close(to_child_r)
        os.close(to_parent_w)
        self.channel = wire.Channel(to_parent_r, to_child_w)
        self.started = time.monotonic()

    def request(self, header: dict, blobs: list[bytes], deadline: float) -> tuple[dict, list[bytes]]:
        self.channel.send(header, blobs)
        return self.channel.receive(deadline)

    def receive(self, deadline: float) -> tuple[dict, list[bytes]]:
        return self.channel.receive(deadline)

    def exit_description(self, wait_s: float = 1.0) -> str:
        """How the worker ended; a worker whose pipe just closed gets a moment to finish dying."""
        try:
            code = self.process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return "it stopped answering"
        if code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exit code {code}"

    def kill(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        for fd in (self.channel.read_fd, self.channel.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.workdir.cleanup()


# ---------------------------------------------------------------- the worker's own side

def _serve(module_path: Path, channel: wire.Channel) -> None:
    try:
        module = load_module(module_path)
    except StudentImportError as exc:
        channel.send({"ready": False, "error": str(exc)})
        return
    channel.send({"ready": True})
    probes: dict[str, object] = {}
    while True:
        try:
            header, blobs = channel.receive()
        except wire.ChannelClosed:
            return
        reply, reply_blobs = _answer(module, module_path, probes, header, blobs)
        channel.send(reply, reply_blobs)


def _answer(module, module_path, probes, header, blobs):
    target = header["target"]
    args, kwargs = wire.unpack(header["arguments"], blobs)
    if "probe" in target:
        probe_module = probes.get(target["file"]) or load_module(Path(target["file"]))
        probes[target["file"]] = probe_module
        function, args = getattr(probe_module, target["probe"]), (module, *args)
    else:
        function = getattr(module, target["function"], None)
        if not callable(function):
            return {"ok": False, "stage": "call", "error": missing_function(module_path, target["function"])}, []
    try:
        result = function(*args, **kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:        # SystemExit too: a learner's exit fails one call, no more
        return {"ok": False, "stage": "call", "error": describe(exc, module_path)}, []
    try:
        value, result_blobs = wire.pack(result)
    except wire.WireError as exc:
        return {"ok": False, "stage": "result", "error": plain_error(module_path, "WireError", str(exc))}, []
    return {"ok": True, "value": value}, result_blobs


def main(argv: list[str]) -> None:
    module_path, read_fd, write_fd = Path(argv[0]), int(argv[1]), int(argv[2])
    _serve(module_path, wire.Channel(read_fd, write_fd))


if __name__ == "__main__":
    main(sys.argv[1:])
