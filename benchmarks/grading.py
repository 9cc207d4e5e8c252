"""Grading figures against the budgets in the design notes. A benchmark, not a test: it prints
numbers and asserts nothing (machines are noisy).

    python benchmarks/grading.py                 # every task
    python benchmarks/grading.py --tasks 01 02   # some tasks
    python benchmarks/grading.py --batch 6       # also batch throughput with 1 vs 2 jobs, and the
                                                 # same suites' scaling as plain pytest (the machine's)
    python benchmarks/grading.py --batch 6 --batch-only --slurm   # that alone, and the same batch on Slurm
    python benchmarks/grading.py --batch 4 --batch-only --rounds 2   # 1 and 2 jobs in turn, twice
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader.course import COURSE, locate_module
from grader.isolation import sandbox
from grader.isolation.worker_host import WorkerSpec
from grader.running import runner
from grader.running.threads import ONE_THREAD_ENV
from grader.session.submission import BACKENDS, BackendContext


def wall(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def pytest_command(*paths, impl=COURSE.solutions) -> list[str]:
    return [sys.executable, "-m", "pytest", *map(str, paths), "--impl", str(impl), "-q", "-p", "no:cacheprovider"]


def plain_pytest(*paths, impl=COURSE.solutions):
    return subprocess.run(pytest_command(*paths, impl=impl), cwd=COURSE.root, capture_output=True, text=True)


def worker_start_seconds(task, sandboxed, restarts=5):
    """(first start: the task's zygote importing its libraries, then a worker; median of the
    restarts that follow, as after a crash or a time-out: a fork of the zygote)."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = WorkerSpec(level="sandbox" if sandboxed else "none", writable_dirs=(Path(tmp),),
                          probe_files=tuple(task.probe_files()))
        context = BackendContext(COURSE.solutions, Path(tmp) / "log", spec)
        backend = BACKENDS["worker"](locate_module(COURSE.solutions, task), context)
        backend.start(time.monotonic() + 120)
        for _ in range(restarts):
            backend.discard_worker()
            backend.start(time.monotonic() + 120)
        backend.close()
    return backend.startup_seconds[0], statistics.median(backend.startup_seconds[1:])


