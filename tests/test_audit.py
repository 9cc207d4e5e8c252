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
# Every suite's operator mutants are killed or declared equivalent, and its audit grades a fixed
# sample of them: all of 01's (251, about 8 s of the default tier), and of the others a few dozen
# each (about 150 s of the full tier together; 07's, whose gradings start ranks and torchrun, 20).
# All 3732 take `grader audit --operators` about 65 minutes on two cores (07's 372 alone 41): what a
# suite author runs after changing a suite or its reference (docs/suite-author.md).
OPERATOR_SAMPLES = {"01": OperatorSample(), "02": OperatorSample(size=30), "03": OperatorSample(size=50),
                    "04": OperatorSample(size=80), "05": OperatorSample(size=120), "06": OperatorSample(size=60),
                    "07": OperatorSample(size=20)}


@pytest.fixture(scope="module")
def audits(request):
    """The tasks whose audit test runs in this session (its tier, its -k), audited in one run, each
    with its sample of operator mutants."""
    running = {item.callspec.params["task"] for item in request.session.items
               if item.originalname == "test_suite_audit" and item.get_closest_marker("skip") is None}
    tasks = [t for t in TASKS if t in running]
    samples = {t.name: OPERATOR_SAMPLES[t.name[:2]] for t in tasks}
    return {result.task: result for result in audit(tasks, jobs=2, operators=samples)} if tasks else {}


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("task", [pytest.param(t, marks=[] if t.name[:2] in DEFAULT_TIER_TASKS else [pytest.mark.full])
                                  for t in TASKS], ids=[t.name for t in TASKS])
def test_suite_audit(audits, task):
    result = audits[task.name]
    failures = [f"{e.name} ({e.kind}): {e.verdict} {e.failing_tests}" for e in result.entries if not e.ok]
    assert not failures, "\n".join(failures)
    assert result.kill_rate == 1.0 and result.false_rejects == 0
    assert not result.uncovered_rules, [rule.id for rule in result.uncovered_rules]
    mutants = [e for e in result.entries if e.kind == "mutant"]
    assert len(mutants) >= 10
    assert all(e.concept in e.failing_concepts for e in mutants)
    assert result.counts()["operators_generated"] >= 100, result.counts()
    assert_every_operator_mutant_accounted_for(result, OPERATOR_SAMPLES[task.name[:2]])


@pytest.mark.slow          # every operator mutant: the full set CI samples (seven suites, about 65 minutes on two cores)
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_every_operator_mutant_is_killed_or_declared_equivalent(task):
    (result,) = audit([task], jobs=2, operators={task.name: OperatorSample()})
    assert_every_operator_mutant_accounted_for(result, OperatorSample())


def assert_every_operator_mutant_accounted_for(result, sample: OperatorSample) -> None:
    """The sample graded whole (a declared equivalent never graded), none survived, no stale declaration."""
    counts = result.counts()
    assert counts["operators_survived"] == 0, counts
    graded = counts["operators_generated"] - counts["operators_equivalent"] if sample.size is None else sample.size
    assert counts["operators_graded"] == graded, counts
    assert not result.stale_equivalents
