"""Grading a batch of submissions so that nothing is lost: each report is written as soon as its
grading ends, `summary.csv` is rewritten from the reports on disk after each one, and a batch
that was killed is finished by running it again with `resume`: reports already on disk are kept,
the missing ones graded.

Submissions are folders, or zip files unpacked with care (`grader.running.archives`). Each one
gets an output folder of its own, whatever the submissions are called (`unique_names`).
"""
from __future__ import annotations

import os
import re
import tempfile
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from grader.reports.report import REPORT_NAME, ReportError, ScoreReport, read_report, write_report
from grader.reports.summary import CLASS_FILES, Entry, write_gradebook
from grader.running import archives, runner

_UNSAFE = re.compile(r"[^\w.-]+")     # letters (any script), digits, `_`, `.` and `-` are kept
MAX_NAME_BYTES = 200                  # file systems allow 255 bytes a name: room left for a number


def unique_names(paths: list[Path], kept: dict[int, str] | None = None, taken: set[str] = frozenset()) -> list[str]:
    """Output folder names, one per submission and never two alike (ignoring case, as some file
    systems do): the submission's own name (a zip's without `.zip`), and for a repeated one the
    first of `-2`, `-3`, ... that no submission of the batch is called, so a learner who named
    theirs `sub-2` keeps it. A name is learner data (an upload's file name), so it is made a plain
    folder name first: never `.`, `..` or hidden, never a path, never the gradebook's own name,
    never longer than a file system allows. `kept` gives some submissions (by index) their name already; no other takes it or `taken`."""
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
    return f"{name}_" if name.lower() in CLASS_FILES else name


def grade(paths: list[Path], template: runner.GradingRun, out_dir: Path | None, *, jobs: int = 1,
          resume: bool = False, limit_s: float = runner.RUN_LIMIT_S, on_done=None) -> list[Entry]:
    """Grade every submission like `template` (its `impl` and `out_dir` are replaced), `jobs` at a
    time; with `resume`, keep the reports `out_dir` already holds, each for the submission whose
    path it records."""
    resumed = _reports_on_disk(out_dir, paths) if resume and out_dir is not None else _OnDisk({}, {}, set())
    names = unique_names(paths, kept=resumed.names, taken=resumed.others)
    entries = [Entry(name, str(path), resumed.reports.get(index)) for index, (name, path) in enumerate(zip(names, paths))]
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="grader-unpacked-") as unpacked:
        pending, runs = [], []
        for index, entry in enumerate(entries):
            if entry.report is not None:
                continue
            # each archive in a folder of its own, named by its place in the batch, not by the learner
            tree, refused = _tree(entry, Path(unpacked) / str(index))
            if tree is None:
                entry.report = ScoreReport.failed(refused[0], {"path": entry.path})
                _save(entry, out_dir)
                continue
            pending.append((entry, refused))
            runs.append(replace(template, impl=tree, out_dir=out_dir / entry.name if out_dir else None))
        by_run = {id(run): item for run, item in zip(runs, pending)}

        def finished(run, report):
            entry, refused = by_run[id(run)]
            report.problems.extend(f"refused from the archive: {why}" for why in refused)
            report.submission["path"] = entry.path
            with lock:
                entry.report = report
                _save(entry, out_dir)
                if out_dir is not None:
                    write_gradebook(out_dir / "summary.csv", entries)
                if on_done:
                    on_done(entry)
        runner.run_many(runs, jobs, on_done=finished, limit_s=limit_s)
    return entries


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
            found.names[index], found.reports[index] = report_path.parent.name, report
        else:
            found.others.add(report_path.parent.name)
    return found


def _same_path(path: str) -> str:
    return os.path.normpath(os.path.abspath(path)) if path else ""


def _tree(entry: Entry, unpack_into: Path) -> tuple[Path | None, list[str]]:
    """The folder to grade, and what was refused on the way (with the reason when nothing is left)."""
    source = Path(entry.path)
    if source.is_dir():
        return source, []
    try:
        result = archives.unpack(source, unpack_into)
    except (ValueError, OSError) as exc:
        return None, [str(exc)]
    return result.root, result.refused


def _existing(path: Path) -> ScoreReport | None:
    try:
        return read_report(path)
    except ReportError:
        return None


def _save(entry: Entry, out_dir: Path | None) -> None:
    """Write the entry's report now (atomically), so a killed batch keeps it; a failure to
    write becomes a problem of that report, never a lost grade."""
    if out_dir is None:
        return
    try:
        write_report(entry.report, out_dir / entry.name / REPORT_NAME)
    except OSError as exc:
        entry.report.problems.append(f"the score report could not be written: {exc}")

