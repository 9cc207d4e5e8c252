"""A score report as GitHub Actions shows it (`grader check --format github`).

- one `::error` annotation per lost test, on the learner's own line when the report knows it
  (`TestResult.location`), else on their module; GitHub shows at most 10 error annotations per
  step, so past 9 the tenth says how many more there are and sends the reader to the summary;
- a Markdown score table and every lost test's feedback, appended to `$GITHUB_STEP_SUMMARY`;
- `points`, `max-points` and `percent` appended to `$GITHUB_OUTPUT`, for later steps.

Outside Actions (no `$GITHUB_STEP_SUMMARY`) the summary goes to the output stream instead.

Actions runs any line of a step's output that starts (after spaces) with `::name` as a workflow
command, and any line holding `##[name]` as a legacy one: a learner's print or exception message
could add a mask, set an output or stop command processing so that the grader's own annotations
are never seen. So everything `grader check` prints before its annotations (the streamed test
run, the score table, feedback, what learner code printed) is written inside `commands_stopped`,
between `::stop-commands::TOKEN` and `::TOKEN::` with a token made for that block and shown to
no one before it is used; inside the annotations, learner text is escaped as Actions unescapes it.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import sys
from pathlib import Path

from grader.schema.report import ScoreReport, TaskResult, TestResult, location_text, not_graded_note, percent_text

MAX_ERRORS = 10           # GitHub keeps 10 error annotations per step and drops the rest


def workflow_commands(report: ScoreReport, workspace: Path) -> list[str]:
    """The workflow commands, in report order, problems first."""
    lines = [_command("error", problem, title="grading incomplete") for problem in report.problems]
    lost = [(task, test) for task in report.tasks for test in task.tests if test.lost]
    room = MAX_ERRORS - len(lines)
    shown = lost if len(lost) <= room else lost[:max(room - 1, 0)]
    for task, test in shown:
        lines.append(_command("error", test.feedback or test.status, title=_title(task, test),
                              **_place(task, test, workspace)))
    if len(shown) < len(lost) and room > 0:
        rest = len(lost) - len(shown)
        lines.append(_command("error", f"{rest} more lost test(s) are listed in the job summary.",
                              title=f"{rest} more test(s) to fix"))
    return lines[:MAX_ERRORS]


def step_summary(report: ScoreReport) -> str:
    total = report.total
    out = [f"## Score: {total.points:g} / {total.max_points:g} points ({total.percent:.1f}%)", "",
           "| task | points | % | passed | to fix |", "|---|---:|---:|---:|---:|"]
    for task in report.tasks:
        passed = sum(t.status == "passed" for t in task.tests)
        out.append(f"| {_cell(task.task)} | {task.points:g} / {task.max_points:g} | {percent_text(task.points, task.max_points)} "
                   f"| {passed} | {sum(t.lost for t in task.tests)} |")
    if total.not_graded_points:
        out += ["", not_graded_note(report.tests())]
    for problem in report.problems:
        out += ["", f"**Incomplete grading:** {_cell(problem)}"]
    lost = [(task, test) for task in report.tasks for test in task.tests if test.lost]
    if lost:
        out += ["", f"### To fix ({len(lost)})", ""]
    for task, test in lost:
        where = f" ({location_text(test.location)})" if test.location else ""
        out += [f"<details><summary>{_html(_title(task, test))}{where}</summary>", "",
                *_fenced(test.feedback or test.status), "", "</details>"]
    return "\n".join(out) + "\n"


def outputs(report: ScoreReport) -> str:
    total = report.total
    return f"points={total.points:g}\nmax-points={total.max_points:g}\npercent={total.percent:.2f}\n"


@contextlib.contextmanager
def commands_stopped(stream=None):
    """Actions shows whatever is written inside the block as text and runs none of it as a
    workflow command; the block ends with everything written so far flushed."""
    stream = stream or sys.stdout
    token = secrets.token_hex(32)       # 256 random bits: no learner line can end the block
    stream.write(f"::stop-commands::{token}\n")
    stream.flush()
    try:
        yield
    finally:
        for written in (sys.stdout, sys.stderr, stream):
            written.flush()
        stream.write(f"::{token}::\n")
        stream.flush()


def publish(report: ScoreReport, environ=os.environ, stream=None) -> None:
    """Write everything GitHub reads: annotations to `stream`, the summary and the outputs to the
    files Actions names in `environ`."""
    stream = stream or sys.stdout
    workspace = Path(environ.get("GITHUB_WORKSPACE") or os.getcwd())
    for line in workflow_commands(report, workspace):
        stream.write(line + "\n")
    summary = environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(step_summary(report))
    else:
        with commands_stopped(stream):          # the summary quotes feedback: learner text
            stream.write(step_summary(report))
    if environ.get("GITHUB_OUTPUT"):
        with open(environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
            f.write(outputs(report))
    stream.flush()


def _title(task: TaskResult, test: TestResult) -> str:
    return f"{task.task}: {test.title} ({test.max_points:g} pt, {test.status})"


def _place(task: TaskResult, test: TestResult, workspace: Path) -> dict:
    """`file` (relative to the repository, as GitHub wants it) and `line` of an annotation."""
    if not task.module.found:
        return {}
    path = Path(task.module.path)
    try:
        relative = path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        relative = f"exercises/{task.task}/{path.name}"     # graded elsewhere: the fork's layout
    place = {"file": relative}
    if test.location:
        place["line"] = str(test.location["line"])
    return place


def _command(kind: str, message: str, **properties: str) -> str:
    props = ",".join(f"{name}={_escape_property(value)}" for name, value in properties.items())
    return f"::{kind}{' ' + props if props else ''}::{_escape_data(message)}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _cell(text: str) -> str:
    return _html(text).replace("|", "\\|").replace("\n", " ")


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _fenced(text: str) -> list[str]:
    """A code block whose fence is longer than any run of backticks inside it."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return [fence, text, fence]
