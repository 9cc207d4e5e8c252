"""What the test cells of the course's nbgrader notebooks run (`grader nbgrader` writes them).

One test cell per README concept, worth that concept's points:

    cell = ConceptCell("01_einsum_attention", "Stable softmax", points=9,
                       visible_tests=[test_softmax_rows_sum_to_one, test_softmax_ignores_minus_infinity])
    ### BEGIN HIDDEN TESTS
    cell.grade_with_hidden_suite()
    ### END HIDDEN TESTS
    cell.result()

Either way the cell tests the learner's module as the saved notebook holds it (its module cells,
see `grader.delivery.notebook`), never the kernel's variables: what a learner checks is what
gets graded, and a helper left in a scratch cell fails here first.

- The learner's copy (the release; `nbgrader validate`) runs the visible tests shown in the cell
  on that module, here in the kernel, prints what each found, and raises when one failed, so
  nbgrader validate reports the cell with that message.
- The instructor's copy, which nbgrader autograde restores from its gradebook, also has the
  hidden-suite line. The module is then graded exactly as `grader grade` grades it
  (`grader.running.runner`: the installed course's visible and hidden suites, learner code in the
  isolated worker), once per notebook; each cell prints its concept's share and ends with the
  points earned, which nbgrader takes as the cell's partial credit.

Whatever the learner's code prints, from Python or below it, is captured around every call and
shown as text: no print or warning can put a stderr stream in a test cell, which nbgrader would
score 0.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import io
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from grader.course import COURSE, Task
from grader.delivery.notebook import cell_source, is_grade_cell, module_file, module_source, read_notebook
from grader.schema.report import NO_GPU, NOT_GRADED_STATUS

FIXTURES = ("submission", "tmp_path")     # what the visible tests may ask for in a notebook


class NotebookError(RuntimeError):
    """The saved notebook cannot be tested: not found, or without module cells."""


class VisibleTestsFailed(AssertionError):
    """A visible test of the cell's concept failed (the learner's copy)."""


class GradingIncomplete(RuntimeError):
    """The grading of the notebook's module went wrong around the tests; it says why."""


class SuiteChanged(RuntimeError):
    """The course's suites no longer match the points this notebook was written with."""


class ConceptCell:
    def __init__(self, task: str, concept: str, points: float, *, visible_tests=(), gpu_points: float = 0.0,
                 count_gpu_tests: bool = False):
        self.task = COURSE.task_named(task)
        self.concept = concept
        self.points = float(points)                # the cell's worth, as nbgrader's metadata says
        self.visible_tests = list(visible_tests)
        self.gpu_points = float(gpu_points)        # the concept's GPU tests: part of `points` if counted
        self.count_gpu_tests = count_gpu_tests     # the notebook was written for a CUDA autograder
        self._hidden = False

    def grade_with_hidden_suite(self) -> None:
        """Grade the concept on the installed course's visible and hidden suites (instructor's copy)."""
        self._hidden = True

    def result(self) -> float | None:
        """The points earned (instructor's copy), or None once every visible test passed."""
        if self._hidden:
            return self._graded_points()
        results = self._run_visible_tests()
        lost = [r for r in results if r.lost]
        if lost:
            raise VisibleTestsFailed(f"{len(lost)} of {len(results)} visible tests of {self.concept!r} failed:\n"
                                     + "\n".join(f"- {r.title}\n  {(r.feedback or r.status).splitlines()[0]}"
                                                 for r in lost))
        return None

    # ------------------------------------------------------------ the learner's copy

    def _run_visible_tests(self) -> list:
        print(f"{self.concept} ({self.points:g} points)")
        if not self.visible_tests:
            print("  No visible test for this concept: the graded suite checks it.")
            return []
        saved = SavedNotebook.find(self.task)
        module_path = _submission_tree(self.task, saved.module) / self.task.name / f"{self.task.module}.py"
        results = [_run_visible_test(test, module_path, self.task) for test in self.visible_tests]
        for result in results:
            print(_describe(result))
        print(f"  ({saved.description()}; the graded suite checks more)")
        return results

    # ------------------------------------------------------------ the instructor's copy

    def _graded_points(self) -> float:
        saved = SavedNotebook.find(self.task)
        report = _graded_report(self.task, saved.module, self.count_gpu_tests)
        task_result = report.task(self.task.name)
        if not report.complete or task_result is None:
            raise GradingIncomplete("the grading of this notebook's module is incomplete: "
                                    + ("; ".join(report.problems) or "no result for the task"))
        # A failing test is listed under the concept its feedback names, which may not be the
        # one it was declared for; a test that passed keeps its own, so the points add up.
        tests = [t for t in task_result.tests if t.concept == self.concept]
        earned = sum(t.points for t in tests if t.graded)
        self._check_suite(task_result, earned)
        print(f"{self.concept}: {earned:g} of {self.points:g} points")
        for test in tests:
            print(_describe(test))
        if saved.concepts and self.concept == saved.concepts[-1]:      # the notebook's last test cell
            others = [t for t in task_result.tests if t.lost and t.concept not in saved.concepts]
            if others:
                print("  Failed tests whose feedback names a concept without a test cell here:")
            for test in others:
                print(_describe(test))
        self._show_gpu_points(tests)
        return float(earned)

    def _show_gpu_points(self, tests) -> None:
        not_graded = sum(t.max_points for t in tests if not t.graded)
        if not_graded:
            print(f"  GPU tests worth {not_graded:g} points were not graded: this autograder has too few CUDA GPUs.")
        if self.gpu_points and not self.count_gpu_tests:
            print(f"  GPU tests worth {self.gpu_points:g} more points are not part of this notebook's grade "
                  "(it was written for an autograder without a GPU).")

    def _check_suite(self, task_result, earned: float) -> None:
        graded_names = {_function_name(t.id) for t in task_result.tests if t.suite == "visible"}
        missing = [test.__name__ for test in self.visible_tests if test.__name__ not in graded_names]
        if earned > self.points + 1e-9 or missing:
            detail = f"visible tests {missing} are gone" if missing else \
                f"{earned:g} points earned in a cell worth {self.points:g}"
            raise SuiteChanged(f"the installed course's suites for {self.task.name} changed since this notebook was "
                               f"written ({detail}): write the notebooks again with `grader nbgrader`")


