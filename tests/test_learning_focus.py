"""The watcher's focus (grader.learning.focus): the concept being worked on, followed from check to
check, in the README's order, moved by hand; and the screen that shows it (grader.learning.screen)."""
from rich.console import Console
from rich.text import Text

from grader.learning.focus import Focus
from grader.learning.screen import check_screen
from grader.schema import report
from grader.schema.report import NOT_RUN, ScoreReport, TaskResult

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


def screen_text(task: TaskResult, focus: Focus, width: int = 120) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(check_screen(ScoreReport.combined([ScoreReport(run={}, submission={}, tasks=[task])]), "04",
                               Text("header"), None, "footer", focus, width, {"B": ["every drawn config"]}))
    return console.export_text()


def test_the_screen_marks_the_focus_says_why_and_what_passing_leaves_out():
    focus = Focus(ORDER, concept="C")
    task = check(A="got 3, expected 4", C="got 5, expected 6\nsecond line", D=NOT_RUN)
    focus.follow(task)
    text = screen_text(task, focus)
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
            for line in text.splitlines() if line.count("│") == 5}
    assert rows["A"] == ["0 / 1", "to fix", "got 3, expected 4"]
    assert rows["▶ C"] == ["0 / 1", "to fix", "got 5, expected 6 …"], "the first line, marked as cut"
    assert rows["B"] == ["1 / 1", "passes", "visible checks pass; the graded suite also checks every drawn config"]
    assert rows["D"][:2] == ["0 / 1", "not run"], "a test the check stopped before is not the learner's to fix"
    assert "focus: C · failed C" in text and "second line" in text, "the focused test's feedback in full"
    narrow = screen_text(task, focus, width=40)
    assert all(len(line) <= 40 for line in narrow.splitlines()) and "…" in narrow


def test_what_a_focused_test_printed_shows_its_end_marked_as_cut():
    focus = Focus(ORDER, concept="A")
    task = check(A="got 3, expected 4")
    task.tests[0].output = "warning: a library's long warning " * 20 + "the learner's own last line"
    focus.follow(task)
    printed = next(line for line in screen_text(task, focus, width=400).splitlines() if "printed:" in line)
    assert printed.strip().startswith("printed: …") and printed.rstrip().endswith("the learner's own last line"), printed
