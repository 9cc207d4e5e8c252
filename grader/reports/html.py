"""A score report as one self-contained HTML page (`--html report.html`): no external file, no
network; figures are embedded PNGs.

The page shows the total, a bar per task and per concept (where the points were lost), each
lost test's feedback with the learner's line, the tests not graded here, and the figures a
suite recorded: exercise 02's loss curve beside the reference loop's, exercise 05's step
breakdown. Everything shown comes from the score report; all of its text is escaped, since
feedback and output can carry whatever learner code printed.
"""
from __future__ import annotations

import base64
from collections import defaultdict
from html import escape

from grader.reports import figures
from grader.schema.report import ScoreReport, TaskResult, TestResult, location_text, not_graded_note

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; color: #1f2328; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #d0d7de; }
.meta { color: #59636e; font-size: 13px; } .muted { color: #59636e; }
table { border-collapse: collapse; width: 100%; } td, th { padding: .25rem .5rem; text-align: left; vertical-align: middle; }
td.num, th.num { text-align: right; white-space: nowrap; }
.bar { background: #eaeef2; border-radius: 4px; height: .9rem; min-width: 10rem; }
.bar > span { display: block; height: 100%; border-radius: 4px; background: #2da44e; }
.bar.low > span { background: #cf222e; } .bar.mid > span { background: #bf8700; }
.test { border-left: 4px solid #cf222e; padding: .3rem .8rem; margin: .8rem 0; background: #f6f8fa; }
.test.not-graded { border-color: #8c959f; } .status { font-weight: 600; text-transform: uppercase; font-size: 12px; }
pre { white-space: pre-wrap; word-break: break-word; background: #fff; border: 1px solid #d0d7de; padding: .5rem; }
.problem { color: #cf222e; font-weight: 600; } figure { margin: 1rem 0; } figure img { max-width: 100%; }
"""

# Lets whoever opens the page (a person, or a test driving a headless browser) see that every
# embedded figure decoded: the count lands on the <html> element once the page has loaded.
SCRIPT = """window.addEventListener("load", () => {
  const shown = [...document.images].filter((image) => image.complete && image.naturalWidth > 0).length;
  document.documentElement.dataset.imagesShown = String(shown);
});"""


def page(title: str, body: list[str]) -> str:
    """The page shell every HTML format of the course shares."""
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
                      f"<title>{escape(title)}</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
                      *body, f"<script>{SCRIPT}</script>", "</body>", "</html>"]) + "\n"


def bar(points: float, max_points: float, *, more_is_worse: bool = False) -> str:
    share = 100.0 * points / max_points if max_points else 0.0
    goodness = 100.0 - share if more_is_worse else share
    level = "low" if goodness < 50 else "mid" if goodness < 100 else ""
    return f'<div class="bar {level}" title="{share:.1f}%"><span style="width: {share:.1f}%"></span></div>'


def image(png: bytes | None, alt: str, caption: str) -> str:
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img alt="{escape(alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption class=\"muted\">{escape(caption)}</figcaption></figure>")


def report_html(report: ScoreReport) -> str:
    total = report.total
    run = report.run
    meta = [f"submission {report.submission.get('path', '?')}", f"run {run.get('run_id', '?')}",
            f"started {run.get('started_at', '?')}"]
    if data_version := run.get("data_version"):
        meta.append(f"data {data_version[:12]}")
    if (report.isolation or {}).get("level"):
        meta.append(f"isolation {report.isolation['level']}")
    body = ["<h1>Score report</h1>", f'<p class="meta">{escape(" · ".join(meta))}</p>',
            f'<p id="total"><strong>{total.points:g} / {total.max_points:g} points '
            f"({total.percent:.1f}%)</strong></p>", bar(total.points, total.max_points)]
    if total.not_graded_points:
        body.append(f'<p class="muted">{escape(not_graded_note(report.tests()))}</p>')
    body += [f'<p class="problem">Incomplete grading: {escape(problem)}</p>' for problem in report.problems]
    body += _task_table(report.tasks)
    body += _concept_table(report.tasks)
    for task in report.tasks:
        body += _task_section(task)
    return page(f"Score report: {total.percent:.1f}%", body)


def _task_table(tasks: list[TaskResult]) -> list[str]:
    rows = [f'<tr class="task-row"><td><a href="#{escape(t.task)}">{escape(t.title)}</a></td>'
            f'<td class="num">{t.points:g} / {t.max_points:g}</td><td>{bar(t.points, t.max_points)}</td></tr>'
            for t in tasks]
    return ["<h2>Tasks</h2>", "<table>", '<tr><th>task</th><th class="num">points</th><th></th></tr>', *rows,
            "</table>"]


def _concept_table(tasks: list[TaskResult]) -> list[str]:
    """Points per README section: where the lost points are, so the learner knows what to reread."""
    rows = []
    for task in tasks:
        earned: defaultdict[str, float] = defaultdict(float)
        possible: defaultdict[str, float] = defaultdict(float)
        for test in task.tests:
            if test.graded:
                earned[test.concept or "(no concept)"] += test.points
                possible[test.concept or "(no concept)"] += test.max_points
        for concept in sorted(possible, key=lambda c: (earned[c] / possible[c] if possible[c] else 1.0, c)):
            rows.append(f'<tr class="concept-row"><td>{escape(task.task[:2])}</td><td>{escape(concept)}</td>'
                        f'<td class="num">{earned[concept]:g} / {possible[concept]:g}</td>'
                        f"<td>{bar(earned[concept], possible[concept])}</td></tr>")
    return ["<h2>Concepts</h2>", '<p class="muted">Each test checks one README section; the weakest first.</p>',
            "<table>", '<tr><th>task</th><th>README section</th><th class="num">points</th><th></th></tr>', *rows,
            "</table>"]


def _task_section(task: TaskResult) -> list[str]:
    lost = [t for t in task.tests if t.lost]
    not_graded = [t for t in task.tests if not t.graded]
    passed = [t for t in task.tests if t.status == "passed" and t.graded]
    out = [f'<section class="task" id="{escape(task.task)}">', f"<h2>{escape(task.title)}</h2>",
           f"<p>{task.points:g} / {task.max_points:g} points · {len(passed)} passed · {len(lost)} to fix"
           + (f" · {len(not_graded)} not graded here" if not_graded else "") + "</p>"]
    if not task.module.found:
        out.append(f'<p class="problem">Module not found: {escape(task.module.path)}</p>')
    for test in task.tests:
        out += _artifacts(test)
    out += [_lost_test(test) for test in lost]
    out += [f'<div class="test not-graded"><span class="status">{escape(test.feedback)}</span> {escape(test.title)} '
            f'<span class="muted">({test.max_points:g} points)</span></div>' for test in not_graded]
    if passed:
        items = "".join(f"<li>{escape(t.title)} <span class=\"muted\">({t.max_points:g})</span></li>" for t in passed)
        out.append(f"<details><summary>{len(passed)} passed</summary><ul>{items}</ul></details>")
    out.append("</section>")
    return out


def _lost_test(test: TestResult) -> str:
    parts = [f'<div class="test lost" data-test-id="{escape(test.id)}">',
             f'<p><span class="status">{escape(test.status)}</span> <strong>{escape(test.title)}</strong> '
             f'<span class="muted">(0 / {test.max_points:g} points · {escape(test.suite)} suite'
             + (f" · README: {escape(test.concept)}" if test.concept else "") + ")</span></p>",
             f'<pre class="feedback">{escape(test.feedback or test.status)}</pre>']
    if test.location:
        parts.append(f'<p class="location">{escape(location_text(test.location))}</p>')
    if test.output:
        parts.append(f'<details><summary>what your code printed</summary><pre>{escape(test.output)}</pre></details>')
    parts.append("</div>")
    return "".join(parts)


def _artifacts(test: TestResult) -> list[str]:
    """The figures of the test's artifacts that `figures.ARTIFACT_FIGURES` knows how to draw."""
    out = []
    for name, data in test.artifacts.items():
        figure = figures.ARTIFACT_FIGURES.get(name)
        if figure is not None and isinstance(data, dict):
            out.append(_figure(figure.draw, data, figure.alt, f"{test.title}: {figure.caption}"))
    return [part for part in out if part]


def _figure(draw, data: dict, alt: str, caption: str) -> str:
    """A figure drawn from a suite's artifact, whose data came from learner code: one it cannot
    be drawn from costs the figure, never the page around it."""
    try:
        png = draw(data)
    except Exception as exc:
        return f'<p class="muted">{escape(caption)}: the figure could not be drawn ({escape(type(exc).__name__)}).</p>'
    return image(png, alt, caption)
