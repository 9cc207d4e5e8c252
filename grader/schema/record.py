"""The experiment record the source map asks of every run: run id, commit, config, data
version, seed, environment, metrics. With these, re-running a grading is one command."""
from __future__ import annotations

import functools
import json
import os
import platform
import secrets
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TypedDict

from grader.course import COURSE

_PACKAGES = ("torch", "numpy", "transformers", "peft", "trl", "datasets", "pytest", "hypothesis")


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def git_commit(path: Path) -> str | None:
    """HEAD of the course's git work tree at `path`, with "-dirty" when it has changes; None
    outside git. Only for the course's own tree: a submission's repository is never handed to
    git (see `grader.session.intake.git_head`). Reading only: `git describe --dirty` would rewrite
    the course's index to refresh it, and grading changes nothing in the course."""
    head = _git(path, "rev-parse", "HEAD")
    if not head:
        return None
    changes = _git(path, "--no-optional-locks", "status", "--porcelain", "--untracked-files=no")
    return f"{head}-dirty" if changes else head


def _git(path: Path, *args: str) -> str | None:
    """What a git command prints in `path`, stripped; None when it fails."""
    try:
        out = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def data_version(datasets_dir: Path = COURSE.datasets) -> str | None:
    """The digest `datasets/MANIFEST.json` gives the data files, or None before the first build."""
    try:
        return json.loads((datasets_dir / "MANIFEST.json").read_text())["data_version"]
    except (OSError, ValueError, KeyError):
        return None


def environment() -> dict:
    env = {"python": platform.python_version(), "platform": platform.platform(),
           "cpu_count": os.cpu_count(), "executable": Path(sys.executable).name, **package_versions()}
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        env["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return env


@functools.cache
def package_versions() -> dict[str, str | None]:
    """The versions of the packages that grade, as installed: read once per process (two dozen
    metadata files; a watcher reads them before its first check, and each check finds them)."""
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


class RunRecord(TypedDict, total=False):
    """The experiment record of a grading (the report's `run`; empty for a grading that produced
    no report of its own)."""
    run_id: str
    started_at: str
    finished_at: str | None
    duration_s: float
    commit: str | None
    config: dict
    data_version: str | None
    seed: int
    environment: dict
    metrics: dict


def run_record(*, run_id: str, started: datetime, finished: datetime, commit: str | None,
               config: dict, seed: int, metrics: dict) -> RunRecord:
    return {"run_id": run_id, "started_at": started.isoformat(timespec="seconds"),
            "finished_at": finished.isoformat(timespec="seconds"),
            "duration_s": round((finished - started).total_seconds(), 3), "commit": commit,
            "config": config, "data_version": data_version(), "seed": seed,
            "environment": environment(), "metrics": metrics}


def combined_run(runs: list[RunRecord], total, tests: int) -> RunRecord:
    """The record of a grading run in parts (one session per task): the first part's, with the
    whole run's end, duration, tasks and metrics."""
    first, last = runs[0], runs[-1]
    record = RunRecord(**first)
    record["finished_at"] = last.get("finished_at")
    record["duration_s"] = round(sum(run.get("duration_s") or 0 for run in runs), 3)
    record["config"] = {**first.get("config", {}),
                        "tasks": [t for run in runs for t in run.get("config", {}).get("tasks", [])]}
    startups = [startup for run in runs if (startup := run.get("metrics", {}).get("worker_startup_s")) is not None]
    record["metrics"] = {**first.get("metrics", {}), "score": total.points, "max_score": total.max_points,
                         "percent": total.percent, "tests": tests,
                         "worker_startup_s": max(startups) if startups else None}
    return record
