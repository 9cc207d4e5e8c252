"""JUnit XML of a score report (`--junit-xml`): the format CI systems and IDEs read.

One <testsuite> per task, one <testcase> per test. A lost test is a <failure> (failed, timeout,
crashed) or an <error> (the test could not run); a skipped test, GPU tests not graded here
included, is <skipped> with its reason. Points travel as <properties>, so a reader that knows
them can rebuild the score; one that does not still sees passes and failures. Problems around
the tests (a suite that could not be collected) become an <error> of their own, so a CI view
never shows green for an incomplete grading.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from grader.schema.report import ScoreReport, TaskResult, TestResult, location_text

_FAILURES = {"failed", "timeout", "crashed"}


def junit_xml(report: ScoreReport) -> str:
    root = ET.Element("testsuites", name="l1-exercises", tests=str(len(report.tests())),
                      failures=str(sum(t.status in _FAILURES for t in report.tests())),
                      errors=str(sum(t.status == "error" for t in report.tests()) + len(report.problems)),
                      time=_seconds(sum(t.duration_s for t in report.tests())))
    for task in report.tasks:
        root.append(_suite(task))
    if report.problems:
        root.append(_problems(report.problems))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _suite(task: TaskResult) -> ET.Element:
    suite = ET.Element("testsuite", name=task.task, tests=str(len(task.tests)),
                       failures=str(sum(t.status in _FAILURES for t in task.tests)),
                       errors=str(sum(t.status == "error" for t in task.tests)),
                       skipped=str(sum(t.status == "skipped" for t in task.tests)),
                       time=_seconds(sum(t.duration_s for t in task.tests)))
    _properties(suite, points=f"{task.points:g}", max_points=f"{task.max_points:g}",
                not_graded_points=f"{task.not_graded_points:g}", module=task.module.path)
    for test in task.tests:
        suite.append(_case(task, test))
    return suite


def _case(task: TaskResult, test: TestResult) -> ET.Element:
    path, _, name = test.id.rpartition("::")
    case = ET.Element("testcase", classname=f"{task.task}.{test.suite}", name=name or test.id,
                      file=path, time=_seconds(test.duration_s))
    _properties(case, title=test.title, concept=test.concept or "", points=f"{test.points:g}",
                max_points=f"{test.max_points:g}", graded=str(test.graded).lower(), status=test.status)
    if test.status in _FAILURES or test.status == "error":
        outcome = ET.SubElement(case, "error" if test.status == "error" else "failure",
                                message=_first_line(test.feedback), type=test.status)
        outcome.text = _clean(test.feedback + _where(test))
    elif test.status == "skipped":
        ET.SubElement(case, "skipped", message=_clean(test.feedback or "skipped"))
    if test.output:
        ET.SubElement(case, "system-out").text = _clean(test.output)
    return case


def _problems(problems: list[str]) -> ET.Element:
    suite = ET.Element("testsuite", name="grading", tests="1", failures="0", errors="1", skipped="0", time="0")
    case = ET.SubElement(suite, "testcase", classname="grading", name="grading complete", time="0")
    ET.SubElement(case, "error", message="the grading is incomplete", type="incomplete").text = \
        _clean("\n".join(problems))
    return suite


def _properties(element: ET.Element, **values: str) -> None:
    properties = ET.SubElement(element, "properties")
    for name, value in values.items():
        ET.SubElement(properties, "property", name=name, value=_clean(value))


def _where(test: TestResult) -> str:
    return f"\n({location_text(test.location)})" if test.location else ""


def _first_line(text: str) -> str:
    return _clean(text.strip().splitlines()[0]) if text.strip() else ""


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _clean(text: str) -> str:
    """XML 1.0 cannot hold most control characters nor lone surrogates; learner output may
    contain any of them."""
    return "".join(c if _xml_char(ord(c)) else "\ufffd" for c in text)


def _xml_char(code: int) -> bool:
    return code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000
