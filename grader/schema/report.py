"""The score report: per test, per task and in total, typed from write to read
(`score_report.json`).

Schema (version 1), documented in docs/instructor/README.md ("The score report"):

    {"schema": "l1-exercises/score-report", "schema_version": 1,
     "complete": bool, "problems": [str], "stopped_early": null or why, "isolation": {...},
     "run": {run record}, "submission": {"path", "commit"},
     "total": {"points", "max_points", "not_graded_points", "percent"},
     "tasks": [{"task", "title", "module": {"path", "found", "sha256", "flags"}, "suite_sha256",
                "points", "max_points", "not_graded_points", "percent", "counts": {status: n},
                "tests": [{"id", "suite", "title", "status", "graded", "points", "max_points",
                           "concept", "feedback", "output", "duration_s", "location", "artifacts"}]}]}

Points: a passed test earns its max_points, any other graded status earns 0. A test skipped
for lack of what this machine or isolation level cannot give it (`NOT_GRADED_HERE`: CUDA for a GPU
test, sockets for a distributed one) is not graded here: it leaves the denominator and its points
are listed as not_graded_points. Any other skip is graded and earns 0. A report is complete when
every collected test ran and nothing went wrong around the tests (`problems` is empty);
`stopped_early` says why a run ended before its last test (only the audit asks for that).

What the output formats need beyond points travels here too, so that every format renders from
this one report: a test's `location` in the learner's module (for annotations beside the
learner's line) and its `artifacts` (a loss curve, a step breakdown) filled by the suites.

Totals, percentages and counts are derived, never stored twice: `to_json` computes them and
`from_json` reads back only what they are computed from.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Literal, TypedDict, get_args

from grader.schema.record import RunRecord, combined_run
from grader.worker.loading import Location

SCHEMA = "l1-exercises/score-report"
REPORT_NAME = "score_report.json"        # a grading's report, in its folder
SCHEMA_VERSION = 1
Status = Literal["passed", "failed", "error", "skipped", "timeout", "crashed"]
STATUSES: tuple[Status, ...] = get_args(Status)
NOT_RUN = "not graded: the grading ended before this test ran"      # a test the grading stopped short of
NOT_IMPLEMENTED = "is not implemented yet"      # a lost test's feedback: the learner's function still raises NotImplementedError
OUT_OF_MEMORY = "out of memory"          # how a crashed test's feedback begins its reason when memory ran out

# The words every format uses (terminal, HTML, JUnit, Gradescope, PrairieLearn, GitHub, the watcher).
NOT_GRADED_STATUS = "not graded here"                   # in place of a status: a test this machine cannot grade


@dataclass(frozen=True)
class NotGradedHere:
    """Tests that need what some machines or isolation levels lack. There they are skipped before
    they run and left out of the total, not counted as failed; elsewhere they are graded."""
    marker: str         # the tests' marker
    needs: str          # what such a test lacks here, in its feedback
    tests: str          # what the total's note calls them
    missing: str        # and why it leaves them out

    @property
    def feedback(self) -> str:
        return f"{NOT_GRADED_STATUS}: {self.needs}"


NO_GPU = NotGradedHere("gpu", "needs more CUDA GPUs than this machine has", "GPU tests", "too few CUDA GPUs")
NO_SOCKETS = NotGradedHere("distributed", "its ranks need sockets, which learner code may not open at the uid level",
                           "distributed tests", "the uid level gives learner code no sockets")
NOT_GRADED_HERE = (NO_GPU, NO_SOCKETS)


def points_text(points: float, max_points: float) -> str:
    """Points as every format writes them: "12.5 / 20"."""
    return f"{points:g} / {max_points:g}"


def percent_text(points: float, max_points: float) -> str:
    """A percentage as the tables write it: "62.5", or "—" where no point was graded here (a task
    whose every test needs what this machine or isolation level lacks), which 0.0 would misread."""
    return f"{_percent(points, max_points):.1f}" if max_points else "—"


def not_graded_note(tests: list[TestResult]) -> str:
    """The sentence under a total that leaves tests out, each kind with its reason ("" when none is)."""
    left_out = [t for t in tests if not t.graded]
    kinds = {kind.feedback: kind for kind in NOT_GRADED_HERE}
    parts = [f"{kind.tests} worth {points:g} points were not graded here ({kind.missing})"
             for kind in NOT_GRADED_HERE if (points := sum(t.max_points for t in left_out if t.feedback == kind.feedback))]
    if other := sum(t.max_points for t in left_out if t.feedback not in kinds):
        parts.append(f"tests worth {other:g} points were not graded here")
    sentence = "; ".join(parts)
    return sentence[:1].upper() + sentence[1:] + ": they are left out of the total, not counted as failed." if parts else ""


class Isolation(TypedDict, total=False):
    """Where learner code ran and why (the report's `isolation`)."""
    level: str          # "sandbox", "uid", "none" or "in-process"
    reason: str
    limits: dict        # what the sandbox enforced, per limit


class SubmissionInfo(TypedDict, total=False):
    """Which tree was graded (the report's `submission`)."""
    path: str
    commit: str | None


def location_text(location: Location) -> str:
    """The learner's line a lost test points at, as every format says it."""
    return f"Your line {location['line']}, in {location['function']}: {location['code']}"


class ReportError(ValueError):
    """A file that is not a readable score report of this schema and version."""


@dataclass
class TestResult:
    id: str
    task: str
    suite: str                  # "visible" or "hidden"
    title: str
    status: Status
    graded: bool
    max_points: float
    concept: str | None = None
    feedback: str = ""
    output: str = ""
    duration_s: float = 0.0
    # Where in the learner's module a failure points: the line that raised, or the line that gave
    # the wrong result (see grader.worker.loading.function_location); None when nothing points there.
    location: Location | None = None
    # Data a format shows beside the result (a loss curve, a step breakdown): the learner's own
    # results and public references only, never a hidden input or expected value.
    artifacts: dict = field(default_factory=dict)

    @property
    def points(self) -> float:
        return self.max_points if self.status == "passed" else 0.0

    @property
    def lost(self) -> bool:
        """Graded and not passed: the test cost the learner its points."""
        return self.graded and self.status != "passed"

    def to_json(self) -> dict:
        data = asdict(self)
        del data["task"]
        data["points"] = self.points
        return data

    @classmethod
    def from_json(cls, data: dict, task: str) -> TestResult:
        if data.get("status") not in STATUSES:
            raise ReportError(f"a test's status is {str(data.get('status'))[:40]!r}, not one of {', '.join(STATUSES)}")
        return cls(task=task, **_known(cls, data, skip={"task"}))


@dataclass
class ModuleInfo:
    path: str
    found: bool
    sha256: str | None = None
    flags: list[str] = field(default_factory=list)     # e.g. identical to a course reference


@dataclass
class TaskResult:
    task: str
    title: str
    module: ModuleInfo
    tests: list[TestResult] = field(default_factory=list)
    suite_sha256: str | None = None     # the version of the suites that graded it (`Task.suite_sha256`)

    @property
    def points(self) -> float:
        return sum(t.points for t in self.tests if t.graded)

    @property
    def max_points(self) -> float:
        return sum(t.max_points for t in self.tests if t.graded)

    @property
    def not_graded_points(self) -> float:
        return sum(t.max_points for t in self.tests if not t.graded)

    @property
    def percent(self) -> float:
        return _percent(self.points, self.max_points)

    def to_json(self) -> dict:
        return {"task": self.task, "title": self.title, "module": asdict(self.module), "suite_sha256": self.suite_sha256,
                **_totals(self.points, self.max_points, self.not_graded_points),
                "counts": dict(Counter(t.status for t in self.tests)),
                "tests": [t.to_json() for t in self.tests]}

    @classmethod
    def from_json(cls, data: dict) -> TaskResult:
        return cls(data["task"], data["title"], ModuleInfo(**_known(ModuleInfo, data["module"])),
                   [TestResult.from_json(t, data["task"]) for t in data["tests"]], data.get("suite_sha256"))


@dataclass
class Total:
    points: float
    max_points: float
    not_graded_points: float

    @property
    def percent(self) -> float:
        return _percent(self.points, self.max_points)


@dataclass
class ScoreReport:
    run: RunRecord
    submission: SubmissionInfo
    tasks: list[TaskResult]
    problems: list[str] = field(default_factory=list)
    stopped_early: str | None = None
    isolation: Isolation = field(default_factory=lambda: Isolation())

    @classmethod
    def failed(cls, problem: str, submission: SubmissionInfo | None = None) -> ScoreReport:
        """The report of a grading that produced none of its own: nothing earned, the reason kept."""
        return cls(run={}, submission=submission or {}, tasks=[], problems=[problem])

    @classmethod
    def combined(cls, parts: list[ScoreReport]) -> ScoreReport:
        """One grading's report from its parts (one per task, each its own session), in order:
        their tasks and problems together, the first part's record with the whole run's times
        and metrics."""
        recorded = [part for part in parts if part.run]
        report = cls(run=RunRecord(**recorded[0].run) if recorded else {},
                     submission=next((p.submission for p in parts if p.submission), SubmissionInfo()),
                     tasks=[task for part in parts for task in part.tasks],
                     problems=[problem for part in parts for problem in part.problems],
                     stopped_early=next((p.stopped_early for p in parts if p.stopped_early), None),
                     isolation=next((p.isolation for p in parts if p.isolation), Isolation()))
        if recorded:
            report.run = combined_run([part.run for part in recorded], report.total, len(report.tests()))
        return report

    @property
    def complete(self) -> bool:
        return not self.problems and not self.stopped_early

    @property
    def total(self) -> Total:
        return Total(sum(t.points for t in self.tasks), sum(t.max_points for t in self.tasks),
                     sum(t.not_graded_points for t in self.tasks))

    def task(self, name: str) -> TaskResult | None:
        return next((t for t in self.tasks if t.task == name), None)

    def tests(self):
        return [test for task in self.tasks for test in task.tests]

    def out_of_memory(self) -> list[TestResult]:
        """The tests whose worker the kernel ended for memory."""
        return [t for t in self.tests() if t.status == "crashed" and OUT_OF_MEMORY in t.feedback]

    def to_json(self) -> dict:
        total = self.total
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "complete": self.complete,
                "problems": self.problems, "stopped_early": self.stopped_early, "isolation": self.isolation,
                "run": self.run, "submission": self.submission,
                "total": _totals(total.points, total.max_points, total.not_graded_points),
                "tasks": [t.to_json() for t in self.tasks]}

    @classmethod
    def from_json(cls, data: dict) -> ScoreReport:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("schema_version") != SCHEMA_VERSION:
            raise ReportError(f"not a version {SCHEMA_VERSION} {SCHEMA}")
        try:
            return cls(run=data["run"], submission=data["submission"],
                       tasks=[TaskResult.from_json(t) for t in data["tasks"]], problems=list(data["problems"]),
                       stopped_early=data.get("stopped_early"), isolation=data.get("isolation") or Isolation())
        except (KeyError, TypeError) as exc:
            raise ReportError(f"malformed score report: {type(exc).__name__}: {exc}") from None


