"""Each hidden suite passes its audit: reference 100%, stub 0, every mutant killed with
feedback naming its concept, every alternative correct solution 100%, every README rule
broken by a killed mutant; and, for the suites sharpened against them, every operator mutant
(mutmut's operators on the reference) killed or declared equivalent with its reason."""
import pytest

from grader.course import COURSE
from grader.running.audit import audit
from grader.running.operators import OperatorSample

TASKS = COURSE.tasks()
# The suite the default tier audits (the quickest to audit); the full tier (--full) audits all. The
# audit's engine is tested on a synthetic task in test_forked_gradings.
DEFAULT_TIER_TASKS = ("01",)
# The suites whose operator mutants are all killed or declared equivalent: their audit grades every
# one (01's 251 add about 8 s to the default tier; in the full tier 03's 433, 04's 764 and 06's 496
# about two minutes each, 05's 582 about 40 s). The others'
# survivors are listed by `grader audit NN --operators`.
OPERATOR_SHARP_TASKS = ("01", "03", "04", "05", "06")


@pytest.fixture(scope="module")
def audits(request):
    """The tasks whose audit test runs in this session (its tier, its -k), audited in two runs:
    those sharp against operator mutants with all of them, the others without."""
    running = {item.callspec.params["task"] for item in request.session.items
               if item.originalname == "test_suite_audit" and item.get_closest_marker("skip") is None}
    sharp = [t for t in TASKS if t in running and t.name[:2] in OPERATOR_SHARP_TASKS]
    others = [t for t in TASKS if t in running and t not in sharp]
    results = (audit(sharp, jobs=2, operators=OperatorSample()) if sharp else []) + (audit(others, jobs=2) if others else [])
    return {result.task: result for result in results}


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
    if task.name[:2] in OPERATOR_SHARP_TASKS:
        counts = result.counts()
        assert counts["operators_generated"] >= 100 and counts["operators_survived"] == 0, counts
        assert counts["operators_graded"] + counts["operators_equivalent"] == counts["operators_generated"]
        assert not result.stale_equivalents
