"""One check of the warm loop, in forked children (`grader.learning.session`): learner code that hangs
past its test's limit (swallowing pytest-timeout's own interruption) or kills its process costs
that check, with the results before it kept; the parent never loads the learner's module. With
two children, each runs its share of the tests, and the report is the whole suite in its order."""
import os
import re
import sys
import time

import pytest

from grader.course import COURSE
from grader.learning.session import STOPPED_AT_TIMEOUT, WATCHDOG_MARGIN_S, CheckChild, shares_of
from grader.schema.report import NOT_RUN

TASK = COURSE.task_named("01")
# The visible tests of exercise 01 declare 30 s each (`QUICK` in their file).
DECLARED_LIMIT_S = float(re.search(r"^QUICK = (\d+)", (TASK.exercise_dir / "test_attention.py")
                                   .read_text(encoding="utf-8"), re.M).group(1))


def reference_with(tmp_path, function: str, body: str):
    """The reference module of exercise 01 in a learner's tree, `function` replaced by `body`."""
    source = (COURSE.solutions / TASK.name / f"{TASK.module}.py").read_text(encoding="utf-8")
    start = source.index(f"\ndef {function}(")
    end = source.index("\ndef ", start + 1)
    signature = source[start:source.index(":\n", start) + 2]
    folder = tmp_path / "impl" / TASK.name
    folder.mkdir(parents=True)
    path = folder / f"{TASK.module}.py"
    path.write_text("import os, signal, time\n" + source[:start] + signature + body + source[end:], encoding="utf-8")
    return path


def by_title(report):
    return {test.id.split("::")[-1]: test for test in report.task(TASK.name).tests}


def learner_module_loaded(path) -> bool:
    return any(getattr(module, "__file__", None) == str(path) for module in list(sys.modules.values()))


@pytest.mark.full       # the watchdog is exercised in the default tier by a hang in a real terminal (test_learning_watch)
def test_a_hang_that_swallows_the_timeout_is_stopped_at_the_tests_own_limit(tmp_path):
    path = reference_with(tmp_path, "split_heads", "    while True:\n        try:\n            time.sleep(1)\n"
                                                   "        except BaseException:\n            pass\n")
    started = []
    child = CheckChild(TASK, path.parent.parent, tmp_path / "work", shares=1)     # one child: the suite's order
    result = child.check(on_test=lambda name, limit: started.append((name, limit)))
    tests = by_title(result.report)
    hung = [name for name, test in tests.items() if test.status == "timeout"]
    assert len(hung) == 1, {name: t.status for name, t in tests.items()}
    assert "split" in hung[0] or "head" in hung[0], hung
    assert f"time limit of {DECLARED_LIMIT_S:g} s" in tests[hung[0]].feedback
    assert started[-1] == (hung[0], DECLARED_LIMIT_S)
    order = list(tests)
    before, after = order[:order.index(hung[0])], order[order.index(hung[0]) + 1:]
    assert before and all(tests[name].status == "passed" for name in before), "results before the hang are kept"
    assert after and all(tests[name].feedback == NOT_RUN for name in after)
    assert result.report.problems == [STOPPED_AT_TIMEOUT]
    assert DECLARED_LIMIT_S <= result.seconds < DECLARED_LIMIT_S + WATCHDOG_MARGIN_S + 15
    assert not learner_module_loaded(path), "the watcher's own process must never import the learner's module"


