"""The course's nbgrader notebooks as data: which cells make up the learner's module, which are
graded, and nbgrader's metadata on a cell (schema version 3).

Shared by the notebook writer (`grader.delivery.nbgrader`), the test cells
(`grader.delivery.nbgrader_cells`) and the autograde kernel (`grader.delivery.nbgrader_kernel`),
so that the three agree on one rule: the learner's module is the notebook's code cells whose
nbgrader `grade_id` starts with `module-`, in notebook order. nbgrader keeps a cell's `grade_id`
from release to autograde; a learner does not see it.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

MODULE_CELL_PREFIX = "module-"
NBGRADER_SCHEMA_VERSION = 3


def read_notebook(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def nbgrader_metadata(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def is_module_cell(cell: dict) -> bool:
    grade_id = nbgrader_metadata(cell).get("grade_id", "")
    return cell.get("cell_type") == "code" and grade_id.startswith(MODULE_CELL_PREFIX)


def is_grade_cell(cell: dict) -> bool:
    """A cell nbgrader scores (its `grade_id` is checked against the gradebook at autograde)."""
    meta = nbgrader_metadata(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and bool(meta.get("grade_id"))


def is_locked_cell(cell: dict) -> bool:
    """A code cell whose source nbgrader restores from its gradebook at autograde: locked, as
    nbgrader decides it (a grade cell is, a solution cell never is), with a `grade_id` (autograde
    drops an id its gradebook does not know)."""
    meta = nbgrader_metadata(cell)
    if cell.get("cell_type") != "code" or not meta.get("grade_id") or meta.get("solution"):
        return False
    return bool(meta.get("grade") or meta.get("locked"))


def module_source(notebook: dict) -> str:
    """The learner's module: the notebook's module cells, in order. Empty when it has none."""
    parts = [cell_source(cell).strip("\n") for cell in notebook.get("cells", []) if is_module_cell(cell)]
    return "\n\n\n".join(parts) + "\n" if parts else ""


def is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`, which a notebook's kernel would run too (its `__name__` is
    `__main__`): a module keeps it out of its cells, and its file ends with it."""
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__")


def module_file(module: str, stub_source: str) -> str:
    """The module file a notebook's module cells make: the cells, then the stub's closing main
    guards (what `python module.py` and torchrun run). Cells that hold a main guard of their own
    get none added: two would run `main()` twice."""
    if _has_main_guard(module):
        return module
    lines = stub_source.splitlines()
    guards = ["\n".join(lines[node.lineno - 1:node.end_lineno]) for node in ast.parse(stub_source).body if is_main_guard(node)]
    return module if not guards else module.rstrip("\n") + "\n\n\n" + "\n\n".join(guards) + "\n"


def _has_main_guard(module: str) -> bool:
    try:
        return any(is_main_guard(node) for node in ast.parse(module).body)
    except SyntaxError:         # the module's import reports it, with the learner's line
        return False