def _known(cls, data: dict, skip=frozenset()) -> dict:
    """The fields of `cls` found in `data` (derived fields such as `points` are not stored)."""
    names = {f.name for f in fields(cls)} - set(skip)
    return {k: v for k, v in data.items() if k in names}


def _percent(points: float, max_points: float) -> float:
    return round(100.0 * points / max_points, 2) if max_points else 0.0


def _totals(points: float, max_points: float, not_graded: float) -> dict:
    return {"points": points, "max_points": max_points, "not_graded_points": not_graded,
            "percent": _percent(points, max_points)}


def write_report(report: ScoreReport, path: Path) -> None:
    """Write atomically: the file at `path` is either the previous one or the whole new report,
    never empty or half written. Text that cannot be encoded (a lone surrogate raised by learner
    code) is replaced, not allowed to lose the grade."""
    write_text_atomically(Path(path), json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    data = text.encode("utf-8", errors="replace")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, 0o644)          # readable like any file written by hand (mkstemp makes it private)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


REASON_LIMIT = 300        # characters of an exception's message in a line saying what was not written


def unwritten_reason(what: str, path: Path, exc: BaseException) -> str:
    """One printable line: which output could not be written, and why. The message may quote
    learner data (a renderer's error about a string it was given), so control characters and
    escape sequences are shown as `?`, never sent to a terminal or a CSV cell as they are."""
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(message) > REASON_LIMIT:
        message = message[:REASON_LIMIT - 1] + "…"
    line = f"the {what} ({path}) could not be written: {message}"
    return "".join(c if c.isprintable() else "?" for c in line.encode("utf-8", "replace").decode("utf-8"))


def read_report(path: Path) -> ScoreReport:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path} could not be read: {exc}") from None
    try:
        return ScoreReport.from_json(data)
    except ReportError as exc:
        raise ReportError(f"{path}: {exc}") from None
