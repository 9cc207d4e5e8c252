"""The gradebook: one SQLite file per batch folder (`DIR/gradebook.sqlite`) that remembers every
grading of every submission, the overrides, the extensions, the late policy and the exports.

Every grading is recorded from its score report, keyed by the learner and the report's run id:
recording the same report twice changes nothing, so a batch resumed, a shard's reports merged later or a
folder recorded again never double a row. Each write is one transaction (`BEGIN IMMEDIATE`,
the default rollback journal, `synchronous=FULL`): a process killed at any moment leaves the
previous state or the new one. Only the process that owns the batch writes it; array tasks and
shards on other nodes leave their reports as files, which their owner records (SQLite's locks
do not hold on a network file system).

A file this grader cannot use is refused with a message, never rebuilt in silence: one written
by a newer grader, one another process holds locked, one that is not a gradebook or is
damaged. A file of an older schema is migrated in place (`MIGRATIONS`).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from grader.reports.summary import GRADEBOOK_FILES
from grader.schema.report import ScoreReport

BOOK_NAME = GRADEBOOK_FILES[0]
APPLICATION_ID = 0x4C314742          # "L1GB": what marks a SQLite file as a gradebook
LOCK_WAIT_S = 10.0

MIGRATIONS = (
    # 1: the first schema
    """
    CREATE TABLE learners (name TEXT PRIMARY KEY);
    CREATE TABLE submissions (
        id INTEGER PRIMARY KEY, learner TEXT NOT NULL REFERENCES learners(name), path TEXT NOT NULL,
        digest TEXT NOT NULL, received_at TEXT, received_from TEXT NOT NULL, channel TEXT NOT NULL,
        UNIQUE (learner, path, digest));
    CREATE TABLE gradings (
        key TEXT PRIMARY KEY, run_id TEXT, submission INTEGER NOT NULL REFERENCES submissions(id),
        seq INTEGER NOT NULL UNIQUE, recorded_at TEXT NOT NULL, graded_at TEXT, grader_version TEXT, course_commit TEXT,
        seed INTEGER, isolation TEXT, complete INTEGER NOT NULL, problems TEXT NOT NULL, report BLOB NOT NULL);
    CREATE TABLE task_gradings (
        grading TEXT NOT NULL REFERENCES gradings(key), task TEXT NOT NULL, suite_sha256 TEXT,
        module_sha256 TEXT, points REAL NOT NULL, max_points REAL NOT NULL, PRIMARY KEY (grading, task));
    CREATE TABLE results (
        grading TEXT NOT NULL REFERENCES gradings(key), task TEXT NOT NULL, test TEXT NOT NULL,
        suite TEXT NOT NULL, status TEXT NOT NULL, graded INTEGER NOT NULL, points REAL NOT NULL, max_points REAL NOT NULL,
        concept TEXT, feedback TEXT NOT NULL, PRIMARY KEY (grading, test));
    CREATE TABLE overrides (
        id INTEGER PRIMARY KEY, learner TEXT NOT NULL REFERENCES learners(name), task TEXT NOT NULL,
        test TEXT, points REAL, reason TEXT NOT NULL, set_by TEXT NOT NULL, set_at TEXT NOT NULL,
        suite_sha256 TEXT);
    CREATE TABLE extensions (
        learner TEXT NOT NULL REFERENCES learners(name), task TEXT NOT NULL, until TEXT NOT NULL,
        reason TEXT NOT NULL, set_by TEXT NOT NULL, set_at TEXT NOT NULL, PRIMARY KEY (learner, task));
    CREATE TABLE policy (id INTEGER PRIMARY KEY CHECK (id = 1), text TEXT NOT NULL, set_by TEXT NOT NULL,
                         set_at TEXT NOT NULL);
    CREATE TABLE exports (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, path TEXT NOT NULL, rows INTEGER NOT NULL,
                          exported_at TEXT NOT NULL);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


class GradebookError(Exception):
    """A gradebook that cannot be used as it is: the message says why and what to do."""


