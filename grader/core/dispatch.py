"""One call into learner code, answered the same way by both backends (in-process and worker).

A request names its target (a learner function, or a trusted probe by file and name) and carries
packed arguments; the answer is a reply header plus blobs, exactly what would cross the pipe:

    {"ok": true, "value": <packed result>}                   + result blobs
    {"ok": false, "stage": "call" | "result", "error": {...}}  (the learner's code raised, or
                                                               returned something that is not data)
    {"ok": false, "stage": "probe", "error": {...}}           (the course's probe did not load here;
                                                               whose fault is the trusted side's call)

This module runs on the worker's side of the sandbox: it imports nothing but `wire` and `loading`.
"""
from __future__ import annotations

from pathlib import Path

from grader.core import wire
from grader.core.loading import StudentImportError, describe, load_module, missing_function, plain_error


def is_test_timeout(exc: BaseException) -> bool:
    """pytest-timeout's signal method ends a test by raising pytest's Failed('Timeout >Ns')."""
    return type(exc).__name__ == "Failed" and str(exc).startswith("Timeout")


def answer(module, module_path: Path, header: dict, blobs: list[bytes],
           raised: list | None = None) -> tuple[dict, list[bytes]]:
    """The reply to one request. What learner code raised is also appended to `raised`, for a
    caller in the same process that wants its traceback."""
    target = header["target"]
    args, kwargs = wire.unpack(header["arguments"], blobs)
    if "probe" in target:
        try:
            function, args = getattr(load_module(Path(target["file"])), target["probe"]), (module, *args)
        except (StudentImportError, AttributeError) as exc:
            return {"ok": False, "stage": "probe", "error": plain_error(Path(target["file"]), "ProbeError", str(exc))}, []
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
