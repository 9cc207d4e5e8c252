"""`nbgrader autograde` of N submissions of every exercise against `grader grade --jobs 2` of the
same N submissions, on the same machine, in one run. A benchmark, not a test: it prints figures
and asserts nothing (machines are noisy).

    python benchmarks/nbgrader.py                          # 2 submissions of every exercise
    python benchmarks/nbgrader.py --submissions 4 --tasks 01 04

Submissions alternate between the reference and a mutant of it (the first of each task's
variants.py), as notebooks in nbgrader's `submitted/` and as module trees for `grader grade`.
Both tools run as the instructor runs them, in a subprocess; the memory figures are the peak
resident memory of that process and all its descendants (kernels, grading processes, workers),
sampled every 0.1 s, summed and per process.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.course import COURSE
from grader.delivery.nbgrader import submission_notebook, write_course
from grader.delivery.notebook import read_notebook
from grader.running.variants import REFERENCE, reference_source, variants_of

PAGE = os.sysconf("SC_PAGE_SIZE")
# nbgrader runs `alembic` and the kernel's `python` from the environment it is installed in.
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def process_tree_rss(root: int) -> tuple[int, int]:
    """(sum, largest) resident bytes of `root` and its descendants, from /proc."""
    parents, rss = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text().split()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        rss[int(entry.name)] = int(statm[1]) * PAGE
    tree, frontier = {root}, [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier and pid not in tree]
        tree.update(children)
        frontier = children
    sizes = [rss.get(pid, 0) for pid in tree]
    return sum(sizes), max(sizes, default=0)


def measured(command: list[str], cwd: Path) -> dict:
    """Run `command`; its wall time and the peak memory of its process tree."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = {"sum": 0, "largest": 0}

    def sample():
        while process.poll() is None:
            total, largest = process_tree_rss(process.pid)
            peak["sum"], peak["largest"] = max(peak["sum"], total), max(peak["largest"], largest)
            time.sleep(0.1)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    sampler.join()
    if process.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{output[-3000:]}")
    return {"seconds": time.perf_counter() - start, **peak}


def row(label: str, figures: dict, note: str = "") -> None:
    print(f"  {label:<46} {figures['seconds']:8.1f} s   peak {figures['sum'] / 2**20:7.0f} MB in all, "
          f"{figures['largest'] / 2**20:6.0f} MB largest process  {note}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=2, help="submissions per exercise (default 2)")
    parser.add_argument("--tasks", nargs="*", default=[])
    args = parser.parse_args()
    tasks = [COURSE.task_named(t) for t in args.tasks] or list(COURSE.tasks())
    python = sys.executable

    with tempfile.TemporaryDirectory(prefix="nbgrader-benchmark-") as scratch:
        course, trees = Path(scratch) / "course", Path(scratch) / "modules"
        print(f"{args.submissions} submission(s) of {len(tasks)} exercise(s); preparing the course")
        write_course(course, tasks)
        for task in tasks:
            measured([python, "-m", "nbgrader", "generate_assignment", task.name], course)
            released = read_notebook(course / "release" / task.name / f"{task.name}.ipynb")
            mutant = next(v for v in variants_of(task) if v.kind == "mutant" and v.base == REFERENCE)
            for i in range(args.submissions):
                module = reference_source(task) if i % 2 == 0 else mutant.apply(reference_source(task))
                folder = course / "submitted" / f"student{i:02d}" / task.name
                folder.mkdir(parents=True)
                (folder / f"{task.name}.ipynb").write_text(json.dumps(submission_notebook(released, task, module)))
                (trees / f"student{i:02d}" / task.name).mkdir(parents=True)
                (trees / f"student{i:02d}" / task.name / f"{task.module}.py").write_text(module, encoding="utf-8")

        print("nbgrader autograde (one kernel per notebook; its first test cell grades the module):")
        autograde = {"seconds": 0.0, "sum": 0, "largest": 0}
        for task in tasks:
            figures = measured([python, "-m", "nbgrader", "autograde", task.name], course)
            row(task.name, figures)
            autograde = {"seconds": autograde["seconds"] + figures["seconds"],
                         "sum": max(autograde["sum"], figures["sum"]),
                         "largest": max(autograde["largest"], figures["largest"])}
        row("all exercises", autograde)

        print("grader grade --jobs 2 (the same modules):")
        students = sorted(p for p in trees.iterdir())
        grade = measured([python, "-m", "grader.cli", "grade", *map(str, students), "--tasks",
                          *[t.name for t in tasks], "--jobs", "2", "--out-dir", str(Path(scratch) / "grading")],
                         COURSE.root)
        row("all exercises", grade)

        notebooks = args.submissions * len(tasks)
        print("Per submission (one exercise of one learner):")
        print(f"  nbgrader autograde                             {autograde['seconds'] / notebooks:8.1f} s")
        print(f"  grader grade --jobs 2                          {grade['seconds'] / notebooks:8.1f} s")
        print(f"  nbgrader / grader                              {autograde['seconds'] / grade['seconds']:8.2f} x")
        _same_scores(course, Path(scratch) / "grading" / "summary.csv", tasks)


def _same_scores(course: Path, summary: Path, tasks) -> None:
    """A benchmark of two tools that disagree would measure nothing: say whether they agree."""
    subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=course, env=ENV, capture_output=True, check=True)
    with open(course / "grades.csv", newline="") as f:
        theirs = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(f)}
    with open(summary, newline="") as f:
        ours = {(r["submission"], t.name): float(r[t.name]) for r in csv.DictReader(f) for t in tasks}
    differ = {key: (ours[key], theirs.get(key)) for key in ours if theirs.get(key) != ours[key]}
    print("Scores: " + ("identical in both tools" if not differ else f"DIFFER (grader, nbgrader): {differ}"))


if __name__ == "__main__":
    main()
