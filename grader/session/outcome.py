"""From pytest's phase reports to one status and one piece of feedback per test.

Feedback is built from exception messages only, never from pytest's long report, so a learner
never sees hidden test source. For hidden suites, the explanation pytest's assertion
rewriting appends (which quotes the test's expressions) is cut off as well.
"""
from __future__ import annotations

import json
import math

from grader.schema.report import NOT_GRADED_STATUS, NOT_IMPLEMENTED, ScoreReport, Status, TestResult, location_text, points_text
from grader.session.submission import StudentError, SubmissionFailure
from grader.worker.dispatch import is_test_timeout
from grader.worker.loading import StudentImportError

FEEDBACK_LIMIT = 2000
OUTPUT_LIMIT = 2000
ARTIFACT_LIMIT = 64 * 1024      # bytes of JSON per artifact: a curve or a table, not a dump


def phase_outcome(when: str, report, excinfo, hidden: bool, broken: SubmissionFailure | None = None,
                  may_go_ungraded: bool = False) -> tuple[Status, str, bool] | None:
    """(status, feedback, graded) for one phase, or None when the phase passed. `broken` is how
    the learner's process died or hung during the test, if it did: that is the reason the test
    failed, whatever the test raised after it (a property-based test that replays its examples
    against a process that is gone reports an inconsistency of its own). A test that needs what
    a machine may lack (`may_go_ungraded`: a marker of `NOT_GRADED_HERE`) skipped before it runs is
    not graded here; any other skip is a lost test, whatever its reason says."""
    if report.passed:
        return None
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return "skipped", reason.removeprefix("Skipped: "), not (may_go_ungraded and when == "setup")
    exc = excinfo.value if excinfo is not None else None
    if broken is not None and not isinstance(exc, SubmissionFailure):
        exc = broken
    return exception_outcome(when, exc, hidden)


def exception_outcome(when: str, exc: BaseException | None, hidden: bool) -> tuple[Status, str, bool]:
    """(status, feedback, graded) for a phase that raised `exc` (None: no exception info)."""
    if isinstance(exc, StudentImportError):
        return "error", str(exc), True
    if isinstance(exc, StudentError) and exc.not_implemented:
        return "failed", f"{exc.function}() {NOT_IMPLEMENTED}: {exc.info['message']}", True
    if isinstance(exc, SubmissionFailure):
        return exc.status, str(exc), True
    if exc is not None and is_test_timeout(exc):
        return "timeout", f"the test did not finish in time ({exc})", True
    if when != "call":
        detail = f"{type(exc).__name__}: {exc}" if exc is not None else "see the log"
        return "error", f"the test could not be {'set up' if when == 'setup' else 'cleaned up'}: {detail}", True
    if isinstance(exc, AssertionError):
        return "failed", _assertion_message(exc, hidden) or "a check failed", True
    if exc is None:       # an xfail that passed, or a report without exception info
        return "failed", "the test did not pass", True
    if _did_not_raise(exc):
        return "failed", "the call returned where it should have raised an error (the README says which)", True
    return "failed", f"the check could not be completed: {type(exc).__name__}: {exc}", True


def _assertion_message(exc: AssertionError, hidden: bool) -> str:
    """The test's own words. pytest's rewritten message is "<user message>\nassert <expression>\n
    + where ...": a hidden test's expression is never shown; a visible test's only when the test
    gave no words of its own (its internals add nothing to a message that says what was wrong)."""
    text = str(exc)
    if text.startswith("assert "):
        return "" if hidden else text.strip()
    return text.split("\nassert ", 1)[0].strip()


def _did_not_raise(exc: BaseException) -> bool:
    """pytest.raises around a call that returned: pytest's own words name the grader's classes."""
    import pytest
    return isinstance(exc, pytest.fail.Exception) and str(exc).startswith("DID NOT RAISE")


def with_concept(feedback: str, concept: str | None, status: str) -> str:
    """The feedback of a lost test ends by sending the learner to the README section of its
    concept, unless it already points there (a stub's NotImplementedError does). A skipped test
    or an error (the test could not run: a module that does not import, a broken set-up) has
    no section to reread."""
    if concept and status not in ("skipped", "error") and "README" not in feedback:
        feedback = f"{feedback}\nReread: README section \"{concept}\"."
    return truncate(feedback, FEEDBACK_LIMIT)


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 20] + "\n... (truncated)"


def tail(text: str, limit: int = OUTPUT_LIMIT) -> str:
    return text if len(text) <= limit else "(earlier output cut)\n" + text[-limit:]


def as_artifacts(found: dict) -> dict:
    """A test's artifacts as JSON data for the report: NumPy and torch scalars become numbers,
    tuples lists, a NaN or an infinity (a diverging loss) null. An artifact that is not data or
    is too large is replaced by the reason, so a suite's mistake never costs the learner a result."""
    kept = {}
    for name, value in found.items():
        try:
            data = _plain(value)
            size = len(json.dumps(data, allow_nan=False))
        except (TypeError, ValueError) as exc:
            kept[name] = {"dropped": f"not JSON data: {exc}"}
            continue
        kept[name] = data if size <= ARTIFACT_LIMIT else {"dropped": f"{size} bytes of JSON, above {ARTIFACT_LIMIT}"}
    return kept


def _plain(value):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if hasattr(value, "tolist") and getattr(value, "ndim", 1) == 0:     # a NumPy or torch scalar
        return _plain(value.tolist())
    raise TypeError(f"{type(value).__name__} is not JSON data")


FULL_TRACE_NOTE = "(pytest --full-trace shows the whole traceback, the course's frames too)"


def failure_text(test: TestResult, learner_frames: list[dict] | None = None) -> str:
    """A lost visible test as pytest's failure section shows it to the learner: the feedback
    (ending with the README section to reread), their own frames when their code raised through
    several, their line, and how to see everything."""
    lines = [test.feedback]
    if learner_frames and len(learner_frames) > 1:
        lines.append("Your code, the outermost call first:")
        lines += [f"  line {frame['line']}, in {frame['function']}: {frame['code']}" for frame in learner_frames]
    if test.location:
        lines.append(location_text(test.location))
    return "\n".join([*lines, FULL_TRACE_NOTE])


def score_lines(report: ScoreReport) -> list[tuple[str, bool]]:
    """The score in plain lines (pytest's terminal summary), each with whether it tells a problem."""
    lines = [(f"{task.task}: {points_text(task.points, task.max_points)} points"
              + (f"  (+{task.not_graded_points:g} {NOT_GRADED_STATUS})" if task.not_graded_points else ""), False)
             for task in report.tasks]
    return lines + [(f"problem: {problem}", True) for problem in report.problems]
