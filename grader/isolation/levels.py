"""Which isolation level official grading gets here, and why not a stronger one.

- `sandbox`: bubblewrap's namespaces, cgroups and a read-only jail (`grader.isolation.sandbox`);
- `uid`: for a grader run by root where namespaces are denied (a platform's container): each
  task's workers as a uid of their own, what decides a grade sealed from it (`grader.isolation.uid_jail`);
- `none`: a separate process and nothing more, for trusted code only.

`--isolation auto` takes the strongest level this machine allows, `required` refuses to grade
below `uid` (REQUIRED_LEVELS), `none` asks for none. `resolve` is the one place a level is
chosen: where a grading starts, on the machine where learner code will run.
"""
from __future__ import annotations

from grader.isolation import sandbox, uid_jail
from grader.schema.report import Isolation, ScoreReport

REQUIRED_LEVELS = ("sandbox", "uid")     # what `--isolation required` and the official channels accept
CHOICES = ("auto", "required", "none")


NOT_GRADED_SAFELY = "not graded: this submission could not be graded safely here"


class IsolationUnavailable(Exception):
    """`--isolation required` on a machine that allows neither the sandbox nor the uid level."""


def refused_report(exc: IsolationUnavailable, path) -> ScoreReport:
    """The report of a submission not graded because the isolation it requires is not to be had
    here: nothing of it ran, and the report says why."""
    return ScoreReport.failed(f"{NOT_GRADED_SAFELY}: {exc}", {"path": str(path)})


def strongest() -> tuple[str, str]:
    """(level, reason): the strongest level available here, and why the stronger ones are not."""
    available, why_not_sandbox = sandbox.availability()
    if available:
        return "sandbox", ""
    possible, why_not_uid = uid_jail.availability()
    if possible:
        return "uid", f"no sandbox: {why_not_sandbox}"
    return "none", f"no sandbox: {why_not_sandbox}; no uid level: {why_not_uid}"


def resolve(wanted: str, backend: str, limits: sandbox.Limits) -> Isolation:
    """Where learner code runs, and why: the report's `isolation`, with how each limit is enforced
    at that level. IsolationUnavailable where `required` cannot be met."""
    if backend == "inprocess":
        return {"level": "in-process", "reason": "self-check: learner code runs in the test process"}
    level, reason = _choose(wanted)
    if level == "none":
        return {"level": "none", "reason": reason}
    return {"level": level, "reason": reason, "limits": sandbox.enforcement(limits, level)}


def _choose(wanted: str) -> tuple[str, str]:
    if wanted == "none":
        return "none", "isolation switched off (--isolation none)"
    level, reason = strongest()
    if wanted == "required" and level not in REQUIRED_LEVELS:
        raise IsolationUnavailable(f"--isolation required, but no sandbox can be made here, nor the uid level "
                                   f"({reason})")
    return level, reason
