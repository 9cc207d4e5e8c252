"""The gradebook on its own, from hand-written score reports (no grading): a report recorded once
however often it is handed in, the late policy at its limits, and every bad input refused with
its reason and nothing written (a newer schema, a locked, damaged or foreign file, an unknown
learner or test, points out of range, a policy with a typo, a times file without offsets). The
term itself, graded for real, is `test_term.py`'s."""
import shutil
import sqlite3
import subprocess
from datetime import datetime, timedelta

import pytest

from grader import cli
from grader.gradebook import adjustments, grades, policy, store
from grader.gradebook.handed_in import COMMIT_TIME, FILE_TIMES, TimesError, read_times, received
from grader.gradebook.store import Gradebook, GradebookError, Received
from grader.schema import report as schema
from grader.schema.report import ModuleInfo, ScoreReport, TaskResult
from grader.worker.loading import sibling_module

term = sibling_module(__file__, "term_course")
HANDED_IN = Received(datetime.fromisoformat("2026-10-05T12:00:00+00:00"), "a test")


def report(run_id: str, passed: bool = True, suite: str = "v1") -> ScoreReport:
    tests = [schema.TestResult(f"tests/hidden/01_demo/test_demo_hidden.py::{name}", "01_demo", "hidden", name,
                        "passed" if passed or name == "test_doubles_zero" else "failed", True, points)
             for name, points in (("test_doubles_a_hidden_input", 2.0), ("test_doubles_small", 1.0),
                                  ("test_doubles_zero", 1.0))]
    task = TaskResult("01_demo", "Exercise 01: doubling", ModuleInfo("demo.py", True, "abc"), tests, suite)
    return ScoreReport(run={"run_id": run_id, "finished_at": "2026-10-05T12:00:05+00:00", "seed": 1},
                       submission={"path": "/class/ada"}, tasks=[task])


@pytest.fixture
def course(tmp_path):
    return term.write(tmp_path / "course")


@pytest.fixture
def book(tmp_path):
    with Gradebook.open(tmp_path / "batch") as opened:
        opened.record("ada", report("run-1"), HANDED_IN, "local")
        yield opened


def test_a_report_recorded_twice_is_one_grading(book):
    assert book.record("ada", report("run-1"), HANDED_IN, "local") is False
    assert book.record("ada", report("run-2", passed=False), HANDED_IN, "local") is True
    assert {t: book.count(t) for t in ("learners", "submissions", "gradings", "results")} == \
        {"learners": 1, "submissions": 1, "gradings": 2, "results": 6}


def test_a_report_with_no_run_id_is_keyed_by_its_content(book):
    failed = ScoreReport.failed("the archive was refused", {"path": "/class/bob.zip"})
    assert book.record("bob", failed) is True
    assert book.record("bob", ScoreReport.failed("the archive was refused", {"path": "/class/bob.zip"})) is False
    assert book.count("gradings") == 2


def test_the_current_grade_is_the_latest_grading_of_each_task(book, course):
    book.record("ada", report("run-2", passed=False), HANDED_IN, "local")
    (ada,) = grades.current(book, course)
    assert (ada.raw, ada.max_points, ada.task("01_demo").grading) == (1.0, 4.0, "ada/run-2")


@pytest.mark.parametrize("late_by, percent", [
    (timedelta(minutes=15), 0.0),                      # exactly the grace
    (timedelta(minutes=15, seconds=1), 10.0),          # past it: one started day, counted from the deadline
    (timedelta(days=1), 10.0),                         # exactly one day
    (timedelta(days=1, seconds=1), 20.0),
    (timedelta(days=3, seconds=1), 35.0),              # four started days, capped
])
def test_the_late_penalty_at_its_limits(late_by, percent):
    late = policy.Policy({}, penalty_percent=10, per="day", cap_percent=35, grace=timedelta(minutes=15))
    assert late.penalty_percent_for(late_by) == percent


def test_per_hour_counts_started_hours():
    late = policy.Policy({}, penalty_percent=2, per="hour", cap_percent=100)
    assert [late.penalty_percent_for(timedelta(minutes=m)) for m in (0, 1, 60, 61)] == [0.0, 2.0, 2.0, 4.0]


