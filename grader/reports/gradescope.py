"""A score report as Gradescope's autograder results (`results.json`), per Gradescope's
autograder specification: a top-level `score` (points, which override the sum of the tests),
`execution_time` (seconds), `output` (Markdown: the score table and what went wrong around the
tests) and one entry in `tests` per test with `name`, `number`, `score`, `max_score`, `status`,
`output`, `tags` (the concept the test checks) and `visibility`.

Visible suites are `visible`; hidden suites are `after_published` by default, so learners see
their hidden results when the instructor publishes grades. A GPU test not graded here scores 0
of 0 with no status, its name and tags say so, and it never counts as failed.

The top-level `output` is shown to learners at once, so it counts only the tests they may see
now (those `visible`): Gradescope hides the total `score` while some tests are hidden, and the
output must not say it either. The totals with the hidden suites are a test entry of their own,
without points, whose visibility is the hidden suites' (`TOTALS_NAME`).
"""
from __future__ import annotations

import math
from typing import Any

from grader.schema.report import ScoreReport, TaskResult, TestResult, location_text, not_graded_note, percent_text

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
DEFAULT_HIDDEN_VISIBILITY = "after_published"
TOTALS_NAME = "Your score with the graded suite"
SHOWN_LATER = {"hidden": "to your instructor only", "after_due_date": "after the due date",
               "after_published": "when your instructor publishes the grades"}


def gradescope_results(report: ScoreReport, hidden_visibility: str = DEFAULT_HIDDEN_VISIBILITY) -> dict:
    if hidden_visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}, not {hidden_visibility!r}")
    tests = [_test(task, test, f"{t_index}.{index}", hidden_visibility)
             for t_index, task in enumerate(report.tasks, start=1)
             for index, test in enumerate(task.tests, start=1)]
    seen_now = _seen_now(report, hidden_visibility)
    output = summary_markdown(report)
    if seen_now is not report:
        output = summary_markdown(seen_now, scope="Visible tests: ") + \
            f"\n\nYour score with the graded suite is shown {SHOWN_LATER[hidden_visibility]}."
        tests.insert(0, {"name": TOTALS_NAME, "number": "0", "output": summary_markdown(report),
                         "output_format": "md", "visibility": hidden_visibility, "extra_data": {"totals": True}})
    return {"score": report.total.points,
            "execution_time": math.ceil(report.run.get("duration_s") or 0),
            "output": output, "output_format": "md",
            "tests": tests,
            "extra_data": {"max_points": report.total.max_points, "not_graded_points": report.total.not_graded_points,
                           "complete": report.complete, "problems": report.problems,
                           "isolation": report.isolation or None, "run_id": report.run.get("run_id"),
                           "data_version": report.run.get("data_version"), "course_commit": report.run.get("commit")}}


def summary_markdown(report: ScoreReport, scope: str = "") -> str:
    """What the learner reads above the tests: the totals (of the tests `scope` names), per
    task, and anything that went wrong around the tests."""
    total = report.total
    lines = []
    if report.problems:
        lines += ["**The grading is incomplete.** What went wrong:", "",
                  *[f"- {problem}" for problem in report.problems], ""]
    lines += [f"**{scope}{total.points:g} / {total.max_points:g} points ({total.percent:.1f}%)**", "",
              "| task | points | % |", "|---|---:|---:|"]
    lines += [f"| {task.title} | {task.points:g} / {task.max_points:g} | {percent_text(task.points, task.max_points)} |"
              for task in report.tasks]
    if total.not_graded_points:
        lines += ["", not_graded_note(report.tests())]
    level = (report.isolation or {}).get("level")
    if level:
        reason = report.isolation.get("reason")
        lines += ["", f"Isolation of your code during grading: {level}" + (f" ({reason})" if reason else "") + "."]
    return "\n".join(lines)


def _seen_now(report: ScoreReport, hidden_visibility: str) -> ScoreReport:
    """The report cut to the tests a learner sees at once (`report` itself when that is all)."""
    if hidden_visibility == "visible" or all(t.suite == "visible" for t in report.tests()):
        return report
    tasks = [TaskResult(task.task, task.title, task.module, [t for t in task.tests if t.suite == "visible"])
             for task in report.tasks]
    return ScoreReport(run=report.run, submission=report.submission, tasks=tasks, problems=report.problems,
                       stopped_early=report.stopped_early, isolation=report.isolation)


def _test(task: TaskResult, test: TestResult, number: str, hidden_visibility: str) -> dict:
    entry: dict[str, Any] = {"name": f"{task.task}: {test.title}", "number": number,
             "score": test.points if test.graded else 0.0, "max_score": test.max_points if test.graded else 0.0,
             "output": _output(test), "tags": [test.concept] if test.concept else [],
             "visibility": "visible" if test.suite == "visible" else hidden_visibility,
             "extra_data": {"id": test.id, "suite": test.suite, "status": test.status, "graded": test.graded,
                            "max_points": test.max_points, "duration_s": test.duration_s}}
    if test.graded:
        entry["status"] = "passed" if test.status == "passed" else "failed"
    else:
        entry["name"] += f" ({test.feedback})"        # why it is not graded here (`NOT_GRADED_HERE`)
        entry["tags"].append(test.feedback)
    return entry


def _output(test: TestResult) -> str:
    parts = [test.feedback] if test.feedback else []
    if not test.graded:
        parts = [f"{test.feedback}; its {test.max_points:g} points are left out of the total."]
    if test.location:
        parts.append(location_text(test.location))
    if test.output:
        parts.append("Your code printed:\n" + test.output)
    if test.status in ("timeout", "crashed", "error"):
        parts.insert(0, f"[{test.status}]")
    return "\n\n".join(parts)
