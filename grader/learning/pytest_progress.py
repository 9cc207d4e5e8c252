"""The plugin's learner mode remembers progress (entry point `pytest11`): a plain `pytest
exercises/NN` in the learner's checkout (in-process, their own exercises/, no score report asked
for) records what it passed, as `grader check` and `grader watch` do, and offers a hint when a
concept keeps failing. Every other run (a grading, an audit, a check of another tree) leaves the
progress alone: those are not the learner's attempts."""
from __future__ import annotations


def pytest_terminal_summary(terminalreporter):
    from grader.session.plugin import grading_session
    config = terminalreporter.config
    try:
        grading = grading_session(config)
    except KeyError:                 # the grader's plugin is not active in this run
        return
    spec = grading.spec
    if spec.backend != "inprocess" or spec.score_report or spec.impl != spec.course.exercises.resolve() \
            or not grading.results:
        return
    report = grading.build_report()
    if any(test.suite != "visible" for test in report.tests()):
        return
    from grader.learning import hints
    from grader.learning.loop import record_and_pick_hints
    for task_name, hint in record_and_pick_hints(report, "pytest"):
        terminalreporter.section(f"hint {hint.number} of {hint.total}: {hint.concept}")
        terminalreporter.write_line(hint.text)
        if hint.number < hint.total:
            terminalreporter.write_line(f"({hints.next_command(task_name, hint.concept)} for the next one)")
