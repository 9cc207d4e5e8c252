"""`grader similarity`: copies of a reference disguised as a copier would (names renamed, functions
reordered, comments added) are flagged against it and each other; the course's independent
correct solution, written apart, is not, on every exercise. A module that is a link out of its
submission is not compared, and what it points at never reaches the report."""
import os
import re
import subprocess
import sys
from itertools import combinations

import pytest

from grader.course import COURSE
from grader.gradebook.batches import Recorder
from grader.gradebook.similarity import THRESHOLD, similarity
from grader.gradebook.store import Gradebook
from grader.reports.summary import Entry
from grader.schema.report import ScoreReport
from grader.worker.loading import sibling_module

planted = sibling_module(__file__, "planted_copies")
COPIES = {"renamed": planted.renamed, "reordered": planted.reordered, "commented": planted.commented,
          "disguised": planted.disguised}


def batch_of(root, task, sources: dict[str, str]):
    """A batch folder whose gradebook holds one submission per learner (its grading is not what is tested)."""
    with Gradebook.open(root / "batch") as book:
        for learner, source in sources.items():
            folder = root / "class" / learner / task.name
            folder.mkdir(parents=True)
            (folder / f"{task.module}.py").write_text(source)
            Recorder(book, "local")(Entry(learner, str(root / "class" / learner),
                                          ScoreReport.failed("not graded here", {"path": str(root / "class" / learner)})))
    return root / "batch"


@pytest.mark.parametrize("task", COURSE.tasks(), ids=[t.name for t in COURSE.tasks()])
def test_disguised_copies_are_flagged_and_the_independent_solution_is_not(tmp_path, task):
    reference = task.reference_module.read_text()
    sources = {"original": reference, **{name: copy(reference) for name, copy in COPIES.items()},
               "independent": task.independent_module.read_text(),
               "stub": (task.exercise_dir / f"{task.module}.py").read_text()}
    for name, source in sources.items():
        compile(source, name, "exec")            # each copy is still a module that runs
    with Gradebook.open(batch_of(tmp_path, task, sources), create=False) as book:
        found = similarity(book, task, tmp_path / "report.html")
    flagged = {frozenset((pair.first, pair.second)) for pair in found.pairs}
    copies = ["original", *COPIES]
    assert flagged == {frozenset(pair) for pair in combinations(copies, 2)}
    assert all(min(p.first_shared, p.second_shared) > 0.8 for p in found.pairs)
    assert sorted(found.compared) == sorted(sources) and not found.not_compared
    page = (tmp_path / "report.html").read_text()
    assert page.count("<mark>") >= 10 and page.count("<pre>") == 2 * len(found.pairs)     # each pair side by side
    assert re.search(r"<h2>[^<]*disguised \(", page) and "grader-similarity-" not in page     # names, not scratch paths


def test_a_module_linked_out_of_its_submission_is_not_compared(tmp_path):
    task = COURSE.task_named("01")
    batch = batch_of(tmp_path, task, {"ada": task.reference_module.read_text(), "bob": "x = 1\n"})
    linked = tmp_path / "class" / "bob" / task.name / f"{task.module}.py"
    linked.unlink()
    hidden = next(task.hidden_dir.glob("test_*.py"))
    linked.symlink_to(hidden)               # the hidden suite, read by whoever compares it
    with Gradebook.open(batch, create=False) as book:
        found = similarity(book, task, tmp_path / "report.html")
    assert "link to a file outside the submission" in found.not_compared["bob"]
    assert found.compared == ["ada"] and not found.pairs
    assert not (tmp_path / "report.html").exists()


def test_the_command_lists_the_pairs_and_writes_the_side_by_side_page(tmp_path):
    task = COURSE.task_named("01")
    reference = task.reference_module.read_text()
    batch = batch_of(tmp_path, task, {"ada": reference, "bob": planted.disguised(reference),
                                      "cy": task.independent_module.read_text()})
    env = {"COLUMNS": "200", "PATH": "", "PYTHONDONTWRITEBYTECODE": os.environ["PYTHONDONTWRITEBYTECODE"]}   # conftest's
    done = subprocess.run([sys.executable, "-m", "grader.cli", "similarity", str(batch), "01"], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if "%" in line and "│" in line]
    assert len(rows) == 1 and "ada" in rows[0] and "bob" in rows[0], done.stdout
    assert f"at least {THRESHOLD:.0%}" in done.stdout and "never a verdict" in done.stdout
    assert (batch / "similarity-01_einsum_attention.html").is_file()
