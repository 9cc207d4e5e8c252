"""How an outcome is decided, on small synthetic suites run with pytester: a timeout is known by
pytest-timeout's own alarm, never by a message; a GPU test is "not graded" by its marker (and
only when skipped before it runs), never by the reason a skip gives."""
import pytest

from grader.schema.report import NO_GPU, NO_SOCKETS
from grader.session.outcome import phase_outcome
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


@pytest.mark.parametrize("marked, when, reason, graded", [
    (True, "setup", NO_GPU.feedback, False),          # the plugin's skip of a GPU test on a machine without one
    (True, "setup", NO_SOCKETS.feedback, False),      # or of a distributed test at the uid level
    (False, "setup", NO_GPU.feedback, True),          # the words alone earn nothing: the marker decides
    (True, "call", NO_GPU.feedback, True),            # skipped by the test's own code, after it started
    (False, "call", "not today", True),
])
def test_a_test_that_may_go_ungraded_skipped_before_it_runs_is_the_only_skip_not_graded(marked, when, reason, graded):
    status, feedback, is_graded = phase_outcome(when, _Skipped(reason), None, hidden=False, may_go_ungraded=marked)
    assert (status, feedback, is_graded) == ("skipped", reason, graded)
