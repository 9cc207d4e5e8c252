"""The current grades pushed to Canvas assignments through its REST API, with canvasapi: one
bulk update per task (`POST /api/v1/courses/:course_id/assignments/:assignment_id/submissions/
update_grades`, Canvas's "Grade or comment on multiple submissions"), each learner found by their
Canvas user id (the roster's `id`).

A dry run comes first and changes nothing: it reads the course and each assignment (so a wrong
id or token is found before any grade moves) and says what each learner would get. Where an
assignment's points possible differ from the task's maximum, the points are scaled to it and
the plan says so. The token comes from an environment variable, never the command line.
"""
from __future__ import annotations

from dataclasses import dataclass

from grader.gradebook.exports import ExportError
from grader.gradebook.grades import LearnerGrade

TOKEN_ENV = "CANVAS_TOKEN"


@dataclass(frozen=True)
class Planned:
    task: str
    assignment_id: int
    assignment_name: str
    grades: dict[str, float]           # Canvas user id -> points posted
    scale: float                       # Canvas points per point of the task


def plan(canvas, course_id: int, assignments: dict[str, int], grades: list[LearnerGrade],
         roster: dict[str, dict[str, str]]) -> list[Planned]:
    """What a push would post: read from Canvas (the course, each assignment), written nowhere."""
    missing = sorted({g.learner for g in grades} - {name for name, who in roster.items() if who.get("id")})
    if missing:
        raise ExportError(f"no Canvas user id (the roster's `id`) for: {', '.join(missing)}: nothing was pushed")
    try:
        course = canvas.get_course(course_id)
        planned = []
        for task, assignment_id in sorted(assignments.items()):
            assignment = course.get_assignment(assignment_id)
            graded = [(g, t) for g in grades if (t := g.task(task)) is not None]
            maximum = max((t.max_points for _, t in graded), default=0.0)
            possible = float(getattr(assignment, "points_possible", None) or maximum or 1.0)
            scale = possible / maximum if maximum else 1.0
            planned.append(Planned(task, assignment_id, assignment.name,
                                   {roster[g.learner]["id"]: round(t.final * scale, 4) for g, t in graded}, scale))
    except _refusals() as exc:
        raise ExportError(f"Canvas could not be read ({type(exc).__name__}: {exc}): nothing was pushed") from None
    return planned


def push(canvas, course_id: int, planned: list[Planned]) -> list[str]:
    """Post each planned task's grades in one bulk update; the progress Canvas gives each."""
    said: list[str] = []
    course = canvas.get_course(course_id)
    for item in planned:
        try:
            progress = course.get_assignment(item.assignment_id).submissions_bulk_update(
                grade_data={user: {"posted_grade": points} for user, points in item.grades.items()})
        except _refusals() as exc:
            raise ExportError(f"Canvas refused the grades of {item.task} ({type(exc).__name__}: {exc}); "
                              f"the tasks before it were pushed: {', '.join(s.split(':')[0] for s in said) or 'none'}") \
                from None
        said.append(f"{item.task}: {len(item.grades)} grade(s) posted to {item.assignment_name!r}, "
                    f"Canvas progress {getattr(progress, 'id', '?')} {getattr(progress, 'workflow_state', '')}".rstrip())
    return said


def described(planned: list[Planned]) -> list[str]:
    lines = []
    for item in planned:
        scaled = f", points scaled x{item.scale:g} to the assignment's" if item.scale != 1 else ""
        lines.append(f"{item.task} -> assignment {item.assignment_id} {item.assignment_name!r}: "
                     f"{len(item.grades)} learner(s){scaled}")
    return lines


def _refusals() -> tuple[type[Exception], ...]:
    """What Canvas, or the way to it, raises: an error answer, or no answer at all."""
    from canvasapi.exceptions import CanvasException
    from requests import RequestException
    return CanvasException, RequestException
