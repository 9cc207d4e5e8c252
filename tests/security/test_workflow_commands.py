"""Under GitHub Actions (`grader check --format github`), a learner's text must never become a
workflow command: a mask, an output, an annotation of theirs, or a `::stop-commands::` that
silences the grader's own `::error` annotations.

The output is read as the Actions runner reads a step's output (`actions.runner_commands`).
"""
import os
import re
import subprocess
import sys
from pathlib import Path

from grader.course import COURSE
from grader.reports import github
from grader.schema.report import ScoreReport
from grader.worker.loading import sibling_module

actions = sibling_module(__file__, "actions")
hostile = sibling_module(__file__, "hostile")
formats = sibling_module(str(Path(__file__).parent.parent / "test_formats.py"), "test_formats")

# Each form a learner tries, the stop last so that the others would be live before it.
LEARNER_COMMANDS = ["::add-mask::learner-secret", "::set-output name=x::learner", "::error::learner",
                    "::warning::learner", "::group::learner", "::debug::learner", "##[add-mask]learner-legacy",
                    "::stop-commands::TOKEN"]
LEARNER_LINES = [prefix + command for command in LEARNER_COMMANDS for prefix in ("", "    ")]
LEARNER_MODULE = f'''
import sys as _sys

_LINES = {LEARNER_LINES!r}


def _shout():
    for line in _LINES:
        print(line)
        print(line, file=_sys.stderr)
    raise ValueError("\\n".join(_LINES))


for line in _LINES:
    print(line)
'''


def test_learner_text_never_runs_as_a_workflow_command(tmp_path):
    module = tmp_path / "fork" / hostile.TASK / "attention.py"
    module.parent.mkdir(parents=True)
    stub = hostile.STUB.replace('def softmax(x, axis=-1):\n', 'def softmax(x, axis=-1):\n    _shout()\n', 1)
    assert stub != hostile.STUB
    module.write_text(LEARNER_MODULE + stub, encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path / "fork"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "GITHUB_OUTPUT": str(tmp_path / "outputs")}
    done = subprocess.run([sys.executable, "-m", "grader.cli", "check", "01", "--impl", str(tmp_path / "fork"),
                           "--format", "github"], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    output = done.stdout + done.stderr          # the runner reads both
    assert done.returncode == 1, output[-3000:]
    shown = {line.strip() for line in output.splitlines()}
    assert not [c for c in LEARNER_COMMANDS if c not in shown], "the learner's text did not reach the output"

    commands = actions.runner_commands(done.stdout)
    names = [name for name, _ in commands]
    assert names[:2] == ["stop-commands", "resume"] and set(names[2:]) == {"error"}, commands
    token = commands[0][1].split("::")[2]
    assert re.fullmatch(r"[0-9a-f]{64}", token) and output.count(token) == 2
    visible = (COURSE.exercises / hostile.TASK / "test_attention.py").read_text(encoding="utf-8")
    lost = len(re.findall(r"^def test_", visible, re.M))          # every visible test, on a stub
    assert lost > github.MAX_ERRORS and len(names[2:]) == github.MAX_ERRORS, commands   # what Actions keeps
    assert f"{lost - github.MAX_ERRORS + 1} more lost test(s)" in commands[-1][1], commands[-1]
    block_end = done.stdout.index(commands[1][1])
    assert all(done.stdout.index(line) > block_end for _, line in commands[2:])
    assert all(line.startswith("::error title=") for _, line in commands[2:])
    assert any("%0A    ::stop-commands::TOKEN" in line for _, line in commands[2:])    # escaped: data of the annotation
    assert not [c for c in actions.runner_commands(done.stderr)], done.stderr[-2000:]


def test_a_summary_written_to_the_stream_is_inside_a_block_of_its_own(tmp_path):
    report = formats.hand_written_report(tmp_path)
    (lost, *_) = [t for t in report.tests() if t.lost]
    lost.feedback = "\n".join(LEARNER_LINES)
    stream = actions.Stream()
    github.publish(ScoreReport.from_json(report.to_json()), environ={"GITHUB_WORKSPACE": str(tmp_path)}, stream=stream)
    commands = actions.runner_commands(stream.text)
    names = [name for name, _ in commands]
    assert names[-2:] == ["stop-commands", "resume"] and set(names[:-2]) == {"error"}, commands
    assert "::stop-commands::TOKEN" in stream.text and "%0A    ::stop-commands::TOKEN" in commands[0][1]
