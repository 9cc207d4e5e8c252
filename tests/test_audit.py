"""Each hidden suite passes its audit: reference 100%, stub 0, every mutant killed with
feedback naming its concept, every alternative correct solution 100%, every README rule
broken by a killed mutant; and every operator mutant (mutmut's operators on the reference) graded
killed, the others declared equivalent with their reason."""
import pytest

from grader.course import COURSE
from grader.running.audit import audit
from grader.running.operators import OperatorSample

TASKS = COURSE.tasks()
# The suite the default tier audits (the quickest to audit); the full tier (--full) audits all. The
# audit's engine is tested on a synthetic task in test_forked_gradings.
DEFAULT_TIER_TASKS = ("01",)
# Every suite's operator mutants are killed or declared equivalent, and its audit grades them: every
# one where that is quick (01's 251 add about 8 s to the default tier, 05's 582 about 40 s to the full
# tier), a fixed sample where all of them would take minutes (all of 02's 834 about ten, run the
# graded training; 03's, 04's and 06's about two each). `grader audit --operators` grades them all.
OPERATOR_SAMPLES = {"01": OperatorSample(), "02": OperatorSample(size=100), "03": OperatorSample(size=150),
                    "04": OperatorSample(size=250), "05": OperatorSample(), "06": OperatorSample(size=200)}


@pytest.fixture(scope="module")
def audits(request):
    """The tasks whose audit test runs in this session (its tier, its -k), audited in one run per
    sample of operator mutants."""
    running = {item.callspec.params["task"] for item in request.session.items
               if item.originalname == "test_suite_audit" and item.get_closest_marker("skip") is None}
    results = []
    for sample in dict.fromkeys(OPERATOR_SAMPLES.values()):
        tasks = [t for t in TASKS if t in running and OPERATOR_SAMPLES[t.name[:2]] == sample]
        results += audit(tasks, jobs=2, operators=sample) if tasks else []
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
    counts, sample = result.counts(), OPERATOR_SAMPLES[task.name[:2]]
    assert counts["operators_generated"] >= 100 and counts["operators_survived"] == 0, counts
    graded = counts["operators_generated"] - counts["operators_equivalent"] if sample.size is None else sample.size
    assert counts["operators_graded"] == graded, counts
    assert not result.stale_equivalents
