"""Grading runs: one pytest session per task of a submission, their reports combined into one.

Each session is a `pytest.main` run on the course's own suites and config for one task,
pointed at the submission with `--impl`; so a grading can neither inherit results from another
nor be changed by files in the submitted tree. Sessions run in a pool of reused pytest processes
(`grader.running.pool`), each session in a child of its pool process, `jobs` submissions at a time.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import Task
from grader.isolation import levels
from grader.isolation.cgroups import memory_budget
from grader.isolation.sandbox import Limits, grading_process_memory_mb, shared_temp_root
from grader.processes.slots import SharedSlots
from grader.running.pool import DIED, SESSION_DIED, TIMED_OUT, PytestPool
from grader.schema.record import new_run_id
from grader.schema.report import REPORT_NAME, Isolation, ReportError, ScoreReport, read_report, write_report
from grader.session import seeds
from grader.spec import GradingSpec

RUN_LIMIT_S = 20 * 60          # one submission, all tasks: far above the 90 s budget, a backstop only
TREE_LIMIT_S = 10 * 60         # one tree of one task in a fork of its task's session: a backstop only
PRIVATE, TRAVERSE_ONLY = 0o700, 0o711      # folders of the grading: its owner's; entered but not listed
PARTS = "parts"                # below a run's out_dir: each task's session's report, combined when all are in


@dataclass
class GradingRun:
    impl: Path
    tasks: list[Task]
    hidden: bool = True
    backend: str = "worker"
    # Where learner code runs, resolved where the grading starts, on the machine that runs it
    # (grader.isolation.levels.resolve); None: the strongest level this machine gives.
    isolation: Isolation | None = None
    limits: Limits = field(default_factory=Limits.from_env)
    seed: int | None = None              # None: drawn from the course secret and the submission (grader.session.seeds)
    out_dir: Path | None = None          # keeps score_report.json, pytest.log and worker logs
    extra_args: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.isolation is None:
            self.isolation = levels.resolve("auto", self.backend, self.limits)

    def sessions(self, out_dir: Path, scratch: Path, run_id: str) -> list[list[str]]:
        """pytest's arguments, one session per task, each with its spec: reports and logs go to
        `out_dir`, which a sandboxed worker never sees; pytest's temporary folders, which it does
        see, to `scratch`."""
        return [self._args(task, out_dir, scratch / task.name, run_id) for task in self.tasks]

    def spec(self, task: Task, out_dir: Path, run_id: str) -> GradingSpec:
        """The spec of the session that grades `task`."""
        assert self.isolation is not None, "resolved on construction"
        seed, seed_from = (self.seed, seeds.FORCED) if self.seed is not None else \
            (seeds.submission_seed(Path(self.impl), self.tasks), seeds.FROM_SUBMISSION)
        return GradingSpec(course=task.course, impl=Path(self.impl).resolve(), backend=self.backend,
                           isolation=self.isolation, limits=self.limits, seed=seed, seed_from=seed_from,
                           run_id=run_id, score_report=out_dir / PARTS / f"{task.name}.json",
                           worker_logs=out_dir / "logs")

    def _args(self, task: Task, out_dir: Path, scratch: Path, run_id: str) -> list[str]:
        paths = [str(p) for p in task.suite_paths(self.hidden)]
        (out_dir / PARTS).mkdir(mode=PRIVATE, parents=True, exist_ok=True)
        spec = self.spec(task, out_dir, run_id).write(out_dir / PARTS / f"{task.name}.spec.json")
        return [*paths, "--grading-spec", str(spec), "--basetemp", str(scratch), *task.course.session_options(),
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
    with tempfile.TemporaryDirectory(prefix="grader-run-", dir=shared_temp_root()) as scratch:
        # absolute: the pool's processes work in the course root, not where the caller stands
        out_dirs = [Path(job.out_dir).absolute() if job.out_dir else Path(scratch) / "out" / str(i)
                    for i, job in enumerate(jobs)]
        for out_dir in out_dirs:
            out_dir.mkdir(mode=PRIVATE, parents=True, exist_ok=True)
            (out_dir / REPORT_NAME).unlink(missing_ok=True)
            shutil.rmtree(out_dir / PARTS, ignore_errors=True)
        temps = _pytest_temps(Path(scratch), len(jobs))
        pool_jobs = [(job.sessions(out_dir, temp, new_run_id()), out_dir / "pytest.log")
                     for job, out_dir, temp in zip(jobs, out_dirs, temps)]
        reports: dict[int, ScoreReport] = {}

        def finished(index: int, codes) -> None:
            reports[index] = combine(jobs[index], out_dirs[index], codes, keep_log=jobs[index].out_dir is not None)
            if on_done:
                on_done(jobs[index], reports[index])
        sharing = max(1, min(workers, len(jobs)))
        PytestPool(workers, session_memory_mb=grading_process_memory_mb(sharing)).run(
            pool_jobs, limit_s, stream=_write_through if stream else None, on_done=finished)
        return [reports.get(i) or ScoreReport.failed("the grading pool ended without a result for it",
                                                     {"path": str(job.impl)}) for i, job in enumerate(jobs)]


@dataclass
class ForkedGradings:
    """Trees of one task graded in forks of one collected session (`grader.session.variant_forks`):
    the audit's reference, stub, mutants and alternatives. Each tree comes with the concept its
    grading stops at, or None to run the whole suite."""
    task: Task
    trees: list[tuple[Path, str | None]]
    seed: int
    backend: str = "inprocess"
    limit_s: float = TREE_LIMIT_S       # each tree's
    warm: bool = False                  # the first tree is the course's reference: graded in the session itself first


def run_forked(groups: list[ForkedGradings], workers: int) -> list[list[ScoreReport]]:
    """Grade every group's trees, `workers` trees at once: as many groups' sessions at a time as
    there are workers, the largest groups first, each forking a tree whenever one of the
    `workers` slots they share is free (while one session collects another's forks run, and the
    last session standing uses every slot); per group, its trees' reports in order. A tree whose
    grading left no report gets one that says why."""
    sessions = max(1, min(workers, len(groups)))
    with tempfile.TemporaryDirectory(prefix="grader-run-", dir=shared_temp_root()) as scratch:
        temps = _pytest_temps(Path(scratch), len(groups))
        (Path(scratch) / "slots").mkdir(mode=PRIVATE)
        slots = SharedSlots.create(Path(scratch) / "slots", workers)
        pool_jobs, report_paths = [], []
        for index, (group, temp) in enumerate(zip(groups, temps)):
            out_dir = Path(scratch) / "out" / str(index)
            (out_dir / "trees").mkdir(mode=PRIVATE, parents=True)
            reports = [out_dir / "trees" / f"{i}.json" for i in range(len(group.trees))]
            plan = out_dir / "plan.json"
            trees = [{"impl": str(tree), "stop_on_concept": concept, "report": str(report), "limit_s": group.limit_s,
                      "basetemp": str(temp / f"tree-{i}"), "workdir": str(temp / f"tree-{i}-cwd")}
                     for i, ((tree, concept), report) in enumerate(zip(group.trees, reports))]
            plan.write_text(json.dumps({"slots": slots.to_json(), "warm": group.warm, "trees": trees}), encoding="utf-8")
            run = GradingRun(group.trees[0][0], [group.task], backend=group.backend, seed=group.seed,
                             extra_args=["-p", "grader.session.variant_forks", "--variant-plan", str(plan)])
            pool_jobs.append((run.sessions(out_dir, temp, new_run_id()), out_dir / "pytest.log"))
            report_paths.append(reports)
        largest_first = sorted(range(len(groups)), key=lambda i: -len(groups[i].trees))
        limit_s = max(group.limit_s * len(group.trees) for group in groups)
        ran = PytestPool(sessions, concurrent=workers).run([pool_jobs[i] for i in largest_first], limit_s)
        codes = [code for _, code in sorted(zip(largest_first, ran))]
        return [[_forked_report(path, tree, code) for path, (tree, _) in zip(paths, group.trees)]
                for paths, group, code in zip(report_paths, groups, codes)]


def _forked_report(path: Path, tree: Path, code) -> ScoreReport:
    found = _part(path, "")
    if found is not None:
        return found
    ending = _meaning(code[0] if isinstance(code, list) else code)
    return ScoreReport.failed(f"the grading ended without a score report ({ending})", {"path": str(tree)})


def _pytest_temps(scratch: Path, count: int) -> list[Path]:
    """A folder for each grading's pytest temporary folders. The way to them may be entered, not
    listed, by a worker of another uid (grader.isolation.uid_jail); everything else in `scratch`, the
    reports included, is its owner's."""
    os.chmod(scratch, TRAVERSE_ONLY)
    (scratch / "tmp").mkdir(mode=TRAVERSE_ONLY)
    temps = [scratch / "tmp" / str(i) for i in range(count)]
    for temp in temps:
        temp.mkdir(mode=TRAVERSE_ONLY)
    return temps


