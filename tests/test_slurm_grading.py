"""`grader grade --executor slurm` on the one-node Slurm of `.ci/slurm-up`: three small
submissions (task 01: the reference twice, the stub once) graded as a job array give the scores
a local batch gives, and the same gradebook; an array task cancelled while it grades leaves a
report that says the scheduler ended it, and `--resume` grades that submission alone, nothing
twice.

One array task runs at a time (`--max-tasks 1`), so the second is cancelled while the first's
report is already in and the third's task has not started. Skips where Slurm cannot start.
"""
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.gradebook import grades
from grader.gradebook.store import Gradebook

pytest.importorskip("submitit", reason="submitit is not installed (pip install -e '.[test]')")

TASK = "01_einsum_attention"
# A task 01 grading takes about 20 s on 2 busy cores; an array task starts in a few more.
ONE_GRADING_S = 180
BATCH_LIMIT_S = 600


def grader(*args, cwd):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=BATCH_LIMIT_S)


def submissions(root: Path) -> list[Path]:
    """The course layout (NN_name/<module>.py): the reference in two folders, the stub in one."""
    made = []
    for name, source in (("alice", "solutions"), ("bob", "exercises"), ("carol", "solutions")):
        module = root / name / TASK / "attention.py"
        module.parent.mkdir(parents=True)
        shutil.copy(COURSE.root / source / TASK / "attention.py", module)
        made.append(root / name)
    return made


def reports(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(out.glob("*/score_report.json"))}


def running_tasks(folder: Path) -> list[str]:
    """The array tasks of this batch's jobs (named in submitit's folder) that are running now."""
    arrays = {p.name.split("_")[0] for p in folder.glob("*_submission.sh")}
    if not arrays:
        return []
    out = subprocess.run(["squeue", "-h", "-r", "-t", "RUNNING", "-j", ",".join(sorted(arrays)), "-o", "%i"],
                         capture_output=True, text=True)
    return out.stdout.split()


def wait_for(predicate, limit_s: float, what: str):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {limit_s} s")


@pytest.mark.full       # a real Slurm runs in the default tier too: test_slurm_cluster's array and cancellation
@pytest.mark.timeout(3 * BATCH_LIMIT_S)
def test_a_slurm_batch_grades_like_a_local_one_and_resumes_what_the_scheduler_cancelled(slurm, tmp_path):
    subs = submissions(tmp_path / "subs")
    local = grader("grade", *subs, "--tasks", "01", "--jobs", "2", "--out-dir", tmp_path / "local", cwd=tmp_path)
    assert local.returncode == 0, local.stdout + local.stderr
    expected = {name: r["total"] for name, r in reports(tmp_path / "local").items()}
    assert [expected[n]["percent"] for n in ("alice", "bob", "carol")] == [100.0, 0.0, 100.0]

    out, jobs = tmp_path / "slurm", tmp_path / "slurm" / ".slurm"
    batch = subprocess.Popen([sys.executable, "-m", "grader.cli", "grade", *map(str, subs), "--tasks", "01",
                              "--executor", "slurm", "--max-tasks", "1", "--out-dir", str(out)],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (out / "alice" / "score_report.json").exists(), ONE_GRADING_S, "the first report")
        # the first task may still be ending: the second is the one to cancel
        second = wait_for(lambda: [t for t in running_tasks(jobs) if t.endswith("_1")], ONE_GRADING_S,
                          "the second array task running")
        assert not (out / "bob" / "score_report.json").exists()
        subprocess.run(["scancel", second[0]], check=True)
        stdout, stderr = batch.communicate(timeout=BATCH_LIMIT_S)
    finally:
        if batch.poll() is None:
            batch.kill()
    assert batch.returncode == 3, stdout + stderr       # a grading incomplete: the scheduler ended one
    first = reports(out)
    assert sorted(first) == ["alice", "bob", "carol"]
    (problem,) = first["bob"]["problems"]
    assert problem.startswith("not finished") and "CANCELLED" in problem and second[0] in problem, problem
    assert first["bob"]["tasks"] == [] and first["bob"]["submission"]["path"] == str(subs[1])
    for name in ("alice", "carol"):
        assert first[name]["total"] == expected[name] and first[name]["complete"]
    assert "failed 1" in stderr                          # the progress line counts it

    resumed = grader("grade", *subs, "--tasks", "01", "--executor", "slurm", "--out-dir", out, "--resume",
                     cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again = reports(out)
    assert {name: r["total"] for name, r in again.items()} == expected
    # nothing graded twice: the others' reports are the same runs, and the resume's array had one task
    for name in ("alice", "carol"):
        assert again[name]["run"]["run_id"] == first[name]["run"]["run_id"]
    assert again["bob"]["complete"] and again["bob"]["run"]["run_id"]
    # the same gradebook as the local batch's: each learner's current results, test by test
    assert gradebook_view(out) == gradebook_view(tmp_path / "local")

    assert len(list(jobs.glob("*_submitted.pkl"))) == 3 + 1, sorted(p.name for p in jobs.iterdir())
    with open(out / "summary.csv") as f:
        assert len(f.read().splitlines()) == 1 + 3


def gradebook_view(out: Path) -> dict:
    with Gradebook.open(out, create=False) as book:
        return {grade.learner: {test.id: (test.status, test.points) for test in grade.report.tests()}
                for grade in grades.current(book, COURSE)}
