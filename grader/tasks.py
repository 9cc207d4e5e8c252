"""The course's tasks, discovered from its folders, and where a submission keeps each module.

A task is an exercise folder `exercises/NN_name/` holding one learner module `<module>.py`
beside its visible tests `test_<module>.py`. Nothing else declares tasks, so adding an
exercise folder is all it takes to add a task.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent
EXERCISES = COURSE_ROOT / "exercises"
SOLUTIONS = COURSE_ROOT / "solutions"
HIDDEN = COURSE_ROOT / "tests" / "hidden"
DATASETS = COURSE_ROOT / "datasets"
# Beside each hidden suite, what only `grader audit` reads: the mutants and alternatives
# (near-references) and the independent solution. Grading never needs them, and a machine where
# learner code runs should not hold them.
VARIANTS, INDEPENDENT_DIR = "variants.py", "independent"
AUDIT_ONLY = (VARIANTS, INDEPENDENT_DIR)

_TASK_DIR = re.compile(r"^\d\d_[a-z0-9_]+$")


def course_session_options() -> list[str]:
    """The pytest options of every session that runs the course's suites (a grading, a collection
    of their points): the course's root and configuration, and nothing of the project's own
    development setup (`tests/conftest.py`, above the hidden suites, is not loaded: the suites keep
    no conftest of their own), so that a grading here and one from the Gradescope zip run the same
    session."""
    return ["--rootdir", str(COURSE_ROOT), "-c", str(COURSE_ROOT / "pyproject.toml"), "--noconftest",
            "-p", "no:cacheprovider"]


@dataclass(frozen=True)
class Task:
    name: str     # the folder name, e.g. "01_einsum_attention"
    module: str   # the learner's module, e.g. "attention"
    title: str    # the README's first heading

    @property
    def exercise_dir(self) -> Path:
        return EXERCISES / self.name

    @property
    def hidden_dir(self) -> Path:
        return HIDDEN / self.name

    @property
    def variants_file(self) -> Path:
        return self.hidden_dir / VARIANTS

    @property
    def independent_module(self) -> Path:
        return self.hidden_dir / INDEPENDENT_DIR / f"{self.module}.py"

    @property
    def readme(self) -> Path:
        return self.exercise_dir / "README.md"

    def suite_paths(self, hidden: bool) -> list[Path]:
        paths = [self.exercise_dir]
        if hidden and self.hidden_dir.is_dir():
            paths.append(self.hidden_dir)
        return paths

    def probe_files(self) -> list[Path]:
        """The files a worker needs to run this task's probes: each suite folder's `probes.py`
        and the sibling modules it loads (`sibling_module(__file__, "name")`). Nothing else of
        a suite folder ever reaches the learner's process."""
        files = []
        for folder in (self.exercise_dir, self.hidden_dir):
            probes = folder / "probes.py"
            if probes.is_file():
                files += [probes, *(folder / f"{name}.py" for name in _sibling_modules(probes))]
        return files


@cache
def all_tasks() -> tuple[Task, ...]:
    """Every exercise folder that holds exactly one learner module (a project test checks
    that no folder is left out for lacking one)."""
    tasks = (_task_from_dir(d) for d in sorted(EXERCISES.iterdir()) if _TASK_DIR.match(d.name))
    return tuple(task for task in tasks if task is not None)


def task_named(name: str) -> Task:
    """Accept the folder name or its number prefix ("01", "1")."""
    for task in all_tasks():
        if name in (task.name, task.name[:2], task.name[:2].lstrip("0")):
            return task
    known = ", ".join(t.name for t in all_tasks())
    raise KeyError(f"no task {name!r}; the tasks are: {known}")


@cache
def task_of_path(path: Path) -> Task | None:
    """The task a test file belongs to: its folder is named after the task."""
    for part in reversed(Path(path).resolve().parts):
        if _TASK_DIR.match(part):
            try:
                return task_named(part)
            except KeyError:
                return None
    return None


def _sibling_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "sibling_module" and len(node.args) == 2 \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            names.append(node.args[1].value)
    return names


def learner_modules(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py")
                  if not p.name.startswith(("test_", "conftest")) and p.name != "probes.py")


def _task_from_dir(folder: Path) -> Task | None:
    modules = learner_modules(folder)
    if len(modules) != 1:
        return None
    title = folder.name
    readme = folder / "README.md"
    if readme.exists():
        first = next((line for line in readme.read_text(encoding="utf-8").splitlines() if line.startswith("# ")), "")
        title = first.removeprefix("# ").strip() or title
    return Task(folder.name, modules[0], title)


def locate_module(root: Path, task: Task) -> Path:
    """Where a submission tree keeps the module of `task`. Accepts the course layout
    (`NN_name/module.py`), a clone of a fork (`exercises/NN_name/module.py`) and a flat upload
    (`module.py`), in that order. Returns the first candidate even when none exists, so the
    caller can say where it looked."""
    root = Path(root)
    candidates = [root / task.name / f"{task.module}.py",
                  root / "exercises" / task.name / f"{task.module}.py",
                  root / f"{task.module}.py"]
    return next((c for c in candidates if c.is_file()), candidates[0])