@dataclass(frozen=True)
class Received:
    """When a submission was handed in, and where that time comes from (the channel's metadata,
    a CSV of times, the files' times)."""
    at: datetime | None
    source: str


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Gradebook:
    """An open gradebook. `Gradebook.open(folder)` checks and migrates it first."""

    def __init__(self, path: Path, connection: sqlite3.Connection):
        self.path = path
        self.db = connection

    @classmethod
    def open(cls, folder: Path, create: bool = True) -> Gradebook:
        path = Path(folder) / BOOK_NAME
        if not path.exists() and not create:
            raise GradebookError(f"no gradebook in {folder}: grade a batch into it first (grader grade ... --out-dir {folder})")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # the pool's threads report gradings as they end; their caller holds a lock around each write
            db = sqlite3.connect(path, timeout=LOCK_WAIT_S, isolation_level=None, check_same_thread=False)
        except (sqlite3.Error, OSError) as exc:
            raise GradebookError(f"{path} cannot be opened: {exc}") from None
        book = cls(path, db)
        try:
            book._check_and_migrate()
        except BaseException:
            db.close()
            raise
        return book

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write: all of it, or none of it."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._refusal(exc) from None
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _check_and_migrate(self) -> None:
        try:
            self.db.execute("PRAGMA synchronous = FULL")
            self.db.execute("PRAGMA foreign_keys = ON")
            application, version = (self.db.execute(f"PRAGMA {name}").fetchone()[0]
                                    for name in ("application_id", "user_version"))
            tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if application != APPLICATION_ID and (tables or version):
                raise GradebookError(f"{self.path} is a SQLite file but not a gradebook: nothing was written to it; "
                                     "give the batch another --out-dir")
            if version > SCHEMA_VERSION:
                raise GradebookError(f"{self.path} was written by a newer grader (gradebook schema {version}; this "
                                     f"grader reads up to {SCHEMA_VERSION}): upgrade the grader; nothing was written")
            damage = self.db.execute("PRAGMA quick_check").fetchone()[0]
            if damage != "ok":
                raise GradebookError(f"{self.path} is damaged ({damage}): {_RESTORE}")
            if version < SCHEMA_VERSION:
                with self.transaction():
                    for script in MIGRATIONS[version:]:
                        for statement in filter(str.strip, script.split(";")):
                            self.db.execute(statement)
                    self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise self._refusal(exc) from None

    def _refusal(self, exc: sqlite3.Error) -> GradebookError:
        if "locked" in str(exc) or "busy" in str(exc):
            return GradebookError(f"{self.path} is locked by another process (a batch or regrade still running?) "
                                  f"and stayed locked for {LOCK_WAIT_S:g} s: run this again once it has ended; "
                                  "nothing was written")
        return GradebookError(f"{self.path} is not a readable gradebook ({exc}): {_RESTORE}")

    # ------------------------------------------------------------------ recording gradings

    def record(self, learner: str, report: ScoreReport, received: Received | None = None, channel: str = "",
               submission: int | None = None) -> bool:
        """Record one grading of `learner`'s submission from its report: a new submission, handed
        in when `received` says through `channel`, or one graded before (`submission`, a
        regrade's). False when that report was recorded already (`grading_key`)."""
        key = grading_key(learner, report)
        data = report.to_json()
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM gradings WHERE key = ?", (key,)).fetchone():
                return False
            if submission is None:
                submission = self._submission(learner, report, received or Received(None, "unknown"), channel)
            seq = db.execute("SELECT coalesce(max(seq), 0) + 1 FROM gradings").fetchone()[0]
            run = report.run or {}
            db.execute("INSERT INTO gradings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (key, run.get("run_id"), submission, seq, now(), run.get("finished_at"), _grader_version(),
                        run.get("commit"), run.get("seed"), (report.isolation or {}).get("level"), int(report.complete),
                        json.dumps(report.problems), zlib.compress(json.dumps(data).encode())))
            for task in report.tasks:
                db.execute("INSERT INTO task_gradings VALUES (?, ?, ?, ?, ?, ?)",
                           (key, task.task, task.suite_sha256, task.module.sha256, task.points, task.max_points))
                db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               [(key, task.task, t.id, t.suite, t.status, int(t.graded), t.points, t.max_points,
                                 t.concept, t.feedback) for t in task.tests])
        return True

    def _submission(self, learner: str, report: ScoreReport, received: Received, channel: str) -> int:
        self.db.execute("INSERT OR IGNORE INTO learners VALUES (?)", (learner,))
        digest, path = submission_digest(report), str(report.submission.get("path", ""))
        at = received.at.isoformat(timespec="seconds") if received.at else None
        self.db.execute("INSERT OR IGNORE INTO submissions (learner, path, digest, received_at, received_from, channel) "
                        "VALUES (?, ?, ?, ?, ?, ?)", (learner, path, digest, at, received.source, channel))
        return self.db.execute("SELECT id FROM submissions WHERE learner = ? AND path = ? AND digest = ?",
                               (learner, path, digest)).fetchone()[0]

    def record_export(self, kind: str, where: str, rows: int) -> None:
        """An export written (or a push made): what, where to, and how many learners' rows."""
        with self.transaction() as db:
            db.execute("INSERT INTO exports (kind, path, rows, exported_at) VALUES (?, ?, ?, ?)", (kind, where, rows, now()))

    def report(self, grading: str) -> ScoreReport:
        blob = self.db.execute("SELECT report FROM gradings WHERE key = ?", (grading,)).fetchone()[0]
        return ScoreReport.from_json(json.loads(zlib.decompress(blob)))

    def learners(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT name FROM learners ORDER BY name")]

    def count(self, table: str) -> int:
        assert table in ("learners", "submissions", "gradings", "task_gradings", "results", "overrides",
                         "extensions", "exports"), table
        return self.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


_RESTORE = ("restore it from a backup, or move it aside and run `grader summary DIR` to record the score reports "
            "in a new one (overrides, extensions and the late policy live only in the gradebook); nothing was written")


def grading_key(learner: str, report: ScoreReport) -> str:
    """A grading's identity: the learner and the report's run id, or for a report that has none
    (a grading refused before it ran), a digest of the report. A report copied into another
    learner's folder is that learner's grading too."""
    run_id = (report.run or {}).get("run_id")
    own = str(run_id) if run_id else \
        "report-" + hashlib.sha256(json.dumps(report.to_json(), sort_keys=True).encode()).hexdigest()[:24]
    return f"{learner}/{own}"


def submission_digest(report: ScoreReport) -> str:
    """What was handed in, as far as grading reads it: the digest of each task's module ("-" for
    one not found), or, for a grading that read none, the path graded."""
    modules = [f"{task.task}:{task.module.sha256 or '-'}" for task in sorted(report.tasks, key=lambda t: t.task)]
    text = "\n".join(modules) if modules else f"path:{report.submission.get('path', '')}"
    return hashlib.sha256(text.encode()).hexdigest()


def _grader_version() -> str | None:
    from importlib import metadata
    try:
        return metadata.version("l1-exercises")
    except metadata.PackageNotFoundError:
        return None
