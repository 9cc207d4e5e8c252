"""The course's files cut into the pieces of a notebook: the learner's module around the stub's
API (the reference's bodies as solution regions), the visible tests one function at a time, and
the README section by section. Pure text and syntax trees; `grader.delivery.nbgrader` assembles
the pieces.
"""
from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from grader.course import Task
from grader.delivery import Refused
from grader.delivery.nbgrader_cells import FIXTURES
from grader.delivery.notebook import is_main_guard
from grader.readme import readme_file, readme_parts

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"


class BuildError(Refused):
    """The course's files do not fit the notebook layout; the message says where."""


# ---------------------------------------------------------------- the learner's module

@dataclass
class FunctionCell:
    name: str
    section: str | None      # the README section its stub points to
    source: str              # with the solution region


@dataclass
class ModuleCells:
    header: str              # the stub's docstring, imports and constants
    helpers: str             # the solution's other top-level code (its private helpers)
    functions: list[FunctionCell]


def module_cells(stub_source: str, solution_source: str) -> ModuleCells:
    """Split a solution into the notebook's module cells, around the stub's API (its top-level
    functions and classes)."""
    stub, solution = ast.parse(stub_source), ast.parse(solution_source)
    stub_lines, solution_lines = stub_source.splitlines(), solution_source.splitlines()
    stub_api = [n for n in stub.body if isinstance(n, API_NODES)]
    if not stub_api:
        raise BuildError("the stub defines no function")
    first = _first_line(stub_api[0])
    if any(_first_line(n) > first for n in stub.body if not isinstance(n, API_NODES) and not is_main_guard(n)):
        raise BuildError("the stub has top-level code after its first function; keep it above (a closing "
                         "`if __name__ == \"__main__\":` excepted)")
    header_dumps = {ast.dump(n) for n in stub.body if not isinstance(n, API_NODES)}
    solution_api = {n.name: n for n in solution.body if isinstance(n, API_NODES)}

    functions = []
    for node in stub_api:
        solution_node = solution_api.get(node.name)
        if type(solution_node) is not type(node):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            raise BuildError(f"the solution has no {kind} {node.name}")
        cell = _class_cell if isinstance(node, ast.ClassDef) else _function_cell
        source = cell(stub_lines, node, solution_lines, solution_node)
        pointer = re.search(r'section "([^"]+)"', ast.get_source_segment(stub_source, node) or "")
        functions.append(FunctionCell(node.name, pointer.group(1) if pointer else None, source))

    helpers, previous_end = [], 0
    api = {n.name for n in stub_api}
    for index, statement in enumerate(solution.body):
        chunk = solution_lines[previous_end:_last_line(statement)]      # with the comments above it
        previous_end = _last_line(statement)
        if index == 0 and _is_docstring(statement):
            continue
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            raise BuildError("the solution imports from __future__; the stub must carry that line")
        if getattr(statement, "name", None) in api or ast.dump(statement) in header_dumps or is_main_guard(statement):
            continue
        helpers.append("\n".join(chunk))
    header = "\n".join(stub_lines[:first - 1]).strip("\n")
    return ModuleCells(header, re.sub(r"\n{4,}", "\n\n\n", "\n".join(helpers)).strip("\n"), functions)


API_NODES = (ast.FunctionDef, ast.ClassDef)


def _class_cell(stub_lines, stub_class, solution_lines, solution_class) -> str:
    """The stub's class line and docstring, then each of its methods as a function cell would
    show it. The class may hold nothing else: a solution region at class level would be released
    as a `raise` that breaks the class itself."""
    def methods(node, role):
        members = [n for n in node.body if not _is_docstring(n)]
        if not all(isinstance(n, ast.FunctionDef) for n in members):
            raise BuildError(f"class {node.name}: the {role} holds more than methods; "
                             "keep other code at module level")
        return {n.name: n for n in members}
    stub_methods, solution_methods = methods(stub_class, "stub"), methods(solution_class, "solution")
    if set(solution_methods) != set(stub_methods):
        raise BuildError(f"class {stub_class.name}: the solution's methods {sorted(solution_methods)} "
                         f"are not the stub's {sorted(stub_methods)}")
    head_end = stub_class.body[0].end_lineno if _is_docstring(stub_class.body[0]) else stub_class.lineno
    parts = ["\n".join(stub_lines[_first_line(stub_class) - 1:head_end])]
    for name, method in stub_methods.items():
        parts.append(_function_cell(stub_lines, method, solution_lines, solution_methods[name]))
    return "\n\n".join(parts)


