"""What one grading session grades, and how: decided once, where the grading starts.

A `GradingSpec` is built at the edge (the runner, for every official channel; or, for a plain
`pytest` run, from the plugin's options by `from_options`) and handed whole to the session as a
file (`--grading-spec`). The plugin reads it and decides nothing again: the isolation level in it
is already resolved (`grader.isolation.levels.resolve`), with the limits its workers get.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from grader.course import COURSE, Course
from grader.isolation import levels
from grader.isolation.sandbox import Limits
from grader.schema.report import Isolation

BACKENDS = ("inprocess", "worker")
ANY_CONCEPT = "*"                 # stop_on_concept: stop at the first test lost, whatever its concept
SEED_OPTION = "--grader-seed"        # where a seed given on pytest's command line came from
_PATHS = ("impl", "score_report", "worker_logs")     # the fields written as text


@dataclass(frozen=True)
class GradingSpec:
    course: Course
    impl: Path                       # the submission tree graded
    backend: str                     # "inprocess" (a self-check) or "worker" (learner code in a process of its own)
    isolation: Isolation             # resolved: the level, why, and how each limit is enforced
    limits: Limits                   # what the task's workers may use
    seed: int                        # of the `seed` and `rng` fixtures
    seed_from: str                   # where the seed came from, for the run record
    run_id: str | None = None        # every task's session of one grading has the same
    score_report: Path | None = None
    worker_logs: Path | None = None
    stop_on_concept: str | None = None      # stop once a test of this concept failed, of any: ANY_CONCEPT (`grader audit`)

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"backend {self.backend!r} is not one of {', '.join(BACKENDS)}")

    def but(self, **changes) -> GradingSpec:
        return replace(self, **changes)

    def to_json(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        paths = {name: None if data[name] is None else str(data[name]) for name in _PATHS}
        return {**data, **paths, "course": str(self.course.root), "limits": asdict(self.limits)}

    @classmethod
    def from_json(cls, data: dict) -> GradingSpec:
        paths = {name: None if data[name] is None else Path(data[name]) for name in _PATHS}
        return cls(**{**data, **paths, "course": Course(Path(data["course"])), "limits": Limits(**data["limits"])})

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> GradingSpec:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def from_options(option, environ) -> GradingSpec:
    """The spec of a plain `pytest` run (the learner's self-check, a suite author's run): its
    command line and environment are this grading's edge."""
    course = Course(Path(option.course).resolve()) if option.course else COURSE
    limits = Limits.from_env(environ)
    return GradingSpec(course=course, impl=Path(option.impl or course.exercises).resolve(),
                       backend=option.backend, isolation=levels.resolve(option.isolation, option.backend, limits),
                       limits=limits, seed=option.grader_seed, seed_from=SEED_OPTION,
                       score_report=Path(option.score_report) if option.score_report else None,
                       worker_logs=Path(option.worker_logs) if option.worker_logs else None,
                       stop_on_concept=option.stop_on_concept)
