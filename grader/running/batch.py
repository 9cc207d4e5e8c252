"""Grading a batch of submissions so that nothing is lost: each report is written as soon as its
grading ends, `summary.csv` is rewritten from the reports on disk after each one, and a batch
that was killed is finished by running it again with `resume`: reports already on disk are kept,
the missing ones graded.

Submissions are folders, or zip files unpacked with care (`grader.running.archives`).
"""
from __future__ import annotations

import re
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from grader.reports.report import REPORT_NAME, ReportError, ScoreReport, read_report, write_report
from grader.reports.summary import CLASS_FILES, Entry, write_gradebook
from grader.running import archives, runner

_UNSAFE = re.compile(r"[^\w.-]+")     # letters (any script), digits, `_`, `.` and `-` are kept


def unique_names(paths: list[Path]) -> list[str]:
    """Output folder names: the submission's own name (a zip's without `.zip`), numbered on clashes.
    A name is learner data (an upload's file name), so it is made a plain folder name first:
    never `.`, `..` or hidden, never a path, never the gradebook's own name."""
    names, seen = [], {}
    for path in paths:
        base = folder_name(path.stem if path.suffix.lower() == ".zip" else path.resolve().name)
        seen[base.lower()] = seen.get(base.lower(), 0) + 1
        names.append(base if seen[base.lower()] == 1 else f"{base}-{seen[base.lower()]}")
    return names


def folder_name(raw: str) -> str:
    name = _UNSAFE.sub("_", raw).lstrip(".-") or "submission"
    return f"{name}_" if name.lower() in CLASS_FILES else name


def grade(paths: list[Path], template: runner.GradingRun, out_dir: Path | None, *, jobs: int = 1,
          resume: bool = False, limit_s: float = runner.RUN_LIMIT_S, on_done=None) -> list[Entry]:
    """Grade every submission like `template` (its `impl` and `out_dir` are replaced), `jobs` at a
    time; with `resume`, keep the reports `out_dir` already holds."""
    entries = [Entry(name, str(path), None) for name, path in zip(unique_names(paths), paths)]
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="grader-unpacked-") as unpacked:
        pending, runs = [], []
        for entry in entries:
            if resume and out_dir is not None:
                entry.report = _existing(out_dir / entry.name / REPORT_NAME)
                if entry.report is not None:
                    continue
            tree, refused = _tree(entry, Path(unpacked))
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


def _tree(entry: Entry, unpacked: Path) -> tuple[Path | None, list[str]]:
    """The folder to grade, and what was refused on the way (with the reason when nothing is left)."""
    source = Path(entry.path)
    if source.is_dir():
        return source, []
    try:
        result = archives.unpack(source, unpacked / entry.name)
    except ValueError as exc:
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

