"""An IPython extension for nbgrader's autograde kernels: in a notebook of this course, only its
test cells run. `grader nbgrader` names it in the course's nbgrader_config.py
(`Execute.extra_arguments`), so it is loaded before the notebook's first cell.

nbgrader autograde runs every cell of a submission in one kernel, and that kernel must be able
to read the hidden suites to grade. Learner code running there could read them and print them
into the feedback, or patch the test cells' helpers to print full marks. Our test cells never
call learner code in the kernel: they grade the module the saved notebook holds, in the isolated
worker. So the learner's cells need not run there at all: every cell that is not one of the
notebook's locked cells (the test cells, the visible tests' helpers they use, the module's
header), whose source nbgrader restored from its gradebook before the kernel started, runs as
`pass`. A notebook without our test cells runs unchanged, and outside
`nbgrader autograde` the extension does nothing.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from grader.delivery.notebook import cell_source, is_locked_cell, read_notebook

log = logging.getLogger(__name__)

MARKER = "from grader.delivery.nbgrader_cells import ConceptCell"   # in every test cell we write


def load_ipython_extension(ipython) -> None:
    if os.environ.get("NBGRADER_EXECUTION") != "autograde":
        return
    allowed = locked_cell_sources(Path.cwd())
    if any(MARKER in source for source in allowed):
        # First in line, so it sees each cell as nbgrader sent it.
        ipython.input_transformers_cleanup.insert(0, OnlyLockedCells(allowed))


def locked_cell_sources(folder: Path) -> set[str]:
    """The sources of the locked cells of the notebooks in `folder` (autograde runs a kernel in
    the assignment's folder, where it has just written the sanitized notebook)."""
    sources = set()
    for path in sorted(folder.glob("*.ipynb")):
        try:
            notebook = read_notebook(path)
        except (OSError, ValueError) as exc:
            log.debug("%s not read for its locked cells: %s", path, exc)
            continue
        sources |= {cell_source(cell).strip() for cell in notebook.get("cells", []) if is_locked_cell(cell)}
    return sources


class OnlyLockedCells:
    """An IPython input transformer: a cell runs only if it is one of `allowed`."""

    def __init__(self, allowed: set[str]):
        self.allowed = allowed

    def __call__(self, lines: list[str]) -> list[str]:
        return lines if "".join(lines).strip() in self.allowed else ["pass\n"]
