"""The warm loop against its budget (design notes: <= 2 s from saving the module to the result once
the libraries are imported). A benchmark, not a test: it prints numbers and asserts nothing.

For each exercise, `grader watch NN` runs on a copy of the stub; once its first screen is up, the
reference is written over the stub and the time from that write to the reference's full score on
the screen is taken (then the stub again, and so on, `--saves` times). Each save comes a moment
after the screen before it (`--read`, 2 s by default), as a person reads a result before saving
again: the watcher forks the next check's children in that moment. Beside it: the time a cold
`pytest exercises/NN` takes on the same reference, and `grader check NN` on the stub against the
time its tests took (its own summary line): what a check costs beyond its tests.

    python benchmarks/watch.py                   # every exercise
    python benchmarks/watch.py --tasks 01 --saves 5
"""
import argparse
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.course import COURSE

STARTUP_LIMIT_S = 300
CHECK_LIMIT_S = 120
SCREEN = re.compile(r"check (\d+) at [\d:]+, ([\d.]+) s: ([\d.]+) / ([\d.]+) points")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "GRADER_PROGRESS": "off", "COLUMNS": "200"}


class WatchProcess:
    """`grader watch` with its screen read line by line (no terminal: rich prints, never clears)."""

    def __init__(self, task, impl: Path):
        grader = Path(sys.executable).with_name("grader")
        self.process = subprocess.Popen([str(grader), "watch", task.name[:2], "--impl", str(impl)], cwd=COURSE.root,
                                        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.screens: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            found = SCREEN.search(line)
            if found:
                self.screens.put((time.perf_counter(), int(found[1]), float(found[2]), float(found[3]),
                                  float(found[4])))

    def next_screen(self, limit_s: float):
        return self.screens.get(timeout=limit_s)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def time_saves(task, saves: int, read_s: float) -> tuple[float, list[float], list[float]]:
    """(seconds to the first screen, write-to-screen seconds of each save of the reference, the
    check's own seconds as the screen gives them)."""
    stub = (COURSE.exercises / task.name / f"{task.module}.py").read_text(encoding="utf-8")
    reference = task.reference_module.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="watch-bench-") as tmp:
        module = Path(tmp) / task.name / f"{task.module}.py"
        module.parent.mkdir()
        module.write_text(stub, encoding="utf-8")
        started = time.perf_counter()
        watcher = WatchProcess(task, Path(tmp))
        try:
            first = watcher.next_screen(STARTUP_LIMIT_S)[0] - started
            to_screen, in_check = [], []
            for _ in range(saves):
                time.sleep(read_s)
                written = time.perf_counter()
                module.write_text(reference, encoding="utf-8")
                shown, _, check_s, points, max_points = watcher.next_screen(CHECK_LIMIT_S)
                if points != max_points:
                    raise SystemExit(f"{task.name}: the reference scored {points:g} / {max_points:g} on the screen")
                to_screen.append(shown - written)
                in_check.append(check_s)
                time.sleep(read_s)
                module.write_text(stub, encoding="utf-8")
                watcher.next_screen(CHECK_LIMIT_S)
        finally:
            watcher.stop()
    return first, to_screen, in_check


def cold_pytest(task) -> float:
    with tempfile.TemporaryDirectory(prefix="watch-bench-") as tmp:
        shutil.copytree(COURSE.solutions / task.name, Path(tmp) / task.name)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", str(task.exercise_dir), "--impl", tmp, "-q",
                        "-p", "no:cacheprovider"], cwd=COURSE.root, env=ENV, capture_output=True, check=False)
        return time.perf_counter() - start


def stub_check(task) -> tuple[float, float]:
    """(wall seconds, seconds its tests took by pytest's summary) of `grader check NN` on the stub."""
    grader = Path(sys.executable).with_name("grader")
    start = time.perf_counter()
    done = subprocess.run([str(grader), "check", task.name[:2]], cwd=COURSE.root, env=ENV, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - start
    tests = re.findall(r" in ([\d.]+)s", done.stdout)
    return wall, float(tests[-1]) if tests else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=[], help="exercises to time (default: every one)")
    parser.add_argument("--saves", type=int, default=3, help="saves of the reference per exercise (default 3)")
    parser.add_argument("--read", type=float, default=2.0, metavar="SECONDS",
                        help="pause between a screen and the next save (default 2)")
    args = parser.parse_args()
    print(f"{'exercise':<22} {'first screen':>13} {'save -> result':>24} {'check alone':>12} {'cold pytest':>12} "
          f"{'grader check, stub':>20}")
    print(f"{'':<22} {'':>13} {'median (min-max)':>24} {'median':>12} {'':>12} {'(its tests)':>20}")
    for task in [COURSE.task_named(t) for t in args.tasks] or list(COURSE.tasks()):
        first, to_screen, in_check = time_saves(task, args.saves, args.read)
        cold = cold_pytest(task)
        check, tests = stub_check(task)
        spread = f"{statistics.median(to_screen):.2f} s ({min(to_screen):.2f}-{max(to_screen):.2f})"
        print(f"{task.name:<22} {first:>11.1f} s {spread:>24} {statistics.median(in_check):>10.2f} s {cold:>10.2f} s "
              f"{f'{check:.2f} s ({tests:.2f} s)':>20}", flush=True)
    print("budget: save -> result <= 2 s once the libraries are imported (first screen: imports included)")


if __name__ == "__main__":
    main()
