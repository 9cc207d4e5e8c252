"""Grading inside a container-sized box: how much memory and time a grading needs where the
platforms put it. A benchmark, not a test: it prints figures and asserts nothing.

    python benchmarks/containers.py                        # the table: full grading in 1 GiB / 1 vCPU,
                                                           # each task in 768 MB / 0.5 vCPU
    python benchmarks/containers.py --memory-mb 768 --cpus 0.5 --tasks 02
    python benchmarks/containers.py --gradescope           # the Gradescope zip's run_autograder instead

Each grading runs in a fresh memory + cpu + pids cgroup (made below this process's own, so the
limits around it still hold) with a cgroup namespace of its own and a fresh cgroup mount, as a
container gives: inside, the grader sees that box as its whole hierarchy, reads its limit, and
makes its workers' cgroups within it. Peak memory is the box's `memory.max_usage_in_bytes` (page
cache included, as a container is charged) and the peak of its anonymous memory, sampled.
Needs root and cgroup v1 (this project's CI machines); where it cannot run it says why and exits 0.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from grader.course import COURSE
from grader.isolation.cgroups import CPU_PERIOD_US, own_dir, read_text

CONTROLLERS = ("memory", "cpu", "pids")
BOX_PROCESSES = 4096
SAMPLE_S = 0.05


@dataclass
class BoxRun:
    returncode: int
    wall_s: float
    peak_mb: float            # memory.max_usage_in_bytes: all the box was charged, page cache included
    peak_anon_mb: float       # the largest sampled rss + shmem: what could not be reclaimed
    oom_kills: int            # of processes charged to the box itself (a worker's own cgroup counts its own)
    output: str


def unavailable() -> str | None:
    """Why no box can be made here, or None."""
    if os.geteuid() != 0:
        return "making cgroups and mounting a cgroup file system needs root"
    if shutil.which("unshare") is None:
        return "util-linux's unshare is not installed"
    for controller in CONTROLLERS:
        place = own_dir(controller)
        if place is None or place[0] != "v1":
            return f"no cgroup v1 hierarchy with the {controller} controller is mounted here"
    return None


def run_in_box(argv: list[str], memory_mb: int, cpus: float, cwd: Path = COURSE.root, env=None,
               timeout_s: float = 3600) -> BoxRun:
    """Run `argv` in a fresh box of `memory_mb` and `cpus`, and measure it."""
    name = f"grader-box-{os.getpid()}-{secrets.token_hex(3)}"
    folders = {c: own_dir(c)[1] / name for c in CONTROLLERS}
    for folder in folders.values():
        folder.mkdir()
    try:
        (folders["memory"] / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
        _try_write(folders["memory"] / "memory.memsw.limit_in_bytes", memory_mb << 20)
        (folders["cpu"] / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (folders["cpu"] / "cpu.cfs_quota_us").write_text(str(int(cpus * CPU_PERIOD_US)))
        (folders["pids"] / "pids.max").write_text(str(BOX_PROCESSES))
        mounts = " && ".join(f"mkdir -p /sys/fs/cgroup/{c} && mount -t cgroup -o {c} cgroup /sys/fs/cgroup/{c}"
                             for c in CONTROLLERS)
        inside = f"mount -t tmpfs cgroups /sys/fs/cgroup && {mounts} && exec \"$@\""
        joins = " && ".join(f'echo $$ > "{folder}/cgroup.procs"' for folder in folders.values())
        command = ["/bin/sh", "-c", f'{joins} && exec unshare --cgroup --mount --propagation private '
                                    f'/bin/sh -c \'{inside}\' box "$@"', "box", *argv]
        peak_anon = [0]
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_anon, args=(folders["memory"], peak_anon, stop), daemon=True)
        sampler.start()
        started = time.monotonic()
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
        wall = time.monotonic() - started
        stop.set()
        sampler.join()
        memory = folders["memory"]
        oom = read_text(memory / "memory.oom_control") or ""
        kills = next((int(line.split()[1]) for line in oom.splitlines() if line.startswith("oom_kill ")), 0)
        return BoxRun(done.returncode, wall, int(read_text(memory / "memory.max_usage_in_bytes") or 0) / 2**20,
                      peak_anon[0] / 2**20, kills, done.stdout + done.stderr)
    finally:
        for folder in folders.values():
            _remove_tree(folder)


def _sample_anon(memory: Path, peak: list, stop: threading.Event) -> None:
    while not stop.wait(SAMPLE_S):
        stat = dict(line.split() for line in (read_text(memory / "memory.stat") or "").splitlines() if " " in line)
        peak[0] = max(peak[0], int(stat.get("total_rss", 0)) + int(stat.get("total_shmem", 0)))


def _try_write(path: Path, value) -> None:
    try:
        path.write_text(str(value))
    except OSError:
        pass


def _remove_tree(folder: Path) -> None:
    """A box's cgroup and whatever the grader left below it (children first)."""
    for _ in range(100):
        pids = (read_text(folder / "cgroup.procs") or "").split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        children = sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
        for child in children:
            _remove_tree(child)
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


