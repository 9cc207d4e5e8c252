"""The trust boundary is a folder: `grader/worker/`, the only code that runs next to learner code
(and all the sandbox copies of the grader), imports nothing else of `grader`."""
import ast
from pathlib import Path

import grader

WORKER_PACKAGE = Path(grader.__file__).parent / "worker"


def imported_names(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names.append("." * node.level + (node.module or ""))
    return names


def test_the_worker_package_imports_nothing_else_of_the_grader():
    modules = sorted(WORKER_PACKAGE.glob("*.py"))
    assert {m.name for m in modules} >= {"__init__.py", "zygote.py", "dispatch.py", "wire.py", "loading.py"}
    for module in modules:
        outside = [name for name in imported_names(module)
                   if (name == "grader" or name.startswith("grader.")) and not name.startswith("grader.worker")
                   or name.startswith("..")]
        assert not outside, f"{module.name} imports {outside}: the worker's side may import only grader.worker"