@pytest.mark.parametrize("text, said", [
    ('[late]\npenalty_percen = 10\n', "did you mean 'penalty_percent'"),
    ('[deadline]\n"01" = 2026-10-05T23:59:00+08:00\n', "did you mean 'deadlines'"),
    ('[deadlines]\n"09" = 2026-10-05T23:59:00+08:00\n', "no task '09'"),
    ('[deadlines]\n"01" = 2026-10-05T23:59:00\n', "UTC offset"),
    ('[late]\nper = "week"\n', '"day" or "hour"'),
    ('[late]\ncap_percent = 150\n', "from 0 to 100"),
    ('[late]\npenalty_percent = "ten"\n', "expected a number"),
    ('[late\n', "not valid TOML"),
])
def test_a_policy_with_a_typo_is_refused_and_nothing_is_written(book, course, text, said):
    with pytest.raises(adjustments.Refused, match=said):
        adjustments.set_policy(book, course, text, "instructor")
    assert book.db.execute("SELECT count(*) FROM policy").fetchone()[0] == 0


@pytest.mark.parametrize("learner, test, points, reason, said", [
    ("bob", None, 1.0, "why", "no learner bob"),
    ("ada", "test_nothing", 1.0, "why", "no test test_nothing"),
    ("ada", "test_doubles_small", 1.5, "why", "expected 0 to 1"),
    ("ada", None, -1.0, "why", "expected 0 to 4"),
    ("ada", None, 1.0, "  ", "give a reason"),
])
def test_an_override_that_cannot_apply_is_refused_and_nothing_is_written(book, course, learner, test, points,
                                                                          reason, said):
    with pytest.raises(adjustments.Refused, match=said):
        adjustments.set_override(book, course, learner, "01", test, points, reason, "instructor")
    assert book.count("overrides") == 0


def test_an_override_of_a_test_that_left_the_suite_is_kept_but_not_applied(book, course):
    adjustments.set_override(book, course, "ada", "01", "test_doubles_small", 0.0, "copied", "instructor")
    later = report("run-2", suite="v2")
    later.tasks[0].tests = [t for t in later.tasks[0].tests if t.title != "test_doubles_small"]
    book.record("ada", later, HANDED_IN, "local")
    (ada,) = grades.current(book, course)
    assert ada.task("01_demo").points == 3.0
    assert ada.notes == ["override of tests/hidden/01_demo/test_demo_hidden.py::test_doubles_small not applied: "
                         "the test is no longer in the suite"]


def test_an_extension_needs_a_known_learner_and_a_time_with_its_offset(book, course):
    with pytest.raises(adjustments.Refused, match="UTC offset"):
        adjustments.set_extension(book, course, "ada", "01", "2026-10-08T23:59", "medical", "instructor")
    with pytest.raises(adjustments.Refused, match="no learner bob"):
        adjustments.set_extension(book, course, "bob", "01", "2026-10-08T23:59:00+08:00", "medical", "instructor")
    assert book.count("extensions") == 0


def _bytes(path):
    return path.read_bytes() if path.exists() else None


def test_a_gradebook_of_a_newer_schema_is_refused_untouched(tmp_path):
    Gradebook.open(tmp_path).close()
    with sqlite3.connect(tmp_path / store.BOOK_NAME) as db:
        db.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 1}")
    before = _bytes(tmp_path / store.BOOK_NAME)
    with pytest.raises(GradebookError, match="newer grader"):
        Gradebook.open(tmp_path)
    assert _bytes(tmp_path / store.BOOK_NAME) == before


def test_a_damaged_or_foreign_file_is_refused_untouched(tmp_path):
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / store.BOOK_NAME).write_bytes(b"SQLite format 3\x00" + b"\x17" * 4000)
    with pytest.raises(GradebookError, match="not a readable gradebook|damaged"):
        Gradebook.open(damaged)
    assert (damaged / store.BOOK_NAME).read_bytes() == b"SQLite format 3\x00" + b"\x17" * 4000
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    with sqlite3.connect(foreign / store.BOOK_NAME) as db:
        db.execute("CREATE TABLE recipes (name TEXT)")
    before = _bytes(foreign / store.BOOK_NAME)
    with pytest.raises(GradebookError, match="not a gradebook"):
        Gradebook.open(foreign)
    assert _bytes(foreign / store.BOOK_NAME) == before


