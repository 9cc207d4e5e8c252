"""Official grading end to end: the worker backend, the pool, the score report.

The gradings run once per module (in parallel) and each test reads the report it needs."""
import ast
import os
import shutil

import pytest

from grader.running import runner
from grader.tasks import EXERCISES, HIDDEN, SOLUTIONS, all_tasks, task_named

# The module's gradings run once, in the first test's setup. Full tier: the engine's outcomes on nine real
# trees; the default tier grades for real at every level elsewhere (the attacks, the platforms, the CLI).
pytestmark = [pytest.mark.timeout(900), pytest.mark.full]

ATTENTION = task_named("01")
OTHERS = [t for t in all_tasks() if t != ATTENTION]


def tree_with(tmp, name, attention_source=None, layout="course", others=True):
    """A submission tree: the reference for every other task, and `attention_source` for task
    01 (None: the file is missing)."""
    root = tmp / name
    folder = {"course": root / ATTENTION.name, "fork": root / "exercises" / ATTENTION.name, "flat": root}[layout]
    folder.mkdir(parents=True)
    if attention_source is not None:
        (folder / "attention.py").write_text(attention_source)
    for task in OTHERS if others else []:
        shutil.copytree(SOLUTIONS / task.name, root / task.name)
    return root


REFERENCE = (SOLUTIONS / ATTENTION.name / "attention.py").read_text()
SEGFAULT_AND_HANG = REFERENCE.replace(
    "def softmax(x, axis=-1):", "def softmax(x, axis=-1):\n    import os, signal; os.kill(os.getpid(), signal.SIGSEGV)\n"
).replace("def split_heads(x, n_heads):", "def split_heads(x, n_heads):\n    while True: pass\n")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trees")
    visible = dict(hidden=False)
    jobs = {
        "reference": runner.GradingRun(SOLUTIONS, [ATTENTION]),
        "stub": runner.GradingRun(EXERCISES, [ATTENTION]),
        "exit_at_import": runner.GradingRun(tree_with(tmp, "exit", "import sys\nsys.exit(0)\n"), list(all_tasks())),
        "missing": runner.GradingRun(tree_with(tmp, "missing", None, others=False), [ATTENTION]),
        "syntax_error": runner.GradingRun(tree_with(tmp, "syntax", "def softmax(x:\n", others=False), [ATTENTION]),
        "fork_layout": runner.GradingRun(tree_with(tmp, "fork", REFERENCE, "fork", others=False), [ATTENTION], **visible),
        "flat_layout": runner.GradingRun(tree_with(tmp, "flat", REFERENCE, "flat", others=False), [ATTENTION], **visible),
        "crash_and_hang": runner.GradingRun(tree_with(tmp, "crash", SEGFAULT_AND_HANG, others=False), [ATTENTION],
                                            **visible),
        "slow_import": runner.GradingRun(tree_with(tmp, "slow", SLOW_IMPORT, others=False), [ATTENTION], **visible),
    }
    return {name: report.to_json() for name, report in zip(jobs, runner.run_many(list(jobs.values()), workers=2))}


def task_result(report, task=ATTENTION):
    return next(t for t in report["tasks"] if t["task"] == task.name)


def test_reference_earns_every_cpu_point_through_the_worker(reports):
    report = reports["reference"]
    result = task_result(report)
    assert report["complete"] and report["problems"] == []
    assert result["max_points"] > 40 and result["points"] == result["max_points"]
    assert {t["suite"] for t in result["tests"]} == {"visible", "hidden"}
    assert report["run"]["config"]["backend"] == "worker"


def test_report_carries_the_run_record(reports):
    run = reports["reference"]["run"]
    for key in ("run_id", "started_at", "finished_at", "commit", "config", "data_version", "seed", "environment", "metrics"):
        assert key in run, key
    assert isinstance(run["seed"], int) and run["config"]["seed_from"] and run["environment"]["torch"]
    assert run["metrics"]["percent"] == 100.0
    assert run["metrics"]["worker_startup_s"] > 0


def test_gpu_tests_are_not_graded_without_cuda(reports):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: GPU tests are graded here")
    result = task_result(reports["reference"])
    gpu = [t for t in result["tests"] if not t["graded"]]
    assert gpu and all(t["status"] == "skipped" and "not graded here" in t["feedback"] for t in gpu)
    assert result["not_graded_points"] == sum(t["max_points"] for t in gpu)
    graded_max = sum(t["max_points"] for t in result["tests"] if t["graded"])
    assert result["max_points"] == graded_max


def test_stub_scores_zero_and_points_to_the_readme(reports):
    result = task_result(reports["stub"])
    assert result["points"] == 0 and result["max_points"] > 0
    assert all(t["status"] == "failed" for t in result["tests"] if t["graded"])
    assert all("not implemented yet" in t["feedback"] and "README" in t["feedback"]
               for t in result["tests"] if t["graded"])


