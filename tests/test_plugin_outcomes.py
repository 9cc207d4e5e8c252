"""The plugin's semantics on a small synthetic course: points, concepts,
stop-on-concept and every outcome (pass, fail, skip, timeout, crash, out of memory, collection and
import errors, a GPU test not graded), each read from the score report the session writes.

The course is one task, `01_demo`, with a visible and a hidden suite; the learner's tree is
written per test. A session (a pytest process of its own) runs as the runner runs one
(`--grading-spec`, the course's own root and configuration, no conftest) or as a learner's plain
`pytest` does (options). Nothing here grades a real exercise: each session takes a second or two,
and the reference's report, which most checks read, is made once."""
import json
from pathlib import Path

import pytest

from grader.course import Course
from grader.isolation.sandbox import Limits
from grader.spec import GradingSpec
from grader.worker.loading import sibling_module

synthetic = sibling_module(__file__, "synthetic_course")
REFERENCE = synthetic.REFERENCE
pytest_session, spec_for, grade, results = synthetic.pytest_session, synthetic.spec_for, synthetic.grade, synthetic.results


@pytest.fixture
def course(tmp_path) -> Course:
    return synthetic.write(tmp_path / "course")


def learner_tree(where: Path, source: str | None) -> Path:
    return synthetic.learner_tree(where / "learner", source)


@pytest.fixture(scope="module")
def reference_report(tmp_path_factory):
    where = tmp_path_factory.mktemp("reference")
    return grade(where, synthetic.write(where / "course"), learner_tree(where, REFERENCE))


def test_a_passing_test_earns_its_points(reference_report):
    graded = results(reference_report)
    assert graded["test_doubles_two"].items() >= {"status": "passed", "points": 1.0, "suite": "visible",
                                                  "graded": True}.items()
    assert graded["test_doubles_a_hidden_input"]["status"] == "passed"
    assert graded["test_doubles_a_hidden_input"]["points"] == 2.0
    assert graded["test_doubles_a_hidden_input"]["suite"] == "hidden"


def test_a_skip_by_the_tests_own_code_is_a_lost_test(reference_report):
    skipped = results(reference_report)["test_skipped_by_its_own_code"]
    assert (skipped["status"], skipped["graded"], skipped["points"]) == ("skipped", True, 0.0)
    assert skipped["feedback"] == "not today"


def test_a_gpu_test_is_not_graded_without_cuda(reference_report):
    gpu = results(reference_report)["test_on_a_gpu"]
    assert (gpu["status"], gpu["graded"]) == ("skipped", False)
    task = reference_report["tasks"][0]
    graded_max = sum(t["max_points"] for t in task["tests"] if t["graded"])
    assert reference_report["run"]["metrics"]["max_score"] == graded_max == 10.0      # 11 declared, the GPU point left out


def test_a_hang_is_a_timeout_and_costs_that_test_alone(reference_report):
    graded = results(reference_report)
    assert graded["test_that_hangs"]["status"] == "timeout"
    assert graded["test_runs_last"]["status"] == "passed"


def test_a_hang_points_at_the_loop_not_at_a_return_it_never_reached(reference_report):
    """The worker is asked where it is before it is killed: its line in the loop, not the
    `return` after it, which the file alone would point at."""
    location = results(reference_report)["test_that_hangs"]["location"]
    assert location is not None and location["function"] == "hang", location
    assert location["code"] in ("while True:", "pass"), location


def test_a_crash_is_reported_as_one(reference_report):
    crashed = results(reference_report)["test_that_crashes"]
    assert crashed["status"] == "crashed"
    assert "SIGSEGV" in crashed["feedback"]


def test_running_out_of_memory_is_a_crash_that_says_so(reference_report):
    hog = results(reference_report)["test_that_hogs_memory"]
    assert hog["status"] == "crashed"
    assert "out of memory" in hog["feedback"] and "256 MB" in hog["feedback"]


def test_the_report_records_the_spec_it_was_given(reference_report):
    run = reference_report["run"]
    assert run["run_id"] == "run-1" and run["seed"] == 7
    assert run["config"]["seed_from"] == "a test"
    assert reference_report["isolation"]["level"] == "none"


def test_a_failed_check_gives_its_words_and_the_readme_section(tmp_path, course):
    wrong = REFERENCE.replace("return 2 * x", "return 2 * x + (x == 3)")
    failed = results(grade(tmp_path, course, learner_tree(tmp_path, wrong)))["test_doubling_is_exact"]
    assert (failed["status"], failed["points"]) == ("failed", 0.0)
    assert failed["feedback"] == '3 doubled should be 6\nReread: README section "Doubling".'


def test_a_call_that_returned_where_it_should_have_raised_says_so_in_the_learners_terms(tmp_path, course):
    (course.hidden / "01_demo" / "test_refusal.py").write_text(
        "import pytest\nfrom grader.session.submission import StudentError\n\n\n@pytest.mark.points(1)\n"
        "@pytest.mark.concept(\"Doubling\")\ndef test_refuses(submission):\n"
        "    with pytest.raises(StudentError):\n        submission.double(-1)\n")
    report = grade(tmp_path, course, learner_tree(tmp_path, REFERENCE),
                   suite_files=("tests/hidden/01_demo/test_refusal.py",))
    refused = results(report)["test_refuses"]
    assert refused["status"] == "failed" and refused["feedback"].startswith(
        "the call returned where it should have raised an error"), refused["feedback"]
    assert "StudentError" not in refused["feedback"] and "DID NOT RAISE" not in refused["feedback"]


