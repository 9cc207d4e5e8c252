"""Which isolation level official grading gets here, and why not a stronger one.

- `sandbox`: bubblewrap's namespaces, cgroups and a read-only jail (`grader.core.sandbox`);
- `uid`: for a grader run by root where namespaces are denied (a platform's container): each
  task's workers as a uid of their own, what decides a grade sealed from it (`grader.core.uid_jail`);
- `none`: a separate process and nothing more, for trusted code only.

`--isolation auto` takes the strongest level this machine allows, `required` refuses to grade
below `uid` (REQUIRED_LEVELS), `none` asks for none.
"""
from __future__ import annotations

from grader.core import sandbox, uid_jail

REQUIRED_LEVELS = ("sandbox", "uid")     # what `--isolation required` and the official channels accept
CHOICES = ("auto", "required", "none")


class IsolationUnavailable(Exception):
    """`--isolation required` on a machine that allows neither the sandbox nor the uid level."""


def strongest() -> tuple[str, str]:
    """(level, reason): the strongest level available here, and why the stronger ones are not."""
    available, why_not_sandbox = sandbox.availability()
    if available:
        return "sandbox", ""
    possible, why_not_uid = uid_jail.availability()
    if possible:
        return "uid", f"no sandbox: {why_not_sandbox}"
    return "none", f"no sandbox: {why_not_sandbox}; no uid level: {why_not_uid}"


def choose(wanted: str) -> tuple[str, str]:
    """(level, reason) for `--isolation wanted`; IsolationUnavailable where `required` cannot be met."""
    if wanted == "none":
        return "none", "isolation switched off (--isolation none)"
    level, reason = strongest()
    if wanted == "required" and level not in REQUIRED_LEVELS:
        raise IsolationUnavailable(f"--isolation required, but no sandbox can be made here, nor the uid level "
                                   f"({reason})")
    return level, reason
