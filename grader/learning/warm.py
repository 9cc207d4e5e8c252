"""Warming a watcher up: what it imports once so that every check forked from it finds it loaded.
Only installed libraries and the course's own code, never the learner's module: that is read
(for the libraries it names), not run."""
from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import io
import logging
import sys
import sysconfig
from pathlib import Path

from grader.course import Task, locate_module
from grader.schema import record

log = logging.getLogger(__name__)

_LIBRARY_DIRS = tuple({Path(sysconfig.get_paths()[key]).resolve()
                       for key in ("stdlib", "platstdlib", "purelib", "platlib")})
_GRADER_DIR = Path(__file__).resolve().parent.parent


def is_library_module(module) -> bool:
    """An installed library's module or the grader's own: what the watcher may import itself.
    The learner's module (loaded under a private name, from their folder) never is."""
    file = getattr(module, "__file__", None)
    if not file:
        return False
    path = Path(file).resolve()
    return any(path.is_relative_to(folder) for folder in (*_LIBRARY_DIRS, _GRADER_DIR))


def imports_of(path: Path) -> list[str]:
    """The modules a Python file imports, read from its syntax tree (never run), at any depth."""
    try:
        tree = ast.parse(path.read_bytes())     # bytes: Python honours a PEP 263 coding line
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def _installed(name: str) -> bool:
    try:
        spec = importlib.util.find_spec(name.split(".")[0])
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return spec is not None
    return any(Path(spec.origin).resolve().is_relative_to(folder) for folder in (*_LIBRARY_DIRS, _GRADER_DIR))


def import_quietly(names) -> None:
    """Import what a check will need, so that the children forked later find it loaded. A library
    that fails to import here fails in the check too, where the learner sees why."""
    for name in names:
        if name in sys.modules or not _installed(name):
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:
            log.debug("%s not imported ahead: %s", name, exc)


def warm_up(task: Task, impl: Path) -> None:
    """pytest, the libraries every suite needs, those the task's visible tests, probes and modules
    import (the learner's and the reference's, read, not run), the visible tests' probes and their
    own `warm_up()` where they have one (the libraries' first calls, made once here), and what
    every check's report reads (the run record's package versions)."""
    from grader.running.pool import BASE_LIBRARIES
    from grader.worker.loading import sibling_module
    files = [*sorted(task.exercise_dir.glob("test_*.py")), task.exercise_dir / "probes.py",
             locate_module(impl, task), task.reference_module]
    import_quietly(["pytest", *BASE_LIBRARIES, *(name for path in files for name in imports_of(path))])
    one_torch_thread()
    if (task.exercise_dir / "probes.py").is_file():
        try:       # the course's helpers, loaded by path as the tests load them: the tests find them cached
            probes = sibling_module(str(task.exercise_dir / "probes.py"), "probes")
            if hasattr(probes, "warm_up"):
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    probes.warm_up()     # the libraries' progress bars and notices are not for this screen
        except Exception as exc:
            log.debug("the probes of %s not loaded (or warmed) ahead: %s", task.name, exc)
    draw_once()
    record.package_versions()


def one_torch_thread() -> None:
    """torch on one thread, in the watcher and in each check's child: OpenMP's threads are not
    forked, and a child of a process whose thread pool has run would wait forever on the parent's
    team at its first parallel operation (`grader watch` starts torch on one thread anyway)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def draw_once() -> None:
    """matplotlib's first figure finds its fonts, builds its text and picks pyplot's backend: done
    once here (when a check will draw: matplotlib is loaded), never again in a check's children."""
    if "matplotlib" not in sys.modules:
        return
    try:
        from matplotlib.figure import Figure
        figure = Figure()
        axes = figure.subplots(2, 1)
        for ax in axes:
            ax.plot([1, 10, 100], [3.0, 2.0, 1.5], label="warm")
            ax.set_xscale("log")
            ax.set_xlabel("step")
            ax.legend()
        for kind in ("png", "svg"):
            figure.savefig(io.BytesIO(), format=kind)
        if "matplotlib.pyplot" in sys.modules:
            pyplot = sys.modules["matplotlib.pyplot"]
            pyplot.close(pyplot.figure())
    except Exception as exc:
        log.debug("no figure drawn ahead: %s", exc)
