"""What an instructor sets by hand in a gradebook: overrides, extensions and the late policy. Each
is checked against the gradebook and the course before it is written (an unknown learner, task
or test, points out of range, a time without its offset, a policy with a typo are refused with
the reason and nothing written), and recorded with who set it and when."""
from __future__ import annotations

from datetime import datetime

from grader.course import Course
from grader.gradebook import grades, policy
from grader.gradebook.store import Gradebook, now


class Refused(ValueError):
    """What was asked cannot be recorded as asked: the message says why."""


def set_override(book: Gradebook, course: Course, learner: str, task: str, test: str | None,
                 points: float | None, reason: str, by: str) -> str:
    """The points `learner` earns on `test` (or the whole task) from now on, regrades included;
    `points` None withdraws the override in force. Returns what was set, in words."""
    task_name = _task(course, task)
    current = grades.current(book, course, [learner])
    if not current:
        raise Refused(f"no learner {learner} in {book.path}")
    graded = current[0].task(task_name)
    if graded is None:
        raise Refused(f"{learner} has no grading of {task_name}")
    ceiling = graded.max_points
    if test is not None:
        found = next((t for t in graded.result.tests if test in (t.id, t.id.rsplit("::", 1)[-1])), None)
        if found is None:
            raise Refused(f"no test {test} in {learner}'s grading of {task_name}")
        test, ceiling = found.id, found.max_points
    if points is not None and not 0 <= points <= ceiling:
        raise Refused(f"{points:g} points: expected 0 to {ceiling:g}")
    if not reason.strip():
        raise Refused("give a reason: it is kept with the override and shown beside the grade")
    with book.transaction() as db:
        db.execute("INSERT INTO overrides (learner, task, test, points, reason, set_by, set_at, suite_sha256) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (learner, task_name, test, points, reason, by, now(), graded.result.suite_sha256))
    said = "withdrawn" if points is None else f"{points:g} / {ceiling:g}"
    return f"override of {test or 'task ' + task_name} for {learner}: {said} ({reason})"


def set_extension(book: Gradebook, course: Course, learner: str, task: str, until: str, reason: str, by: str) -> str:
    task_name = _task(course, task)
    try:
        deadline = datetime.fromisoformat(until)
    except ValueError:
        deadline = None
    if deadline is None or deadline.tzinfo is None:
        raise Refused(f"{until}: give an ISO 8601 time with its UTC offset (e.g. 2026-10-07T23:59:00+08:00)")
    if learner not in book.learners():
        raise Refused(f"no learner {learner} in {book.path}")
    with book.transaction() as db:
        db.execute("INSERT OR REPLACE INTO extensions VALUES (?, ?, ?, ?, ?, ?)",
                   (learner, task_name, deadline.isoformat(), reason, by, now()))
    return f"{learner}'s deadline for {task_name}: {deadline.isoformat()} ({reason})"


def set_policy(book: Gradebook, course: Course, text: str, by: str) -> str:
    try:
        late = policy.parse(text, course)
    except policy.PolicyError as exc:
        raise Refused(str(exc)) from None
    with book.transaction() as db:
        db.execute("INSERT OR REPLACE INTO policy VALUES (1, ?, ?, ?)", (text, by, now()))
    return (f"late policy set: {len(late.deadlines)} deadline(s), {late.penalty_percent:g}% a started {late.per} "
            f"late, at most {late.cap_percent:g}%, {late.grace.total_seconds() / 60:g} min of grace")


def _task(course: Course, name: str) -> str:
    try:
        return course.task_named(name).name
    except KeyError as exc:
        raise Refused(exc.args[0]) from None
