"""What the learner's loop shows: a check's table per concept, the first failing test with the
learner's own line, and a hint. Learner text (feedback, code, printed output) is always `Text`,
never read as rich markup."""
from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from grader.learning.hints import Hint, next_command
from grader.learning.progress import concept_results
from grader.schema.report import ScoreReport, TaskResult, location_text

_STATUS_STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "magenta",
                 "crashed": "magenta", "skipped": "yellow"}
FEEDBACK_LINES = 12          # the first failing test's feedback, cut to what a screen holds


def concept_table(task: TaskResult) -> Table:
    table = Table()
    table.add_column("concept")
    table.add_column("points", justify="right")
    table.add_column("")
    for name, (points, max_points, passed) in concept_results(task.tests).items():
        table.add_row(Text(name), f"{points:g} / {max_points:g}",
                      Text("done", style="green") if passed else Text("to fix", style="red"))
    return table


def first_failure(task: TaskResult) -> Group | None:
    """The first lost test: its status and title, its feedback, and the learner's line it points at."""
    test = next((t for t in task.tests if t.lost), None)
    if test is None:
        return None
    lost = [t for t in task.tests if t.lost]
    if test.status == "error" and all(t.status == "error" and t.feedback == test.feedback for t in lost):
        heading = Text(f"every test stopped at the same error ({len(lost)} tests):", style="bold red")
    else:                 # (a module that does not import, say: one error, not the first test's fault)
        heading = Text.assemble(("first to fix: ", "bold"), (test.status, _STATUS_STYLE.get(test.status, "")), " ",
                                test.title, (f"  [{test.concept}]" if test.concept else "", "dim"))
    parts = [heading]
    lines = test.feedback.splitlines()
    shown = lines[:FEEDBACK_LINES] + (["..."] if len(lines) > FEEDBACK_LINES else [])
    parts.append(Text("\n".join("  " + line for line in shown)))
    if test.location:
        parts.append(Text("  " + location_text(test.location), style="cyan"))
    if test.output:
        parts.append(Text("  printed: " + test.output.strip()[-300:].replace("\n", "\n  "), style="dim"))
    return Group(*parts)


def hint_text(task_name: str, hint: Hint) -> Text:
    again = " (every hint seen: the last again)" if hint.repeated else ""
    return Text.assemble((f"hint {hint.number} of {hint.total} · {hint.concept}{again}: ", "bold yellow"), hint.text,
                         ("" if hint.number == hint.total else f"\n  ({next_command(task_name, hint.concept)} "
                                                               "for the next one)", "dim"))


def check_screen(report: ScoreReport, task_name: str, header: Text, hint: Hint | None, footer: str) -> Group:
    """The whole screen after one check."""
    parts: list[RenderableType] = [header]
    task = report.task(task_name)
    if task is not None and task.tests:
        parts.append(concept_table(task))
        failure = first_failure(task)
        parts.append(failure if failure is not None else Text("every visible test passed", style="bold green"))
    if hint is not None:
        parts.append(hint_text(task_name, hint))
    parts += [Text.assemble(("problem: ", "bold red"), problem) for problem in report.problems]
    parts.append(Text(footer, style="dim"))
    return Group(*parts)
