"""A hostile learner against the gradebook: files or a commit backdated to look on time, a submission named
like the gradebook or its journal (which would stop SQLite from writing), and text written to
be read as SQL. The time is flagged as one the learner could set, the names are moved aside and
every grading is recorded, the text stays text."""
import os
from datetime import datetime
from pathlib import Path

import pytest

from grader.gradebook import adjustments, grades
from grader.gradebook.batches import Recorder
from grader.gradebook.handed_in import COMMIT_TIME, FILE_TIMES
from grader.gradebook.store import BOOK_NAME, Gradebook
from grader.isolation import levels
from grader.isolation.sandbox import Limits
from grader.reports.summary import GRADEBOOK_FILES, Entry
from grader.running import batch, runner
from grader.schema import report as schema
from grader.schema.report import ModuleInfo, ScoreReport, TaskResult
from grader.worker.loading import load_module

term = load_module(Path(__file__).resolve().parent.parent / "term_course.py")
POLICY = '[deadlines]\n"01" = 2026-10-05T23:59:00+08:00\n[late]\npenalty_percent = 50\n'


def hand_report(feedback: str = "") -> ScoreReport:
    test = schema.TestResult("tests/hidden/01_demo/test_demo_hidden.py::test_doubles_small", "01_demo", "hidden",
                      "test_doubles_small", "failed" if feedback else "passed", True, 1.0, feedback=feedback)
    return ScoreReport(run={"run_id": "run-1"}, submission={"path": "x"},
                       tasks=[TaskResult("01_demo", "Exercise 01", ModuleInfo("demo.py", True, "abc"), [test], "v1")])


def _backdate_files(learner: Path, when: datetime) -> None:
    for path in learner.rglob("*.py"):
        os.utime(path, (when.timestamp(), when.timestamp()))


@pytest.mark.parametrize("backdate, source", [(_backdate_files, FILE_TIMES), (term.commit_all, COMMIT_TIME)],
                         ids=["files", "commit"])
def test_a_backdated_submission_is_never_trusted_in_silence(tmp_path, backdate, source):
    """Handed in after the deadline, made to look days early: its files' times, or its commit's."""
    course = term.write(tmp_path / "course")
    learner = term.submission(tmp_path / "mallory", term.REFERENCE)
    backdate(learner, datetime.fromisoformat("2026-10-01T00:00:00+00:00"))
    with Gradebook.open(tmp_path / "batch") as book:
        Recorder(book, "local")(Entry("mallory", str(learner), hand_report()))
        adjustments.set_policy(book, course, POLICY, "instructor")
        (grade,) = grades.current(book, course)
    assert grade.task("01_demo").penalty_percent == 0.0
    assert any(source in note and "whoever made the submission can set" in note and "--received-times" in note
               for note in grade.notes), grade.notes


def test_text_written_as_sql_is_kept_as_text(tmp_path):
    feedback = "x'); DROP TABLE results; --"
    with Gradebook.open(tmp_path) as book:
        book.record("robert'); DROP TABLE learners; --", hand_report(feedback))
        assert book.count("results") == 1 and book.learners() == ["robert'); DROP TABLE learners; --"]
        (stored,) = book.db.execute("SELECT feedback FROM results").fetchone()
    assert stored == feedback


@pytest.mark.e2e
def test_submissions_named_like_the_gradebook_get_folders_of_their_own(tmp_path):
    course = term.write(tmp_path / "course")
    subs = [term.submission(tmp_path / "class" / name, term.REFERENCE, triple=False) for name in GRADEBOOK_FILES]
    names = batch.unique_names(subs)
    assert not set(names) & set(GRADEBOOK_FILES)
    limits = Limits()
    template = runner.GradingRun(tmp_path, [course.task_named("01")], limits=limits,
                                 isolation=levels.resolve("none", "worker", limits))
    out = tmp_path / "out"
    with Gradebook.open(out) as book:
        entries = batch.grade(subs, template, out, record=Recorder(book, "local"))
        assert book.count("gradings") == 2 and all(e.report.total.points == term.MAX_01 for e in entries)
    assert (out / BOOK_NAME).is_file()