def test_hidden_feedback_never_quotes_the_hidden_test(tmp_path, course):
    wrong = REFERENCE.replace("return 2 * x", "return x")
    failed = results(grade(tmp_path, course, learner_tree(tmp_path, wrong)))["test_doubles_a_hidden_input"]
    assert failed["status"] == "failed"
    assert "SECRET_INPUT" not in failed["feedback"] and "12345" not in failed["feedback"]


@pytest.mark.parametrize("source, words", [
    (None, "demo.py was not found"),
    ("import sys\nsys.exit(0)\n", "SystemExit"),
    ("def double(x:\n", "SyntaxError"),
    ("raise RuntimeError('at import')\n", "RuntimeError: at import"),
])
def test_a_module_that_does_not_import_scores_zero_with_a_clear_message(tmp_path, course, source, words):
    report = grade(tmp_path, course, learner_tree(tmp_path, source), suite_files=("exercises/01_demo",))
    test = results(report)["test_doubles_two"]
    assert (test["status"], test["points"]) == ("error", 0.0)
    assert words in test["feedback"]
    assert test["feedback"].count("demo.py, line") <= 1, f"the place said once: {test['feedback']}"


def test_a_suite_that_cannot_be_collected_is_a_problem_of_the_report(tmp_path, course):
    (course.hidden / "01_demo" / "test_broken.py").write_text("def test_(:\n")
    report = grade(tmp_path, course, learner_tree(tmp_path, REFERENCE), "-k", "doubles")
    assert any("could not collect" in problem and "test_broken.py" in problem for problem in report["problems"])


def test_a_test_without_points_is_refused(tmp_path, course):
    (course.hidden / "01_demo" / "test_pointless.py").write_text("def test_x(submission):\n    pass\n")
    spec = spec_for(tmp_path, course, learner_tree(tmp_path, REFERENCE), backend="inprocess")
    result = pytest_session(tmp_path, str(course.hidden), "--grading-spec", str(spec), *course.session_options())
    assert "test_x has no @pytest.mark.points(n)" in result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR


def test_stop_on_concept_runs_the_concept_first_and_stops_at_its_failure(tmp_path, course):
    wrong = REFERENCE.replace("return 2 * x", "return 2 * x + (x == 3)")
    report = grade(tmp_path, course, learner_tree(tmp_path, wrong), concept="Doubling")
    ran = results(report)
    assert report["stopped_early"] == "a test of concept 'Doubling' failed"
    assert ran["test_doubling_is_exact"]["status"] == "failed"
    assert "test_that_hangs" not in ran and "test_runs_last" not in ran      # the other concepts' tests never ran


def test_the_in_process_backend_grades_the_same_points(tmp_path, course):
    safe = "\n".join(REFERENCE.split("\n\n\ndef hang")[:1]) + "\n"
    report = grade(tmp_path, course, learner_tree(tmp_path, safe), "-k", "doubl", backend="inprocess")
    assert {name: t["status"] for name, t in results(report).items()} == {
        "test_doubles_two": "passed", "test_doubles_zero": "passed", "test_doubles_a_hidden_input": "passed",
        "test_doubling_is_exact": "passed"}
    assert report["isolation"]["level"] == "in-process"


def test_a_plain_pytest_run_is_its_own_edge(tmp_path, course):
    """The learner's `pytest exercises/NN`: the options make the spec; the stub's feedback is its own."""
    report = tmp_path / "plain.json"
    pytest_session(tmp_path, str(course.exercises / "01_demo"), "--course", str(course.root), "--score-report",
                   str(report), *course.session_options())
    test = results(json.loads(report.read_text()))["test_doubles_two"]
    assert test["status"] == "failed"
    assert test["feedback"].startswith("double() is not implemented yet")
    assert json.loads(report.read_text())["submission"]["path"] == str((course.exercises).resolve())


def test_a_spec_and_a_grading_option_together_are_refused(tmp_path, course):
    spec = spec_for(tmp_path, course, course.solutions, backend="inprocess")
    result = pytest_session(tmp_path, str(course.exercises), "--grading-spec", str(spec), "--impl", "elsewhere",
                            *course.session_options())
    assert "--grading-spec says how to grade: leave out --impl" in result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR


def test_a_spec_reads_back_as_written(tmp_path, course):
    limits = Limits(memory_mb=300, cpus=0.5)
    spec = GradingSpec(course=course, impl=tmp_path, backend="worker", isolation={"level": "none", "reason": "why"},
                       limits=limits, seed=3, seed_from="x", run_id="r", score_report=tmp_path / "r.json",
                       worker_logs=None, stop_on_concept="Doubling")
    assert GradingSpec.read(spec.write(tmp_path / "spec.json")) == spec
    with pytest.raises(ValueError, match="backend 'thread'"):
        spec.but(backend="thread")



PRINTING_TEST = '''import pytest


@pytest.mark.points(1)
@pytest.mark.concept("Doubling")
def test_prints_on_both_sides(submission):
    print("the test's own notice")
    assert submission.double(2) == 5
'''


@pytest.mark.parametrize("backend", ["worker", "inprocess"])
def test_printed_is_what_the_learners_code_printed_never_the_tests_own(tmp_path, course, backend):
    """A test's own output (a library's notice about the model the test builds, say) is nothing the
    learner wrote or can act on: "printed" holds the learner's output alone, in a worker and in process."""
    (course.root / "exercises/01_demo/test_printing.py").write_text(PRINTING_TEST)
    learner = REFERENCE.replace("    return 2 * x", "    print('the learner says', x)\n    return 2 * x")
    report = grade(tmp_path, course, learner_tree(tmp_path, learner), backend=backend,
                   suite_files=("exercises/01_demo/test_printing.py",))
    printed = results(report)["test_prints_on_both_sides"]["output"]
    assert "the learner says 2" in printed and "the test's own notice" not in printed, printed
