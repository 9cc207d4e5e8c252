"""A score report as PrairieLearn's external-grader results (`/grade/results/results.json`):
`score` in [0, 1], `gradable`, `message`, `output` and `tests` with `points` / `max_points`.

A submission is not gradable, so PrairieLearn neither scores it nor counts the attempt, when the
grading itself is incomplete (`problems`) or when no test could run because no module was found
or none imported; `format_errors` then says why. PrairieLearn refuses results over 1 MB, so
per-test output is dropped, then messages are cut, until the file fits.
"""
from __future__ import annotations

import json

from grader.schema.report import NOT_GRADED_STATUS, ScoreReport, TestResult, location_text

SIZE_LIMIT = 1_000_000


def prairielearn_results(report: ScoreReport) -> dict:
    reasons = _not_gradable(report)
    if reasons:
        return {"gradable": False, "format_errors": reasons, "message": " ".join(reasons)}
    total = report.total
    results = {"gradable": True, "score": round(total.points / total.max_points, 6) if total.max_points else 0.0,
               "message": f"{total.points:g} / {total.max_points:g} points ({total.percent:.1f}%)" + _isolation(report),
               "output": _overview(report),
               "tests": [_test(task.task, test) for task in report.tasks for test in task.tests]}
    return _within_limit(results)


def _not_gradable(report: ScoreReport) -> list[str]:
    if report.problems:
        return [f"The grading is incomplete: {problem}" for problem in report.problems]
    graded = [t for t in report.tests() if t.graded]
    if not graded or all(t.status == "error" for t in graded):
        modules = [t for t in report.tasks if not t.module.found]
        if modules:
            return [f"{t.task}: {t.module.path} was not found" for t in modules]
        return [f"{t.task}: " + next((x.feedback for x in t.tests if x.feedback), "no test could run")
                for t in report.tasks] or ["no test could run"]
    return []


def _isolation(report: ScoreReport) -> str:
    level = (report.isolation or {}).get("level")
    return f"; isolation of your code during grading: {level}" if level else ""


def _overview(report: ScoreReport) -> str:
    lines = [f"{task.task}: {task.points:g} / {task.max_points:g} points" +
             (f" (+{task.not_graded_points:g} {NOT_GRADED_STATUS})" if task.not_graded_points else "")
             for task in report.tasks]
    return "\n".join(lines)


def _test(task: str, test: TestResult) -> dict:
    message = test.feedback       # a test not graded here: why (`NOT_GRADED_HERE`)
    if test.location:
        message += "\n" + location_text(test.location)
    return {"name": f"{task}: {test.title}", "description": test.concept or "",
            "points": test.points if test.graded else 0.0, "max_points": test.max_points if test.graded else 0.0,
            "message": message.strip(), "output": test.output}


def _within_limit(results: dict) -> dict:
    if len(json.dumps(results)) <= SIZE_LIMIT:
        return results
    for test in results["tests"]:
        test["output"] = ""
    results["output"] += "\n(per-test output left out: the results must stay under 1 MB)"
    limit = 2000
    while len(json.dumps(results)) > SIZE_LIMIT and limit > 50:
        limit //= 2
        for test in results["tests"]:
            test["message"] = test["message"][:limit]
    return results
