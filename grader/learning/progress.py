"""What the learner's runs leave behind: per exercise and concept, passed or failing, how many runs
it took, when it first passed, and which hints were seen (asked for, or offered).

A hint is offered for a concept the learner is working on that keeps failing: a concept whose
failing tests all stopped before the learner's own code for it ran (a function still raising
NotImplementedError, a module that does not import) is not being worked on, and counts no run
towards a hint.

One small JSON file in the learner's checkout (`.grader-progress.json`, git-ignored), or where
`GRADER_PROGRESS` says (`off`: nothing is recorded). Every self-check writes it: `pytest
exercises/NN` (the plugin's learner mode), `grader check` and `grader watch`; official grading
never does. It is the learner's own notebook, not a grade: nothing reads it to score anything.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from grader.course import COURSE
from grader.schema.report import NOT_IMPLEMENTED, NOT_RUN, ScoreReport, write_text_atomically
from grader.worker.loading import NOT_IMPORTED

PROGRESS_FILE = ".grader-progress.json"
PROGRESS_ENV = "GRADER_PROGRESS"
OFF = "off"
FORMAT = 1
# A concept that failed this many runs in a row without gaining a point gets its next hint offered:
# fewer would hint at a learner still typing; more leaves them stuck for long.
HINT_AFTER_FAILING_RUNS = 3
PASSED, FAILING = "passed", "failing"


@dataclass
class ConceptProgress:
    status: str = FAILING
    attempts: int = 0                  # runs that checked this concept
    first_passed: str | None = None    # ISO time of the first run where all its tests passed
    points: float = 0.0                # of the last run
    max_points: float = 0.0
    best_points: float = 0.0
    stuck_runs: int = 0                # failing runs since the last gain (or the last hint offered), once reached


@dataclass
class TaskProgress:
    concepts: dict[str, ConceptProgress] = field(default_factory=dict)
    hints_seen: dict[str, int] = field(default_factory=dict)     # concept -> hints shown so far
    hints_asked: int = 0               # hints shown because the learner asked (`grader hint`)
    hints_offered: int = 0             # hints shown because a concept kept failing
    runs: int = 0
    last_run: str | None = None
    last_source: str | None = None

    @property
    def complete(self) -> bool:
        return bool(self.concepts) and all(c.status == PASSED for c in self.concepts.values())

    @property
    def still_open(self) -> list[str]:
        """The concepts the last run left failing, in the order they were first checked."""
        return [name for name, concept in self.concepts.items() if concept.status != PASSED]

    @property
    def points(self) -> float:
        return sum(c.points for c in self.concepts.values())

    @property
    def max_points(self) -> float:
        return sum(c.max_points for c in self.concepts.values())


def progress_path() -> Path | None:
    """Where progress is kept, or None when recording is switched off."""
    where = os.environ.get(PROGRESS_ENV)
    if where == OFF:
        return None
    return Path(where) if where else COURSE.root / PROGRESS_FILE


def load(path: Path | None = None) -> dict[str, TaskProgress]:
    """Every exercise's progress; an unreadable or missing file is a fresh start, never an error."""
    path = path or progress_path()
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tasks = data["tasks"] if data.get("format") == FORMAT else {}
        return {name: _task_from_json(entry) for name, entry in tasks.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


@contextlib.contextmanager
def updating(path: Path | None = None):
    """The progress to change in place, written back when the block ends; one writer at a time
    (a watcher and a `grader check` may end a run together)."""
    path = path or progress_path()
    if path is None:
        yield {}
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tasks = load(path)
        yield tasks
        data = {"format": FORMAT, "tasks": {name: asdict(entry) for name, entry in tasks.items()}}
        write_text_atomically(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def record(report: ScoreReport, source: str, now: datetime | None = None) -> dict[str, list[str]]:
    """Fold one self-check's report into the progress file. Returns, per task, the concepts due a
    hint: failing for HINT_AFTER_FAILING_RUNS runs without a gain (their count restarts, so the
    next hint comes as many runs later)."""
    if progress_path() is None:
        return {}
    stamp = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    due: dict[str, list[str]] = {}
    with updating() as tasks:
        for task in report.tasks:
            concepts = concept_results(task.tests)
            if not concepts:
                continue
            entry = tasks.setdefault(task.task, TaskProgress())
            entry.runs += 1
            entry.last_run, entry.last_source = stamp, source
            unreached = unreached_concepts(task.tests)
            for name, (points, max_points, passed) in concepts.items():
                concept = entry.concepts.setdefault(name, ConceptProgress())
                if _fold(concept, points, max_points, passed, stamp, reached=name not in unreached):
                    due.setdefault(task.task, []).append(name)
    return due


def concept_of(test) -> str:
    """A test's concept; a test without one stands for itself under its title."""
    return test.concept or test.title


def concept_results(tests) -> dict[str, tuple[float, float, bool]]:
    """{concept: (points, max points, all passed)} over the graded tests, in the tests' order
    (the README's). A test without a concept counts under its own title."""
    concepts: dict[str, tuple[float, float, bool]] = {}
    for test in tests:
        if not test.graded:            # a GPU test on a machine without one says nothing either way
            continue
        name = concept_of(test)
        points, max_points, passed = concepts.get(name, (0.0, 0.0, True))
        concepts[name] = (points + test.points, max_points + test.max_points, passed and test.status == "passed")
    return concepts


def unreached_concepts(tests) -> set[str]:
    """The concepts whose lost tests all stopped before the learner's code for them ran: a
    function still raising NotImplementedError, a module that does not import, a check that ended
    before the test ran."""
    lost: dict[str, bool] = {}
    for test in tests:
        if test.lost:
            name = concept_of(test)
            lost[name] = lost.get(name, True) and not reached(test)
    return {name for name, stopped in lost.items() if stopped}


def reached(test) -> bool:
    """Whether a lost test ran the learner's code it checks (see `unreached_concepts`)."""
    return not (NOT_IMPLEMENTED in test.feedback or test.feedback == NOT_RUN
                or (test.status == "error" and NOT_IMPORTED in test.feedback))


def _fold(concept: ConceptProgress, points: float, max_points: float, passed: bool, stamp: str,
          reached: bool = True) -> bool:
    """One run's result of a concept; True when a hint is now due (never for one not reached)."""
    concept.attempts += 1
    concept.points, concept.max_points = points, max_points
    concept.status = PASSED if passed else FAILING
    if passed:
        concept.first_passed = concept.first_passed or stamp
        concept.stuck_runs = 0
    elif points > concept.best_points:
        concept.stuck_runs = 0
    elif reached:
        concept.stuck_runs += 1
    concept.best_points = max(concept.best_points, points)
    if not passed and concept.stuck_runs >= HINT_AFTER_FAILING_RUNS:
        concept.stuck_runs = 0
        return True
    return False


def mark_hint_seen(task: str, concept: str, shown: int, asked: bool) -> None:
    """Remember that hints 1..`shown` of `concept` were seen (never fewer than before), one more
    asked for or offered."""
    if progress_path() is None:
        return
    with updating() as tasks:
        entry = tasks.setdefault(task, TaskProgress())
        entry.hints_seen[concept] = max(entry.hints_seen.get(concept, 0), shown)
        if asked:
            entry.hints_asked += 1
        else:
            entry.hints_offered += 1


def _task_from_json(data: dict) -> TaskProgress:
    concepts = {name: ConceptProgress(**value) for name, value in data.get("concepts", {}).items()}
    return TaskProgress(concepts=concepts, hints_seen={k: int(v) for k, v in data.get("hints_seen", {}).items()},
                        hints_asked=int(data.get("hints_asked", 0)), hints_offered=int(data.get("hints_offered", 0)),
                        runs=int(data.get("runs", 0)), last_run=data.get("last_run"),
                        last_source=data.get("last_source"))