_EXIT_MEANINGS = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected",
                  DIED: "the grading process died", TIMED_OUT: "ran past the submission's time limit"}


def combine(job: GradingRun, out_dir: Path, codes, keep_log: bool) -> ScoreReport:
    """The submission's report from its tasks' parts, written as `out_dir/score_report.json`.
    Whatever ended a session is said in `problems`; a task whose session left no report at all
    is listed there too, so nothing about it is silently lost."""
    log_hint = f"; see {out_dir / 'pytest.log'}" if keep_log else ""
    whole = None if isinstance(codes, list) else codes        # the pool process itself died or timed out
    parts = []
    for index, task in enumerate(job.tasks):
        code = whole or codes[index]
        part = _part(out_dir / PARTS / f"{task.name}.json", log_hint)
        if part is None:
            parts.append(ScoreReport.failed(f"{task.name}: grading ended without a score report "
                                            f"({_meaning(code)}){log_hint}"))
            continue
        if whole is None and code not in (0, 1) and not part.stopped_early:
            part.problems.append(f"{task.name}: pytest exited with code {code} ({_meaning(code)}){log_hint}")
        parts.append(part)
    report = ScoreReport.combined(parts)
    if whole is not None:
        report.problems.append(f"{_meaning(whole)}{log_hint}")
    write_report(report, out_dir / REPORT_NAME)
    shutil.rmtree(out_dir / PARTS, ignore_errors=True)
    return report


def _part(path: Path, log_hint: str) -> ScoreReport | None:
    if not path.exists():
        return None
    try:
        return read_report(path)
    except ReportError as exc:
        return ScoreReport.failed(f"the score report could not be read: {exc}{log_hint}")


def _meaning(code) -> str:
    if isinstance(code, str) and code.startswith(SESSION_DIED):
        budget = memory_budget()
        memory = f"; the box's memory limit is {budget.limit_bytes >> 20} MB" if budget else ""
        return f"its grading process {code[len(SESSION_DIED) + 2:]}{memory}"
    return _EXIT_MEANINGS.get(code, "unknown")


def _write_through(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
