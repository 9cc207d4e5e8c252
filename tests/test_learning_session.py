"""One check of the warm loop, in a forked child (`grader.learning.session`): learner code that hangs
past its test's limit (swallowing pytest-timeout's own interruption) or kills its process costs
that check, with the results before it kept; the parent never loads the learner's module."""
import re
import sys
import time

from grader.core.outcome import NOT_RUN
from grader.learning.session import STOPPED_AT_TIMEOUT, WATCHDOG_MARGIN_S, CheckChild
from grader.tasks import SOLUTIONS, task_named

TASK = task_named("01")
# The visible tests of exercise 01 declare 30 s each (`QUICK` in their file).
DECLARED_LIMIT_S = float(re.search(r"^QUICK = (\d+)", (TASK.exercise_dir / "test_attention.py")
                                   .read_text(encoding="utf-8"), re.M).group(1))


def reference_with(tmp_path, function: str, body: str):
    """The reference module of exercise 01 in a learner's tree, `function` replaced by `body`."""
    source = (SOLUTIONS / TASK.name / f"{TASK.module}.py").read_text(encoding="utf-8")
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


def test_a_hang_that_swallows_the_timeout_is_stopped_at_the_tests_own_limit(tmp_path):
    path = reference_with(tmp_path, "split_heads", "    while True:\n        try:\n            time.sleep(1)\n"
                                                   "        except BaseException:\n            pass\n")
    started = []
    child = CheckChild(TASK, path.parent.parent, tmp_path / "work")
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
    child = CheckChild(TASK, path.parent.parent, tmp_path / "work")
    started = time.monotonic()
    result = child.check()
    tests = by_title(result.report)
    crashed = [name for name, test in tests.items() if test.status == "crashed"]
    assert len(crashed) == 1 and "causal" in crashed[0], {name: t.status for name, t in tests.items()}
    assert "SIGSEGV" in tests[crashed[0]].feedback
    assert any(test.status == "passed" for test in tests.values())
    assert time.monotonic() - started < DECLARED_LIMIT_S, "a crash is reported at once, not at the time limit"
    # The next check runs as if nothing happened: a fresh child.
    path.write_text((SOLUTIONS / TASK.name / f"{TASK.module}.py").read_text(encoding="utf-8"), encoding="utf-8")
    again = child.check().report.task(TASK.name)
    assert again.points == again.max_points > 0
