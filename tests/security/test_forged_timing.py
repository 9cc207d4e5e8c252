"""Exercise 05's timing tests judge `time_ms` by what a witness in the test's process saw: the
functions it times run there, counted and timed on the test's clock. A module that replaces the
timing probes in its own process (their files are in its sandbox, so their names are known) and
reports the numbers the tests want, without calling anything, earns none of those points. Run
inside the learner's process, the same probes once reported whatever the module wrote. A
`time_ms` that calls the function as often as asked but waits for nothing cannot pass the
device test either, whatever number it reports."""
import pytest

from grader.schema.report import read_report
from grader.worker.loading import sibling_module

attacks = sibling_module(__file__, "attacks")
harness = sibling_module(__file__, "harness")

pytestmark = [pytest.mark.skipif(harness.sandbox_skip_reason() is not None, reason=str(harness.sandbox_skip_reason())),
              pytest.mark.timeout(900)]

FORGED_PROBES = '''

import sys as _sys

def _forged_time_calls(module, function, iters, warmup):
    return 10.0                         # what the median test's calls sleep, at the middle of their draws

def _forged_time_simulated_cuda(module, device, iters, warmup):
    return 30.0                         # the device work each call queues, at the middle of its draws

for _module in list(_sys.modules.values()):
    if hasattr(_module, "time_calls") and hasattr(_module, "time_simulated_cuda"):
        _module.time_calls, _module.time_simulated_cuda = _forged_time_calls, _forged_time_simulated_cuda
        print("ATTACK-OBSERVED forged the timing probes of", getattr(_module, "__file__", "?"))
'''

UNTIMED = '''

def time_ms(fn, *, iters=10, warmup=3, device="cpu"):
    """Calls fn as often as asked, reads no clock, waits for nothing, and reports a number the device
    test accepts whatever work (20 to 40 ms) the grading's seed drew."""
    for _ in range(warmup + iters):
        fn()
    return 40.0
'''


def graded_timing_tests(tmp_path, addition: str):
    """Grade the exercise-05 stub with `addition`: its hidden timing tests, and its workers' logs."""
    out = attacks.grade_stub_with(tmp_path, "05", addition)
    logs = "".join(p.read_text(errors="replace") for p in out.rglob("*.log"))
    timing = [t for t in read_report(out / "learner" / "score_report.json").tests()
              if t.suite == "hidden" and t.id.split("::")[-1].startswith("test_time_ms") and t.graded]
    return timing, logs


def test_timing_probes_replaced_in_the_learners_process_earn_nothing(tmp_path):
    timing, logs = graded_timing_tests(tmp_path, FORGED_PROBES)
    assert "ATTACK-OBSERVED forged the timing probes" in logs, "the forgery never ran, so this proves nothing"
    assert len(timing) == 4, [t.id for t in timing]
    assert all(t.status == "failed" for t in timing), [(t.id, t.status, t.feedback) for t in timing]
    assert sum(t.points for t in timing) == 0
    assert any("called fn 0 times" in (t.feedback or "") for t in timing), [t.feedback for t in timing]


@pytest.mark.full       # forged timing is attacked in the default tier by the replaced probes
def test_a_time_ms_that_never_waits_for_the_device_fails_however_right_its_number(tmp_path):
    timing, _ = graded_timing_tests(tmp_path, UNTIMED)
    device = next(t for t in timing if t.id.endswith("test_time_ms_waits_for_queued_device_work"))
    assert device.status == "failed" and "it never waited for the device" in (device.feedback or ""), \
        (device.status, device.feedback)
