"""When each submission was handed in, from what the channel knows: a CSV of times an instructor
exports from where the submissions were collected (`grade --received-times FILE`); else, for a
clone of a learner's repository, the time of the commit it holds; else the files' own times (the
newest modification time of the submission's Python files, or of the zip file). The source is
recorded beside the time, so a report can say how much to trust it: the learner sets a commit's
time and the files' times alike (a clone's files bear the time of the clone).
"""
from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path

from grader.course import COURSE
from grader.gradebook.store import Received
from grader.session import intake

FILE_TIMES = "the files' modification times"
COMMIT_TIME = "the time its commit states"
SET_BY_LEARNER = (FILE_TIMES, COMMIT_TIME)     # sources whoever made the submission can set
MAX_FILES = 2000          # a tree's Python files looked at for its newest time


class TimesError(ValueError):
    """A times file that cannot be read as written: the message names the line."""


def read_times(path: Path) -> dict[str, datetime]:
    """`submission,received_at` rows (a header first): a submission's name as given (a folder or a
    zip file's name) or its path, and an ISO 8601 time with its UTC offset."""
    try:
        rows = list(csv.reader(Path(path).read_text(encoding="utf-8-sig").splitlines()))
    except (OSError, UnicodeDecodeError) as exc:
        raise TimesError(f"{path} cannot be read: {exc}") from None
    if not rows or [cell.strip() for cell in rows[0][:2]] != ["submission", "received_at"]:
        raise TimesError(f"{path}: the first line must be the header `submission,received_at`")
    times = {}
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) < 2:
            raise TimesError(f"{path} line {number}: expected a submission and a time, got {row!r}")
        try:
            when = datetime.fromisoformat(row[1].strip())
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise TimesError(f"{path} line {number}: {row[1].strip()!r} is not an ISO 8601 time with its UTC offset "
                             "(e.g. 2026-10-05T23:12:00+08:00)")
        times[row[0].strip()] = when
    return times


def received(submission: Path, times: dict[str, datetime] | None) -> Received:
    """When `submission` was handed in: its row in `times` (by path, then by name), else its own
    repository's HEAD commit time, else its files' times."""
    for key in (str(submission), submission.name):
        if times and key in times:
            return Received(times[key], "a CSV of times")
    not_listed = " (not in the CSV of times)" if times else ""
    committed = _committed(submission)
    if committed is not None:
        return Received(committed[0], f"{COMMIT_TIME} ({committed[1][:12]}){not_listed}")
    newest = _newest_mtime(submission)
    return Received(datetime.fromtimestamp(newest, UTC) if newest is not None else None, FILE_TIMES + not_listed)


def _committed(submission: Path) -> tuple[datetime, str] | None:
    """The time and id of the commit a submission's own repository (a `.git` folder at its root,
    never the course's) holds checked out."""
    if submission.resolve() == COURSE.root.resolve():
        return None
    commit = intake.git_head(submission, stop_at=submission, follow_files=False)
    when = intake.commit_time(submission / ".git", commit) if commit else None
    return (when, commit) if when is not None and commit else None


def _newest_mtime(submission: Path) -> float | None:
    try:
        if submission.is_file():
            return submission.stat().st_mtime
        times = [p.stat().st_mtime for _, p in zip(range(MAX_FILES), submission.rglob("*.py")) if p.is_file()]
    except OSError:
        return None
    return max(times) if times else None
