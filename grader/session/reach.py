"""Which of a learner module's top-level definitions each test reaches: the audit's test selection.

A mutant or alternative differs from the course's reference in a few top-level functions or
classes. A test that, graded on the reference, reached none of them runs the same code on the
variant and ends the same way, so the audit takes that test's result from the reference's
grading instead of running it again, as mutation-testing tools select tests by coverage.

What a test reaches is recorded while the reference is graded in the audit's collected session
(`grader.session.variant_forks`, in process only), whose module is loaded with every function of it
made to note its top-level definition when called (one call each: no tracing slows the rest):
- every top-level definition whose code ran, in any thread, or ran at import;
- every attribute of the module read from outside it (a class built, a constant read);
- then, repeatedly, every top-level definition named in the code of one reached (a dataclass
  that a reached function builds runs no code of the file, but is named there).
A test reaches *everything* when it read the module's file (a check of the source; a traceback
or warning that shows a line is not one) or started a process, which the recorder cannot follow.
A variant whose module differs anywhere outside its definitions (an import, a constant) has every
test run, as do the stub and any solution written apart.

The selection assumes what the audit's verdicts already rest on: a test's outcome depends on
the code it runs and the seed, not on what an earlier test's learner code left in memory.
"""
from __future__ import annotations

import ast
import importlib.util
import linecache
import os
import sys
import traceback
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.worker.loading import module_name_for

EVERYTHING = None          # what a test reaches when the recorder cannot tell which definitions
_SPAWNS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.system"})
_SHOWS_LINES = frozenset({traceback.__file__, warnings.__file__})     # a source read there is a display

Reached = frozenset[str] | None


def changed_definitions(old_source: str, new_source: str) -> Reached:
    """The names of the top-level functions and classes that differ between two versions of a
    module (added and removed ones included); EVERYTHING when anything else at the top level
    differs, or either does not parse."""
    try:
        old = _Definitions(ast.parse(old_source))
    except SyntaxError:
        return EVERYTHING
    return _changed_since(old, new_source)


def _changed_since(old: _Definitions, new_source: str) -> Reached:
    try:
        new = _Definitions(ast.parse(new_source))
    except SyntaxError:
        return EVERYTHING
    if old.others != new.others:
        return EVERYTHING
    return frozenset(name for name in old.dumps.keys() | new.dumps.keys() if old.dumps.get(name) != new.dumps.get(name))


def needs_running(reached: Reached, changed: Reached) -> bool:
    return reached is EVERYTHING or changed is EVERYTHING or bool(reached & changed)


class _Definitions:
    """A module's top-level functions and classes: their syntax and the other definitions each
    names; and the module's other top-level statements."""

    def __init__(self, tree: ast.Module):
        self.dumps: dict[str, str] = {}
        self.names: dict[str, set[str]] = {}
        self.others: list[str] = []
        nodes = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                nodes.append(node)
                self.dumps[node.name] = ast.dump(node)
            else:
                self.others.append(ast.dump(node))
        for node in nodes:
            self.names[node.name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in self.dumps}

    def closure(self, names: set[str]) -> frozenset[str]:
        """`names` and every definition named in the code of one of them, repeatedly."""
        found, waiting = set(), list(names)
        while waiting:
            name = waiting.pop()
            if name not in found:
                found.add(name)
                waiting.extend(self.names.get(name, ()))
        return frozenset(found)


class ReachRecorder:
    """Records, test by test, what of the module at `module_path` each one reaches. It loads the
    module itself, noting its calls, under the name `grader.worker.loading.load_module` gives
    it, so that the in-process backend grades that copy."""

    def __init__(self, module_path: Path):
        path = Path(module_path)
        self._paths = {str(path), str(path.absolute()), os.path.realpath(path)}
        self._file_name = path.name
        tree = ast.parse(path.read_text(encoding="utf-8"))
        self._definitions = _Definitions(tree)       # what was recorded, to compare variants with
        self.reached: dict[str, Reached] = {}
        self._everything = False
        self._recording = False
        self._at_import: set[str] = set()       # what ran as the module was imported: reached by every test
        self._seen = self._at_import
        _load_noting_calls(path, tree, self._note)
        self._seen = set()
        sys.addaudithook(self._audit)       # for the process's life: it does nothing unless recording

    def changed_in(self, new_source: str) -> Reached:
        """`changed_definitions` from the recorded module to `new_source` (the recorded side parsed once)."""
        return _changed_since(self._definitions, new_source)

    def _note(self, name: str) -> None:
        self._seen.add(name)

    @contextmanager
    def test(self, nodeid: str) -> Iterator[None]:
        self._seen, self._everything = set(self._at_import), False
        for path in self._paths:
            linecache.cache.pop(path, None)      # a source read from the cache would open nothing
        _ReadsRecorded.reads = self._seen
        self._recording = True
        try:
            yield
        finally:
            self._recording = False
            _ReadsRecorded.reads = None
            self.reached[nodeid] = EVERYTHING if self._everything else self._definitions.closure(self._seen)
            self._seen = set()

    def _audit(self, event: str, args: tuple) -> None:
        if not self._recording or self._everything:
            return
        if event in _SPAWNS:
            self._everything = True
        elif event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)) and self._is_module(args[0]):
            self._everything = not _shows_a_line()

    def _is_module(self, path) -> bool:
        path = os.fsdecode(path)
        return path in self._paths or (os.path.basename(path) == self._file_name and os.path.realpath(path) in self._paths)


_NOTE = "__grader_reach__"


class _NoteCalls(ast.NodeTransformer):
    """Makes every function of a module, nested ones and methods included, first call
    `__grader_reach__(NAME)`, NAME its top-level definition's."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        for statement in node.body:
            self.top = getattr(statement, "name", "<module>")
            self.visit(statement)
        return node

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        docstring = 1 if node.body and isinstance(node.body[0], ast.Expr) and \
            isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str) else 0
        anchor = node.body[min(docstring, len(node.body) - 1)]
        note = ast.Expr(ast.Call(ast.Name(_NOTE, ast.Load()), [ast.Constant(self.top)], []))
        node.body.insert(docstring, ast.copy_location(note, anchor))
        ast.fix_missing_locations(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef


def _load_noting_calls(path: Path, tree: ast.Module, note) -> types.ModuleType:
    """The module at `path`, each of its functions noting its call, registered where
    `load_module(path)` finds it."""
    name = module_name_for(path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _ReadsRecorded
    setattr(module, _NOTE, note)
    sys.modules[name] = module
    try:
        exec(compile(_NoteCalls().visit(tree), str(path), "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]       # the grading loads the file itself, and says what it raised
        raise
    return module


class _ReadsRecorded(types.ModuleType):
    """The learner's module while a test is recorded: the names read from it from outside."""
    reads: set[str] | None = None

    def __getattribute__(self, name: str):
        reads = _ReadsRecorded.reads
        if reads is not None and not name.startswith("__"):
            reads.add(name)
        return super().__getattribute__(name)


def _shows_a_line() -> bool:
    """Whether the source is being read by a traceback or warning that shows a line of it."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename in _SHOWS_LINES:
            return True
        frame = frame.f_back
    return False
