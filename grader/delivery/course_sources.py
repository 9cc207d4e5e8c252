"""The course's files cut into the pieces of a notebook: the learner's module around the stub's
API (the reference's bodies as solution regions), the visible tests one function at a time, and
the README section by section. Pure text and syntax trees; `grader.delivery.nbgrader` assembles
the pieces.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from grader.delivery.nbgrader_cells import FIXTURES
from grader.tasks import Task

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"


class BuildError(ValueError):
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
    """Split a solution into the notebook's module cells, around the stub's API."""
    stub, solution = ast.parse(stub_source), ast.parse(solution_source)
    stub_lines, solution_lines = stub_source.splitlines(), solution_source.splitlines()
    stub_functions = [n for n in stub.body if isinstance(n, ast.FunctionDef)]
    if not stub_functions:
        raise BuildError("the stub defines no function")
    first = _first_line(stub_functions[0])
    if any(_first_line(n) > first for n in stub.body if not isinstance(n, ast.FunctionDef)):
        raise BuildError("the stub has top-level code after its first function; keep it above")
    header_nodes = [n for n in stub.body if not isinstance(n, ast.FunctionDef)]
    header_dumps = {ast.dump(n) for n in header_nodes}
    solution_functions = {n.name: n for n in solution.body if isinstance(n, ast.FunctionDef)}

    functions = []
    for node in stub_functions:
        if node.name not in solution_functions:
            raise BuildError(f"the solution has no function {node.name}()")
        source = _function_cell(stub_lines, node, solution_lines, solution_functions[node.name])
        pointer = re.search(r'section "([^"]+)"', ast.get_source_segment(stub_source, node) or "")
        functions.append(FunctionCell(node.name, pointer.group(1) if pointer else None, source))

    helpers, previous_end = [], 0
    api = {n.name for n in stub_functions}
    for index, node in enumerate(solution.body):
        chunk = solution_lines[previous_end:node.end_lineno]      # with the comments above it
        previous_end = node.end_lineno
        if index == 0 and _is_docstring(node):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            raise BuildError("the solution imports from __future__; the stub must carry that line")
        if getattr(node, "name", None) in api or ast.dump(node) in header_dumps:
            continue
        helpers.append("\n".join(chunk))
    header = "\n".join(stub_lines[:first - 1]).strip("\n")
    return ModuleCells(header, re.sub(r"\n{4,}", "\n\n\n", "\n".join(helpers)).strip("\n"), functions)


def _function_cell(stub_lines, stub_node, solution_lines, solution_node) -> str:
    """The stub's signature and docstring, the solution's body as the solution region, then the
    rest of the stub's body (its raise), which the solution returns before reaching."""
    head_end, body_start = _docstring_end(stub_node), _docstring_end(solution_node)
    indent = " " * stub_node.body[0].col_offset
    body = solution_lines[body_start:solution_node.end_lineno]
    if not isinstance(solution_node.body[-1], (ast.Return, ast.Raise)):
        body.append(indent + "return")      # what falling off the end did, now before the stub's raise
    lines = [*stub_lines[_first_line(stub_node) - 1:head_end], indent + BEGIN_SOLUTION, *body,
             indent + END_SOLUTION, *stub_lines[head_end:stub_node.end_lineno]]
    source = "\n".join(lines)
    try:
        compile(source, f"<{stub_node.name}>", "exec")
    except SyntaxError as exc:      # e.g. the stub and the solution indent their bodies differently
        raise BuildError(f"{stub_node.name}(): the stub's signature and the solution's body do not fit: "
                         f"{exc}") from None
    return source


def _first_line(node) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


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
    sources, removed = {}, set()
    for name in functions:
        node = nodes.get(name)
        if node is None:
            raise BuildError(f"{path.name}: {name} is not a top-level function (a notebook cell needs its source)")
        unknown = [a.arg for a in node.args.args if a.arg not in FIXTURES]
        if unknown:
            raise BuildError(f"{path.name}: {name} asks for fixtures {unknown}; a notebook provides {list(FIXTURES)}")
        start = _first_line(node)
        sources[name] = "\n".join(lines[start - 1:node.end_lineno])
        removed.update(range(start, node.end_lineno + 1))
    if tree.body and _is_docstring(tree.body[0]):
        removed.update(range(tree.body[0].lineno, tree.body[0].end_lineno + 1))
    helpers = "\n".join(line for number, line in enumerate(lines, 1) if number not in removed)
    return re.sub(r"\n{3,}", "\n\n\n", helpers).strip("\n"), sources


# ---------------------------------------------------------------- the README

def readme_parts(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The introduction (title and text before the first `## ` heading) and each section as
    (heading, Markdown with its heading); headings inside code fences do not count."""
    intro, sections, fenced = [], [], False
    current = intro
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            sections.append((line[3:].strip(), [line]))
            current = sections[-1][1]
            continue
        current.append(line)
    return "\n".join(intro).strip(), [(heading, "\n".join(body).strip()) for heading, body in sections]


def readme_in(task: Task, lang: str) -> tuple[str, list[tuple[str, str]]]:
    """The README in `lang`, its sections named by the English README's headings (the concepts
    and stubs name those); the translations keep the English sections' order."""
    intro, english = readme_parts(task.readme.read_text(encoding="utf-8"))
    if lang == "en":
        return intro, english
    path = task.exercise_dir / f"README.{lang}.md"
    if not path.is_file():
        raise BuildError(f"{task.name} has no {path.name}")
    intro, translated = readme_parts(path.read_text(encoding="utf-8"))
    if len(translated) != len(english):
        raise BuildError(f"{path.name} has {len(translated)} sections, README.md {len(english)}: they must match")
    return intro, [(heading, body) for (heading, _), (_, body) in zip(english, translated)]
