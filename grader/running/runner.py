"""Grading runs: one pytest session per submission, its score report read back.

Each run is a `pytest.main` session on the course's own suites and config, pointed at the
submission with `--impl`; so a grading can neither inherit results from another nor be changed
by files in the submitted tree. Sessions run in a pool of reused pytest processes
(`grader.running.pool`), `jobs` at a time.
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.running.pool import PytestPool
from grader.reports.report import ReportError, ScoreReport, read_report
from grader.tasks import COURSE_ROOT, Task

RUN_LIMIT_S = 20 * 60          # one submission, all tasks: far above the 90 s budget, a backstop only


@dataclass
class GradingRun:
    impl: Path
    tasks: list[Task]
    hidden: bool = True
    backend: str = "worker"
    isolation: str = "auto"              # "auto", "required" or "none" (see grader.core.plugin)
    seed: int = 0
    out_dir: Path | None = None          # keeps score_report.json, pytest.log and worker logs
    extra_args: list[str] = field(default_factory=list)

    def args(self, out_dir: Path, scratch: Path) -> list[str]:
        """pytest's arguments: reports and logs go to `out_dir`, which a sandboxed worker never
        sees; pytest's temporary folders, which it does see, to `scratch`."""
        paths = [str(p) for task in self.tasks for p in task.suite_paths(self.hidden)]
        return [*paths, "--impl", str(Path(self.impl).resolve()), "--backend", self.backend,
                "--isolation", self.isolation, "--basetemp", str(scratch),
                "--grader-seed", str(self.seed), "--score-report", str(out_dir / "score_report.json"),
                "--worker-logs", str(out_dir / "logs"), "--rootdir", str(COURSE_ROOT),
                "-c", str(COURSE_ROOT / "pyproject.toml"), "-p", "no:cacheprovider",
                "-q", "--tb=no", "-rN", "--no-header",
                # the pool process imported grader before pytest could mark the plugin for rewriting
                "-W", "ignore::pytest.PytestAssertRewriteWarning", *self.extra_args]


def run(job: GradingRun, stream: bool = False) -> ScoreReport:
    """Grade one submission; with `stream`, echo pytest's progress as it goes."""
    return run_many([job], 1, stream=stream)[0]


def run_many(jobs: list[GradingRun], workers: int, on_done=None, stream: bool = False,
             limit_s: float = RUN_LIMIT_S) -> list[ScoreReport]:
    """Grade several submissions, `workers` at a time, each within `limit_s` of wall time;
    reports come back in input order. A run that produced no report still returns one, empty,
    with the reason in `problems`. `on_done(job, report)` is called as each one ends."""
    with tempfile.TemporaryDirectory(prefix="grader-run-") as scratch:
        # absolute: the pool's processes work in the course root, not where the caller stands
        out_dirs = [Path(job.out_dir).absolute() if job.out_dir else Path(scratch) / "out" / str(i)
                    for i, job in enumerate(jobs)]
        for out_dir in out_dirs:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "score_report.json").unlink(missing_ok=True)
        (Path(scratch) / "tmp").mkdir()
        pool_jobs = [(job.args(out_dir, Path(scratch) / "tmp" / str(i)), out_dir / "pytest.log")
                     for i, (job, out_dir) in enumerate(zip(jobs, out_dirs))]
        reports: list[ScoreReport | None] = [None] * len(jobs)

        def finished(index: int, code) -> None:
            reports[index] = _report(out_dirs[index], code, keep_log=jobs[index].out_dir is not None)
            if on_done:
                on_done(jobs[index], reports[index])
        PytestPool(workers).run(pool_jobs, limit_s, stream=_write_through if stream else None, on_done=finished)
        return reports


_EXIT_MEANINGS = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected",
                  "died": "the grading process died", "timeout": "ran past the submission's time limit"}


def _report(out_dir: Path, code, keep_log: bool) -> ScoreReport:
    path = out_dir / "score_report.json"
    log_hint = f"; see {out_dir / 'pytest.log'}" if keep_log else ""
    if path.exists():
        try:
            report = read_report(path)
        except ReportError as exc:
            return ScoreReport.failed(f"the score report could not be read: {exc}{log_hint}")
        if code not in (0, 1) and not report.stopped_early:
            report.problems.append(f"pytest exited with code {code} ({_EXIT_MEANINGS.get(code, 'unknown')}){log_hint}")
        return report
    return ScoreReport.failed(f"grading ended without a score report ({_EXIT_MEANINGS.get(code, code)}){log_hint}")


def _write_through(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
