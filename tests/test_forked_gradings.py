"""The audit's engine (`grader.running.runner.run_forked`, `grader.session.variant_forks`) on a
synthetic task: one collected session grades many trees, each in a fork of its own; the warm
reference's grading records what each test reaches, and a fork runs only the tests that reach
what its tree changed, taking the others' results from the reference's. Each test of the task
notes in a log which tree it ran on, so what ran is observed, not inferred."""
import textwrap
import uuid
from pathlib import Path

import pytest

from grader.course import COURSE, Course
from grader.running import runner
from grader.running.audit import AuditEntry, score_entry
from grader.spec import ANY_CONCEPT
from grader.worker.loading import sibling_module

synthetic = sibling_module(__file__, "synthetic_course")

REFERENCE = textwrap.dedent('''
    from dataclasses import dataclass

    SIDES = 4


    @dataclass
    class Square:
        side: int = 1


    def area(side):
        return side ** 2


    def perimeter(side):
        return SIDES * side


    def unit_side():
        return Square().side
''')

HIDDEN = textwrap.dedent('''
    from pathlib import Path

    import pytest

    LOG = Path(__file__).parents[3] / "ran.log"


    def ran(submission, test):
        with open(LOG, "a") as log:
            log.write(f"{submission.module_path.parent.parent.name} {test}\\n")


    @pytest.mark.points(1)
    @pytest.mark.concept("Area")
    def test_area(submission):
        ran(submission, "area")
        assert submission.area(3) == 9


    @pytest.mark.points(1)
    @pytest.mark.concept("Perimeter")
    def test_perimeter(submission):
        ran(submission, "perimeter")
        assert submission.perimeter(2) == 8


    @pytest.mark.points(1)
    @pytest.mark.concept("Unit")
    def test_unit_square(submission):
        ran(submission, "unit")
        assert submission.unit_side() == 1


    @pytest.mark.points(1)
    @pytest.mark.concept("Style")
    def test_source_defines_perimeter(submission):
        ran(submission, "source")
        assert "def perimeter(" in submission.module_path.read_text()
''')

VARIANTS = {
    "area_doubled": ("return side ** 2", "return side * 2"),              # breaks area only
    "perimeter_summed": ("return SIDES * side", "return side + side + side + side"),   # correct
    "sides_five": ("SIDES = 4", "SIDES = 5"),                             # outside any function
    "square_of_two": ("side: int = 1", "side: int = 2"),                  # a dataclass no code of the file runs
}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    synthetic.write(root)
    for path, text in {"exercises/03_shapes/README.md": "# Exercise 03: shapes\n\n## Area\n",
                       "exercises/03_shapes/shapes.py": "def area(side):\n    raise NotImplementedError\n",
                       "tests/hidden/03_shapes/test_shapes_hidden.py": HIDDEN,
                       "solutions/03_shapes/shapes.py": REFERENCE}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return Course(root).task_named("03")


def _tree(root: Path, task, source: str) -> Path:
    (root / task.name).mkdir(parents=True)
    (root / task.name / f"{task.module}.py").write_text(source)
    return root


def _ran(task) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for line in (task.course.root / "ran.log").read_text().splitlines():
        tree, test = line.split()
        found.setdefault(tree, set()).add(test)
    return found


def test_a_fork_runs_only_the_tests_that_reach_what_its_tree_changed(shapes, tmp_path):
    trees = [(shapes.course.solutions, None)]
    for name, (old, new) in VARIANTS.items():
        assert REFERENCE.count(old) == 1
        trees.append((_tree(tmp_path / name, shapes, REFERENCE.replace(old, new)), None))
    reports = runner.run_forked([runner.ForkedGradings(shapes, trees, seed=0, warm=True)], workers=2)[0]
    ran = _ran(shapes)
    assert ran["solutions"] == {"area", "perimeter", "unit", "source"}
    assert ran["area_doubled"] == {"area", "source"}
    assert ran["perimeter_summed"] == {"perimeter", "source"}
    assert ran["sides_five"] == {"area", "perimeter", "unit", "source"}
    assert ran["square_of_two"] == {"unit", "source"}
    points = {name: {t.id.split("::")[1]: t.points for t in report.task(shapes.name).tests}
              for name, report in zip(["reference", *VARIANTS], reports)}
    every_test = {"test_area", "test_perimeter", "test_unit_square", "test_source_defines_perimeter"}
    assert all(set(got) == every_test for got in points.values()), points      # the taken results are reported
    assert points["reference"] == points["perimeter_summed"] == dict.fromkeys(every_test, 1.0)
    assert points["area_doubled"] == {**points["reference"], "test_area": 0.0}
    assert points["sides_five"] == {**points["reference"], "test_perimeter": 0.0}
    assert points["square_of_two"] == {**points["reference"], "test_unit_square": 0.0}


