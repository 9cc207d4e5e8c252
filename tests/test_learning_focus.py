"""The watcher's focus (grader.learning.focus): the concept being worked on, followed from check to
check, in the README's order, moved by hand."""
from grader.learning.focus import Focus
from grader.schema import report
from grader.schema.report import NOT_RUN, TaskResult

ORDER = ["A", "B", "C", "D"]


def check(**feedback: str) -> TaskResult:
    """One check: a test per concept, passed where no feedback is given, else failed saying it."""
    tests = [report.TestResult(id=f"t::{name}", task="04", suite="visible", title=name, graded=True,
                               max_points=1.0, concept=name, status="failed" if name in feedback else "passed",
                               feedback=feedback.get(name, "")) for name in ORDER]
    return TaskResult("04", "memory", None, tests)


def test_the_first_check_focuses_on_the_first_failing_concept_in_the_readmes_order():
    focus = Focus(["D", "C", "B", "A"])          # the README's order, not the tests'
    focus.follow(check(B="wrong", D="wrong"))
    assert focus.concept == "D"


def test_a_concept_named_first_is_kept_while_it_fails():
    focus = Focus(ORDER, concept="C")
    focus.follow(check(A="wrong", C="wrong"))
    assert focus.concept == "C"


def test_the_focus_goes_where_results_changed_and_on_when_its_concept_passes():
    focus = Focus(ORDER)
    focus.follow(check(A="wrong", B="wrong", C="wrong"))
    assert focus.concept == "A"
    focus.follow(check(A="wrong", B="wrong", C="wrong in another way"))
    assert focus.concept == "C", "the learner is working on C"
    focus.follow(check(A="wrong", B="wrong"))
    assert focus.concept == "A", "C passes: on to the next failing concept, round the end"
    focus.follow(check(A="still wrong", B="wrong in another way"))
    assert focus.concept == "A", "the focused concept changed too: it stays"


def test_changes_where_the_learners_code_did_not_run_move_nothing():
    focus = Focus(ORDER, concept="C")
    focus.follow(check(A="wrong", C="wrong"))
    focus.follow(check(A="f() is not implemented yet: see README.md", C="wrong"))
    assert focus.concept == "C"
    focus.follow(check(A=NOT_RUN, C="wrong"))
    assert focus.concept == "C"


def test_the_keys_step_through_the_failing_concepts_round_the_end():
    focus = Focus(ORDER, concept="B")
    task = check(A="wrong", B="wrong", D="wrong")
    focus.follow(task)
    focus.step(task, 1)
    assert focus.concept == "D"
    focus.step(task, 1)
    assert focus.concept == "A"
    focus.step(task, -1)
    assert focus.concept == "D"
    focus.follow(check())
    assert focus.concept is None, "nothing fails: nothing to focus on"
