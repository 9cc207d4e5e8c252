"""The one seam between tests and learner code: the `Submission` object a test receives.

`submission.softmax(x)` calls the learner's function; `submission.probe(fn, ...)` runs a
trusted probe `fn(module, ...)` beside the learner's code, for checks that need an object
(a model, a callable) built from data or observed while the learner's code runs. A probe runs
in the learner's process, so what it returns is no more trustworthy than what the learner's own
functions return: it is data produced beside learner code, never a verdict.

Two backends (`BACKENDS`) give the same semantics: a call is packed into a request, answered by
`grader.worker.dispatch.answer` (in this process, or in a worker process through a pipe), and the
reply unpacked here, so a value that could not reach a worker fails in-process too, and learner
code can never mutate a test's inputs.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Protocol

from grader.isolation.worker_host import (
    ScratchFull,
    Worker,
    WorkerHost,
    WorkerOutput,
    WorkerSpec,
    printed_since,
    remove_strays,
)
from grader.schema.report import OUT_OF_MEMORY, Status
from grader.session.intake import git_head, jailed_commit, read_module
from grader.worker import wire
from grader.worker.dispatch import answer, asking
from grader.worker.loading import (
    Location,
    StudentImportError,
    format_error,
    learner_traceback,
    load_module,
    location_in_stack_dump,
    plain_error,
)

STARTUP_LIMIT_S = 60.0
# A task's worker host (its zygote, in its jail) is started again after learner code ended it, once:
# a module that ends it again would end every later one too, each costing the libraries' import.
HOST_ENDINGS_ALLOWED = 2


class SubmissionFailure(Exception):
    """Base of the ways a call into learner code can fail; the report's status comes from the class."""
    status: Status = "failed"


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


class CourseFault(SubmissionFailure):
    """Something of the course's own failed beside learner code (a probe file that does not load
    in the worker): the grading is incomplete, the learner is not to blame."""
    status = "error"


class CallTimeout(SubmissionFailure):
    status = "timeout"

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.location = location        # the learner's line the call was running when it was stopped


class WorkerCrashed(SubmissionFailure):
    status = "crashed"


@dataclass(frozen=True)
class BackendContext:
    """What a backend needs besides the module: the submission it came from, where the worker's
    output is logged, and how workers are started."""
    submission_root: Path
    log_path: Path
    spec: WorkerSpec


class Backend(Protocol):
    """What the plugin asks of a backend: the learner's module run in-process or in workers."""
    kind: str
    module_path: Path
    module_bytes: bytes | None          # what is graded, once read (None: the import reads the file itself)

    def __init__(self, module_path: Path, context: BackendContext): ...
    def launch(self) -> None: ...
    @property
    def git_head(self) -> str | None: ...
    def start(self, deadline: float) -> None: ...
    def exchange(self, header: dict, blobs: list[bytes], deadline: float, name: str, witness=None): ...
    def learner_traceback(self) -> TracebackType | None: ...
    def probe_failure(self, name: str, file: str, error: dict) -> SubmissionFailure: ...
    def output_mark(self) -> int: ...
    def output_since(self, mark: int) -> str: ...
    def discard_worker(self) -> None: ...
    def close(self) -> None: ...


class PrintedTail:
    """What learner code printed in this process (while its module loaded and while it answered
    calls: the test's own code and the libraries it drives print elsewhere), as a running count
    and at least the last TAIL_CHARS, the in-process counterpart of a worker's `WorkerOutput`."""

    TAIL_CHARS = 64 << 10

    def __init__(self):
        self.total = 0
        self._tail = ""

    def write(self, text: str) -> int:
        text = str(text)
        self.total += len(text)
        self._tail += text
        if len(self._tail) > 2 * self.TAIL_CHARS:      # cut now and then, not at every line printed
            self._tail = self._tail[-self.TAIL_CHARS:]
        return len(text)

    def flush(self) -> None:
        pass

    @contextlib.contextmanager
    def taking(self):
        """Within: what is printed comes here."""
        with contextlib.redirect_stdout(self), contextlib.redirect_stderr(self):
            yield

    def since(self, mark: int) -> str:
        """The text printed since `mark` (its tail, if more was printed than is kept)."""
        return printed_since(self._tail, self.total, mark)


