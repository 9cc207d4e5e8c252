"""A batch whose CLI is killed (`kill -9`) loses nothing: rerun with `--resume`, the reports it
finished are kept as they are, the missing ones are graded, and `summary.csv` is rebuilt from the
reports. The pool process that was grading when its CLI died finishes that grading (its report is
whole: pytest's own timeouts bound it) and then exits; nothing of the batch lives on."""
import csv
import os
import signal
import subprocess
import sys
import time

import pytest

from grader.schema.report import read_report
from grader.worker.loading import sibling_module

attacks = sibling_module(__file__, "attacks")
harness = sibling_module(__file__, "harness")

pytestmark = [pytest.mark.skipif(harness.sandbox_skip_reason() is not None, reason=str(harness.sandbox_skip_reason())),
              pytest.mark.timeout(1800)]

SUBMISSIONS = {"alice": attacks.REFERENCE, "bob": attacks.STUB, "carol": attacks.REFERENCE, "dave": attacks.STUB}
EXPECTED_PERCENT = {"alice": 100.0, "bob": 0.0, "carol": 100.0, "dave": 0.0}
ORPHAN_GRACE_S = 300           # the grading in flight when the CLI died: a stub's, well under a minute unloaded


def test_a_killed_batch_resumes_without_losing_or_redoing_anything(tmp_path):
    paths = []
    for name, source in SUBMISSIONS.items():
        module = tmp_path / "subs" / name / attacks.TASK / "attention.py"
        module.parent.mkdir(parents=True)
        module.write_text(source, encoding="utf-8")
        paths.append(module.parent.parent)
    out = tmp_path / "out"
    env = harness.grading_env(tmp_path)
    args = [sys.executable, "-m", "grader.cli", "grade", *paths, "--tasks", "01", "--out-dir", out]

    with harness.Watch(tmp_path / "tmp") as watch:
        cli = subprocess.Popen([*map(str, args), "--jobs", "1"], cwd=tmp_path, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 900
        while not (out / "alice" / "score_report.json").exists():
            assert cli.poll() is None, "the batch ended before it could be killed"
            assert time.monotonic() < deadline, "the first report never came"
            time.sleep(0.2)
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
    orphans = watch.survivors(grace_s=ORPHAN_GRACE_S)
    kept = (out / "alice" / "score_report.json").read_bytes()
    before = {p.parent.name for p in out.glob("*/score_report.json")}
    assert before < set(SUBMISSIONS), f"the batch was killed too late to test anything: {before}"

    resumed = harness.run_cli([*args[3:], "--jobs", "2", "--resume"], env, cwd=tmp_path, timeout_s=1500)
    assert resumed.returncode == 0, resumed.output[-3000:]
    assert (out / "alice" / "score_report.json").read_bytes() == kept, "a finished report was graded again"
    for name, percent in EXPECTED_PERCENT.items():
        report = read_report(out / name / "score_report.json")
        assert report.complete and report.total.percent == percent, (name, report.total, report.problems)
    with open(out / "summary.csv", newline="", encoding="utf-8") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert {n: float(r["percent"]) for n, r in rows.items()} == EXPECTED_PERCENT
    assert not orphans, f"processes of the killed batch still ran {ORPHAN_GRACE_S} s after its CLI died: {orphans}"
