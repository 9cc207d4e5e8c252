"""The points the suites declare, read by collecting them (nothing runs): what a Classroom
workflow awards per exercise, for instance. A parametrized test counts once per case, exactly
as a grading does.

Collection runs in a pytest process of its own (this module is its plugin), so the caller
never imports the suites or their libraries.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from grader.course import COURSE, Task
from grader.suite import metadata

_OUT = "GRADER_COLLECT_OUT"


class CollectionError(RuntimeError):
    """The suites could not be collected; the message carries pytest's own words."""


def declared_points(tasks: list[Task], hidden: bool = False) -> dict[str, dict[str, float]]:
    """{task name: {"cpu": points of tests that run without CUDA, "gpu": points of GPU tests}}."""
    paths = [str(p) for task in tasks for p in task.suite_paths(hidden)]
    with tempfile.TemporaryDirectory(prefix="grader-collect-") as scratch:
        out = Path(scratch) / "points.json"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *paths, "--collect-only", "-q", "-p", "grader.running.collect",
             *COURSE.session_options()],
            cwd=COURSE.root, env={**os.environ, _OUT: str(out)}, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not out.exists():
            raise CollectionError(f"collecting {', '.join(t.name for t in tasks)} failed (pytest exit "
                                  f"{done.returncode}):\n{(done.stdout + done.stderr)[-2000:]}")
        found = json.loads(out.read_text())
    return {task.name: found.get(task.name, {"cpu": 0.0, "gpu": 0.0}) for task in tasks}


def pytest_collection_finish(session):
    """The plugin side: sum each task's declared points."""
    if not os.environ.get(_OUT):
        return
    points: dict[str, dict[str, float]] = {}
    for item in session.items:
        task = COURSE.task_of_path(item.path)
        meta = metadata.of_item(item)
        if task is None or meta.points is None:
            continue
        entry = points.setdefault(task.name, {"cpu": 0.0, "gpu": 0.0})
        entry["gpu" if meta.gpu else "cpu"] += meta.points
    Path(os.environ[_OUT]).write_text(json.dumps(points))
