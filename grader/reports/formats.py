"""The files one score report can be written as, one entry each. The commands walk `FORMATS`:
for their options (`grader check` offers the formats a learner reads; `grader grade` every one)
and for what they write. A new format is its renderer's module and one line here.

A format a platform takes as the grade (`platform`) makes an official grading: `grader grade`
then requires isolation unless told otherwise (`grader.cli`)."""
from __future__ import annotations

import json
from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass

from grader.schema.report import ScoreReport


@dataclass(frozen=True)
class OutputFormat:
    option: str                                    # its flag's destination: "junit_xml" is --junit-xml
    what: str                                      # how a message names the file
    help: str
    render: Callable[[ScoreReport, Namespace], str]    # the file's text, from the report and the command's options
    platform: bool = False                         # a platform reads it as the grade: one submission, isolated
    add_options: Callable | None = None            # the format's own options, beside its flag

    @property
    def flag(self) -> str:
        return "--" + self.option.replace("_", "-")


def _json(report: ScoreReport, options: Namespace) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"


def _html(report: ScoreReport, options: Namespace) -> str:
    from grader.reports.html import report_html
    return report_html(report)


def _junit(report: ScoreReport, options: Namespace) -> str:
    from grader.reports.junit import junit_xml
    return junit_xml(report)


def _gradescope(report: ScoreReport, options: Namespace) -> str:
    from grader.reports.gradescope import gradescope_results
    return json.dumps(gradescope_results(report, options.gradescope_hidden_visibility), indent=2,
                      ensure_ascii=False) + "\n"


def _gradescope_options(command) -> None:
    from grader.reports.gradescope import DEFAULT_HIDDEN_VISIBILITY, VISIBILITIES
    command.add_argument("--gradescope-hidden-visibility", choices=VISIBILITIES, default=DEFAULT_HIDDEN_VISIBILITY,
                         help="when learners see the hidden suites' results on Gradescope (default after_published)")


def _prairielearn(report: ScoreReport, options: Namespace) -> str:
    from grader.reports.prairielearn import prairielearn_results
    return json.dumps(prairielearn_results(report), indent=2) + "\n"


FORMATS = (
    OutputFormat("json", "score report", "also write the score report here", _json),
    OutputFormat("html", "HTML report", "a self-contained HTML report", _html),
    OutputFormat("junit_xml", "JUnit XML", "JUnit XML", _junit),
    OutputFormat("gradescope", "Gradescope results", "Gradescope's results.json", _gradescope, platform=True,
                 add_options=_gradescope_options),
    OutputFormat("prairielearn", "PrairieLearn results", "PrairieLearn's external-grader results.json", _prairielearn,
                 platform=True),
)
