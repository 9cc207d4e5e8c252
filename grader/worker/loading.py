"""Loading a learner's module by path, and describing what it raised without showing anything
but the learner's own code."""
from __future__ import annotations

import ast
import codecs
import hashlib
import importlib.util
import io
import re
import sys
import tokenize
import traceback
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TypedDict

MESSAGE_LIMIT = 1500
NOT_IMPORTED = "could not be imported"       # how the feedback of a module that does not import begins, after its name


class StudentImportError(Exception):
    """The learner's module is missing or could not be imported."""


def module_name_for(path: Path) -> str:
    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:10]
    return f"submitted_{Path(path).stem}_{digest}"


def load_module(path: Path) -> ModuleType:
    """Import the file at `path` under a private name. Anything it raises at import time,
    SystemExit included, becomes a StudentImportError that says what and where."""
    __tracebackhide__ = True    # pytest shows the learner's frames and the message, not this loader
    path = Path(path)
    if not path.is_file():
        raise StudentImportError(f"{path.name} was not found (looked for {path})")
    name = module_name_for(path)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None      # a .py file's path always has both
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:        # SyntaxError, ImportError, SystemExit, ...
        del sys.modules[name]
        error = StudentImportError(f"{path.name} {NOT_IMPORTED}: {format_error(describe(exc, path))}")
        raise error.with_traceback(learner_traceback(exc.__traceback__, path)) from None
    return module


def sibling_module(test_file: str, name: str):
    """Import `name`.py from the folder of `test_file` (suite folders are not packages)."""
    return load_module(Path(test_file).with_name(f"{name}.py"))


def describe(exc: BaseException, student_file: Path) -> dict:
    """The exception as data: its type, message and the frames that lie in the learner's file.
    Frames of the tests and probes are left out, so feedback never shows hidden code."""
    learner = str(Path(student_file).resolve())
    frames = [{"line": f.lineno, "function": f.name, "code": (f.line or "").strip()}
              for f in traceback.extract_tb(exc.__traceback__)
              if str(Path(f.filename).resolve()) == learner]
    if isinstance(exc, SyntaxError) and exc.filename and str(Path(exc.filename).resolve()) == learner:
        frames.append({"line": exc.lineno, "function": "<module>", "code": (exc.text or "").strip()})
    message = str(exc)
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + " ..."
    return {"type": type(exc).__name__, "message": message, "file": Path(student_file).name,
            "frames": frames[-3:]}


def learner_traceback(tb: TracebackType | None, student_file: Path) -> TracebackType | None:
    """`tb` cut down to its frames in the learner's file: what pytest shows under the test's own
    line when learner code raised in-process, instead of the grader's dispatch and probe frames."""
    learner = str(Path(student_file).resolve())
    kept = []
    while tb is not None:
        if str(Path(tb.tb_frame.f_code.co_filename).resolve()) == learner:
            kept.append(tb)
        tb = tb.tb_next
    chain = None
    for entry in reversed(kept):
        chain = TracebackType(chain, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return chain


def learner_source(student_file: Path) -> str:
    """The text of a learner's module as Python reads it when it imports the file: decoded by
    its PEP 263 coding line or its UTF-8 byte-order mark (UTF-8 without either), newlines made
    `\n`. The one way the trusted side reads learner source. An encoding Python would refuse, or
    bytes it cannot decode outside a comment, raise SyntaxError, as importing would. Python's
    tokenizer never decodes a comment: such bytes may stand in one and the module still imports,
    so its source is read with them replaced."""
    data = Path(student_file).read_bytes()
    try:
        return importlib.util.decode_source(data)
    except (UnicodeDecodeError, SyntaxError):
        compile(data, str(student_file), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)   # as importing would
        text = data.decode(_declared_encoding(data), errors="replace")
        return io.IncrementalNewlineDecoder(None, translate=True).decode(text, final=True)


def _declared_encoding(data: bytes) -> str:
    """The encoding PEP 263 gives a source whose comments may not decode: a UTF-8 byte-order
    mark, else a coding line (the first line, or the second below a blank or comment line), else UTF-8."""
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    for line in data.splitlines()[:2]:
        match = tokenize.cookie_re.match(line.decode("latin-1"))
        if match:
            return codecs.lookup(match.group(1)).name
        if not tokenize.blank_re.match(line):
            break
    return "utf-8"


class Location(TypedDict):
    """A line of the learner's module that a lost test points at."""
    line: int
    function: str
    code: str


def function_location(student_file: Path, function: str) -> Location | None:
    """The line of the learner's module that gave `function`'s result: its one `return` (in its
    last top-level `def`; nested functions' returns are theirs), or the `def` when it returns
    from several lines or none. Found by parsing the file, never by running it; None when the
    module defines no such function."""
    try:
        source = learner_source(student_file)
        tree = ast.parse(source)
    except (OSError, ValueError, SyntaxError):
        return None
    lines = source.splitlines()
    found = [node for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function]
    if not found:
        return None
    returns = _returns_of(found[-1])
    line = returns[0].lineno if len(returns) == 1 else found[-1].lineno
    return {"line": line, "function": function, "code": lines[line - 1].strip()}


_DUMPED_FRAME = re.compile(r'^\s*File "(?P<file>.*)", line (?P<line>\d+) in (?P<function>\w+)\s*$')


def location_in_stack_dump(dump: str, dumped_path: str, student_file: Path) -> Location | None:
    """The learner's line a worker was running, read from the stacks faulthandler wrote for it
    (each thread's frames, the most recent first): the first frame of the learner's module,
    whose path the worker knows it by is `dumped_path`, in the thread that was serving the call
    (the one with frames of the grader's worker) or else any. The dump is the worker's words, so
    only a line number and a name are taken from it; the code shown is read from `student_file`."""
    threads = [block.splitlines() for block in re.split(r"^(?=(?:Current thread|Thread) 0x)", dump, flags=re.M)]
    serving = [lines for lines in threads if any("grader/worker/" in line for line in lines)]
    for lines in serving + threads:
        for line in lines:
            frame = _DUMPED_FRAME.match(line)
            if frame and frame["file"] == dumped_path:
                return _location(student_file, int(frame["line"]), frame["function"])
    return None


def _location(student_file: Path, line: int, function: str) -> Location:
    try:
        lines = learner_source(student_file).splitlines()
    except (OSError, ValueError, SyntaxError):
        lines = []
    return {"line": line, "function": function, "code": lines[line - 1].strip() if 0 < line <= len(lines) else ""}


def _returns_of(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The `return` statements of `function` itself, not of the functions or classes inside it."""
    returns: list[ast.Return] = []
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            returns.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    return returns


def plain_error(student_file: Path, type_name: str, message: str) -> dict:
    """An error of the learner's code that has no traceback worth showing."""
    return {"type": type_name, "message": message, "file": Path(student_file).name, "frames": []}


def missing_function(student_file: Path, function: str) -> dict:
    return plain_error(student_file, "AttributeError", f"{Path(student_file).name} defines no function {function!r}")


def format_error(info: dict) -> str:
    """`Type: message (file, line N, in function: code)`, the place said once (a SyntaxError's
    message already ends with its file and line)."""
    message = info["message"]
    if info["frames"]:
        last = info["frames"][-1]
        message = message.removesuffix(f" ({info['file']}, line {last['line']})")
    text = f"{info['type']}: {message}" if message else info["type"]
    if info["frames"]:
        text += f" ({info['file']}, line {last['line']}, in {last['function']}: {last['code']})"
    return text
