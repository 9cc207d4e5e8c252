"""Each hidden suite passes its audit: reference 100%, stub 0, every mutant killed with
feedback naming its concept, every alternative correct solution 100%, every README rule
broken by a killed mutant."""
import pytest

from grader.running.audit import audit
from grader.tasks import all_tasks

TASKS = all_tasks()


@pytest.fixture(scope="module")
def audits():
    """Every task audited in one batch: one pool of processes for all, busy to the end."""
    return {result.task: result for result in audit(TASKS, jobs=2)}


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_suite_audit(audits, task):
    result = audits[task.name]
    failures = [f"{e.name} ({e.kind}): {e.verdict}" for e in result.entries if not e.ok]
    assert not failures, "\n".join(failures)
    assert result.kill_rate == 1.0 and result.false_rejects == 0
    assert not result.uncovered_rules, [rule.id for rule in result.uncovered_rules]
    mutants = [e for e in result.entries if e.kind == "mutant"]
    assert len(mutants) >= 10
    assert all(e.concept in e.failing_concepts for e in mutants)