# ---------------------------------------------------------------- the saved notebook

@dataclass
class SavedNotebook:
    path: Path
    module: str
    saved_at: float
    concepts: list[str]          # of its test cells, in order

    @classmethod
    def find(cls, task: Task) -> SavedNotebook:
        """The notebook the kernel runs: the one its Jupyter session names, else <task>.ipynb,
        in the working folder (nbgrader and Jupyter start kernels in the notebook's folder)."""
        session = os.environ.get("JPY_SESSION_NAME", "")
        candidates = [Path.cwd() / Path(session).name] if session.endswith(".ipynb") else []
        candidates.append(Path.cwd() / f"{task.name}.ipynb")
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            raise NotebookError(f"the notebook was not found (looked for {', '.join(map(str, candidates))}); "
                                "its test cells test the saved notebook, in the folder the kernel runs in")
        notebook = read_notebook(path)
        module = module_source(notebook)
        if not module:
            raise NotebookError(f"{path.name} has no cells of the module {task.module}.py: "
                                "were the answer cells deleted?")
        return cls(path, module, path.stat().st_mtime, _test_cell_concepts(notebook))

    def description(self) -> str:
        if os.environ.get("NBGRADER_EXECUTION"):
            return f"tested: {self.path.name}"
        saved = datetime.fromtimestamp(self.saved_at).strftime("%H:%M:%S")
        return f"tested: {self.path.name} as saved at {saved}; save it first if you changed it since"


def _test_cell_concepts(notebook: dict) -> list[str]:
    concepts = []
    for cell in notebook.get("cells", []):
        if not is_grade_cell(cell):
            continue
        try:
            tree = ast.parse(cell_source(cell))
        except SyntaxError:
            continue
        concepts += [node.args[1].value for node in ast.walk(tree)
                     if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ConceptCell"
                     and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                     and isinstance(node.args[1].value, str)]
    return concepts


_SCRATCH: tempfile.TemporaryDirectory | None = None


def _submission_tree(task: Task, module: str) -> Path:
    """A submission tree holding `module` as the task's module file, one per distinct source, for
    the visible tests of the learner's own kernel (kept while it lives)."""
    global _SCRATCH
    if _SCRATCH is None:
        _SCRATCH = tempfile.TemporaryDirectory(prefix="grader-notebook-")
    return _write_tree(Path(_SCRATCH.name), task, module)


def _write_tree(folder: Path, task: Task, module: str) -> Path:
    tree = folder / _digest(module)
    path = tree / task.name / f"{task.module}.py"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(module_file(module, (task.exercise_dir / f"{task.module}.py").read_text(encoding="utf-8")),
                        encoding="utf-8")
    return tree