def test_a_process_killed_by_learner_code_costs_the_test_it_ran(tmp_path):
    path = reference_with(tmp_path, "causal_mask", "    os.kill(os.getpid(), signal.SIGSEGV)\n")
    child = CheckChild(TASK, path.parent.parent, tmp_path / "work", shares=2)
    started = time.monotonic()
    result = child.check()
    tests = by_title(result.report)
    crashed = [name for name, test in tests.items() if test.status == "crashed"]
    # each child dies at the first test of its share that calls causal_mask
    assert 1 <= len(crashed) <= 2 and any("causal" in name for name in crashed), \
        {name: t.status for name, t in tests.items()}
    assert all("SIGSEGV" in tests[name].feedback for name in crashed)
    assert any(test.status == "passed" for test in tests.values())
    assert time.monotonic() - started < DECLARED_LIMIT_S, "a crash is reported at once, not at the time limit"
    # The next check runs as if nothing happened: a fresh child.
    path.write_text((COURSE.solutions / TASK.name / f"{TASK.module}.py").read_text(encoding="utf-8"), encoding="utf-8")
    again = child.check().report.task(TASK.name)
    assert again.points == again.max_points > 0


@pytest.mark.full       # the watchdog is exercised in the default tier by a hang in a real terminal (test_learning_watch)
def test_two_children_share_the_suite_and_a_hang_costs_only_its_share(tmp_path):
    """The same hang with two children: the other child's tests all end, the report lists every
    test of the suite once, in the suite's order, and the next check shares by the times measured."""
    path = reference_with(tmp_path, "split_heads", "    while True:\n        try:\n            time.sleep(1)\n"
                                                   "        except BaseException:\n            pass\n")
    whole = CheckChild(TASK, COURSE.solutions, tmp_path / "whole", shares=1).check().report.task(TASK.name)
    child = CheckChild(TASK, path.parent.parent, tmp_path / "work", shares=2)
    result = child.check()
    tests = by_title(result.report)
    assert list(tests) == [t.id.split("::")[-1] for t in whole.tests], "every test once, in the suite's order"
    hung = [name for name, test in tests.items() if test.status == "timeout"]
    assert 1 <= len(hung) <= 2 and result.report.problems == [STOPPED_AT_TIMEOUT]
    passed = {name for name, test in tests.items() if test.status == "passed"}
    for share in shares_of([t.id for t in whole.tests], {}, 2):      # the first check's shares: untimed
        names = {test.split("::")[-1] for test in share}
        assert names & passed, f"a child ran none of its tests to the end: {sorted(names)}"
    # the next check shares by the times of the tests that reported (a hung test's child was killed first)
    ran = {test.id for test in result.report.task(TASK.name).tests if test.feedback != NOT_RUN and test.status != "timeout"}
    assert ran and set(child.durations) == ran


def test_children_forked_ahead_run_the_module_as_saved_after_them(tmp_path):
    """`prepare` forks the next check's children before the save: they collect and wait, and run
    the module as it is when the check begins; dropped ones leave no process behind."""
    path = reference_with(tmp_path, "causal_mask", "    raise RuntimeError('not yet')\n")
    child = CheckChild(TASK, path.parent.parent, tmp_path / "work", shares=2)
    first = child.check().report.task(TASK.name)
    assert first.points < first.max_points
    child.prepare()
    forked_ahead = [c.process.pid for c in child._ready]
    assert len(forked_ahead) == 2 and all(alive(pid) for pid in forked_ahead)
    path.write_text((COURSE.solutions / TASK.name / f"{TASK.module}.py").read_text(encoding="utf-8"), encoding="utf-8")
    result = child.check()
    again = result.report.task(TASK.name)
    assert again.points == again.max_points > 0, {t.id: t.status for t in again.tests}
    assert not any(alive(pid) for pid in forked_ahead), "each child serves one check"
    assert not learner_module_loaded(path)
    child.prepare()
    dropped = [c.process.pid for c in child._ready]
    child.discard()
    assert child._ready == [] and not any(alive(pid) for pid in dropped)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_shares_balance_the_measured_times():
    durations = {"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0}
    assert shares_of(list(durations), durations, 2) == [{"a", "d"}, {"b", "c"}]
    assert shares_of(["x", "y", "z"], {}, 2) == [{"x", "z"}, {"y"}]      # untimed: alternately, in order
    assert shares_of(["x", "y"], {}, 1) == [{"x", "y"}]
