"""Exercise 05's timing tests judge `time_ms` by what a witness in the test's process saw: the
functions it times run there, counted and timed on the test's clock. A module that replaces the
timing probes in its own process (their files are in its sandbox, so their names are known) and
reports the numbers the tests want, without calling anything, earns none of those points. Run
inside the learner's process, the same probes once reported whatever the module wrote."""
import pytest

from grader.core.loading import sibling_module
from grader.reports.report import read_report
from grader.tasks import EXERCISES, locate_module, task_named

attacks = sibling_module(__file__, "attacks")
harness = sibling_module(__file__, "harness")

pytestmark = [pytest.mark.skipif(harness.sandbox_skip_reason() is not None, reason=str(harness.sandbox_skip_reason())),
              pytest.mark.timeout(900)]

FORGED_PROBES = '''

import sys as _sys

def _forged_time_calls(module, function, iters, warmup):
    return 10.0                         # what the median test's calls sleep

def _forged_time_simulated_cuda(module, device, iters, warmup):
    return 30.0                         # the device work each call queues

for _module in list(_sys.modules.values()):
    if hasattr(_module, "time_calls") and hasattr(_module, "time_simulated_cuda"):
        _module.time_calls, _module.time_simulated_cuda = _forged_time_calls, _forged_time_simulated_cuda
        print("ATTACK-OBSERVED forged the timing probes of", getattr(_module, "__file__", "?"))
'''


def test_timing_probes_replaced_in_the_learners_process_earn_nothing(tmp_path):
    stub = locate_module(EXERCISES, task_named("05")).read_text(encoding="utf-8")
    attacks.course_layout(tmp_path / "learner", {"05": stub + FORGED_PROBES})
    cli = harness.run_cli(["grade", tmp_path / "learner", "--tasks", "05", "--out-dir", tmp_path / "out"],
                          harness.grading_env(tmp_path), cwd=tmp_path, timeout_s=800)
    assert cli.returncode in (0, 1), cli.output[-2000:]
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*.log"))
    assert "ATTACK-OBSERVED forged the timing probes" in logs, "the forgery never ran, so this proves nothing"
    timing = [t for t in read_report(tmp_path / "out" / "learner" / "score_report.json").tests()
              if t.suite == "hidden" and t.id.split("::")[-1].startswith("test_time_ms") and t.graded]
    assert len(timing) == 4, [t.id for t in timing]
    assert all(t.status == "failed" for t in timing), [(t.id, t.status, t.feedback) for t in timing]
    assert sum(t.points for t in timing) == 0
    assert any("called fn 0 times" in (t.feedback or "") for t in timing), [t.feedback for t in timing]
