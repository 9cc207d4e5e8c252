"""Each hidden suite passes its audit: reference 100%, stub 0, every mutant killed with
feedback naming its concept, every alternative correct solution 100%, every README rule
broken by a killed mutant."""
import pytest

from grader.course import COURSE
from grader.running import runner
from grader.running.audit import audit
from grader.running.variants import materialize, variants_of

TASKS = COURSE.tasks()
# The suites the default tier audits (the quickest to audit); the full tier (--full) audits all.
DEFAULT_TIER_TASKS = ("01", "05", "06")


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


def test_one_collected_session_grades_each_tree_in_a_fork_of_its_own(tmp_path):
    """The audit's engine: one session of task 01, collected once, grades five trees in forks, two at
    a time. The reference gets full marks and the stub 0 beside them; a tree that kills its own
    process and one that hangs past its limit each get a report saying how it ended; a mutant's
    grading stops at its concept's first failure."""
    task = COURSE.task_named("01")
    killer = _tree(tmp_path / "killer", task, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    hang = _tree(tmp_path / "hang", task, "import time\ntime.sleep(600)\n")
    mutant = next(v for v in variants_of(task) if v.kind == "mutant")
    trees = [(COURSE.solutions, None), (COURSE.exercises, None), (killer, None), (hang, None),
             (materialize(task, mutant, tmp_path / "mutants"), mutant.concept)]
    reference, stub, killed, hung, stopped = runner.run_forked([runner.ForkedGradings(task, trees, seed=0, limit_s=15)],
                                                               workers=2)[0]
    assert reference.complete and reference.total.percent == 100.0, reference.problems
    assert stub.complete and stub.total.points == 0 and stub.total.max_points > 0
    assert killed.problems == ["the grading process was killed by signal SIGKILL"], killed.problems
    assert hung.problems == ["the grading ran past its time limit (15 s)"], hung.problems
    assert stopped.stopped_early == f"a test of concept {mutant.concept!r} failed"
    lost = [t for t in stopped.task(task.name).tests if t.lost]
    assert lost and lost[-1].concept == mutant.concept
    assert len(stopped.task(task.name).tests) < len(reference.task(task.name).tests)


def _tree(root, task, source: str):
    (root / task.name).mkdir(parents=True)
    (root / task.name / f"{task.module}.py").write_text(source, encoding="utf-8")
    return root
