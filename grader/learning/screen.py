"""What the learner's loop shows: a check's table per concept in the README's order (each failing
one with its reason), the focused concept's first failing test in full with the learner's own
line, and a hint. Learner text (feedback, code, printed output) is always `Text`,
never read as rich markup."""
from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from grader.learning.focus import Focus
from grader.learning.hints import Hint, next_command
from grader.learning.progress import concept_of, concept_results
from grader.schema.report import NOT_RUN, ScoreReport, TaskResult, TestResult, location_text

_STATUS_STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "magenta",
                 "crashed": "magenta", "skipped": "yellow"}
MIN_REASON_CHARS = 12        # a failing concept's one-line reason in the table, however narrow the terminal
CUT = "…"                    # marks text cut short
PRINTED_CHARS = 300          # of what a focused test printed, the end is shown
PASSES_MEANS = ("passes: the visible checks pass; the graded suite checks more of each concept (the README's last "
                "section, \"What the graded suite checks\")")


def clipped(text: str, limit: int) -> str:
    """The first line of `text`, at most `limit` characters, with a mark where anything was left out."""
    lines = text.strip().splitlines() or [""]
    line, more = lines[0], len(lines) > 1
    if len(line) > limit or (more and len(line) + 2 > limit):
        return line[:limit - 1].rstrip() + CUT
    return line + (f" {CUT}" if more else "")


def concept_table(task: TaskResult, focus: Focus, width: int, graded: dict[str, list[str]]) -> Table:
    """Every concept in the README's order, the focused one marked; a failing one with its reason, a
    passing one with what the graded suite checks beyond the visible tests (`graded`, the README's
    list): one line each in a terminal `width` wide, cut with a mark."""
    names = focus.ordered(task)
    results = concept_results(task.tests)
    points = {name: f"{results[name][0]:g} / {results[name][1]:g}" for name in names}
    widths = (max([len("concept"), *(len(name) + 2 for name in names)]), max([len("points"), *map(len, points.values())]),
              len("not run"))
    reason_chars = max(MIN_REASON_CHARS, width - sum(widths) - 13)     # 13: four columns' borders and padding
    table = Table()
    table.add_column("concept", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("why")
    for name in names:
        passed = results[name][2]
        lost = [t for t in task.tests if t.lost and concept_of(t) == name]
        first_lost = lost[0] if lost else None
        not_run = bool(lost) and all(t.feedback == NOT_RUN for t in lost)    # the check stopped before them
        focused = name == focus.concept
        status = Text("passes", style="green") if passed else \
            Text("not run", style="yellow") if not_run else Text("to fix", style="red")
        table.add_row(Text(("▶ " if focused else "  ") + name, style="bold" if focused else ""),
                      points[name], status,
                      Text(clipped(first_lost.feedback if first_lost else _beyond(graded.get(name, [])), reason_chars),
                           style="dim"))
    return table


def _beyond(checks: list[str]) -> str:
    return "visible checks pass" + (f"; the graded suite also checks {'; '.join(checks)}" if checks else "")


def focused_failure(task: TaskResult, focus: Focus) -> Group | None:
    """The focused concept's first lost test, in full: its status and title, its feedback, and the
    learner's line it points at (one error that stopped every test is shown as that)."""
    lost = [t for t in task.tests if t.lost]
    if not lost:
        return None
    test = next((t for t in lost if concept_of(t) == focus.concept), lost[0])
    if test.status == "error" and all(t.status == "error" and t.feedback == test.feedback for t in lost):
        heading = Text(f"every test stopped at the same error ({len(lost)} tests):", style="bold red")
    else:                 # (a module that does not import, say: one error, not the first test's fault)
        heading = Text.assemble(("focus: ", "bold"), (concept_of(test), "bold"), " · ",
                                (test.status, _STATUS_STYLE.get(test.status, "")), " ", test.title)
    return Group(heading, *_details(test))


def _details(test: TestResult) -> list[Text]:
    parts = [Text("\n".join("  " + line for line in test.feedback.splitlines()))]
    if test.location:
        parts.append(Text("  " + location_text(test.location), style="cyan"))
    if test.output:
        printed = test.output.strip()
        printed = printed if len(printed) <= PRINTED_CHARS else CUT + printed[-PRINTED_CHARS:]
        parts.append(Text("  printed: " + printed.replace("\n", "\n  "), style="dim"))
    return parts


def hint_text(task_name: str, hint: Hint) -> Text:
    again = " (every hint seen: the last again)" if hint.repeated else ""
    return Text.assemble((f"hint {hint.number} of {hint.total} · {hint.concept}{again}: ", "bold yellow"), hint.text,
                         ("" if hint.number == hint.total else f"\n  ({next_command(task_name, hint.concept)} "
                                                               "for the next one)", "dim"))


def check_screen(report: ScoreReport, task_name: str, header: Text, hint: Hint | None, footer: str,
                 focus: Focus, width: int, graded: dict[str, list[str]]) -> Group:
    """The whole screen after one check, for a terminal `width` wide."""
    parts: list[RenderableType] = [header]
    task = report.task(task_name)
    if task is not None and task.tests:
        parts.append(concept_table(task, focus, width, graded))
        if any(passed for _, _, passed in concept_results(task.tests).values()):
            parts.append(Text(PASSES_MEANS, style="dim"))
        failure = focused_failure(task, focus)
        parts.append(failure if failure is not None else
                     Text("every visible test passed: the graded suite checks more (the README's last section)",
                          style="bold green"))
    if hint is not None:
        parts.append(hint_text(task_name, hint))
    parts += [Text.assemble(("problem: ", "bold red"), problem) for problem in report.problems]
    parts.append(Text(footer, style="dim"))
    return Group(*parts)