def test_a_locked_gradebook_is_said_and_waits_for_no_one(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "LOCK_WAIT_S", 0.2)
    Gradebook.open(tmp_path).close()
    holder = sqlite3.connect(tmp_path / store.BOOK_NAME, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(GradebookError, match="locked by another process"):
            with Gradebook.open(tmp_path) as book:
                book.record("ada", report("run-1"), HANDED_IN, "local")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Gradebook.open(tmp_path) as book:
        assert book.count("gradings") == 0


def test_an_older_gradebook_is_migrated_in_place(tmp_path):
    (tmp_path / store.BOOK_NAME).touch()          # schema 0: an empty file
    with Gradebook.open(tmp_path) as book:
        assert book.db.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
        book.record("ada", report("run-1"), HANDED_IN, "local")
    with Gradebook.open(tmp_path) as book:
        assert book.count("gradings") == 1


def test_a_times_file_without_offsets_or_header_is_refused(tmp_path):
    times = tmp_path / "times.csv"
    times.write_text("submission,received_at\nada,2026-10-05T12:00:00+02:00\n")
    assert read_times(times) == {"ada": datetime.fromisoformat("2026-10-05T12:00:00+02:00")}
    times.write_text("submission,received_at\nada,2026-10-05 12:00\n")
    with pytest.raises(TimesError, match="line 2"):
        read_times(times)
    times.write_text("name,time\nada,2026-10-05T12:00:00+02:00\n")
    with pytest.raises(TimesError, match="header"):
        read_times(times)


def test_a_clone_is_handed_in_when_its_commit_says_not_when_it_was_cloned(tmp_path):
    """A fork cloned for grading after the deadline: its files bear the clone's time, its commit
    (packed, as a clone's are) the time the learner committed; a CSV row wins over both."""
    committed = datetime.fromisoformat("2026-10-05T23:12:00+08:00")
    source = tmp_path / "fork"
    (source / "01_demo").mkdir(parents=True)
    (source / "01_demo" / "demo.py").write_text("def double(x):\n    return 2 * x\n")
    commit = term.commit_all(source, committed)
    clone = tmp_path / "class" / "ada"
    subprocess.run(["git", "clone", "-q", "--no-local", str(source), str(clone)], check=True)
    assert not list((clone / ".git" / "objects").glob("??/*")), "the clone's objects should all be packed"

    handed_in = received(clone, None)
    assert handed_in.at == committed and handed_in.at.utcoffset() == timedelta(hours=8)
    assert handed_in.source == f"{COMMIT_TIME} ({commit[:12]})"
    csv_time = datetime.fromisoformat("2026-10-06T01:00:00+08:00")
    assert received(clone, {"ada": csv_time}).at == csv_time
    shutil.rmtree(clone / ".git")
    assert received(clone, None).source == FILE_TIMES


@pytest.mark.parametrize("argv, said", [
    (["override", "{dir}", "ada", "01", "--points", "1", "--reason", "why"], "no gradebook in"),
    (["regrade", "{dir}", "--dry-run"], "no gradebook in"),
    (["export", "{dir}", "--roster", "{dir}/roster.csv"], "give --canvas OUT, --moodle OUT, --canvas-url URL, or several"),
])
def test_the_commands_refuse_a_folder_without_a_gradebook(tmp_path, capsys, argv, said):
    assert cli.main([arg.format(dir=tmp_path) for arg in argv]) == cli.USAGE
    assert said in " ".join(capsys.readouterr().out.split())
    assert not (tmp_path / store.BOOK_NAME).exists()


def test_deadlines_with_a_typo_leave_the_gradebook_as_it_was(tmp_path, capsys):
    with Gradebook.open(tmp_path) as book:
        book.record("ada", report("run-1"), HANDED_IN, "local")
    before = _bytes(tmp_path / store.BOOK_NAME)
    (tmp_path / "policy.toml").write_text('[late]\ngrace_minute = 5\n')
    assert cli.main(["deadlines", str(tmp_path), str(tmp_path / "policy.toml")]) == cli.USAGE
    assert "did you mean 'grace_minutes'" in capsys.readouterr().out
    assert _bytes(tmp_path / store.BOOK_NAME) == before
