"""A learner's current grade, read from the gradebook: for each task, the latest grading of their
latest submission that graded it, then the overrides set on it, then the late penalty the
course's policy and their extension give. Nothing here is stored: every view (summary.csv, the
exports, a regrade's deltas) asks again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from grader.course import Course
from grader.gradebook import policy as late_policy
from grader.gradebook.handed_in import SET_BY_LEARNER
from grader.gradebook.store import Gradebook
from grader.schema.report import ScoreReport, TaskResult


@dataclass(frozen=True)
class Override:
    id: int
    learner: str
    task: str
    test: str | None             # None: the whole task
    points: float | None         # None: withdrawn
    reason: str
    set_by: str
    set_at: str
    suite_sha256: str | None     # the version of the task's suite it was set against

    @property
    def target(self) -> str:
        return self.test or f"task {self.task}"


@dataclass
class TaskGrade:
    task: str
    result: TaskResult                     # from the grading this grade comes from
    grading: str                           # that grading's key in the gradebook
    overrides: list[Override] = field(default_factory=list)    # applied, in order
    points: float = 0.0                    # after the overrides
    penalty_percent: float = 0.0
    late_by: timedelta | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def raw(self) -> float:
        return self.result.points

    @property
    def max_points(self) -> float:
        return self.result.max_points

    @property
    def penalty(self) -> float:
        return round(self.points * self.penalty_percent / 100, 4)

    @property
    def final(self) -> float:
        return round(self.points - self.penalty, 4)


@dataclass
class LearnerGrade:
    learner: str
    submission: int                        # its id in the gradebook
    path: str
    received_at: datetime | None
    report: ScoreReport                    # the current results: the latest grading of each task
    tasks: list[TaskGrade]

    @property
    def raw(self) -> float:
        return sum(t.raw for t in self.tasks)

    @property
    def penalty(self) -> float:
        return round(sum(t.penalty for t in self.tasks), 4)

    @property
    def final(self) -> float:
        return round(sum(t.final for t in self.tasks), 4)

    @property
    def max_points(self) -> float:
        return sum(t.max_points for t in self.tasks)

    @property
    def notes(self) -> list[str]:
        return [note for task in self.tasks for note in task.notes]

    def task(self, name: str) -> TaskGrade | None:
        return next((t for t in self.tasks if t.task == name), None)


def current(book: Gradebook, course: Course, learners: list[str] | None = None) -> list[LearnerGrade]:
    """Every learner's current grade (or those named), in name order."""
    policy = stored_policy(book, course)
    overrides = current_overrides(book)
    extensions = {(row[0], row[1]): datetime.fromisoformat(row[2])
                  for row in book.db.execute("SELECT learner, task, until FROM extensions")}
    grades = []
    for learner, submission in current_submissions(book):
        if learners is not None and learner not in learners:
            continue
        grades.append(_grade(book, learner, submission, policy, overrides, extensions))
    return grades


def current_submissions(book: Gradebook) -> list[tuple[str, int]]:
    """Each learner and the submission of their latest grading."""
    rows = book.db.execute("SELECT s.learner, g.submission, max(g.seq) FROM gradings g "
                           "JOIN submissions s ON s.id = g.submission GROUP BY s.learner ORDER BY s.learner")
    return [(learner, submission) for learner, submission, _ in rows]


def latest_task_gradings(book: Gradebook, submission: int) -> dict[str, str]:
    """Task -> the key of the latest grading of `submission` that graded it."""
    rows = book.db.execute("SELECT tg.task, tg.grading, max(g.seq) FROM task_gradings tg JOIN gradings g "
                           "ON g.key = tg.grading WHERE g.submission = ? GROUP BY tg.task ORDER BY tg.task",
                           (submission,))
    return {task: grading for task, grading, _ in rows}


def current_overrides(book: Gradebook) -> dict[tuple[str, str], list[Override]]:
    """(learner, task) -> the override in force on each of its tests and on the task, if any."""
    rows = book.db.execute(
        "SELECT id, learner, task, test, points, reason, set_by, set_at, suite_sha256 FROM overrides o "
        "WHERE id = (SELECT max(id) FROM overrides WHERE learner = o.learner AND task = o.task AND test IS o.test) "
        "AND points IS NOT NULL ORDER BY id")
    found: dict[tuple[str, str], list[Override]] = {}
    for row in rows:
        override = Override(*row)
        found.setdefault((override.learner, override.task), []).append(override)
    return found


def stored_policy(book: Gradebook, course: Course) -> late_policy.Policy | None:
    row = book.db.execute("SELECT text FROM policy").fetchone()
    return late_policy.parse(row[0], course) if row else None


def _grade(book: Gradebook, learner: str, submission: int, policy, overrides, extensions) -> LearnerGrade:
    path, received, received_from = book.db.execute(
        "SELECT path, received_at, received_from FROM submissions WHERE id = ?", (submission,)).fetchone()
    received_at = datetime.fromisoformat(received) if received else None
    latest_key = book.db.execute("SELECT key FROM gradings WHERE submission = ? ORDER BY seq DESC LIMIT 1",
                                 (submission,)).fetchone()[0]
    latest = book.report(latest_key)
    reports = {latest_key: latest}
    tasks = []
    for task, grading in latest_task_gradings(book, submission).items():
        if grading not in reports:
            reports[grading] = book.report(grading)
        result = reports[grading].task(task)
        assert result is not None, f"the gradebook lists {task} in {grading}"
        grade = TaskGrade(task, result, grading)
        _apply_overrides(grade, overrides.get((learner, task), []))
        _apply_late_policy(grade, policy, extensions.get((learner, task)), received_at, received_from)
        tasks.append(grade)
    report = ScoreReport(run=latest.run, submission=latest.submission, tasks=[t.result for t in tasks],
                         problems=[problem for one in reports.values() for problem in one.problems],
                         stopped_early=latest.stopped_early, isolation=latest.isolation)
    return LearnerGrade(learner, submission, path, received_at, report, tasks)


def _apply_overrides(grade: TaskGrade, overrides: list[Override]) -> None:
    grade.points = grade.raw
    tests = {test.id: test for test in grade.result.tests}
    for override in sorted(overrides, key=lambda o: o.test is None):        # a task's override last: it is the total
        changed = override.suite_sha256 != grade.result.suite_sha256
        if override.points is None:         # withdrawn: `current_overrides` leaves these out
            continue
        if override.test is None:
            grade.points = override.points
        elif override.test in tests:
            grade.points += override.points - tests[override.test].points
        else:
            grade.notes.append(f"override of {override.test} not applied: the test is no longer in the suite")
            continue
        grade.overrides.append(override)
        if changed:
            grade.notes.append(f"override of {override.target} was set on another version of the suite: check it")


def _apply_late_policy(grade: TaskGrade, policy, extension: datetime | None, received_at: datetime | None,
                       received_from: str) -> None:
    deadline = extension or (policy.deadlines.get(grade.task) if policy else None)
    if deadline is None or policy is None:
        return
    if received_at is None:
        grade.notes.append(f"{grade.task}: when it was handed in is unknown: no late penalty applied")
        return
    if received_from.startswith(SET_BY_LEARNER):
        grade.notes.append(f"{grade.task}: handed in at {received_at.isoformat()} by {received_from}, which whoever "
                           "made the submission can set: give grade --received-times from where it was collected")
    grade.late_by = max(received_at - deadline, timedelta(0))
    grade.penalty_percent = policy.penalty_percent_for(grade.late_by)
