"""A grading's spec (`grader.spec`) says how each task's session grades: the tree, the
isolation level, the seed, where the report goes. In a batch of several tasks, the next task's
spec is written before the first task's learner code runs: a worker that could rewrite it would
choose how its own next task is graded (no isolation, a seed it knows, another tree). The specs
lie under the run's out_dir, its owner's alone; here a process of a worker's uid tries them, as
the uid level runs learner code, with the kernel's own permission checks."""
import json
import os
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.isolation.sandbox import Limits
from grader.isolation.uid_jail import allocate_uid
from grader.running.runner import GradingRun
from grader.schema.report import Isolation
from grader.worker.loading import sibling_module

harness = sibling_module(__file__, "harness")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a worker's uid is taken by root only")


def test_a_workers_uid_can_neither_read_nor_rewrite_the_next_tasks_spec(tmp_path):
    run = GradingRun(COURSE.solutions, list(COURSE.tasks()[:2]), seed=7, limits=Limits(),
                     isolation=Isolation(level="uid", reason="a worker of its own uid", limits={}))
    out_dir = tmp_path / "out"
    os.chmod(tmp_path, 0o711)                 # as a batch's folders are: entered, not listed, by workers
    out_dir.mkdir(mode=0o711)
    run.sessions(out_dir, tmp_path / "scratch", "run")
    specs = sorted((out_dir / "parts").glob("*.spec.json"))
    assert len(specs) == 2, specs
    following = specs[1]
    uid = allocate_uid()

    def rewrite():
        forged = {**json.loads(following.read_text()), "isolation": {"level": "none"}, "seed": 0}
        following.write_text(json.dumps(forged))

    assert harness.tries_as(uid, lambda: following.read_text()) == "refused"
    assert harness.tries_as(uid, rewrite) == "refused"
    assert harness.tries_as(uid, lambda: os.rename(following, following.with_suffix(".old"))) == "refused"
    assert harness.tries_as(uid, lambda: (out_dir / "parts" / "planted.spec.json").write_text("{}")) == "refused"
    assert json.loads(following.read_text())["seed"] == 7
    assert sorted(p.name for p in (out_dir / "parts").iterdir()) == [s.name for s in specs]
    assert oct(Path(out_dir / "parts").stat().st_mode & 0o777) == oct(0o700)
