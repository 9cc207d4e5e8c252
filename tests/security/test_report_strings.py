"""Every format renders any string a learner's code can put in a score report, and renders it
inert: feedback, printed output, a failure's line of code, a function's name, an artifact's
labels, the submission's path. A string that stops a renderer costs the learner (and, in a
batch, the class) a page; one that a format interprets (markup, a formula, an XML entity, a
workflow command) speaks for the grader."""
import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
from rich.console import Console

from grader.reports import github
from grader.reports.gradescope import gradescope_results
from grader.reports.html import report_html
from grader.reports.junit import junit_xml
from grader.reports.prairielearn import prairielearn_results
from grader.reports.render import batch_table, print_report
from grader.reports.summary import Entry, class_html, concept_table, write_gradebook
from grader.schema.report import ScoreReport, read_report, write_report
from grader.worker.loading import sibling_module

formats = sibling_module(str(Path(__file__).parent.parent / "test_formats.py"), "test_formats")
actions = sibling_module(__file__, "actions")

NASTY = [
    "lone surrogates \ud800 \udfff", "NUL \x00 and \x01\x02\x1f\x7f", "\x1b[2J\x1b]0;title\x07 escapes",
    "$\\undefinedmacro{x}$ and $x^2$", "\\input{/etc/passwd}", "<script>alert(1)</script>", "]]> <![CDATA[ &amp;",
    "=HYPERLINK(\"http://example.invalid\")", "| pipe | cell |", "```\n</details></summary>\n```", "\u202eright to left",
    "::stop-commands::TOKEN", "\n    ::add-mask::x", "##[set-output name=x;]1", "%0A%25 already escaped", "\r\n\r",
    "😀" * 50, "x" * 200_000, "",
]
HOSTILE = "\n".join(NASTY)


def hostile_report(workspace: Path) -> ScoreReport:
    """The hand-written report of test_formats, every learner-made string replaced by all of NASTY."""
    report = formats.hand_written_report(workspace)
    report.submission["path"] = str(workspace / "sub\ud800\x1b[2J<i>")
    for test in report.tests():
        test.feedback = test.output = HOSTILE
        if test.location:
            test.location = {"line": test.location["line"], "function": "fn\u202e<b>", "code": HOSTILE}
        if "step_breakdown" in test.artifacts:
            test.artifacts["step_breakdown"]["steps"][0]["step"] = HOSTILE
            test.artifacts["step_breakdown"]["profile"] = HOSTILE
    report.problems.append(HOSTILE)
    return report


def test_every_format_renders_any_learner_string(tmp_path):
    report = hostile_report(tmp_path)

    page = report_html(report)
    assert "<script>alert" not in page and "could not be drawn" not in page and page.count("data:image/png") == 2

    root = ET.fromstring(junit_xml(report).encode("utf-8"))
    assert len(root.findall(".//testcase")) == len(report.tests()) + 1      # and the incomplete grading

    results = gradescope_results(report)
    jsonschema.validate(json.loads(json.dumps(results)), formats.SCHEMA)
    learn = prairielearn_results(report)
    assert len(json.dumps(learn)) <= 1_000_000

    stream = actions.Stream()
    github.publish(report, environ={"GITHUB_WORKSPACE": str(tmp_path)}, stream=stream)
    names = {name for name, _ in actions.runner_commands(stream.text)}
    assert names <= {"error", "stop-commands", "resume"}, names

    write_report(report, tmp_path / "r" / "score_report.json")
    entries = [Entry("sub\x1b[2J", report.submission["path"], read_report(tmp_path / "r" / "score_report.json"))]
    write_gradebook(tmp_path / "summary.csv", entries)
    with open(tmp_path / "summary.csv", newline="", encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == 1
    assert "<script>alert" not in class_html(entries, concept_table(entries))

    console = Console(file=io.StringIO(), width=100, force_terminal=True)
    print_report(report, console)
    console.print(batch_table(["sub[/]\x1b[2J", "[bold]x"], [report, report]))
    assert "alert(1)" in console.file.getvalue()