class InProcessBackend:
    """Imports the learner's module into the test process: fast, for a learner's own runs."""

    kind = "inprocess"

    def __init__(self, module_path: Path, context: BackendContext | None = None):   # needs no context
        self.module_path = Path(module_path)
        self.module_bytes: bytes | None = None        # the import reads the file itself
        self._module: ModuleType | None = None
        self._raised: list[BaseException] = []
        self.printed = PrintedTail()

    def launch(self) -> None:
        pass                   # importing in this process cannot overlap anything

    @property
    def git_head(self) -> str | None:
        return git_head(self.module_path.parent)

    def start(self, deadline: float) -> None:
        __tracebackhide__ = True
        if self._module is None:
            with self.printed.taking():
                self._module = load_module(self.module_path)

    def exchange(self, header: dict, blobs: list[bytes], deadline: float, name: str, witness=None):
        self._raised = []
        with self.printed.taking():
            return answer(self._module, self.module_path, header, blobs, asking(witness), raised=self._raised)

    def learner_traceback(self):
        """The learner's own frames of what the last call raised: what pytest shows under the
        test's line, instead of the grader's dispatch and probe frames."""
        return learner_traceback(self._raised[-1].__traceback__, self.module_path) if self._raised else None

    def probe_failure(self, name: str, file: str, error: dict) -> SubmissionFailure:
        return CourseFault(f"the course's probe {name} could not run beside the learner's code: {error['message']}")

    def output_mark(self) -> int:
        return self.printed.total

    def output_since(self, mark: int) -> str:
        return self.printed.since(mark)

    def discard_worker(self) -> None:
        pass

    def close(self) -> None:
        pass