def test_each_tree_is_graded_in_a_fork_of_its_own(shapes, tmp_path):
    """Beside the reference (full marks) and the stub (0): a tree that kills its own process and
    one that hangs past its limit each get a report saying how it ended; a mutant's grading stops
    at its concept's first failure."""
    killer = _tree(tmp_path / "killer", shapes, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    hang = _tree(tmp_path / "hang", shapes, "import time\ntime.sleep(600)\n")
    mutant = _tree(tmp_path / "mutant", shapes, REFERENCE.replace("return SIDES * side", "return 2 * side"))
    trees = [(shapes.course.solutions, None), (shapes.course.exercises, None), (killer, None), (hang, None),
             (mutant, "Perimeter")]
    reference, stub, killed, hung, stopped = runner.run_forked(
        [runner.ForkedGradings(shapes, trees, seed=0, limit_s=4)], workers=2)[0]
    assert reference.complete and reference.total.percent == 100.0, reference.problems
    assert stub.complete and stub.total.points == 0 and stub.total.max_points > 0
    assert killed.problems == ["the grading process was killed by signal SIGKILL"], killed.problems
    assert hung.problems == ["the grading ran past its time limit (4 s)"], hung.problems
    assert stopped.stopped_early == "a test of concept 'Perimeter' failed"
    assert [t.id.split("::")[1] for t in stopped.task(shapes.name).tests] == ["test_perimeter"]


def test_an_operator_mutant_stops_at_any_lost_test_and_writes_only_in_its_own_folder(shapes, tmp_path):
    """Graded to stop at any concept (an operator mutant's grading), a tree stops at its first lost
    test, whatever its concept; a tree that writes to a relative path (an output path a mutant
    made None writes ./None) writes in its own working folder, never where the grading started."""
    stray = f"stray-{uuid.uuid4().hex[:8]}"
    writer = _tree(tmp_path / "writer", shapes, REFERENCE.replace(
        "def area(side):\n", f"def area(side):\n    open({stray!r}, 'w').write('x')\n"))
    mutant = _tree(tmp_path / "mutant", shapes, REFERENCE.replace("return Square().side", "return 2"))
    places = [COURSE.root / stray, Path.cwd() / stray, shapes.course.root / stray]
    try:
        written, stopped = runner.run_forked(
            [runner.ForkedGradings(shapes, [(writer, None), (mutant, ANY_CONCEPT)], seed=0)], workers=2)[0]
        assert written.complete and written.total.percent == 100.0, written.problems
        assert not [str(place) for place in places if place.exists()], "a tree wrote where the grading started"
    finally:
        for place in places:
            place.unlink(missing_ok=True)
    assert stopped.stopped_early == "a test failed"
    ran = [t.id.split("::")[1] for t in stopped.task(shapes.name).tests]
    assert ran == ["test_area", "test_perimeter", "test_unit_square"], "it stops at the first lost test, of any concept"


def test_a_false_reject_says_which_test_was_lost_and_why(shapes, tmp_path):
    """An alternative that loses a test is a false reject whose verdict names the test and the
    first line of its feedback: what a suite author reads first, in the audit's table or CI's log."""
    rejected = _tree(tmp_path / "rejected", shapes, REFERENCE.replace("return side ** 2", "raise ValueError('no side of 3')"))
    (report,) = runner.run_forked([runner.ForkedGradings(shapes, [(rejected, None)], seed=0)], workers=1)[0]
    entry = AuditEntry(shapes.name, "rejected", "alternative")
    score_entry(entry, report)
    assert not entry.ok and [test.rpartition("::")[2] for test in entry.failing_tests] == ["test_area"]
    assert entry.verdict.startswith("FALSE REJECT: lost test_area ("), entry.verdict
    assert "ValueError: no side of 3" in entry.verdict, entry.verdict
