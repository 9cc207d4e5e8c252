"""The runner's semantics on a synthetic course of two tasks (`synthetic_course`): one pytest
session per task in the pool, their reports combined into one, a broken module or a killed
session costing its own task alone, every layout of a submission found, the run record kept.

The gradings run once per module (two at a time) and each test reads the report it needs. The
plugin's outcomes, test by test, are `test_plugin_outcomes.py`'s; isolation is the security
suite's: these grade at `none`."""
import os

import pytest

from grader.isolation import levels
from grader.isolation.sandbox import Limits
from grader.running import runner
from grader.worker.loading import sibling_module

synthetic = sibling_module(__file__, "synthetic_course")
SLOW_IMPORT_S = synthetic.FIRST_TEST_LIMIT_S + 5    # longer than test_doubles_two's limit: it interrupts the import


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return synthetic.write(tmp_path_factory.mktemp("course"))


def grading(course, tree, tasks=("01", "02"), hidden=True, extra_args=()) -> runner.GradingRun:
    limits = Limits()
    return runner.GradingRun(tree, [course.task_named(t) for t in tasks], hidden=hidden, limits=limits,
                             isolation=levels.resolve("none", "worker", limits), extra_args=list(extra_args))


@pytest.fixture(scope="module")
def reports(course, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trees")
    tree = synthetic.learner_tree
    quick = synthetic.REFERENCE.split("\n\n\ndef hang")[0] + "\n"        # double() alone
    jobs = {
        "reference": grading(course, tree(tmp / "reference", synthetic.REFERENCE, other=True)),
        "exit_at_import": grading(course, tree(tmp / "exit", "import sys\nsys.exit(0)\n", other=True)),
        "fork_layout": grading(course, tree(tmp / "fork", quick, "fork"), ["01"], hidden=False),
        "flat_layout": grading(course, tree(tmp / "flat", quick, "flat"), ["01"], hidden=False),
        "slow_import": grading(course, tree(tmp / "slow", f"import time\ntime.sleep({SLOW_IMPORT_S})\n" + quick),
                               ["01"], hidden=False),
    }
    return {name: report.to_json() for name, report in zip(jobs, runner.run_many(list(jobs.values()), workers=2))}


def task_result(report, name):
    return next(t for t in report["tasks"] if t["task"] == name)


def test_each_task_is_graded_in_its_own_session_and_combined(reports):
    report = reports["reference"]
    assert [t["task"] for t in report["tasks"]] == ["01_demo", "02_other"]
    assert task_result(report, "02_other")["points"] == 3.0
    demo = {t["id"].rsplit("::", 1)[1]: t["status"] for t in task_result(report, "01_demo")["tests"]}
    assert demo["test_doubles_a_hidden_input"] == "passed" and demo["test_that_crashes"] == "crashed"
    assert report["run"]["metrics"]["score"] == task_result(report, "01_demo")["points"] + 3.0


def test_the_report_carries_the_run_record(reports):
    run = reports["reference"]["run"]
    for key in ("run_id", "started_at", "finished_at", "commit", "config", "data_version", "seed", "environment", "metrics"):
        assert key in run, key
    assert isinstance(run["seed"], int) and run["config"]["seed_from"] and run["environment"]["torch"]
    assert run["config"]["backend"] == "worker" and run["config"]["tasks"] == ["01_demo", "02_other"]
    assert run["metrics"]["worker_startup_s"] > 0


def test_other_tasks_are_graded_beside_a_module_that_exits_at_import(reports):
    report = reports["exit_at_import"]
    assert report["complete"], report["problems"]
    broken = task_result(report, "01_demo")
    assert broken["points"] == 0
    assert all(t["status"] == "error" and "SystemExit" in t["feedback"] for t in broken["tests"] if t["graded"])
    assert task_result(report, "02_other")["points"] == 3.0


@pytest.mark.parametrize("layout", ["fork_layout", "flat_layout"])
def test_fork_clones_and_flat_uploads_are_found(reports, layout):
    result = task_result(reports[layout], "01_demo")
    assert result["module"]["found"] and result["points"] == result["max_points"] == 2.0


def test_an_import_slower_than_a_test_goes_on_in_the_next(reports):
    """The first test's time limit interrupts the import, not the worker: the next test waits on
    for the same import (the whole import has STARTUP_LIMIT_S), and runs normally."""
    first, second = task_result(reports["slow_import"], "01_demo")["tests"]
    assert first["status"] == "timeout" and "did not finish importing within the test's time limit" in first["feedback"]
    assert second["status"] == "passed" and second["duration_s"] < SLOW_IMPORT_S, second


KILLER_PLUGIN = '''
import os, signal

def pytest_runtest_call(item):
    if item.name == "test_doubles_zero":       # the trusted session of task 01, mid-task
        os.kill(os.getpid(), signal.SIGKILL)
'''


def test_a_killed_task_session_costs_that_task_alone(course, tmp_path, monkeypatch):
    """The kernel ending one task's grading process (out of memory, say) leaves that task's tests
    listed as not graded, says how it ended, and grades the tasks after it."""
    (tmp_path / "session_killer.py").write_text(KILLER_PLUGIN)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    tree = synthetic.learner_tree(tmp_path / "tree", synthetic.REFERENCE, other=True)
    report = runner.run(grading(course, tree, hidden=False, extra_args=["-p", "session_killer"])).to_json()
    assert not report["complete"]
    assert any("01_demo" in p and "killed by signal SIGKILL" in p for p in report["problems"]), report["problems"]
    killed = task_result(report, "01_demo")
    assert killed["tests"] and all(t["status"] == "error" and "not graded" in t["feedback"] for t in killed["tests"])
    assert task_result(report, "02_other")["points"] == 3.0
