"""How an outcome is decided, on small synthetic suites run with pytester: a timeout is known by
pytest-timeout's own alarm, never by a message; a GPU test is "not graded" by its marker (and
only when skipped before it runs), never by the reason a skip gives."""
import pytest

from grader.session.outcome import GPU_SKIP_REASON, phase_outcome
from grader.worker.dispatch import is_test_timeout

pytest_plugins = ["pytester"]

SUITE = '''
import time
import pytest
from grader.worker.dispatch import is_test_timeout


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.excinfo is not None:
        print("TIMEOUT-RULE", item.name, is_test_timeout(call.excinfo.value))
    return report
'''


def test_only_pytest_timeouts_alarm_is_a_timeout(pytester):
    pytester.makeconftest(SUITE)
    pytester.makepyfile(test_rule='''
import time
import pytest

@pytest.mark.timeout(0.5, method="signal")
def test_sleeps_past_its_limit():
    time.sleep(5)

def test_writes_the_message_itself():
    pytest.fail("Timeout >0.5s")
''')
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*TIMEOUT-RULE test_sleeps_past_its_limit True*",
                                 "*TIMEOUT-RULE test_writes_the_message_itself False*"])


def test_a_forged_timeout_message_is_a_plain_failure():
    with pytest.raises(pytest.fail.Exception) as caught:
        pytest.fail("Timeout >1.0s")
    assert not is_test_timeout(caught.value)


class _Skipped:
    """A phase report of a skipped test, as pytest makes it."""
    passed, skipped = False, True

    def __init__(self, reason: str):
        self.longrepr = ("file.py", 1, f"Skipped: {reason}")


@pytest.mark.parametrize("gpu, when, reason, graded", [
    (True, "setup", GPU_SKIP_REASON, False),          # the plugin's skip of a GPU test on a machine without one
    (False, "setup", GPU_SKIP_REASON, True),          # the words alone earn nothing: the marker decides
    (True, "call", GPU_SKIP_REASON, True),            # skipped by the test's own code, after it started
    (False, "call", "not today", True),
])
def test_a_gpu_test_skipped_before_it_runs_is_the_only_skip_not_graded(gpu, when, reason, graded):
    status, feedback, is_graded = phase_outcome(when, _Skipped(reason), None, hidden=False, gpu=gpu)
    assert (status, feedback, is_graded) == ("skipped", reason, graded)
