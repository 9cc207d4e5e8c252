"""The gradebook beside a batch: what a batch records as each report comes in (and `grader
summary DIR` from the reports on disk: a shard's, an array task's, a batch killed between a
report and its record), and the class's rows read back from it for the class files."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from grader.course import Course
from grader.gradebook import grades
from grader.gradebook.handed_in import received
from grader.gradebook.store import Gradebook
from grader.reports.summary import Entry


@dataclass
class Recorder:
    """`batch.grade`'s `record`: each entry's report recorded as a grading of the learner named
    by its folder, with when it was handed in."""
    book: Gradebook
    channel: str
    times: dict[str, datetime] | None = None

    def __call__(self, entry: Entry) -> None:
        if entry.report is not None:
            self.book.record(entry.name, entry.report, received(Path(entry.path), self.times), self.channel)


def class_entries(book: Gradebook, course: Course, unreadable: Sequence[Entry] = ()) -> list[Entry]:
    """One row per learner: their current grade (overrides and late penalty applied), then the
    reports on disk that could not be read."""
    rows = [Entry(grade.learner, grade.path, grade.report, grade=grade) for grade in grades.current(book, course)]
    return sorted([*rows, *unreadable], key=lambda entry: entry.name)
