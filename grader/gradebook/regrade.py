"""`grader regrade DIR`: grade again what a changed suite graded, keep every earlier grading, and
say who gained or lost what, test by test.

What is graded again: each learner's current submission, for each task whose recorded suite
version (`Task.suite_sha256`) is not the course's now; or, where tasks or learners are named,
those, whatever their version. Each regrading is recorded in the gradebook as its own grading
of the same submission (the earlier ones stay), in one transaction as it ends: a regrade killed
at any moment is finished by running it again, which grades only what is still out of date.
"""
from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.course import Course, Task
from grader.gradebook import grades
from grader.gradebook.store import Gradebook
from grader.reports.html import report_html
from grader.running import runner
from grader.running.executors import Unit, grade_units
from grader.schema.report import REPORT_NAME, ScoreReport, TaskResult, write_report, write_text_atomically

log = logging.getLogger(__name__)
WORK_FOLDER = ".regrade"        # in the batch's folder: each regrading's files until it is recorded


@dataclass
class Planned:
    learner: str
    submission: int
    path: str
    tasks: list[Task]
    before: dict[str, TaskResult]          # task -> its current results
    missing: bool = False                  # the submission is no longer where it was graded from


@dataclass(frozen=True)
class TestChange:
    test: str
    before: str                             # "passed, 2 / 2", or "not in the suite"
    after: str
    gained: float                           # points, negative when lost
    why: str


@dataclass
class Delta:
    learner: str
    task: str
    before: float
    after: float
    changes: list[TestChange] = field(default_factory=list)

    @property
    def gained(self) -> float:
        return round(self.after - self.before, 4)


def plan(book: Gradebook, course: Course, tasks: list[Task] | None = None,
         learners: list[str] | None = None) -> list[Planned]:
    """What a regrade grades again, learner by learner (see the module's docstring)."""
    named = tasks is not None or learners is not None
    wanted = {task.name for task in tasks} if tasks is not None else None
    versions: dict[tuple[str, bool], str] = {}          # (task, hidden) -> the course's suite version now
    planned = []
    for grade in grades.current(book, course, learners):
        chosen, before = [], {}
        for task_grade in grade.tasks:
            if wanted is not None and task_grade.task not in wanted:
                continue
            try:
                task = course.task_named(task_grade.task)
            except KeyError:
                continue          # a task the course no longer has: nothing to grade it with
            hidden = any(test.suite == "hidden" for test in task_grade.result.tests)
            if (task.name, hidden) not in versions:
                versions[task.name, hidden] = task.suite_sha256(hidden)
            if named or task_grade.result.suite_sha256 != versions[task.name, hidden]:
                chosen.append(task)
                before[task.name] = task_grade.result
        if chosen:
            planned.append(Planned(grade.learner, grade.submission, grade.path, chosen, before,
                                   missing=not Path(grade.path).exists()))
    return planned


def regrade(book: Gradebook, course: Course, planned: list[Planned], template: runner.GradingRun, batch_dir: Path,
            jobs: int = 1, limit_s: float = runner.RUN_LIMIT_S,
            on_done: Callable[[Planned, list[Delta]], None] | None = None) -> list[Delta]:
    """Grade each planned submission again (those still on disk), `jobs` at a time; record each
    grading as it ends, rewrite the learner's current report in the batch folder, and return the
    deltas."""
    deltas: list[Delta] = []
    work = batch_dir / WORK_FOLDER
    items = dict(enumerate(planned))
    lock = threading.Lock()         # gradings end in the pool's threads; the gradebook has one writer

    def finished(unit: Unit, report: ScoreReport) -> None:
        item = items[unit.place]
        with lock:
            book.record(item.learner, report, submission=item.submission)
            _write_current(book, course, item.learner, batch_dir)
            found = _deltas(item, report)
            deltas.extend(found)
            if unit.folder is not None:
                shutil.rmtree(unit.folder, ignore_errors=True)
            if on_done:
                on_done(item, found)
    by_tasks: dict[tuple[str, ...], list[int]] = {}
    for place, item in items.items():
        if not item.missing:
            by_tasks.setdefault(tuple(t.name for t in item.tasks), []).append(place)
    for places in by_tasks.values():
        units = [Unit(items[place].path, work / str(place), place) for place in places]
        grade_units(units, replace(template, tasks=items[places[0]].tasks), limit_s, jobs, finished)
    shutil.rmtree(work, ignore_errors=True)
    return deltas


def _write_current(book: Gradebook, course: Course, learner: str, batch_dir: Path) -> None:
    """The learner's report and page in the batch folder become their current results (the latest
    grading of each task), so the folder says what the gradebook says. A page that cannot be
    rendered keeps the old one, and says why in the log (`grader --verbose`)."""
    current = grades.current(book, course, [learner])
    if not current:
        return
    write_report(current[0].report, batch_dir / learner / REPORT_NAME)
    try:
        write_text_atomically(batch_dir / learner / "report.html", report_html(current[0].report))
    except Exception:           # a renderer's failure on one learner's data: their page alone
        log.exception("the page of %s could not be written", learner)


def _deltas(item: Planned, report: ScoreReport) -> list[Delta]:
    found = []
    for task in item.tasks:
        before, after = item.before[task.name], report.task(task.name)
        if after is None:
            reason = "; ".join(report.problems) or "the regrading graded nothing"
            found.append(Delta(item.learner, task.name, before.points, before.points,
                               [TestChange("(the task)", "graded", "not graded again", 0.0, reason)]))
            continue
        found.append(Delta(item.learner, task.name, before.points, after.points, test_changes(before, after)))
    return found


def test_changes(before: TaskResult, after: TaskResult) -> list[TestChange]:
    """Each test whose status or points differ between two gradings of a task, with why."""
    old = {test.id: test for test in before.tests}
    new = {test.id: test for test in after.tests}
    changes = []
    for test_id in [*old, *(t for t in new if t not in old)]:
        was, now = old.get(test_id), new.get(test_id)
        if was is not None and now is not None and (was.status, was.points, was.max_points) == \
                (now.status, now.points, now.max_points):
            continue
        gained = (now.points if now and now.graded else 0.0) - (was.points if was and was.graded else 0.0)
        if now is None:
            why = "no longer in the suite"
        elif was is None:
            why = "new in the suite" + (f": {_first_line(now.feedback)}" if now.lost else "")
        elif now.lost:
            why = _first_line(now.feedback) or now.status
        elif was.lost:
            why = "passes now"
        else:
            why = f"worth {now.max_points:g} points instead of {was.max_points:g}"
        changes.append(TestChange(test_id, _state(was), _state(now), round(gained, 4), why))
    return changes


def _state(test) -> str:
    if test is None:
        return "not in the suite"
    return f"{test.status}, {test.points:g} / {test.max_points:g}" if test.graded else "not graded here"


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 160 else line[:159] + "…"
