"""The learner's commands besides the watcher: hints asked for or offered, and the progress table."""
from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from grader.course import COURSE
from grader.learning import hints, progress
from grader.learning.focus import in_order
from grader.learning.screen import hint_text
from grader.readme import concepts_of
from grader.schema.report import ScoreReport


def record_and_pick_hints(report: ScoreReport, source: str, lang: str | None = None) -> list[tuple[str, hints.Hint]]:
    """Remember a self-check's results; for each task with a concept that keeps failing, that
    concept's next hint (the first failing test's concept when it is one of them), marked seen."""
    offered = []
    for task_name, concepts in progress.record(report, source).items():
        task = COURSE.task_named(task_name)
        result = report.task(task_name)
        failing = [t.concept for t in result.tests if t.lost] if result else []
        concept = next((c for c in failing if c in concepts), concepts[0])
        hint = hints.next_hint(task, concept, hints.language(lang), asked=False)
        if hint is not None:
            offered.append((task_name, hint))
    return offered


def show_hint(task_name: str, concept: str | None, lang: str | None, console: Console) -> bool:
    """`grader hint`: the next unseen hint of a concept; False (and why) when there is none to show."""
    lang = hints.language(lang)
    try:
        task = COURSE.task_named(task_name)
        concept = hints.concept_named(task, concept, lang) if concept else hints.concept_to_work_on(task, lang)
    except KeyError as exc:
        console.print(f"[red]{escape(exc.args[0])}[/]")
        return False
    if concept is None:
        console.print(f"every concept of {task.name} passed in your last run: name one to see its hints "
                      f"({escape(', '.join(hints.ladders(task, lang)))})")
        return True
    hint = hints.next_hint(task, concept, lang, asked=True)
    if hint is None:
        console.print(f"[red]{task.name} has no hints for {escape(concept)!r}[/]")
        return False
    console.print(hint_text(task.name, hint))
    return True


def progress_view() -> Group:
    """`grader progress`: the table, then per exercise begun the concepts still open."""
    by_task = progress.load()
    lines = [Text.assemble((f"{task.name}: ", "bold"), "still open: ", ", ".join(in_order(entry.still_open, concepts_of(task))))
             for task in COURSE.tasks() if (entry := by_task.get(task.name)) is not None and entry.still_open]
    return Group(progress_table(by_task), *lines)


def progress_table(by_task: dict[str, progress.TaskProgress]) -> Table:
    """One row per exercise: concepts passed of those checked, points of the last run, hints asked
    for and offered, runs."""
    table = Table(title="Your progress (visible tests: practice, not a grade)", title_justify="left")
    for column in ("exercise", "concepts", "points", "hints asked", "offered", "runs", "last run"):
        table.add_column(column, justify="left" if column in ("exercise", "last run") else "right",
                         no_wrap=column == "exercise")
    totals = [0, 0, 0.0, 0.0, 0, 0]
    for task in COURSE.tasks():
        entry = by_task.get(task.name)
        if entry is None or not entry.concepts:
            table.add_row(task.name, "-", "-", "-", "-", "0", Text("not started", style="dim"))
            continue
        done = sum(c.status == progress.PASSED for c in entry.concepts.values())
        style = "green" if entry.complete else ""
        table.add_row(Text(task.name, style=style), f"{done} / {len(entry.concepts)}",
                      f"{entry.points:g} / {entry.max_points:g}", str(entry.hints_asked), str(entry.hints_offered),
                      str(entry.runs), f"{(entry.last_run or '')[5:16].replace('T', ' ')} {entry.last_source}")
        for i, value in enumerate((done, len(entry.concepts), entry.points, entry.max_points, entry.hints_asked,
                                   entry.hints_offered)):
            totals[i] += value
    table.add_row(Text("total", style="bold"), f"{totals[0]} / {totals[1]}", f"{totals[2]:g} / {totals[3]:g}",
                  str(totals[4]), str(totals[5]), "", "", end_section=True)
    return table
