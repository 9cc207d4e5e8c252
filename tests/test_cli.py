"""The `grader` command as a learner, an instructor and a CI job use it."""
import csv
import json
import subprocess
import sys

import pytest

from grader.course import COURSE


def grader(*args, cwd=COURSE.root):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.e2e
def test_check_passes_on_the_reference_and_fails_on_the_stub():
    good = grader("check", "01", "--impl", "solutions")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "01_einsum_attention" in good.stdout
    stub = grader("check", "01")
    assert stub.returncode == 1
    assert "the first:" in stub.stdout and "README" in stub.stdout
    assert "hint 1 of" not in stub.stdout, "grader check shows no hint unasked"


@pytest.mark.e2e
def test_batch_grading_writes_a_gradebook(tmp_path):
    out = tmp_path / "grading"          # given relative to where the instructor stands
    result = grader("grade", COURSE.root / "solutions", COURSE.root / "exercises", "--tasks", "01", "--jobs", "2",
                    "--out-dir", "grading", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    with open(out / "summary.csv") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert float(rows["solutions"]["percent"]) == 100.0 and rows["solutions"]["status"] == "complete"
    assert float(rows["exercises"]["points"]) == 0.0
    assert (out / "solutions" / "score_report.json").exists() and (out / "exercises" / "pytest.log").exists()
    # the class summary and each submission's page come with the batch
    with open(out / "concepts.csv") as f:
        concepts = list(csv.DictReader(f))
    assert concepts and all(float(c["lost_share"]) == 0.5 for c in concepts)    # the stub lost every concept
    assert "Class summary" in (out / "class.html").read_text()
    assert "Score report" in (out / "solutions" / "report.html").read_text()


@pytest.mark.e2e
def test_learner_failures_show_the_learners_line_and_full_trace_shows_everything():
    """A stub's failure in `pytest exercises/NN`: the message, the README section to reread and
    the learner's line; the test's code and the grader's dispatch frames only with --full-trace."""
    def pytest_run(*extra):
        return subprocess.run([sys.executable, "-m", "pytest", "exercises/01_einsum_attention", "-x",
                               "-p", "no:cacheprovider", *extra], cwd=COURSE.root, capture_output=True, text=True,
                              timeout=600).stdout
    short = pytest_run()
    assert 'Your line 19, in softmax: raise NotImplementedError(\'see README.md, section "Stable softmax"\')' in short
    assert 'softmax() is not implemented yet: see README.md, section "Stable softmax"' in short
    assert "grader/session/submission.py" not in short and "grader/worker/loading.py" not in short
    assert "def test_" not in short
    full = pytest_run("--full-trace")
    assert "grader/session/submission.py" in full and "def test_" in full


def test_usage_errors_exit_2(tmp_path):
    assert grader("grade", tmp_path / "nowhere").returncode == 2
    assert grader("audit", "99").returncode == 2
    assert grader("grade", "solutions", "exercises", "--json", tmp_path / "r.json").returncode == 2


@pytest.mark.e2e
def test_an_explicit_isolation_none_grades_for_a_platform_and_says_so(tmp_path):
    """A platform's output grades at `required` unless the instructor says otherwise on the command
    line: `--isolation none` (a trusted local run) is honoured, and the report and the platform's
    message say which isolation graded it."""
    results, report = tmp_path / "results.json", tmp_path / "report.json"
    done = grader("grade", COURSE.root / "solutions", "--tasks", "01", "--isolation", "none",
                  "--prairielearn", results, "--json", report)
    assert done.returncode == 0, done.stdout + done.stderr
    graded = json.loads(results.read_text(encoding="utf-8"))
    assert graded["gradable"] is True and graded["score"] == 1.0, graded
    assert graded["message"].endswith("isolation of your code during grading: none"), graded["message"]
    assert json.loads(report.read_text(encoding="utf-8"))["isolation"]["level"] == "none"
    assert "learner code runs unprotected" in done.stdout
