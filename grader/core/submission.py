"""The one seam between tests and learner code: the `Submission` object a test receives.

`submission.softmax(x)` calls the learner's function; `submission.probe(fn, ...)` runs a
trusted probe `fn(module, ...)` beside the learner's code, for checks that need an object
(a model, a callable) built from data or observed while the learner's code runs.

Two backends give the same semantics: arguments and results always cross `grader.core.wire`, so a
value that could not reach a worker process fails in-process too, and learner code can never
mutate a test's inputs.
"""
from __future__ import annotations

import time
from pathlib import Path

from grader.core import wire
from grader.core.loading import (StudentImportError, describe, format_error, learner_traceback, load_module,
                                 missing_function, plain_error)
from grader.core.worker import WorkerProcess

STARTUP_LIMIT_S = 60.0


class SubmissionFailure(Exception):
    """Base of the ways a call into learner code can fail; the report's status comes from the class."""
    status = "failed"


class StudentError(SubmissionFailure):
    """The learner's code raised, or returned something that is not data."""

    def __init__(self, function: str, info: dict):
        self.function, self.info = function, info
        super().__init__(f"{function}() raised {format_error(info)}")

    @property
    def not_implemented(self) -> bool:
        return self.info["type"] == "NotImplementedError"


class BadReturnValue(StudentError):
    def __init__(self, function: str, info: dict):
        super().__init__(function, info)
        self.args = (f"{function}() returned a value that is not data: {info['message']}",)


class CallTimeout(SubmissionFailure):
    status = "timeout"


class WorkerCrashed(SubmissionFailure):
    status = "crashed"


def is_test_timeout(exc: BaseException) -> bool:
    """pytest-timeout's signal method ends a test by raising pytest's Failed('Timeout >Ns')."""
    return type(exc).__name__ == "Failed" and str(exc).startswith("Timeout")


class InProcessBackend:
    """Imports the learner's module into the test process: fast, for a learner's own runs."""

    kind = "inprocess"

    def __init__(self, module_path: Path):
        self.module_path = Path(module_path)
        self._module = None

    def launch(self) -> None:
        pass                   # importing in this process cannot overlap anything

    def start(self, deadline: float) -> None:
        __tracebackhide__ = True
        if self._module is None:
            self._module = load_module(self.module_path)

    def call(self, target: dict, arguments: tuple, deadline: float):
        __tracebackhide__ = True    # a failure shows the test's line and the learner's, not this dispatch
        self.start(deadline)
        args, kwargs = wire.roundtrip(arguments)
        if "probe" in target:
            function, args = target["callable"], (self._module, *args)
        else:
            function = getattr(self._module, target["function"], None)
            if not callable(function):
                raise StudentError(target["function"], missing_function(self.module_path, target["function"]))
        try:
            result = function(*args, **kwargs)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # skips, exits and xfails raised by learner code count as errors
            if is_test_timeout(exc):
                raise
            error = StudentError(_name(target), describe(exc, self.module_path))
            raise error.with_traceback(learner_traceback(exc.__traceback__, self.module_path)) from None
        try:
            return wire.roundtrip(result)
        except wire.WireError as exc:
            raise BadReturnValue(_name(target), plain_error(self.module_path, "WireError", str(exc))) from None

    def output_mark(self) -> int:
        return 0

    def output_since(self, mark: int) -> str:
        return ""              # pytest's own capture holds in-process output

    def close(self) -> None:
        pass


