"""One call into learner code, answered the same way by both backends (in-process and worker).

A request names its target (a learner function, or a trusted probe by file and name) and carries
packed arguments; the answer is a reply header plus blobs, exactly what would cross the pipe:

    {"ok": true, "value": <packed result>}                   + result blobs
    {"ok": false, "stage": "call" | "result", "error": {...}}  (the learner's code raised, or
                                                               returned something that is not data)
    {"ok": false, "stage": "probe", "error": {...}}           (the course's probe did not load here;
                                                               whose fault is the trusted side's call)

A *witnessed* probe also gets a witness: an object of the test's that lives on the trusted side,
where the learner's code cannot reach it. The probe hands the learner's code callables that ask
the witness (`witness.call()`), and the witness does the work, counts and times it on its own
clock; the test judges the learner's answer by what the witness saw, not by anything measured in
the learner's process. Before its reply, a witnessed request may send questions, each answered
in turn:

    {"ask": <method name>, "arguments": <packed args>}     + blobs     (to the trusted side)
    {"ok": true, "value": <packed result>} | {"ok": false, "message": "..."}   (its answer)

This module runs on the worker's side of the sandbox: it imports nothing but `wire` and `loading`.
"""
from __future__ import annotations

from pathlib import Path

from grader.worker import wire
from grader.worker.loading import StudentImportError, describe, load_module, missing_function, plain_error


def is_test_timeout(exc: BaseException) -> bool:
    """Whether pytest-timeout's signal method ended the test: its alarm handler (`timeout_sigalrm`)
    raises pytest's Failed, so that handler's frame is in the exception's traceback. Known by the
    frame, never by the message, which any code can write."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "timeout_sigalrm" and Path(code.co_filename).name == "pytest_timeout.py":
            return True
        tb = tb.tb_next
    return False


def answer(module, module_path: Path, header: dict, blobs: list[bytes], ask,
           raised: list | None = None) -> tuple[dict, list[bytes]]:
    """The reply to one request; `ask(name, args)` puts a witnessed probe's questions to the
    witness. What learner code raised is also appended to `raised`, for a caller in the same
    process that wants its traceback."""
    target = header["target"]
    args, kwargs = wire.unpack(header["arguments"], blobs)
    if "probe" in target:
        try:
            function, args = getattr(load_module(Path(target["file"])), target["probe"]), (module, *args)
        except (StudentImportError, AttributeError) as exc:
            return {"ok": False, "stage": "probe", "error": plain_error(Path(target["file"]), "ProbeError", str(exc))}, []
        if target.get("witnessed"):
            args = (args[0], Witness(ask), *args[1:])
    else:
        function = getattr(module, target["function"], None)
        if not callable(function):
            return {"ok": False, "stage": "call", "error": missing_function(module_path, target["function"])}, []
    try:
        result = function(*args, **kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:        # SystemExit and pytest's skips too: a learner's exit fails one call
        if is_test_timeout(exc):
            raise
        if raised is not None:
            raised.append(exc)
        return {"ok": False, "stage": "call", "error": describe(exc, module_path)}, []
    try:
        value, result_blobs = wire.pack(result)
        wire.encode({"ok": True, "value": value}, result_blobs)      # within the size limits?
    except wire.WireError as exc:
        return {"ok": False, "stage": "result", "error": plain_error(module_path, "WireError", str(exc))}, []
    return {"ok": True, "value": value}, result_blobs


# ---------------------------------------------------------------- witnesses

MAX_QUESTIONS = 1000        # per call: exercise 05's probes ask a few dozen


class Witness:
    """The trusted side's witness as a probe sees it: calling a method asks the witness (and
    raises RuntimeError with its message if the witness refused)."""

    def __init__(self, ask):
        self._ask = ask

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)

        def question(*args):
            return self._ask(name, args)
        question.__name__ = name
        return question


def question(name: str, args: tuple) -> tuple[dict, list[bytes]]:
    packed, blobs = wire.pack(list(args))
    return {"ask": name, "arguments": packed}, blobs


def is_question(header: dict) -> bool:
    return "ask" in header and "ok" not in header


def witness_answer(witness, header: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
    """The trusted side's answer to a question: the witness's method named in it, if the witness
    lists it in QUESTIONS, called with its arguments. A question that does not fit, or that the
    witness refuses by raising, gets an answer saying so; a malformed one is a WireError."""
    if witness is None:
        raise wire.WireError("a question came outside a witnessed probe")
    name = header.get("ask")
    if not isinstance(name, str) or name not in witness.QUESTIONS:
        return {"ok": False, "message": f"the witness answers {', '.join(witness.QUESTIONS)}, not {str(name)[:60]!r}"}, []
    args = wire.unpack(header.get("arguments"), blobs)
    if not isinstance(args, list):
        raise wire.WireError("a witness's question carries no list of arguments")
    try:
        value, value_blobs = wire.pack(getattr(witness, name)(*args))
    except Exception as exc:        # noqa: BLE001 (a refusal, or arguments that do not fit)
        said = str(exc) if type(exc) is RuntimeError else f"{type(exc).__name__}: {exc}"
        return {"ok": False, "message": said}, []
    return {"ok": True, "value": value}, value_blobs


def read_answer(header: dict, blobs: list[bytes]):
    """A question's answer, on the probe's side."""
    if header.get("ok") is True:
        return wire.unpack(header.get("value"), blobs)
    raise RuntimeError(str(header.get("message", "the witness did not answer")))


def asking(witness):
    """`ask` for a probe in the same process as its witness: the same messages, without the pipe."""
    def ask(name: str, args: tuple):
        return read_answer(*witness_answer(witness, *question(name, args)))
    return ask


def asking_over(channel: wire.Channel):
    """`ask` for a probe in the worker: each question crosses the channel and waits for its answer."""
    def ask(name: str, args: tuple):
        channel.send(*question(name, args))
        return read_answer(*channel.receive())
    return ask
