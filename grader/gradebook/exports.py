"""The current grades as the learning management systems import them, one column per task (its
final points: overrides and the late penalty applied), learners matched to the LMS's users
through a roster.

- **Canvas**: the Gradebook's import CSV (Canvas Instructor Guide, "How do I import grades in
  the Gradebook?"): the columns `Student`, `ID`, `SIS User ID`, `SIS Login ID`, `Section`, then
  one per assignment; the second row, `Points Possible`, gives each one's maximum, as Canvas's
  own export writes it. A column Canvas does not know yet becomes a new assignment on import.
- **Moodle**: the grade import CSV (Moodle docs, "Import grades", CSV file): a header row, a
  column that identifies the user (here `ID number` and `Email address`, either one chosen as
  "Identify user by" when importing) and a column per grade item, mapped to one on import.

The roster (`--roster CSV`) has a header and one row per learner: `learner` (their folder in the
batch) and any of `student`, `id`, `sis_user_id`, `sis_login_id`, `section`, `id_number`, `email`.
A graded learner without a roster row stops the export (an import that skips a learner is a
lost grade); a roster row never graded gets empty cells (the LMS keeps what it has), and is said.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from grader.gradebook.grades import LearnerGrade
from grader.reports.summary import inert
from grader.schema.report import write_text_atomically

ROSTER_FIELDS = ("student", "id", "sis_user_id", "sis_login_id", "section", "id_number", "email")


class ExportError(ValueError):
    """An export that would lose or misplace a grade: the message says which."""


@dataclass(frozen=True)
class Column:
    task: str
    title: str
    max_points: float


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    try:
        rows = list(csv.DictReader(io.StringIO(Path(path).read_text(encoding="utf-8-sig"))))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ExportError(f"{path} cannot be read: {exc}") from None
    if not rows or "learner" not in rows[0]:
        raise ExportError(f"{path}: the header must name a `learner` column (and any of {', '.join(ROSTER_FIELDS)})")
    unknown = [name for name in rows[0] if name not in ("learner", *ROSTER_FIELDS)]
    if unknown:
        raise ExportError(f"{path}: unknown column(s) {', '.join(unknown)} (known: learner, {', '.join(ROSTER_FIELDS)})")
    roster = {}
    for number, row in enumerate(rows, start=2):
        learner = (row.get("learner") or "").strip()
        if not learner or learner in roster:
            raise ExportError(f"{path} line {number}: " + ("no learner" if not learner else f"{learner} twice"))
        roster[learner] = {key: (value or "").strip() for key, value in row.items() if key != "learner"}
    return roster


def columns(grades: list[LearnerGrade]) -> list[Column]:
    found: dict[str, Column] = {}
    for grade in grades:
        for task in grade.tasks:
            found.setdefault(task.task, Column(task.task, task.result.title, task.max_points))
    return [found[name] for name in sorted(found)]


def canvas_csv(grades: list[LearnerGrade], roster: dict[str, dict[str, str]]) -> str:
    matched, tasks = _matched(grades, roster), columns(grades)
    rows: list[list] = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *(c.title for c in tasks)],
            ["Points Possible", "", "", "", "", *(c.max_points for c in tasks)]]
    for grade, who in matched:
        rows.append([who.get("student", ""), who.get("id", ""), who.get("sis_user_id", ""),
                     who.get("sis_login_id", ""), who.get("section", ""), *_finals(grade, tasks)])
    return _csv(rows)


def moodle_csv(grades: list[LearnerGrade], roster: dict[str, dict[str, str]]) -> str:
    matched, tasks = _matched(grades, roster), columns(grades)
    rows: list[list] = [["ID number", "Email address", *(c.title for c in tasks)]]
    for grade, who in matched:
        rows.append([who.get("id_number", ""), who.get("email", ""), *_finals(grade, tasks)])
    return _csv(rows)


def write(path: Path, text: str) -> int:
    """Write an export atomically; the number of learners' rows it holds."""
    write_text_atomically(Path(path), text)
    return sum(1 for row in csv.reader(io.StringIO(text)) if row and row[0] != "Points Possible") - 1


def _matched(grades: list[LearnerGrade], roster: dict[str, dict[str, str]]) -> list[tuple[LearnerGrade | None, dict]]:
    """Each roster row with its learner's grade (None: never graded, so their cells stay empty
    and the LMS keeps what it has); a graded learner the roster lacks stops the export."""
    by_learner = {grade.learner: grade for grade in grades}
    missing = sorted(set(by_learner) - set(roster))
    if missing:
        raise ExportError(f"not in the roster: {', '.join(missing)}: add them (their LMS identity), nothing was exported")
    return [(by_learner.get(learner), who) for learner, who in sorted(roster.items())]


def never_graded(grades: list[LearnerGrade], roster: dict[str, dict[str, str]]) -> list[str]:
    """The roster's learners with no grading: their cells are left empty."""
    return sorted(set(roster) - {grade.learner for grade in grades})


def _finals(grade: LearnerGrade | None, tasks: list[Column]) -> list:
    return ["" if grade is None or (task := grade.task(column.task)) is None else task.final for column in tasks]


def _csv(rows: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in rows:
        writer.writerow(inert(row))
    return buffer.getvalue()