class WorkerBackend:
    """Runs the learner's module in worker processes (official grading), sandboxed when the
    context's spec says so: forked from a zygote (`WorkerHost`) that is started once per task,
    and again only if a learner's code brought it down."""

    kind = "worker"

    def __init__(self, module_path: Path, context: BackendContext):
        self.module_path = Path(module_path)
        self.context = context
        self.output = WorkerOutput(context.log_path)
        self._host: WorkerHost | None = None
        self._host_output_mark = 0
        self._worker: Worker | None = None
        self.module_bytes: bytes | None = None      # what is graded, read once (`intake.read_module`)
        self._import_error: str | None = None
        self._startup_failure: SubmissionFailure | None = None   # an import that killed or stalled its worker
        self._importing: Worker | None = None     # a worker whose import a test's time limit interrupted
        self._host_endings = 0                    # hosts that learner code ended
        self._import_spent_s = 0.0                # the time that import has had so far
        self.startup_seconds: list[float] = []

    def launch(self) -> None:
        """Start the sandbox and its zygote without waiting for them, so that the libraries' import
        overlaps what the tests do next. No learner code runs before `start`: a worker imported
        ahead would run unpaused while other tests read and write the folders it shares."""
        if self._import_error or self._startup_failure:
            return
        if self.module_bytes is None:
            try:
                self.module_bytes = read_module(self.context.submission_root, self.module_path)
            except StudentImportError as exc:
                self._import_error = str(exc)
                return
        if self._host is not None and not self._host.alive():
            self._host.close()
            self._host = None
            self._host_endings += 1
            if self._host_endings >= HOST_ENDINGS_ALLOWED:
                self._startup_failure = WorkerCrashed(
                    f"{self.module_path.name} ended the processes that run it {self._host_endings} times (its code "
                    "signals or kills processes it did not start): the task's later tests are not run, each would "
                    "end the same way")
                return
        if self._host is None:
            self._host_output_mark = self.output.mark()
            self._host = WorkerHost(self.module_path, self.module_bytes, self.context.spec, self.output,
                                    commit=self.git_head)

    @property
    def host(self) -> WorkerHost:
        """The zygote's host, once `launch` has made it (every use comes after `start`'s launch)."""
        assert self._host is not None, "used before launch()"
        return self._host

    @property
    def git_head(self) -> str | None:
        """The commit learner code finds beside its module, as the worker sees it."""
        if self.context.spec.level == "none":
            return git_head(self.module_path.parent)
        return jailed_commit(self.module_path, self.context.submission_root, self.context.spec.course.root)

    def start(self, deadline: float) -> None:
        """Have a worker ready. An import gets STARTUP_LIMIT_S of its own, across tests if a test's
        time limit is shorter: the worker stays (paused) and the next test waits on for the same
        import. A module whose import killed or stalled its worker is not imported again: every
        later test of the task fails the same way at once."""
        __tracebackhide__ = True
        if self._worker is not None:
            return
        if self._startup_failure is not None:
            raise self._startup_failure_again()
        with self._clearing_strays(f"importing {self.module_path.name}"):
            self._start(deadline)

    def _start(self, deadline: float) -> None:
        __tracebackhide__ = True
        self.launch()
        if self._import_error:
            raise StudentImportError(self._import_error)
        if self._startup_failure is not None:
            raise self._startup_failure_again()
        self.host.grant_writable()
        if self._importing is None or self._importing.host is not self._host:     # none, or its host was replaced
            self._importing, self._import_spent_s = self.host.spawn(), 0.0
        else:
            self.host.resume()
        worker, waited_from = self._importing, time.monotonic()
        import_ends = waited_from + STARTUP_LIMIT_S - self._import_spent_s
        try:
            header, _ = worker.receive(min(deadline, import_ends))
        except (wire.ChannelTimeout, wire.ChannelClosed, wire.WireError, ScratchFull) as exc:
            self._import_spent_s += time.monotonic() - waited_from
            if isinstance(exc, wire.ChannelTimeout) and time.monotonic() < import_ends and self.host.pause():
                # the test ran out of time, not the import: the next test waits on for it
                raise CallTimeout(f"{self.module_path.name} did not finish importing within the test's time "
                                  f"limit ({self._import_spent_s:.0f} s of its {STARTUP_LIMIT_S:g} s so far)") from None
            self._importing = None
            failure = self._why_start_failed(worker, exc)
            host_ended = self.host.started_up() and not self.host.alive()
            worker.kill()
            if host_ended:      # learner code ended its host: the next test starts another (`launch` counts them)
                raise failure from None
            self._startup_failure = failure
            raise self._startup_failure_again() from None
        self._importing = None
        if not header.get("ready"):
            worker.kill()
            self._import_error = str(header.get("error") or "import failed")
            raise StudentImportError(self._import_error)
        self.startup_seconds.append(self._import_spent_s + time.monotonic() - waited_from)
        if not self.host.pause():           # learner code runs only while a call is in flight
            raise WorkerCrashed(f"the process that imported {self.module_path.name} could not be paused between "
                                "calls, and was ended")
        self._worker = worker

    def _why_start_failed(self, worker: Worker, exc: BaseException) -> SubmissionFailure:
        """What a worker that never said "ready" failed of (asked before it is killed)."""
        name = self.module_path.name
        if isinstance(exc, wire.ChannelTimeout):
            return CallTimeout(f"{name} did not finish importing within {STARTUP_LIMIT_S:g} s")
        if isinstance(exc, ScratchFull):
            return WorkerCrashed(f"the process importing {name} was stopped: {exc}")
        if isinstance(exc, wire.WireError):      # it is alive, but what it sent is not the protocol
            return WorkerCrashed(f"the process importing {name} sent a broken message ({exc})")
        if not self.host.started_up():
            if self.host.memory_exceeded():
                return CourseFault(f"the grading worker ran {OUT_OF_MEMORY} (limit {self.host.limits.memory_mb} MB) "
                                   f"while importing the task's libraries, before {name} was imported: this machine "
                                   "or container is too small for this task (the instructors' guide to the sandbox, "
                                   "\"Memory, and the sizes the platforms give\")")
            how = self.host.exit_description(wait_s=1.0)          # ended first, so all it printed is read
            printed = self.output.since(self._host_output_mark).strip()[-2000:] or "nothing"
            return CourseFault(f"the grading worker could not start (it ended: {how}), before {name} was "
                               f"imported; it printed: {printed}")
        return WorkerCrashed(f"the process importing {name} died: {worker.exit_description()}")

    def _startup_failure_again(self) -> SubmissionFailure:
        failure = self._startup_failure
        assert failure is not None
        return type(failure)(*failure.args)

    def exchange(self, header: dict, blobs: list[bytes], deadline: float, name: str, witness=None):
        with self._clearing_strays(f"{name}()"):
            return self._call(header, blobs, deadline, name, witness)

    @contextlib.contextmanager
    def _clearing_strays(self, what: str):
        """Learner code runs within: once it has stopped, however that went, what it left in the
        shared folders that would lead a test out of them is removed (`remove_strays`); if there
        was any, `what` fails saying so."""
        __tracebackhide__ = True
        try:
            yield
        finally:
            strays = remove_strays(self.context.spec.writable_dirs)
        if strays:
            self._stop(wait_s=0)
            shown = "; ".join(strays[:3]) + (" ..." if len(strays) > 3 else "")
            raise WorkerCrashed(f"{what} left links leading out of the folders it was given, or pipes, in them "
                                f"(removed: {shown}): the tests read and write only inside those folders")

    def _call(self, header: dict, blobs: list[bytes], deadline: float, name: str, witness):
        self.host.grant_writable()
        self.host.resume()
        assert self._worker is not None, "a call comes after start()"
        try:
            reply = self._worker.request(header, blobs, deadline, witness)
        except wire.ChannelTimeout:
            where = location_in_stack_dump(self.host.stack_of(self._worker), str(self.host.jail.module_path),
                                           self.module_path)
            self._stop(wait_s=0)
            raise CallTimeout(f"{name}() did not return within the time limit", where) from None
        except wire.ChannelClosed:
            how = self._stop()
            raise WorkerCrashed(f"the process running {name}() died: {how}") from None
        except wire.WireError as exc:           # it is alive, but what it sent is not a reply
            self._stop(wait_s=0)
            raise WorkerCrashed(f"the process running {name}() sent a broken reply ({exc})") from None
        except ScratchFull as exc:
            self._stop(wait_s=0)
            raise WorkerCrashed(f"the process running {name}() was stopped: {exc}") from None
        except BaseException:
            self._stop(wait_s=0)    # interrupted mid-call: the worker's state is unknown
            raise
        if not self.host.pause():
            self._worker = None     # it could not be stopped, so it was killed: the next call starts afresh
        return reply

    def probe_failure(self, name: str, file: str, error: dict) -> SubmissionFailure:
        """A probe that did not run. The course's fault only if it did not load in the zygote too,
        before any learner code ran; else the learner's code replaced or broke it (or claims so)."""
        host = self._host
        started = host is not None and host.started_up()      # reads the zygote's first word
        course_error = host.probe_errors.get(file) if host is not None and started else None
        if course_error is not None:
            return CourseFault(f"the course's probe {name} could not load in the grading worker: {course_error}")
        return StudentError(name, plain_error(self.module_path, "ProbeError",
                                              f"the course's probe {name}() could not run in the process of "
                                              f"{self.module_path.name}: something there replaced or broke what it "
                                              f"needs ({error['message']})"))

    def output_mark(self) -> int:
        return self.output.mark()

    def output_since(self, mark: int) -> str:
        """What the learner's code printed since `mark` (a bounded tail)."""
        return self.output.since(mark)

    def discard_worker(self) -> None:
        """After a malformed reply: the worker's state is unknown, the next call starts afresh."""
        self._stop(wait_s=0)

    def learner_traceback(self):
        return None            # the learner's frames ran in the worker: they are in the message

    def _stop(self, wait_s: float = 1.0) -> str:
        how = self._worker.exit_description(wait_s) if self._worker else "not running"
        if self._worker is not None:
            self._worker.kill()
            self._worker = None     # the next call starts a fresh worker
        return how

    def close(self) -> None:
        """End everything at once: workers hold nothing worth a graceful exit, and a Python
        process with torch loaded takes a while to tear itself down."""
        self._worker = self._importing = None
        if self._host is not None:
            self._host.close()
            self._host = None


