"""The `grader` command as a learner, an instructor and a CI job use it."""
import csv
import subprocess
import sys

from grader.tasks import COURSE_ROOT


def grader(*args, cwd=COURSE_ROOT):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_check_passes_on_the_reference_and_fails_on_the_stub():
    good = grader("check", "01", "--impl", "solutions")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "01_einsum_attention" in good.stdout
    stub = grader("check", "01")
    assert stub.returncode == 1
    assert "first hint" in stub.stdout and "README" in stub.stdout


def test_batch_grading_writes_a_gradebook(tmp_path):
    out = tmp_path / "grading"
    result = grader("grade", "solutions", "exercises", "--tasks", "01", "--jobs", "2", "--out-dir", out)
    assert result.returncode == 0, result.stdout + result.stderr
    with open(out / "summary.csv") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert float(rows["solutions"]["percent"]) == 100.0
    assert float(rows["exercises"]["points"]) == 0.0
    assert (out / "solutions" / "score_report.json").exists() and (out / "exercises" / "pytest.log").exists()


def test_usage_errors_exit_2(tmp_path):
    assert grader("grade", tmp_path / "nowhere").returncode == 2
    assert grader("audit", "99").returncode == 2
    assert grader("grade", "solutions", "exercises", "--json", tmp_path / "r.json").returncode == 2