@pytest.mark.parametrize("case,message", [
    ("exit_at_import", "SystemExit"), ("missing", "attention.py was not found"), ("syntax_error", "SyntaxError")])
def test_a_broken_module_scores_zero_with_a_clear_message(reports, case, message):
    report = reports[case]
    result = task_result(report)
    assert report["complete"], report["problems"]
    assert result["points"] == 0
    assert all(t["status"] == "error" and message in t["feedback"] for t in result["tests"] if t["graded"])


def test_other_tasks_are_graded_beside_a_broken_one(reports):
    report = reports["exit_at_import"]
    assert {t["task"] for t in report["tasks"]} == {t.name for t in all_tasks()}
    for task in OTHERS:
        result = task_result(report, task)
        assert result["points"] == result["max_points"] > 0, task.name


@pytest.mark.parametrize("layout", ["fork_layout", "flat_layout"])
def test_fork_clones_and_flat_uploads_are_found(reports, layout):
    result = task_result(reports[layout])
    assert result["module"]["found"] and result["points"] == result["max_points"] > 0


def visible_time_limit(name):
    """The seconds the visible test `name` of exercise 01 declares (@pytest.mark.timeout, a number or a constant)."""
    tree = ast.parse((ATTENTION.exercise_dir / "test_attention.py").read_text())
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                 for t in n.targets if isinstance(t, ast.Name)}
    test = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    limit = next(d.args[0] for d in test.decorator_list if isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "timeout")
    return constants[limit.id] if isinstance(limit, ast.Name) else limit.value


SLOW_IMPORT_S = visible_time_limit("test_softmax_rows_sum_to_one") + 8
SLOW_IMPORT = f"import time\ntime.sleep({SLOW_IMPORT_S})\n" + REFERENCE


def test_crashes_and_hangs_cost_their_tests_only(reports):
    tests = {t["id"].split("::")[-1]: t for t in task_result(reports["crash_and_hang"])["tests"]}
    softmax = [t for name, t in tests.items() if "softmax" in name]
    assert softmax and all(t["status"] == "crashed" and "SIGSEGV" in t["feedback"] for t in softmax)
    heads = tests["test_split_heads_shape_and_round_trip"]
    assert heads["status"] == "timeout" and heads["duration_s"] < visible_time_limit("test_split_heads_shape_and_round_trip") + 5
    assert tests["test_causal_mask_square"]["status"] == "passed"        # after the crash: a fresh worker
    assert tests["test_attention_matches_pytorch"]["status"] == "crashed"  # it calls softmax... through attention


def test_an_import_slower_than_a_test_goes_on_in_the_next(reports):
    """The first test's time limit interrupts the import, not the worker: the next test waits on
    for the same import (the whole import has STARTUP_LIMIT_S), and every later test runs normally."""
    tests = task_result(reports["slow_import"])["tests"]
    first, *later = [t for t in tests if t["suite"] == "visible"]
    assert first["status"] == "timeout" and "did not finish importing within the test's time limit" in first["feedback"]
    assert later[0]["status"] == "passed" and later[0]["duration_s"] < SLOW_IMPORT_S, later[0]
    assert all(t["status"] == "passed" for t in later), [t["id"] for t in later if t["status"] != "passed"]


def test_hidden_feedback_never_quotes_hidden_source(reports):
    hidden_lines = {line.strip() for path in (HIDDEN / ATTENTION.name).glob("*.py")
                    for line in path.read_text().splitlines() if len(line.strip()) > 30}
    for case in ("stub", "crash_and_hang", "syntax_error"):
        for task in reports[case]["tasks"]:
            for test in task["tests"]:
                leaked = [line for line in hidden_lines if line in test["feedback"]]
                assert not leaked, f"{test['id']} quotes hidden source: {leaked[0]}"


KILLER_PLUGIN = '''
import os, signal

def pytest_runtest_call(item):
    if item.name == "test_causal_mask_square":       # the trusted session of task 01, mid-task
        os.kill(os.getpid(), signal.SIGKILL)
'''


def test_a_killed_task_session_costs_that_task_alone(tmp_path, monkeypatch):
    """The kernel ending one task's grading process (out of memory, say) leaves that task's tests
    listed as not graded, says how it ended, and grades the tasks after it."""
    (tmp_path / "session_killer.py").write_text(KILLER_PLUGIN)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    memory = task_named("04")
    report = runner.run(runner.GradingRun(SOLUTIONS, [ATTENTION, memory], hidden=False,
                                          extra_args=["-p", "session_killer"])).to_json()
    assert not report["complete"]
    assert any(ATTENTION.name in p and "killed by signal SIGKILL" in p for p in report["problems"]), report["problems"]
    killed = task_result(report)
    assert killed["tests"] and all(t["status"] == "error" and "not graded" in t["feedback"] for t in killed["tests"])
    after = task_result(report, memory)
    assert after["points"] == after["max_points"] > 0
