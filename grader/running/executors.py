"""Where a batch's gradings run: here (`LocalExecutor`, a pool of `jobs` gradings) or on a Slurm
cluster (`grader.running.slurm`, a job array). Either one is handed the batch's units, each a
submission and its folder in the batch's out-dir, and each unit's report is written into that
folder as soon as its grading ends: the out-dir (the resume ledger) is the only state the batch
and its executor share, so a grading on another machine is seen by the report it leaves there.

`grade_units` grades some units here and is what every executor ends in: the pool directly, a
Slurm array task through submitit (importable in the job: it is this module's top level).
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from grader.isolation import levels
from grader.running import archives, runner
from grader.schema.report import REPORT_NAME, ReportError, ScoreReport, read_report, write_report

# A report that opens with this says its grading never ran to its end for a reason outside the
# submission (the scheduler ended its job): `--resume` grades that submission again.
NOT_FINISHED = "not finished"


@dataclass(frozen=True)
class Unit:
    path: str                    # the submission as given: a folder or a zip file
    folder: Path | None          # its folder in the out-dir; None: a single grading that keeps no files
    place: int = 0               # its place in the batch: names its unpacking folder, never the learner's name


OnDone = Callable[[Unit, ScoreReport], None]


class Executor(Protocol):
    def run(self, units: list[Unit], template: runner.GradingRun, limit_s: float, on_done: OnDone,
            on_poll: Callable[[int, int], None] | None = None) -> None:
        """Grade every unit like `template`; `on_done(unit, report)` as each one's report is in
        its folder; `on_poll(running, pending)` where the executor knows those counts."""


@dataclass
class LocalExecutor:
    jobs: int = 1

    def run(self, units, template, limit_s, on_done, on_poll=None) -> None:
        grade_units(units, template, limit_s, self.jobs, on_done)


def grade_units(units: list[Unit], template: runner.GradingRun, limit_s: float = runner.RUN_LIMIT_S,
                jobs: int = 1, on_done: OnDone | None = None) -> None:
    """Grade `units` here, `jobs` at a time, each report written to its unit's folder as soon as
    it is in (what an archive refused listed in its problems, the submission's path recorded
    as given: the ledger matches reports to submissions by it)."""
    with tempfile.TemporaryDirectory(prefix="grader-unpacked-") as unpacked:
        runs, graded = [], {}
        for unit in units:
            tree, refused = _tree(unit.path, Path(unpacked) / str(unit.place))
            if tree is None:
                _finish(unit, ScoreReport.failed(refused[0], {"path": unit.path}), on_done)
                continue
            run = replace(template, impl=tree, out_dir=unit.folder)
            runs.append(run)
            graded[id(run)] = unit, refused

        def finished(run, report):
            unit, refused = graded[id(run)]
            report.problems.extend(f"refused from the archive: {why}" for why in refused)
            report.submission["path"] = unit.path
            _finish(unit, report, on_done)
        runner.run_many(runs, jobs, on_done=finished, limit_s=limit_s)


def grade_chunk(units: list[Unit], template: runner.GradingRun, limit_s: float, jobs: int,
                isolation_wanted: str) -> int:
    """One Slurm array task's work: its units graded on its node, at the isolation this node gives
    (where the controller's submission host resolved it, the node may differ); a node that cannot
    give what is asked grades nothing, and each report says why. Returns how many, for the log."""
    try:
        where = levels.resolve(isolation_wanted, template.backend, template.limits)
    except levels.IsolationUnavailable as exc:
        for unit in units:
            _finish(unit, levels.refused_report(exc, unit.path), None)
        return len(units)
    grade_units(units, replace(template, isolation=where), limit_s, jobs)
    return len(units)


def _finish(unit: Unit, report: ScoreReport, on_done: OnDone | None) -> None:
    save(report, unit.folder)
    if on_done:
        on_done(unit, report)


def save(report: ScoreReport, folder: Path | None) -> None:
    """Write the unit's report now (atomically), so a killed batch keeps it; a failure to write
    becomes a problem of that report, never a lost grade."""
    if folder is None:
        return
    try:
        write_report(report, folder / REPORT_NAME)
    except OSError as exc:
        report.problems.append(f"the score report could not be written: {exc}")


def finished_report(unit: Unit) -> ScoreReport | None:
    """The unit's report once its grading has written its last version, else None."""
    if unit.folder is None:
        return None
    try:
        report = read_report(unit.folder / REPORT_NAME)
    except (ReportError, OSError):
        return None
    # the pool writes a first version before the submission's path is recorded in it
    return report if report.submission.get("path") == unit.path else None


def not_finished(report: ScoreReport) -> bool:
    return any(problem.startswith(NOT_FINISHED) for problem in report.problems)


def _tree(path: str, unpack_into: Path) -> tuple[Path | None, list[str]]:
    """The folder to grade, and what was refused on the way (with the reason when nothing is left)."""
    source = Path(path)
    if source.is_dir():
        return source, []
    try:
        result = archives.unpack(source, unpack_into)
    except (ValueError, OSError) as exc:
        return None, [str(exc)]
    return result.root, result.refused