class WorkerBackend:
    """Runs the learner's module in a worker process (official grading)."""

    kind = "worker"

    def __init__(self, module_path: Path, log_path: Path):
        self.module_path = Path(module_path)
        self.log_path = Path(log_path)
        self.log_path.touch()
        self._worker: WorkerProcess | None = None
        self._launched: WorkerProcess | None = None     # started, not yet known to be ready
        self._import_error: str | None = None
        self.startup_seconds: list[float] = []

    def launch(self) -> None:
        """Start a worker without waiting for it, so its imports overlap what the tests do next."""
        if self._worker is None and self._launched is None and self.module_path.is_file():
            self._launched = WorkerProcess(self.module_path, self.log_path)

    def start(self, deadline: float) -> None:
        __tracebackhide__ = True
        if self._import_error:
            raise StudentImportError(self._import_error)
        if self._worker is not None:
            return
        if not self.module_path.is_file():
            self._import_error = f"{self.module_path.name} was not found (looked for {self.module_path})"
            raise StudentImportError(self._import_error)
        self.launch()
        worker, self._launched = self._launched, None
        try:
            header, _ = worker.receive(min(deadline, worker.started + STARTUP_LIMIT_S))
        except wire.ChannelTimeout:
            worker.kill()
            raise CallTimeout(f"{self.module_path.name} did not finish importing within the time limit") from None
        except (wire.ChannelClosed, wire.WireError):
            worker.kill()
            raise WorkerCrashed(f"the process importing {self.module_path.name} died "
                                f"({worker.exit_description()})") from None
        if not header.get("ready"):
            worker.kill()
            self._import_error = header.get("error") or "import failed"
            raise StudentImportError(self._import_error)
        self.startup_seconds.append(time.monotonic() - worker.started)
        self._worker = worker

    def call(self, target: dict, arguments: tuple, deadline: float):
        __tracebackhide__ = True    # the learner's frames are in the message: they ran in the worker
        self.start(deadline)
        packed, blobs = wire.pack(arguments)
        header = {"op": "call", "target": {k: v for k, v in target.items() if k != "callable"},
                  "arguments": packed}
        name = _name(target)
        try:
            reply, reply_blobs = self._worker.request(header, blobs, deadline)
        except wire.ChannelTimeout:
            self._stop(wait_s=0)
            raise CallTimeout(f"{name}() did not return within the time limit") from None
        except (wire.ChannelClosed, wire.WireError):
            how = self._stop()
            raise WorkerCrashed(f"the process running {name}() died ({how})") from None
        except BaseException:
            self._stop(wait_s=0)    # interrupted mid-call: the worker's state is unknown
            raise
        if reply.get("ok"):
            try:
                return wire.unpack(reply["value"], reply_blobs)
            except wire.WireError as exc:
                self._stop()
                raise WorkerCrashed(f"the process running {name}() sent a malformed reply ({exc})") from None
        error_class = BadReturnValue if reply.get("stage") == "result" else StudentError
        raise error_class(name, reply["error"])

    def output_mark(self) -> int:
        return self.log_path.stat().st_size

    def output_since(self, mark: int) -> str:
        """What the learner's code printed since byte `mark` of the log."""
        with open(self.log_path, "rb") as log:
            log.seek(mark)
            return log.read().decode("utf-8", "replace")

    def _stop(self, wait_s: float = 1.0) -> str:
        how = self._worker.exit_description(wait_s) if self._worker else "not running"
        if self._worker is not None:
            self._worker.kill()
            self._worker = None     # the next call starts a fresh worker
        return how

    def close(self) -> None:
        """End the worker at once: it holds nothing worth a graceful exit, and a Python
        process with torch loaded takes a while to tear itself down."""
        if self._launched is not None:
            self._launched.kill()
        if self._worker is not None:
            self._stop(wait_s=0)


class Submission:
    """What a test holds: attribute access calls the learner's function of that name."""

    def __init__(self, backend, deadline: float):
        self._backend = backend
        self._deadline = deadline
        self.last_called: str | None = None     # where a wrong result points in the learner's file

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args, **kwargs):
            __tracebackhide__ = True
            self.last_called = name
            return self._backend.call({"function": name}, (args, kwargs), self._deadline)
        call.__name__ = name
        return call

    def probe(self, probe, /, *args, **kwargs):
        """Run the trusted function `probe(module, *args, **kwargs)` beside the learner's code.
        It must be a top-level function of a course file; it returns data."""
        __tracebackhide__ = True
        target = {"probe": probe.__name__, "file": probe.__code__.co_filename, "callable": probe}
        if probe.__qualname__ != probe.__name__:
            raise TypeError(f"probe {probe.__qualname__} must be a module-level function")
        return self._backend.call(target, (args, kwargs), self._deadline)

    @property
    def module_path(self) -> Path:
        return self._backend.module_path


def _name(target: dict) -> str:
    return target.get("function") or target["probe"]

