"""The course: its root folder, its tasks discovered from their folders, and where a submission
keeps each module.

A task is an exercise folder `exercises/NN_name/` holding one learner module `<module>.py`
beside its visible tests `test_<module>.py`. Nothing else declares tasks, so adding an
exercise folder is all it takes to add a task. `COURSE` is the course this package grades;
any other folder laid out the same way is a course too (a suite author's small test course).
"""
from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

# Beside each hidden suite, what only `grader audit` reads: the mutants and alternatives
# (near-references) and the independent solution. Grading never needs them, and a machine where
# learner code runs should not hold them.
VARIANTS, INDEPENDENT_DIR = "variants.py", "independent"
AUDIT_ONLY = (VARIANTS, INDEPENDENT_DIR)
SECRET_NAME = ".grader-secret"

_TASK_DIR = re.compile(r"^\d\d_[a-z0-9_]+$")


@dataclass(frozen=True)
class Course:
    root: Path

    @property
    def exercises(self) -> Path:
        return self.root / "exercises"

    @property
    def solutions(self) -> Path:
        return self.root / "solutions"

    @property
    def hidden(self) -> Path:
        return self.root / "tests" / "hidden"

    @property
    def datasets(self) -> Path:
        return self.root / "datasets"

    @property
    def secret_file(self) -> Path:
        return self.root / SECRET_NAME

    def session_options(self) -> list[str]:
        """The pytest options of every session that runs the course's suites (a grading, a collection
        of their points): the course's root and configuration, and nothing of the project's own
        development setup (`tests/conftest.py`, above the hidden suites, is not loaded: the suites keep
        no conftest of their own), so that a grading here and one from the Gradescope zip run the same
        session."""
        return ["--rootdir", str(self.root), "-c", str(self.root / "pyproject.toml"), "--noconftest",
                "-p", "no:cacheprovider"]

    def tasks(self) -> tuple[Task, ...]:
        """Every exercise folder that holds exactly one learner module (a project test checks
        that no folder is left out for lacking one)."""
        return self._tasks

    @cached_property
    def _tasks(self) -> tuple[Task, ...]:
        if not self.exercises.is_dir():
            return ()
        found = (_task_from_dir(self, d) for d in sorted(self.exercises.iterdir()) if _TASK_DIR.match(d.name))
        return tuple(task for task in found if task is not None)

    def task_named(self, name: str) -> Task:
        """Accept the folder name or its number prefix ("01", "1")."""
        for task in self.tasks():
            if name in (task.name, task.name[:2], task.name[:2].lstrip("0")):
                return task
        known = ", ".join(t.name for t in self.tasks())
        raise KeyError(f"no task {name!r}; the tasks are: {known}")

    def task_of_path(self, path: Path) -> Task | None:
        """The task a test file belongs to: its folder is named after the task."""
        return _task_of_path(self, Path(path).resolve())

    def is_hidden(self, path: Path) -> bool:
        return Path(path).resolve().is_relative_to(self.hidden.resolve())


@dataclass(frozen=True)
class Task:
    name: str     # the folder name, e.g. "01_einsum_attention"
    module: str   # the learner's module, e.g. "attention"
    title: str    # the README's first heading
    course: Course = field(repr=False)

    @property
    def exercise_dir(self) -> Path:
        return self.course.exercises / self.name

    @property
    def hidden_dir(self) -> Path:
        return self.course.hidden / self.name

    @property
    def reference_module(self) -> Path:
        return self.course.solutions / self.name / f"{self.module}.py"

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

    def suite_sha256(self, hidden: bool) -> str:
        """The version of the suites that grade this task: a digest of every file in its suite
        folders that a grading reads (the tests, their probes and oracles, their data), by path
        and content. The learner's module, the READMEs, hints and notebooks, and what only the
        audit reads are left out: editing a hint changes no grade, tightening a test does."""
        digest = hashlib.sha256()
        for folder in self.suite_paths(hidden):
            for path in sorted(p for p in folder.rglob("*") if p.is_file() and self._grades_with(p, folder)):
                digest.update(f"{path.relative_to(self.course.root).as_posix()}\0".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest()

    def _grades_with(self, path: Path, folder: Path) -> bool:
        parts = path.relative_to(folder).parts
        return not (parts[0] in AUDIT_ONLY or any(p.startswith(".") or p == "__pycache__" for p in parts)
                    or path.suffix in (".md", ".ipynb") or (folder == self.exercise_dir and path.name == f"{self.module}.py"))

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


COURSE = Course(Path(__file__).resolve().parent.parent)


@cache
def _task_of_path(course: Course, path: Path) -> Task | None:
    for part in reversed(path.parts):
        if _TASK_DIR.match(part):
            try:
                return course.task_named(part)
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


def _task_from_dir(course: Course, folder: Path) -> Task | None:
    modules = learner_modules(folder)
    if len(modules) != 1:
        return None
    title = folder.name
    readme = folder / "README.md"
    if readme.exists():
        first = next((line for line in readme.read_text(encoding="utf-8").splitlines() if line.startswith("# ")), "")
        title = first.removeprefix("# ").strip() or title
    return Task(folder.name, modules[0], title, course)


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
