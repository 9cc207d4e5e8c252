"""Each hidden suite passes its audit: reference 100%, stub 0, every mutant killed with
feedback naming its concept, every alternative correct solution 100%, every README rule
broken by a killed mutant."""
import pytest

from grader.course import COURSE
from grader.running.audit import audit

TASKS = COURSE.tasks()
# The suite the default tier audits (the quickest to audit); the full tier (--full) audits all. The
# audit's engine is tested on a synthetic task in test_forked_gradings.
DEFAULT_TIER_TASKS = ("01",)


@pytest.fixture(scope="module")
def audits(request):
    """The tasks whose audit test runs in this session (its tier, its -k), audited in one run."""
    running = {item.callspec.params["task"] for item in request.session.items
               if item.originalname == "test_suite_audit" and item.get_closest_marker("skip") is None}
    return {result.task: result for result in audit([t for t in TASKS if t in running], jobs=2)}


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("task", [pytest.param(t, marks=[] if t.name[:2] in DEFAULT_TIER_TASKS else [pytest.mark.full])
                                  for t in TASKS], ids=[t.name for t in TASKS])
def test_suite_audit(audits, task):
    result = audits[task.name]
    failures = [f"{e.name} ({e.kind}): {e.verdict}" for e in result.entries if not e.ok]
    assert not failures, "\n".join(failures)
    assert result.kill_rate == 1.0 and result.false_rejects == 0
    assert not result.uncovered_rules, [rule.id for rule in result.uncovered_rules]
    mutants = [e for e in result.entries if e.kind == "mutant"]
    assert len(mutants) >= 10
    assert all(e.concept in e.failing_concepts for e in mutants)
