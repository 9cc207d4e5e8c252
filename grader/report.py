"""The score report: per test, per task and in total, and its JSON form (`score_report.json`).

Schema (version 1), documented in README.md ("The score report"):

    {"schema": "l1-exercises/score-report", "schema_version": 1,
     "complete": bool, "problems": [str], "stopped_early": null or why,
     "run": {run record}, "submission": {"path", "commit"},
     "total": {"points", "max_points", "not_graded_points", "percent"},
     "tasks": [{"task", "title", "module": {"path", "found", "sha256"},
                "points", "max_points", "not_graded_points", "percent", "counts": {status: n},
                "tests": [{"id", "suite", "title", "status", "graded", "points", "max_points",
                           "concept", "feedback", "output", "duration_s"}]}]}

Points: a passed test earns its max_points, any other graded status earns 0. A GPU test
skipped for lack of CUDA is not graded here: it leaves the denominator and its points are
listed as not_graded_points. Any other skip is graded and earns 0. A report is complete when
every collected test ran and nothing went wrong around the tests (`problems` is empty);
`stopped_early` says why a run ended before its last test (only the audit asks for that).
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

SCHEMA = "l1-exercises/score-report"
SCHEMA_VERSION = 1
STATUSES = ("passed", "failed", "error", "skipped", "timeout", "crashed")


@dataclass
class TestResult:
    id: str
    task: str
    suite: str                  # "visible" or "hidden"
    title: str
    status: str
    graded: bool
    max_points: float
    concept: str | None = None
    feedback: str = ""
    output: str = ""
    duration_s: float = 0.0

    @property
    def points(self) -> float:
        return self.max_points if self.status == "passed" else 0.0

    def to_json(self) -> dict:
        data = asdict(self)
        del data["task"]
        data["points"] = self.points
        return data


@dataclass
class TaskResult:
    task: str
    title: str
    module: dict
    tests: list[TestResult] = field(default_factory=list)

    @property
    def points(self) -> float:
        return sum(t.points for t in self.tests if t.graded)

    @property
    def max_points(self) -> float:
        return sum(t.max_points for t in self.tests if t.graded)

    @property
    def not_graded_points(self) -> float:
        return sum(t.max_points for t in self.tests if not t.graded)

    def to_json(self) -> dict:
        return {"task": self.task, "title": self.title, "module": self.module,
                **_totals(self.points, self.max_points, self.not_graded_points),
                "counts": dict(Counter(t.status for t in self.tests)),
                "tests": [t.to_json() for t in self.tests]}


@dataclass
class ScoreReport:
    run: dict
    submission: dict
    tasks: list[TaskResult]
    problems: list[str] = field(default_factory=list)
    stopped_early: str | None = None

    @property
    def complete(self) -> bool:
        return not self.problems and not self.stopped_early

    def total(self) -> dict:
        return _totals(sum(t.points for t in self.tasks), sum(t.max_points for t in self.tasks),
                       sum(t.not_graded_points for t in self.tasks))

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "complete": self.complete,
                "problems": self.problems, "stopped_early": self.stopped_early, "run": self.run, "submission": self.submission,
                "total": self.total(), "tasks": [t.to_json() for t in self.tasks]}

    def write(self, path: Path) -> None:
        write_report(self.to_json(), path)


def _totals(points: float, max_points: float, not_graded: float) -> dict:
    percent = round(100.0 * points / max_points, 2) if max_points else 0.0
    return {"points": points, "max_points": max_points, "not_graded_points": not_graded,
            "percent": percent}


def write_report(data: dict, path: Path) -> None:
    Path(path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_report(path: Path) -> dict:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("schema") != SCHEMA or data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path} is not a version {SCHEMA_VERSION} score report")
    return data