def row(label, seconds, budget=""):
    print(f"  {label:<58} {seconds:8.2f} s  {budget}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=[])
    parser.add_argument("--batch", type=int, default=0, help="submissions for the --jobs scaling figure")
    parser.add_argument("--batch-only", action="store_true", help="skip the per-task and whole-grading figures")
    parser.add_argument("--rounds", type=int, default=1, help="measure --jobs 1 and --jobs 2 this many times, in turn")
    parser.add_argument("--slurm", action="store_true",
                        help="also grade the batch with --executor slurm (the cluster of .ci/slurm-up, or any "
                             "whose commands are on PATH), two array tasks at once")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    tasks = [COURSE.task_named(t) for t in args.tasks] or list(COURSE.tasks())

    available, why = sandbox.availability()
    isolation, isolation_name = ("required", "sandboxed worker") if available else ("none", "worker, no sandbox")
    if not available:
        print(f"No sandbox here ({why}): official grading figures are for an unsandboxed worker.")
    if not args.batch_only:
        single_figures(tasks, isolation, isolation_name, available)
    if args.batch:
        batch_section(tasks, isolation, args.batch, args.slurm, args.rounds)


def single_figures(tasks, isolation, isolation_name, available):
    print("Per task (reference solution):")
    for task in tasks:
        seconds, _ = wall(lambda task=task: plain_pytest(task.exercise_dir))
        row(f"{task.name}: visible suite, plain pytest", seconds, "(budget 10 s)")
        plain, _ = wall(lambda task=task: plain_pytest(*task.suite_paths(hidden=True)))
        row(f"{task.name}: visible + hidden, plain pytest in-process", plain)
        graded, _ = wall(lambda task=task: runner.run(runner.GradingRun(COURSE.solutions, [task], isolation=isolation)))
        row(f"{task.name}: visible + hidden, graded ({isolation_name})", graded, f"(x{graded / plain:.2f} of plain pytest)")
        inproc, _ = wall(lambda task=task: runner.run(runner.GradingRun(COURSE.solutions, [task], backend="inprocess")))
        row(f"{task.name}: visible + hidden, graded in-process", inproc,
            f"(isolated / in-process = {graded / inproc:.2f})")
        first, restart = worker_start_seconds(task, sandboxed=isolation == "required")
        row(f"{task.name}: first worker start (zygote + worker, {isolation_name})", first)
        row(f"{task.name}: worker restart (median of 5, {isolation_name})", restart, "(budget 1.0 s)")

    print("All tasks:")
    seconds, report = wall(lambda: runner.run(runner.GradingRun(COURSE.solutions, tasks, isolation=isolation)))
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    row(f"full hidden grading, {len(tasks)} tasks, {report.total.percent:.0f}% ({isolation_name})", seconds,
        "(budget 90 s)")
    print(f"  {'peak RSS of one grading process':<58} {peak_mb:8.0f} MB  (budget 4096 MB)")
    if available:
        bare, _ = wall(lambda: runner.run(runner.GradingRun(COURSE.solutions, tasks, isolation="none")))
        row(f"full hidden grading, {len(tasks)} tasks (worker, no sandbox)", bare,
            f"(sandboxed / unsandboxed = {seconds / bare:.2f}, budget 1.3)")



def batch_section(tasks, isolation, submissions, slurm, rounds=1):
    """`--jobs 1` then `--jobs 2` on the same copies, `rounds` times (A B A B): a shared machine's
    speed can drift by tens of percent within minutes, so a ratio is only as good as its pair."""
    print(f"Batch of {submissions} copies of the reference:")
    with tempfile.TemporaryDirectory() as tmp:
        copies = [shutil.copytree(COURSE.solutions, Path(tmp) / f"s{i}") for i in range(submissions)]
        jobs = [runner.GradingRun(Path(c), tasks, isolation=isolation) for c in copies]
        ratios = []
        for round_ in range(1, rounds + 1):
            label = f" (round {round_})" if rounds > 1 else ""
            one, two = batch_figures(jobs, 1), batch_figures(jobs, 2)
            ratios.append(one.wall_s / two.wall_s)
            row(f"--jobs 1{label}", one.wall_s, one.cpu_note())
            row(f"--jobs 2{label}", two.wall_s, f"(throughput x{ratios[-1]:.2f}, budget 1.8) {two.cpu_note()}")
            if one.steady_s and two.steady_s:
                row(f"--jobs 1, per submission after the first{label}", one.steady_s)
                row(f"--jobs 2, per submission after each process's first{label}", two.steady_s,
                    f"(steady throughput x{one.steady_s / two.steady_s:.2f})")
        if rounds > 1:
            print(f"  --jobs 2 throughput by round: {', '.join(f'x{r:.2f}' for r in ratios)}; "
                  f"median x{statistics.median(ratios):.2f}")
        same_work_without_the_grader(tasks, statistics.median(ratios))
        if slurm:
            slurm_figures(copies, jobs[0], Path(tmp), two)


@dataclass
class BatchFigures:
    workers: int
    wall_s: float
    cpu_s: float | None           # all the machine's cores together; None where /proc/stat is not there
    steady_s: float | None        # seconds per submission once every process has graded its first one
    submissions: int

    def cpu_note(self) -> str:
        if self.cpu_s is None:
            return ""
        return (f"[machine CPU {self.cpu_s:.0f} s, {self.cpu_s / self.submissions:.1f} s a submission, "
                f"{self.cpu_s / self.wall_s:.2f} cores busy]")


def batch_figures(jobs, workers: int) -> BatchFigures:
    """Grade `jobs` with `workers` pool processes. Each process's first submission also pays its
    start (imports, the suites' oracles), so the steady rate is measured from the moment the
    `workers`-th submission is done."""
    done: list[float] = []
    start = time.perf_counter()
    wall_s, cpu_s, _ = wall_and_cpu(lambda: runner.run_many(
        jobs, workers, on_done=lambda job, report: done.append(time.perf_counter() - start)))
    done.sort()
    steady_s = (done[-1] - done[workers - 1]) / (len(done) - workers) if len(done) > workers else None
    return BatchFigures(workers, wall_s, cpu_s, steady_s, len(jobs))


def same_work_without_the_grader(tasks, graded_ratio: float) -> None:
    """The hidden suites as plain pytest, in one process on one thread, alone and then two at
    once: the scaling the machine itself gives this work (its cores share caches and memory
    bandwidth), the ceiling for the grader's `--jobs 2`."""
    paths = [p for task in tasks for p in task.suite_paths(hidden=True)]
    alone_s, alone_cpu = wall(lambda: cpu_seconds_of([one_thread_pytest(paths)]))
    pair_s, pair_cpu = wall(lambda: cpu_seconds_of([one_thread_pytest(paths) for _ in range(2)]))
    ratio = 2 * alone_s / pair_s
    row("plain pytest of the same suites, one thread, alone", alone_s, f"[CPU {alone_cpu:.1f} s]")
    row("the same, two at once", pair_s,
        f"(throughput x{ratio:.2f}; CPU {pair_cpu / 2:.1f} s each, {pair_cpu / 2 / alone_cpu - 1:+.0%}) "
        f"[--jobs 2 reached {graded_ratio / ratio:.0%} of it]")


def one_thread_pytest(paths) -> subprocess.Popen:
    return subprocess.Popen(pytest_command(*paths), cwd=COURSE.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**ONE_THREAD_ENV, **os.environ})     # as the pool runs its gradings