def _digest(module: str) -> str:
    return hashlib.sha256(module.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- grading (instructor's copy)

_REPORTS: dict = {}


def _graded_report(task: Task, module: str, count_gpu_tests: bool):
    """The score report of `module`, graded once per notebook state as `grader grade` grades it."""
    from grader.isolation import levels
    from grader.isolation.sandbox import Limits
    from grader.running import runner
    key = (_digest(module), task.name, count_gpu_tests)
    if key in _REPORTS:
        return _REPORTS[key]
    # The module and its grading's files live as long as the grading: an autograde kernel is
    # ended without its clean-up, and a submission must not stay behind in the machine's /tmp.
    with tempfile.TemporaryDirectory(prefix="grader-notebook-") as scratch:
        tree = _write_tree(Path(scratch), task, module)
        # Written for an autograder without a GPU, the notebook's cells are worth the CPU tests
        # only: GPU tests are left out, even on a machine that could run them.
        extra = [] if count_gpu_tests else ["-m", "not gpu"]
        # The autograde kernel is the instructor's: the learner's module is graded isolated (the sandbox,
        # else the uid level) or not at all, and then the report says why.
        limits = Limits.from_env()
        try:
            where = levels.resolve("required", "worker", limits)
        except levels.IsolationUnavailable as exc:
            _REPORTS[key] = levels.refused_report(exc, tree)
            return _REPORTS[key]
        job = runner.GradingRun(tree, [task], isolation=where, limits=limits, out_dir=tree / "grading", extra_args=extra)
        with captured_output():         # the grading processes inherit the kernel's stderr
            _REPORTS[key] = runner.run(job)
    return _REPORTS[key]


# ---------------------------------------------------------------- visible tests (learner's copy)

_BACKENDS: dict = {}


def _run_visible_test(test, module_path: Path, task: Task):
    """Run one visible test function on the module, in this process; its result as the score
    report types it, classified by the same rules as a graded run."""
    import pytest

    from grader.schema.report import TestResult
    from grader.session.outcome import exception_outcome, tail, with_concept
    from grader.session.submission import InProcessBackend, Submission
    from grader.suite import metadata

    meta = metadata.of_function(test)
    result = TestResult(id=test.__name__, task=task.name, suite="visible", title=meta.title, status="passed",
                        graded=True, max_points=meta.points or 0.0, concept=meta.concept)
    unknown = [name for name in inspect.signature(test).parameters if name not in FIXTURES]
    if unknown:
        raise NotebookError(f"{test.__name__} asks for {unknown}; a notebook provides only {list(FIXTURES)}")
    backend = _BACKENDS.setdefault(module_path, InProcessBackend(module_path))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="grader-test-") as tmp, captured_output() as printed:
        fixtures = {"submission": Submission(backend, time.monotonic() + 24 * 3600.0), "tmp_path": Path(tmp)}
        try:
            if meta.lacks_gpus():
                result.status, result.feedback, result.graded = "skipped", NO_GPU.feedback, False
            else:
                test(**{name: fixtures[name] for name in inspect.signature(test).parameters})
        except KeyboardInterrupt:
            raise
        except pytest.skip.Exception as exc:     # a skip the test itself asked for: the test is lost
            result.status, result.feedback = "skipped", exc.msg or "a skipped test"
        except BaseException as exc:       # learner code may raise anything, SystemExit included
            result.status, feedback, result.graded = exception_outcome("call", exc, hidden=False)
            if isinstance(exc, NameError):  # the test's own code: learner code's errors come wrapped
                feedback += "\n(Run the cell of the visible tests' helpers first.)"
            result.concept = getattr(exc, "concept", None) or result.concept
            result.feedback = with_concept(feedback, result.concept, result.status)
    result.duration_s = round(time.perf_counter() - start, 3)
    result.output = tail(printed.text)
    return result


def _function_name(test_id: str) -> str:
    return test_id.split("::")[-1].split("[")[0]


def _describe(test) -> str:
    where = "visible" if test.suite == "visible" else "graded suite"
    status = test.status if test.graded else NOT_GRADED_STATUS
    lines = [f"  {status:<8} {test.points:g}/{test.max_points:g}  {test.title}  [{where}]"]
    if test.status != "passed" and test.feedback:
        lines += ["             " + line for line in test.feedback.splitlines()]
    if test.output.strip():
        lines += ["             printed: " + line for line in test.output.strip().splitlines()[-5:]]
    return "\n".join(lines)


# ---------------------------------------------------------------- output

class _Captured:
    text = ""


@contextlib.contextmanager
def captured_output():
    """Keep everything written to stdout or stderr inside the block, by Python code or below it
    (C extensions, child processes), as text (`.text`, once the block ends) instead of letting
    it reach the cell's output."""
    captured = _Captured()
    buffer = io.StringIO()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                yield captured
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            captured.text = buffer.getvalue() + sink.read().decode("utf-8", "replace")
