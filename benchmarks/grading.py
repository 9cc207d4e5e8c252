"""Grading figures against the budgets in the design notes. A benchmark, not a test: it prints
numbers and asserts nothing (machines are noisy).

    python benchmarks/grading.py                 # every task
    python benchmarks/grading.py --tasks 01 02   # some tasks
    python benchmarks/grading.py --batch 4       # also batch throughput with 1 vs 2 jobs
"""
import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.core import sandbox
from grader.core.submission import BACKENDS, BackendContext
from grader.core.worker_process import WorkerSpec
from grader.running import runner
from grader.tasks import COURSE_ROOT, SOLUTIONS, all_tasks, locate_module, task_named


def wall(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def plain_pytest(*paths, impl=SOLUTIONS):
    command = [sys.executable, "-m", "pytest", *map(str, paths), "--impl", str(impl), "-q", "-p", "no:cacheprovider"]
    return subprocess.run(command, cwd=COURSE_ROOT, capture_output=True, text=True)


def worker_start_seconds(task, sandboxed, restarts=5):
    """(first start: the task's zygote importing its libraries, then a worker; median of the
    restarts that follow, as after a crash or a time-out: a fork of the zygote)."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = WorkerSpec(sandboxed=sandboxed, writable_dirs=(Path(tmp),), probe_files=tuple(task.probe_files()))
        backend = BACKENDS["worker"](locate_module(SOLUTIONS, task), BackendContext(SOLUTIONS, Path(tmp) / "log", spec))
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
    args = parser.parse_args()
    tasks = [task_named(t) for t in args.tasks] or list(all_tasks())

    available, why = sandbox.availability()
    isolation, isolation_name = ("required", "sandboxed worker") if available else ("none", "worker, no sandbox")
    if not available:
        print(f"No sandbox here ({why}): official grading figures are for an unsandboxed worker.")
    print("Per task (reference solution):")
    for task in tasks:
        seconds, _ = wall(lambda: plain_pytest(task.exercise_dir))
        row(f"{task.name}: visible suite, plain pytest", seconds, "(budget 10 s)")
        plain, _ = wall(lambda: plain_pytest(*task.suite_paths(hidden=True)))
        row(f"{task.name}: visible + hidden, plain pytest in-process", plain)
        graded, _ = wall(lambda: runner.run(runner.GradingRun(SOLUTIONS, [task], isolation=isolation)))
        row(f"{task.name}: visible + hidden, graded ({isolation_name})", graded, f"(x{graded / plain:.2f} of plain pytest)")
        inproc, _ = wall(lambda: runner.run(runner.GradingRun(SOLUTIONS, [task], backend="inprocess")))
        row(f"{task.name}: visible + hidden, graded in-process", inproc,
            f"(isolated / in-process = {graded / inproc:.2f})")
        first, restart = worker_start_seconds(task, sandboxed=isolation == "required")
        row(f"{task.name}: first worker start (zygote + worker, {isolation_name})", first)
        row(f"{task.name}: worker restart (median of 5, {isolation_name})", restart, "(budget 1.0 s)")

    print("All tasks:")
    seconds, report = wall(lambda: runner.run(runner.GradingRun(SOLUTIONS, tasks, isolation=isolation)))
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    row(f"full hidden grading, {len(tasks)} tasks, {report.total.percent:.0f}% ({isolation_name})", seconds,
        "(budget 90 s)")
    print(f"  {'peak RSS of one grading process':<58} {peak_mb:8.0f} MB  (budget 4096 MB)")
    if available:
        bare, _ = wall(lambda: runner.run(runner.GradingRun(SOLUTIONS, tasks, isolation="none")))
        row(f"full hidden grading, {len(tasks)} tasks (worker, no sandbox)", bare,
            f"(sandboxed / unsandboxed = {seconds / bare:.2f}, budget 1.3)")

    if args.batch:
        print(f"Batch of {args.batch} copies of the reference:")
        with tempfile.TemporaryDirectory() as tmp:
            copies = [shutil.copytree(SOLUTIONS, Path(tmp) / f"s{i}") for i in range(args.batch)]
            jobs = [runner.GradingRun(Path(c), tasks, isolation=isolation) for c in copies]
            one, _ = wall(lambda: runner.run_many(jobs, 1))
            two, _ = wall(lambda: runner.run_many(jobs, 2))
        row("--jobs 1", one)
        row("--jobs 2", two, f"(throughput x{one / two:.2f}, budget 1.7)")


if __name__ == "__main__":
    main()