BACKENDS: dict[str, type[Backend]] = {backend.kind: backend for backend in (InProcessBackend, WorkerBackend)}


def call(backend, target: dict, arguments: tuple, deadline: float, witness=None):
    """One call through `backend`: the request out, the reply back as a value or a failure; a
    witnessed probe's questions are answered by `witness` meanwhile."""
    __tracebackhide__ = True    # a failure shows the test's line and the learner's, not this dispatch
    name = target.get("function") or target["probe"]
    backend.start(deadline)
    packed, blobs = wire.pack(arguments)
    reply, reply_blobs = backend.exchange({"target": target, "arguments": packed}, blobs, deadline, name, witness)
    if reply.get("ok"):
        try:
            return wire.unpack(reply["value"], reply_blobs)
        except (wire.WireError, KeyError, TypeError) as exc:
            backend.discard_worker()
            raise WorkerCrashed(f"the process running {name}() sent a malformed reply ({exc})") from None
    error = reply.get("error")
    if not _is_error_info(error):
        backend.discard_worker()
        raise WorkerCrashed(f"the process running {name}() sent a malformed reply")
    if reply.get("stage") == "probe":
        raise backend.probe_failure(name, target["file"], error)
    error_class = BadReturnValue if reply.get("stage") == "result" else StudentError
    raise error_class(name, error).with_traceback(backend.learner_traceback()) from None