# ---------------------------------------------------------------- what runs in the box

def grade_command(tasks: list[str], report: Path, impl: Path = COURSE.solutions) -> list[str]:
    return [sys.executable, "-m", "grader.cli", "grade", str(impl), "--json", str(report),
            *(["--tasks", *tasks] if tasks else [])]


def score(report_path: Path) -> str:
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no report"
    total = report["total"]
    crashed = [t["id"] for task in report["tasks"] for t in task["tests"] if t["status"] == "crashed"]
    note = f", {len(crashed)} crashed" if crashed else ""
    return f"{total['points']:g} / {total['max_points']:g}{note}{'' if report['complete'] else ', incomplete'}"


def gradescope_tree(root: Path, tasks: list[str]) -> Path:
    """A rehearsal of Gradescope's /autograder tree: the zip unpacked, the reference uploaded flat."""
    zip_path = root / "autograder.zip"
    subprocess.run([sys.executable, "-m", "grader.cli", "gradescope", str(zip_path),
                    *(["--tasks", *tasks] if tasks else [])], check=True, capture_output=True, cwd=COURSE.root)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(root / "source")
    os.chmod(root / "source" / "run_autograder", 0o755)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    for task in tasks and [COURSE.task_named(t) for t in tasks] or COURSE.tasks():
        shutil.copy(task.reference_module, root / "submission")
    return root


def measure(tasks: list[str], memory_mb: int, cpus: float, gradescope: bool) -> tuple[BoxRun, str]:
    with tempfile.TemporaryDirectory(prefix="grader-box-run-") as tmp:
        tmp = Path(tmp)
        if gradescope:
            tree = gradescope_tree(tmp / "ag", tasks)
            env = {**os.environ, "AUTOGRADER_ROOT": str(tree), "GRADER_PYTHON": sys.executable}
            run = run_in_box([str(tree / "run_autograder")], memory_mb, cpus, cwd=tree, env=env)
            return run, score(tree / "results" / "score_report.json")
        run = run_in_box(grade_command(tasks, tmp / "report.json"), memory_mb, cpus)
        return run, score(tmp / "report.json")


def print_row(label: str, memory_mb: int, cpus: float, run: BoxRun, result: str) -> None:
    print(f"{label:<24} {memory_mb:>6} MB {cpus:>4g} vCPU  peak {run.peak_mb:7.0f} MB  "
          f"(anon {run.peak_anon_mb:5.0f} MB)  {run.wall_s:6.1f} s  oom kills {run.oom_kills}  {result}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=None, help="grade these tasks together (default: the table)")
    parser.add_argument("--memory-mb", type=int, default=1024)
    parser.add_argument("--cpus", type=float, default=1.0)
    parser.add_argument("--gradescope", action="store_true", help="run the Gradescope zip's run_autograder")
    args = parser.parse_args()
    why = unavailable()
    if why:
        print(f"no container box here: {why}")
        return 0
    if args.tasks is not None:
        run, result = measure(args.tasks, args.memory_mb, args.cpus, args.gradescope)
        print_row(" ".join(args.tasks) or "all tasks", args.memory_mb, args.cpus, run, result)
        if run.returncode not in (0, 1):
            print(run.output[-3000:])
        return 0
    what = "run_autograder" if args.gradescope else "grader grade solutions"
    print(f"{what}, in a fresh cgroup box with its own cgroup namespace:")
    run, result = measure([], 1024, 1.0, args.gradescope)
    print_row("all tasks", 1024, 1.0, run, result)
    for task in COURSE.tasks():
        run, result = measure([task.name[:2]], 768, 0.5, args.gradescope)
        print_row(task.name, 768, 0.5, run, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
