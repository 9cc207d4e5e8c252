"""Grading inside a container-sized box (a memory + cpu + pids cgroup with its own cgroup
namespace, as a platform's container gives; `benchmarks/containers.py`): the reference of task 01
gets full marks in Gradescope's default 768 MB / 0.5 vCPU, and a module whose call allocates past
the box costs the tests that call it, as `crashed` with the reason, never the report."""
import json
import shutil

import pytest

from grader.course import COURSE
from grader.worker.loading import load_module

containers = load_module(COURSE.root / "benchmarks" / "containers.py")

pytestmark = [pytest.mark.skipif(containers.unavailable() is not None, reason=str(containers.unavailable())),
              pytest.mark.timeout(900)]

ATTENTION = COURSE.task_named("01")
PLATFORM_MB, PLATFORM_CPUS = 768, 0.5          # Gradescope's default autograder container
CALLERS_OF_CAUSAL_MASK = ("causal_mask", "multi_head_attention")      # the reference's, in attention.py
HOG = "    hog = b'x' * (2 << 30)          # 2 GiB, written: more than the whole box\n"


def grade_in_box(tree, tmp_path):
    report_path = tmp_path / "report.json"
    run = containers.run_in_box(containers.grade_command(["01"], report_path, impl=tree), PLATFORM_MB, PLATFORM_CPUS)
    assert report_path.exists(), f"no score report (exit {run.returncode}):\n{run.output[-3000:]}"
    return run, json.loads(report_path.read_text(encoding="utf-8"))


@pytest.mark.full       # a budget, not a mechanism: the box's limit is attacked in the default tier (memory_bomb)
def test_the_reference_gets_full_marks_in_a_768_mb_box(tmp_path):
    run, report = grade_in_box(COURSE.solutions, tmp_path)
    assert report["complete"] and report["problems"] == []
    assert report["total"]["points"] == report["total"]["max_points"] > 0
    assert run.oom_kills == 0, "the kernel ended a process of the box for memory"


@pytest.mark.full
def test_a_call_that_allocates_past_the_box_costs_its_tests_not_the_report(tmp_path):
    tree = tmp_path / "hog"
    shutil.copytree(COURSE.solutions / ATTENTION.name, tree / ATTENTION.name)
    module = tree / ATTENTION.name / "attention.py"
    source = module.read_text(encoding="utf-8")
    head = 'def causal_mask(q_len, k_len):\n'
    docstring_end = source.index('"""', source.index('"""', source.index(head)) + 3) + 4
    module.write_text(source[:docstring_end] + HOG + source[docstring_end:], encoding="utf-8")

    run, report = grade_in_box(tree, tmp_path)
    assert report["complete"], report["problems"]
    tests = [t for task in report["tasks"] for t in task["tests"]]
    crashed = [t for t in tests if t["status"] == "crashed"]
    assert crashed, "no test crashed: the allocation did not run out of memory"
    for test in crashed:
        assert "out of memory (limit " in test["feedback"], test["feedback"]
        assert test["location"]["function"] in CALLERS_OF_CAUSAL_MASK, test["location"]
    others = [t for t in tests if t not in crashed and t["graded"]]
    assert others and all(t["status"] == "passed" for t in others), \
        [(t["id"], t["status"], t["feedback"][:200]) for t in others if t["status"] != "passed"]