def _is_error_info(info) -> bool:
    """The shape `grader.worker.loading.describe` gives an error: a reply from the worker is
    learner-controlled data and is checked before anything formats it."""
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in ("type", "message", "file")):
        return False
    frames = info.get("frames")
    return isinstance(frames, list) and all(
        isinstance(f, dict) and isinstance(f.get("line"), (int, type(None))) and isinstance(f.get("function"), str)
        and isinstance(f.get("code"), str) for f in frames)


class Submission:
    """What a test holds: attribute access calls the learner's function of that name.

    Once the learner's process has died or hung in a test, the rest of that test's calls fail the
    same way at once: the test has failed already, and a property-based test would otherwise pay a
    fresh worker for every example it tries and shrinks (minutes per test, enough to push the
    whole submission past its time limit)."""

    def __init__(self, backend, deadline: float):
        self._backend = backend
        self._deadline = deadline
        self.last_called: str | None = None     # where a wrong result points in the learner's file
        self._broken: SubmissionFailure | None = None

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)

        def function(*args, **kwargs):
            __tracebackhide__ = True
            self.last_called = name
            return self._call({"function": name}, (args, kwargs))
        function.__name__ = name
        return function

    @property
    def failure(self) -> SubmissionFailure | None:
        """How the learner's process died or hung during this test, if it did."""
        return self._broken

    def _call(self, target: dict, arguments: tuple, witness=None):
        __tracebackhide__ = True
        if self._broken is not None:
            raise type(self._broken)(*self._broken.args)
        try:
            return call(self._backend, target, arguments, self._deadline, witness)
        except (WorkerCrashed, CallTimeout) as failure:
            self._broken = failure
            raise

    def probe(self, probe, /, *args, witness=None, **kwargs):
        """Run the trusted function `probe(module, *args, **kwargs)` beside the learner's code.
        It must be a top-level function of a course file; it returns data. With a `witness`
        (an object of the test's, listing the methods a probe may call in QUESTIONS), the probe
        is called as `probe(module, witness, *args, **kwargs)` and each call of a witness method
        runs here, in the test's process, out of the learner's reach: what the witness counts
        and times is the test's own measurement (see `grader.worker.dispatch`)."""
        __tracebackhide__ = True
        if probe.__qualname__ != probe.__name__:
            raise TypeError(f"probe {probe.__qualname__} must be a module-level function")
        target = {"probe": probe.__name__, "file": probe.__code__.co_filename}
        if witness is not None:
            target["witnessed"] = True
        return self._call(target, (args, kwargs), witness)

    @property
    def module_path(self) -> Path:
        return self._backend.module_path

    @property
    def git_head(self) -> str | None:
        """The git HEAD the learner's code sees beside its module (None outside git): in the
        sandbox, only a submission's own repository is visible."""
        return self._backend.git_head
