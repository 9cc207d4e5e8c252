"""`grader audit` timed against an earlier commit of the course, on the same machine and in turn
(A B A B: a shared machine's speed drifts by tens of percent within minutes), with the verdicts of
both compared entry by entry. A benchmark, not a test: it prints numbers and asserts nothing.

    python benchmarks/audit.py --baseline REV                 # every task, one round
    python benchmarks/audit.py --baseline REV --tasks 01 05 --rounds 2

The baseline runs from a temporary git worktree of REV with this environment's interpreter and
libraries (the worktree's own `grader` package shadows the installed one: it is run from there).
Where REV names the pytest plugin otherwise (before a package moved, say), give the interpreter of
an environment installed from REV: `--baseline-python PATH`.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.course import COURSE

AUDIT_LIMIT_S = 3 * 3600


def timed_audit(python: str, root: Path, tasks: list[str], jobs: int, out: Path) -> tuple[float, int]:
    """(wall seconds, exit status) of `grader audit` run by `python` from the course at `root`."""
    start = time.perf_counter()
    done = subprocess.run([python, "-m", "grader.cli", "audit", *tasks, "--jobs", str(jobs), "--json", str(out)],
                          cwd=root, capture_output=True, text=True, timeout=AUDIT_LIMIT_S)
    return time.perf_counter() - start, done.returncode


def verdicts(path: Path) -> dict[tuple[str, str], str]:
    if not path.exists():
        return {}
    return {(audit["task"], entry["name"]): entry["verdict"]
            for audit in json.loads(path.read_text(encoding="utf-8")) for entry in audit["entries"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, metavar="REV", help="the commit to compare with")
    parser.add_argument("--tasks", nargs="*", default=[])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="baseline and current this many times, in turn")
    parser.add_argument("--baseline-python", default=sys.executable, metavar="PATH",
                        help="the interpreter that runs the baseline (default: this one)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as scratch:
        baseline = Path(scratch) / "baseline"
        subprocess.run(["git", "-C", str(COURSE.root), "worktree", "add", "--detach", "-q", str(baseline), args.baseline],
                       check=True)
        try:
            times: dict[str, list[float]] = {"baseline": [], "current": []}
            for round_ in range(args.rounds):
                for name, python, root in (("baseline", args.baseline_python, baseline),
                                           ("current", sys.executable, COURSE.root)):
                    seconds, code = timed_audit(python, root, args.tasks, args.jobs, Path(scratch) / f"{name}-{round_}.json")
                    times[name].append(seconds)
                    print(f"round {round_ + 1} {name:8}: {seconds:7.1f} s (exit {code})", flush=True)
            before, after = verdicts(Path(scratch) / "baseline-0.json"), verdicts(Path(scratch) / "current-0.json")
        finally:
            subprocess.run(["git", "-C", str(COURSE.root), "worktree", "remove", "--force", str(baseline)], check=False)
    ratios = [b / c for b, c in zip(times["baseline"], times["current"])]
    print(f"tasks: {' '.join(args.tasks) or 'all'}, --jobs {args.jobs}, {args.rounds} round(s)")
    print(f"baseline {args.baseline}: median {statistics.median(times['baseline']):.1f} s")
    print(f"current: median {statistics.median(times['current']):.1f} s")
    print(f"baseline / current, round by round: {', '.join(f'x{r:.2f}' for r in ratios)}; "
          f"median x{statistics.median(ratios):.2f}")
    changed = sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))
    print(f"verdicts: {len(after)} entries, {len(changed)} differ from the baseline's")
    for task, name in changed:
        print(f"  {task} {name}: {before.get((task, name))} -> {after.get((task, name))}")


if __name__ == "__main__":
    main()
