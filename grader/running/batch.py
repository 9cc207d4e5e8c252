"""Grading a batch of submissions so that nothing is lost: each report is written as soon as its
grading ends, `summary.csv` is rewritten from the reports on disk after each one, and a batch
that was killed is finished by running it again with `resume`: reports already on disk are kept,
the missing ones graded.

Submissions are folders, or zip files unpacked with care (`grader.running.archives`). Each one
gets an output folder of its own, whatever the submissions are called (`unique_names`). The batch
decides what is graded and into which folder; where the gradings run is its executor's
(`grader.running.executors`: here, or a Slurm array), and a shard (`grader.running.shards`)
grades one slice of the batch.
"""
from __future__ import annotations

import os
import re
import threading
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path

from grader.reports.summary import BATCH_FILES, Entry, write_gradebook
from grader.running import runner
from grader.running.executors import Executor, LocalExecutor, Unit, not_finished
from grader.running.shards import Shard
from grader.schema.report import REPORT_NAME, ReportError, ScoreReport, read_report

_UNSAFE = re.compile(r"[^\w.-]+")     # letters (any script), digits, `_`, `.` and `-` are kept
MAX_NAME_BYTES = 200                  # file systems allow 255 bytes a name: room left for a number


def unique_names(paths: list[Path], kept: dict[int, str] | None = None, taken: Set[str] = frozenset()) -> list[str]:
    """Output folder names, one per submission and never two alike (ignoring case, as some file
    systems do): the submission's own name (a zip's without `.zip`), and for a repeated one the
    first of `-2`, `-3`, ... that no submission of the batch is called, so a learner who named
    theirs `sub-2` keeps it. A name is learner data (an upload's file name), so it is made a plain
    folder name first: never `.`, `..` or hidden, never a path, never a file of the batch folder's own (`BATCH_FILES`),
    never longer than a file system allows. `kept` gives some submissions (by index) their name already; no other
    takes it or `taken`."""
    kept = kept or {}
    bases = [folder_name(path.stem if path.suffix.lower() == ".zip" else path.resolve().name) for path in paths]
    used = {name.lower() for name in [*taken, *kept.values()]}
    own = {base.lower() for index, base in enumerate(bases) if index not in kept}
    names = []
    for index, base in enumerate(bases):
        name, number = kept.get(index, base), 1
        while index not in kept and (name.lower() in used or (number > 1 and name.lower() in own)):
            number += 1
            name = f"{base}-{number}"
        used.add(name.lower())
        names.append(name)
    return names


def folder_name(raw: str) -> str:
    name = _UNSAFE.sub("_", raw).lstrip(".-")
    name = name.encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", "ignore") or "submission"
    return f"{name}_" if name.lower() in BATCH_FILES else name


def grade(paths: list[Path], template: runner.GradingRun, out_dir: Path | None, *, jobs: int = 1,
          resume: bool = False, limit_s: float = runner.RUN_LIMIT_S, on_done=None, shard: Shard | None = None,
          executor: Executor | None = None, on_poll=None, on_plan=None, record=None) -> list[Entry]:
    """Grade every submission like `template` (its `impl` and `out_dir` are replaced), by
    `executor` (default: here, `jobs` at a time); with `resume`, keep the reports `out_dir`
    already holds, each for the submission whose path it records. With `shard`, only that slice
    of the batch is graded and returned, and `summary.csv` is left to the whole batch's summary:
    the other shards are writing the same folder. `on_plan(kept, to_grade)` once it is known
    how many of them the out-dir holds already; `on_poll` goes to the executor. `record(entry)`
    as each report is in (the gradebook's writer), and at the end for every report of the batch,
    the ones kept from before included: recording one twice changes nothing."""
    resumed = _reports_on_disk(out_dir, paths) if resume and out_dir is not None else _OnDisk({}, {}, set())
    names = unique_names(paths, kept=resumed.names, taken=resumed.others)
    entries = [Entry(name, str(path), resumed.reports.get(index)) for index, (name, path) in enumerate(zip(names, paths))]
    chosen = shard.select(paths) if shard else list(range(len(paths)))
    units = [Unit(entries[i].path, out_dir / entries[i].name if out_dir else None, i)
             for i in chosen if entries[i].report is None]
    by_place = {unit.place: entries[unit.place] for unit in units}
    if on_plan:
        on_plan(len(chosen) - len(units), len(units))
    lock = threading.Lock()

    def finished(unit, report):
        entry = by_place[unit.place]
        with lock:
            entry.report = report
            if record:
                record(entry)
            if out_dir is not None and shard is None:
                write_gradebook(out_dir / "summary.csv", entries)
            if on_done:
                on_done(entry)
    (executor or LocalExecutor(jobs)).run(units, template, limit_s, finished, on_poll)
    for unit in units:
        if by_place[unit.place].report is None:     # an executor that ended without its result: said, not lost
            finished(unit, ScoreReport.failed("the grading ended without a score report", {"path": unit.path}))
    if record:
        for i in chosen:
            record(entries[i])
    return [entries[i] for i in chosen]


@dataclass
class _OnDisk:
    names: dict[int, str]            # submission index -> the folder holding its report
    reports: dict[int, ScoreReport]
    others: set[str]                 # folders holding a report of no submission of this batch


def _reports_on_disk(out_dir: Path, paths: list[Path]) -> _OnDisk:
    """The reports a batch folder already holds, each matched to the submission whose path it
    records (`submission.path`): a folder's name alone may have been another submission's."""
    wanted: dict[str, list[int]] = {}
    for index, path in enumerate(paths):
        wanted.setdefault(_same_path(str(path)), []).append(index)
    found = _OnDisk({}, {}, set())
    for report_path in sorted(Path(out_dir).glob(f"*/{REPORT_NAME}")):
        report = _existing(report_path)
        if report is None:
            continue          # unreadable: that submission is graded again, into this folder or another
        waiting = wanted.get(_same_path(str(report.submission.get("path", ""))), [])
        if waiting:
            index = waiting.pop(0)
            found.names[index] = report_path.parent.name
            if not not_finished(report):       # else graded again, into the same folder
                found.reports[index] = report
        else:
            found.others.add(report_path.parent.name)
    return found


def _same_path(path: str) -> str:
    return os.path.normpath(os.path.abspath(path)) if path else ""


def _existing(path: Path) -> ScoreReport | None:
    try:
        return read_report(path)
    except ReportError:
        return None
