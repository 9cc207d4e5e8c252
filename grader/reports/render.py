"""Terminal views of score reports, batch summaries and audits (rich tables)."""
from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from grader.schema.report import NOT_GRADED_STATUS, ScoreReport, TaskResult, not_graded_note, percent_text, points_text

_STATUS_STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "magenta",
                 "crashed": "magenta", "skipped": "yellow"}


def _counts(task: TaskResult) -> Text:
    text = Text()
    counts = Counter(NOT_GRADED_STATUS if not test.graded else test.status for test in task.tests)
    for i, (status, n) in enumerate(sorted(counts.items())):
        text.append(("" if i == 0 else ", ") + f"{n} {status}", style=_STATUS_STYLE.get(status, "dim"))
    return text


def _not_graded_note(points: float) -> str:
    return f" (+{points:g} {NOT_GRADED_STATUS})" if points else ""


def report_table(report: ScoreReport) -> Table:
    run, submission = report.run, report.submission
    caption = f"run {run.get('run_id', '?')}"
    if commit := submission.get("commit"):
        caption += f" · submission commit {commit[:12]}"
    if data_version := run.get("data_version"):
        caption += f" · data {data_version[:12]}"
    table = Table(title=f"Score report: {escape(str(submission.get('path', '?')))}", caption=escape(caption))
    table.add_column("task")
    table.add_column("points", justify="right")
    table.add_column("%", justify="right")
    table.add_column("tests")
    for task in report.tasks:
        table.add_row(task.task, points_text(task.points, task.max_points) + _not_graded_note(task.not_graded_points),
                      percent_text(task.points, task.max_points), _counts(task))
    total = report.total
    table.add_row(Text("total", style="bold"),
                  points_text(total.points, total.max_points) + _not_graded_note(total.not_graded_points),
                  f"{total.percent:.1f}", "", end_section=True)
    return table


def print_report(report: ScoreReport, console: Console, *, first_failure_only: bool = False) -> None:
    """The table, then what went wrong: every failing test, or the first of each task."""
    console.print(report_table(report))
    if report.total.not_graded_points:
        console.print(Text(not_graded_note(report.tests()), style="yellow"))
    for task in report.tasks:
        failing = [t for t in task.tests if t.lost]
        if not failing:
            continue
        shown = failing[:1] if first_failure_only else failing
        heading = f"\n[bold]{task.task}[/]: {len(failing)} test(s) to fix"
        console.print(heading + (" — the first:" if first_failure_only else ":"))
        for test in shown:
            style = _STATUS_STYLE.get(test.status, "")
            console.print(f"  [{style}]{test.status}[/] {test.title} [dim]({test.points:g}/{test.max_points:g})[/]")
            console.print(Text("    " + test.feedback.replace("\n", "\n    ")))
            if test.output:
                console.print(Text("    printed: " + test.output.strip()[-300:].replace("\n", "\n    "), style="dim"))
    for problem in report.problems:        # learner data may be quoted in a problem: never read as markup
        console.print(Text.assemble(("problem: ", "bold red"), problem))


def batch_table(names: list[str], reports: list[ScoreReport]) -> Table:
    tasks = sorted({t.task for r in reports for t in r.tasks})
    table = Table(title=f"{len(reports)} submissions")
    table.add_column("submission")
    for task in tasks:
        table.add_column(task[:2], justify="right")
    table.add_column("total", justify="right")
    table.add_column("%", justify="right")
    table.add_column("notes")
    for name, report in zip(names, reports):
        cells = ["-" if (result := report.task(t)) is None else f"{result.points:g}" for t in tasks]
        total = report.total
        table.add_row(Text(name), *cells, points_text(total.points, total.max_points), f"{total.percent:.1f}",
                      Text("; ".join(report.problems)[:60], style="red"))
    return table


def audit_table(task_audit) -> Table:
    """One task's audit: every graded variant, its points and verdict."""
    c = task_audit.counts()
    caption = "\n".join([
        f"rules: {c['rules_killed']} of {c['rules']} with a killing test",
        f"mutants killed: course {c['course_mutants_killed']}/{c['course_mutants']}, "
        f"independent {c['independent_mutants_killed']}/{c['independent_mutants']}",
        f"alternatives accepted: course {c['course_alternatives_accepted']}/{c['course_alternatives']}, "
        f"independent {c['independent_alternatives_accepted']}/{c['independent_alternatives']}",
        *[f"rule without a killing test: {r.id} ({r.section}): {r.text}" for r in task_audit.uncovered_rules],
        *_operator_lines(c, task_audit.stale_equivalents),
        "OK" if task_audit.ok else "NOT OK"])
    table = Table(title=f"Audit of {task_audit.task}", caption=caption)
    for column in ("variant", "kind", "author", "rule", "points", "verdict"):
        table.add_column(column)
    for e in task_audit.entries:
        if e.kind == "operator":                    # counted in the caption, listed in operator_table
            continue
        points = points_text(e.points, e.max_points) + (" (stopped)" if e.kind == "mutant" and e.killed else "")
        table.add_row(escape(e.name), e.kind, e.origin, e.rule or "", points,
                      Text(e.verdict, style="green" if e.ok else "bold red"))
    return table


def operator_table(task_audit) -> Table | None:
    """One task's operator mutants that no test killed: the survivors, and those declared
    equivalent with the reason (the killed ones are only counted, in `audit_table`'s caption)."""
    shown = [e for e in task_audit.entries if e.kind == "operator" and (e.equivalent is not None or not e.ok)]
    if not shown:
        return None
    table = Table(title=f"Operator mutants of {task_audit.task} not killed", show_lines=True)
    table.add_column("operator mutant: definition: the reference's line -> the mutant's", overflow="fold")
    table.add_column("verdict")
    for e in shown:
        table.add_row(escape(e.name), Text(e.verdict, style="green" if e.ok else "bold red"))
    return table


def _operator_lines(counts: dict, stale: list[str]) -> list[str]:
    if "operators_generated" not in counts:
        return []
    sample = "" if counts["operators_graded"] + counts["operators_equivalent"] == counts["operators_generated"] \
        else f" ({counts['operators_graded']} of them drawn and graded)"
    return [f"operator mutants: {counts['operators_generated']} generated{sample}, {counts['operators_killed']} killed, "
            f"{counts['operators_equivalent']} declared equivalent, {counts['operators_survived']} survived",
            *[f"declared equivalent, but no such operator mutant now: {name}" for name in stale]]


def sweep_table(sweep) -> Table:
    """One task's audit at several seeds: what missed its verdict, and at which seeds."""
    rows = [("false reject", name, seeds) for name, seeds in sweep.false_rejects.items()] + \
        [("survives most seeds", name, seeds) for name, seeds in sweep.survivors.items()] + \
        [("flaky test", test, seeds) for test, seeds in sweep.flaky_tests.items()]
    table = Table(title=f"Audit of {sweep.task} at seeds 0..{len(sweep.seeds) - 1}",
                  caption="OK" if sweep.ok else "NOT OK")
    for column in ("finding", "what", "seeds"):
        table.add_column(column)
    for finding, what, seeds in rows:
        table.add_row(finding, escape(what), ", ".join(map(str, seeds)))
    if not rows:
        table.add_row("none", "every verdict held at every seed", "")
    return table
