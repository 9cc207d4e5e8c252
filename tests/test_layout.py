"""The trust boundary is a folder: `grader/worker/`, the only code that runs next to learner code
(and all the sandbox copies of the grader), imports nothing else of `grader`."""
import ast
from pathlib import Path

import grader

WORKER_PACKAGE = Path(grader.__file__).parent / "worker"


def imported_names(path: Path, skipping: frozenset[str] = frozenset()) -> list[str]:
    """The modules a file imports, but in the top-level functions named in `skipping`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tree.body = [node for node in tree.body if not (isinstance(node, ast.FunctionDef) and node.name in skipping)]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names.append("." * node.level + (node.module or ""))
    return names


def beyond_the_worker(names: list[str]) -> list[str]:
    """The imported names that reach the grader outside `grader.worker`."""
    return [name for name in names
            if (name == "grader" or name.startswith("grader.")) and not name.startswith("grader.worker")
            or name.startswith("..")]


def test_the_worker_package_imports_nothing_else_of_the_grader():
    modules = sorted(WORKER_PACKAGE.glob("*.py"))
    assert {m.name for m in modules} >= {"__init__.py", "zygote.py", "dispatch.py", "wire.py", "loading.py"}
    for module in modules:
        outside = beyond_the_worker(imported_names(module))
        assert not outside, f"{module.name} imports {outside}: the worker's side may import only grader.worker"


def test_probes_and_their_siblings_import_only_the_workers_side_of_the_grader():
    """Probe files are loaded beside learner code, where only `grader.worker` is there to import:
    a probe that reaches for the rest of the grader fails to load in every official grading.
    (`warm_up` runs in `grader watch`'s own process, never beside learner code.)"""
    from grader.course import COURSE

    files = {path for task in COURSE.tasks() for path in task.probe_files()}
    assert files
    for path in sorted(files):
        outside = beyond_the_worker(imported_names(path, skipping=frozenset({"warm_up"})))
        assert not outside, f"{path.parent.name}/{path.name} imports {outside}: beside learner code only grader.worker is there"


GROUND_FLOOR = ("grader.course", "grader.schema", "grader.worker")


def test_the_report_schema_stands_on_the_ground_floor():
    """`grader/schema/` imports only the ground floor (the course, the worker's `Location`, itself):
    never a renderer of `grader/reports/`, nor the engine that fills the report."""
    modules = sorted((WORKER_PACKAGE.parent / "schema").glob("*.py"))
    assert {m.name for m in modules} >= {"report.py", "record.py"}
    for module in modules:
        above = [name for name in imported_names(module) if name.startswith(("grader.", ".")) and
                 not name.startswith(GROUND_FLOOR)]
        assert not above, f"schema/{module.name} imports {above}"


UPPER_FLOORS = ("grader.reports", "grader.running", "grader.learning", "grader.delivery", "grader.cli")


SESSION_FLOOR = ("session", "isolation", "suite", "processes", "spec.py")


def test_the_grading_session_imports_no_floor_above_it():
    """The grading session's floor (the plugin and the submission, isolation, the suite author's
    API, forks and slots, the spec) renders nothing and starts no run: it imports neither the
    renderers nor the runners, the learner's loop, delivery or the CLI (docs/architecture.md,
    "The floors of grader/")."""
    package = WORKER_PACKAGE.parent
    modules = [module for part in SESSION_FLOOR for module in
               ([package / part] if part.endswith(".py") else sorted((package / part).glob("*.py")))]
    assert len(modules) > len(SESSION_FLOOR), modules
    for module in modules:
        above = [name for name in imported_names(module) if name.startswith(UPPER_FLOORS)]
        assert not above, f"{module.relative_to(package)} imports {above}"