def cpu_seconds_of(runs: list[subprocess.Popen]) -> float:
    """The CPU time the runs took (each waited for here, with its own resource usage)."""
    total = 0.0
    for run in runs:
        _, status, usage = os.wait4(run.pid, 0)
        run.returncode = os.waitstatus_to_exitcode(status)
        total += usage.ru_utime + usage.ru_stime
    return total


def slurm_figures(copies, template, scratch: Path, local: BatchFigures) -> None:
    """The same submissions as a Slurm job array, two array tasks at once (this machine's two
    cores), against the local pool of two: the scheduler's overhead per submission is the
    difference of the walls over the submissions each of the two lanes grades."""
    from grader.running import batch
    from grader.running.slurm import SlurmExecutor, SlurmOptions
    if shutil.which("sbatch") is None:
        print("  --executor slurm: no sbatch here (start one with .ci/slurm-up)")
        return
    executor = SlurmExecutor(SlurmOptions(folder=scratch / "submitit", max_running=2))
    wall_s, cpu_s, entries = wall_and_cpu(
        lambda: batch.grade([Path(c) for c in copies], template, scratch / "slurm-out", executor=executor))
    figures = BatchFigures(2, wall_s, cpu_s, None, len(copies))
    graded = sum(1 for e in entries if e.report is not None and e.report.complete)
    row("--executor slurm, 2 array tasks at once", wall_s,
        f"({graded}/{len(copies)} complete; x{local.wall_s / wall_s:.2f} of --jobs 2) {figures.cpu_note()}")
    lanes = len(copies) / 2
    row("  scheduler's overhead per submission (wall, against --jobs 2)", (wall_s - local.wall_s) / lanes)


def wall_and_cpu(fn):
    """`wall(fn)` with the machine's CPU time over it (None where /proc/stat is not there)."""
    cpu_before = machine_cpu_seconds()
    seconds, result = wall(fn)
    cpu_after = machine_cpu_seconds()
    return seconds, (cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None), result


def machine_cpu_seconds() -> float | None:
    """CPU time the whole machine has spent busy (every core), from /proc/stat."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return None
    idle = fields[3] + fields[4]           # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