def _function_cell(stub_lines, stub_node, solution_lines, solution_node) -> str:
    """The stub's signature and docstring, the statements the stub runs before its raise (such
    as `super().__init__()`), the solution's body as the solution region (less those statements
    where it starts with them), then the stub's raise, which the solution returns before
    reaching."""
    head_end, body_start = _docstring_end(stub_node), _docstring_end(solution_node)
    indent = " " * stub_node.body[0].col_offset
    stub_body = [n for n in stub_node.body if not _is_docstring(n)]
    prefix = stub_body[:-1]
    solution_body = [n for n in solution_node.body if not _is_docstring(n)]
    starts_with_prefix = [ast.dump(n) for n in solution_body[:len(prefix)]] == [ast.dump(n) for n in prefix]
    if prefix and starts_with_prefix and len(solution_body) > len(prefix):
        body_start = solution_body[len(prefix)].lineno - 1
    body = solution_lines[body_start:solution_node.end_lineno]
    if not isinstance(solution_node.body[-1], (ast.Return, ast.Raise)):
        body.append(indent + "return")      # what falling off the end did, now before the stub's raise
    tail_start = stub_body[-1].lineno - 1 if prefix else head_end
    lines = [*stub_lines[_first_line(stub_node) - 1:tail_start], indent + BEGIN_SOLUTION, *body,
             indent + END_SOLUTION, *stub_lines[tail_start:stub_node.end_lineno]]
    source = "\n".join(lines)
    try:
        compile(textwrap.dedent(source), f"<{stub_node.name}>", "exec")
    except SyntaxError as exc:      # e.g. the stub and the solution indent their bodies differently
        raise BuildError(f"{stub_node.name}(): the stub's signature and the solution's body do not fit: "
                         f"{exc}") from None
    return source


def _first_line(node) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _last_line(node: ast.stmt) -> int:
    return node.end_lineno or node.lineno      # always set on a parsed tree; typed as optional


def _is_docstring(node) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _docstring_end(function) -> int:
    """The last line of a function's signature and docstring."""
    first = function.body[0]
    if _is_docstring(first):
        return first.end_lineno
    if first.lineno == function.lineno:
        raise BuildError(f"{function.name}(): its body starts on the line of its signature")
    return first.lineno - 1


# ---------------------------------------------------------------- the visible tests

def visible_test_parts(path: Path, functions: list[str]) -> tuple[str, dict[str, str]]:
    """The visible test file as its helpers (everything but the test functions and the module
    docstring) and the source of each test function."""
    text = path.read_text(encoding="utf-8")
    lines, tree = text.splitlines(), ast.parse(text)
    nodes = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    sources: dict[str, str] = {}
    removed: set[int] = set()
    for name in functions:
        node = nodes.get(name)
        if node is None:
            raise BuildError(f"{path.name}: {name} is not a top-level function (a notebook cell needs its source)")
        unknown = [a.arg for a in node.args.args if a.arg not in FIXTURES]
        if unknown:
            raise BuildError(f"{path.name}: {name} asks for fixtures {unknown}; a notebook provides {list(FIXTURES)}")
        start = _first_line(node)
        sources[name] = "\n".join(lines[start - 1:_last_line(node)])
        removed.update(range(start, _last_line(node) + 1))
    if tree.body and _is_docstring(tree.body[0]):
        removed.update(range(tree.body[0].lineno, _last_line(tree.body[0]) + 1))
    helpers = "\n".join(line for number, line in enumerate(lines, 1) if number not in removed)
    return re.sub(r"\n{3,}", "\n\n\n", helpers).strip("\n"), sources


# ---------------------------------------------------------------- the README

def readme_in(task: Task, lang: str) -> tuple[str, list[tuple[str, str]]]:
    """The README in `lang`, its sections named by the English README's headings (the concepts
    and stubs name those); the translations keep the English sections' order."""
    intro, english = readme_parts(task.readme.read_text(encoding="utf-8"))
    if lang == "en":
        return intro, english
    path = readme_file(task, lang)
    if not path.is_file():
        raise BuildError(f"{task.name} has no {path.name}")
    intro, translated = readme_parts(path.read_text(encoding="utf-8"))
    if len(translated) != len(english):
        raise BuildError(f"{path.name} has {len(translated)} sections, README.md {len(english)}: they must match")
    return intro, [(heading, body) for (heading, _), (_, body) in zip(english, translated)]
