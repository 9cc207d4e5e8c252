"""A term rehearsed on a quick course (`term_course`): a class of 20 hands in (reference copies,
stubs, mutants); the late policy, an extension and two overrides are set; a hidden test is
tightened; a regrade is killed half way and run again. The gradebook must then hold exactly what
the change implies: the deltas, the overrides kept and flagged, the penalties, the exports, and
every grading once. The default tier runs the command itself once on exercise 01
(`test_grader_regrade_...`); the rehearsal and the three ways of running a batch are the full
tier's (about a minute)."""
import csv
import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console

from grader.gradebook import adjustments, commands, exports, grades, regrade
from grader.gradebook.batches import Recorder
from grader.gradebook.store import Gradebook
from grader.isolation import levels
from grader.isolation.sandbox import Limits
from grader.reports.summary import load_entries
from grader.running import batch, runner
from grader.running.shards import Shard
from grader.worker.loading import sibling_module

term = sibling_module(__file__, "term_course")
pytestmark = pytest.mark.e2e

DEADLINE = datetime.fromisoformat("2026-10-05T23:59:00+08:00")
POLICY = """[deadlines]
"01" = 2026-10-05T23:59:00+08:00

[late]
penalty_percent = 10
per = "day"
cap_percent = 30
grace_minutes = 15
"""
# learner -> (their 01_demo, handed in how long after the deadline); names sort the mutants of
# `abs` last, so the killed regrade's first gradings are of learners the tightened test leaves alone
CLASS = {
    **{f"r{i:02}": (term.REFERENCE, timedelta(hours=-3)) for i in range(1, 9)},
    **{f"s{i:02}": (term.STUB, timedelta(days=-1)) for i in range(1, 5)},
    **{f"m-big{i}": (term.MUTANTS["big"], timedelta(0)) for i in (1, 2)},
    **{f"m-plus{i}": (term.MUTANTS["plus1"], timedelta(minutes=-1)) for i in (1, 2)},
    **{f"zabs{i}": (term.MUTANTS["abs"], timedelta(hours=-1)) for i in range(1, 5)},
}
CLASS["r02"] = (term.REFERENCE, timedelta(minutes=10))        # within the grace
CLASS["r03"] = (term.REFERENCE, timedelta(days=1, hours=12))  # two started days: 20%
CLASS["r04"] = (term.REFERENCE, timedelta(days=10))           # capped: 30%
CLASS["r05"] = (term.REFERENCE, timedelta(days=2))            # extended by three days: nothing
ROSTER_EXTRA = "never-handed-in"

KILLABLE_REGRADE = """
import sys
from pathlib import Path
from grader.course import Course
from grader.gradebook import regrade
from grader.gradebook.store import Gradebook
from grader.isolation import levels
from grader.isolation.sandbox import Limits
from grader.running import runner
course, out = Course(Path(sys.argv[1])), Path(sys.argv[2])
limits = Limits()
template = runner.GradingRun(Path("."), list(course.tasks()), limits=limits,
                             isolation=levels.resolve("none", "worker", limits))
with Gradebook.open(out, create=False) as book:
    regrade.regrade(book, course, regrade.plan(book, course), template, out, jobs=1)
"""


def template_for(course) -> runner.GradingRun:
    limits = Limits()
    return runner.GradingRun(Path("."), list(course.tasks()), limits=limits,
                             isolation=levels.resolve("none", "worker", limits))


def gradings_count(out) -> int:
    with sqlite3.connect(out / "gradebook.sqlite", timeout=30) as db:
        return db.execute("SELECT count(*) FROM gradings").fetchone()[0]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("term")
    course = term.write(tmp / "course")
    paths = [term.submission(tmp / "class" / name, demo) for name, (demo, _) in CLASS.items()]
    times = {name: DEADLINE + late for name, (_, late) in CLASS.items()}
    out = tmp / "out"
    template = template_for(course)
    said = {}
    with Gradebook.open(out) as book:
        batch.grade(paths, template, out, jobs=2, record=Recorder(book, "local", times))
        said["first"] = {g.learner: (g.raw, g.final) for g in grades.current(book, course)}
        said["policy"] = adjustments.set_policy(book, course, POLICY, "instructor")
        said["extension"] = adjustments.set_extension(book, course, "r05", "01", "2026-10-08T23:59:00+08:00",
                                                      "medical", "instructor")
        adjustments.set_override(book, course, "zabs1", "01", "test_doubles_small", 1, "asked in office hours",
                                 "instructor")
        adjustments.set_override(book, course, "r01", "01", None, 3, "integrity case 14", "instructor")
    term.tighten(course)

    # a regrade killed half way (SIGKILL, once five gradings are in), then run again to its end
    killed = subprocess.Popen([sys.executable, "-c", KILLABLE_REGRADE, str(course.root), str(out)],
                              start_new_session=True)
    deadline = time.monotonic() + 240
    while gradings_count(out) < len(CLASS) + 5 and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    said["after_kill"] = gradings_count(out)
    with Gradebook.open(out, create=False) as book:
        said["replanned"] = [item.learner for item in regrade.plan(book, course)]
        said["deltas"] = regrade.regrade(book, course, regrade.plan(book, course), template, out, jobs=2)
        said["current"] = {g.learner: g for g in grades.current(book, course)}
        roster = {name: {"student": f"Student {name}", "sis_login_id": f"{name}@uni", "email": f"{name}@uni.edu",
                         "id_number": name.upper()} for name in [*CLASS, ROSTER_EXTRA]}
        current = list(said["current"].values())
        said["canvas"] = exports.canvas_csv(current, roster)
        said["moodle"] = exports.moodle_csv(current, roster)
        said["counts"] = {table: book.count(table) for table in ("learners", "submissions", "gradings")}
    return said, out


@pytest.mark.full
def test_the_first_grading_scores_each_kind_of_submission(rehearsal):
    said, _ = rehearsal
    first = said["first"]
    assert first["r01"] == (8.0, 8.0) and first["s01"] == (3.0, 3.0)       # 02 is every learner's: 3 points
    assert first["m-big1"][0] == 3.0 + 3.0 and first["m-plus1"][0] == 3.0 and first["zabs1"][0] == 8.0


@pytest.mark.full
def test_a_killed_regrade_run_again_grades_each_submission_once_more_and_no_more(rehearsal):
    said, out = rehearsal
    assert len(CLASS) + 5 <= said["after_kill"] < 2 * len(CLASS)
    assert len(said["replanned"]) == 2 * len(CLASS) - said["after_kill"]
    assert said["counts"] == {"learners": 20, "submissions": 20, "gradings": 40}
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        per_learner = db.execute("SELECT s.learner, count(*) FROM gradings g JOIN submissions s ON s.id = g.submission "
                                 "GROUP BY s.learner").fetchall()
        tasks_per_grading = db.execute("SELECT count(*) FROM task_gradings").fetchone()[0]
    assert {count for _, count in per_learner} == {2} and len(per_learner) == 20
    assert tasks_per_grading == 20 * 2 + 20        # the batch graded both tasks, the regrade 01 only
    assert not (out / regrade.WORK_FOLDER).exists()


@pytest.mark.full
def test_the_deltas_are_exactly_what_the_tightened_test_implies(rehearsal):
    said, out = rehearsal
    changed = {(d.learner, c.test.rsplit("::", 1)[1], c.gained) for d in said["deltas"] for c in d.changes}
    assert changed == {(f"zabs{i}", "test_doubles_small", -1.0) for i in range(1, 5)}
    page = (out / "zabs2" / "report.html").read_text()          # the learner's page shows the regrade too
    assert "a negative input keeps its sign" in page
    assert all(d.task == "01_demo" for d in said["deltas"])
    with sqlite3.connect(out / "gradebook.sqlite") as db:      # the killed run's learners too, from the raw rows
        rows = db.execute("SELECT s.learner, g.seq, r.test, r.points FROM results r JOIN gradings g ON g.key = r.grading "
                          "JOIN submissions s ON s.id = g.submission WHERE r.task = '01_demo' ORDER BY g.seq").fetchall()
    by_learner = {}
    for learner, seq, test, points in rows:
        by_learner.setdefault(learner, {}).setdefault(seq, {})[test] = points
    for learner, gradings in by_learner.items():
        first, last = list(gradings.values())
        lost = {test.rsplit("::", 1)[1] for test in first if first[test] != last[test]}
        assert lost == ({"test_doubles_small"} if learner.startswith("zabs") else set()), learner


@pytest.mark.full
def test_overrides_survive_the_regrade_and_are_flagged_where_their_test_changed(rehearsal):
    said, _ = rehearsal
    zabs1, zabs2, r01 = (said["current"][name] for name in ("zabs1", "zabs2", "r01"))
    assert zabs2.task("01_demo").points == 4.0                # lost test_doubles_small: no override
    assert zabs1.task("01_demo").points == 5.0                # its override keeps the point
    assert any("test_doubles_small" in note and "another version" in note for note in zabs1.notes)
    assert r01.task("01_demo").points == 3.0 and any("task 01_demo" in note for note in r01.notes)
    assert not said["current"]["r06"].notes


@pytest.mark.full
def test_late_submissions_pay_the_policy_and_the_extension_is_honoured(rehearsal):
    said, _ = rehearsal
    penalty = {name: said["current"][name].task("01_demo").penalty_percent for name in ("r02", "r03", "r04", "r05", "r06")}
    assert penalty == {"r02": 0.0, "r03": 20.0, "r04": 30.0, "r05": 0.0, "r06": 0.0}
    r03 = said["current"]["r03"]
    assert (r03.raw, r03.penalty, r03.final) == (8.0, 1.0, 7.0)          # 02 has no deadline
    assert said["current"]["r04"].task("01_demo").final == 3.5


@pytest.mark.full
def test_both_exports_parse_back_with_the_final_points(rehearsal):
    said, _ = rehearsal
    canvas = list(csv.reader(io.StringIO(said["canvas"])))
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert canvas[1][0] == "Points Possible" and canvas[1][5:] == [str(term.MAX_01), str(term.MAX_02)]
    rows = {row[3]: row[5:] for row in canvas[2:]}
    assert len(rows) == 21
    assert rows["r03@uni"] == ["4.0", "3.0"] and rows["zabs2@uni"] == ["4.0", "3.0"] and rows["r01@uni"] == ["3.0", "3.0"]
    assert rows[f"{ROSTER_EXTRA}@uni"] == ["", ""]
    moodle = list(csv.DictReader(io.StringIO(said["moodle"])))
    by_id = {row["ID number"]: row for row in moodle}
    assert by_id["R04"]["Exercise 01: doubling"] == "3.5" and by_id["S01"]["Exercise 01: doubling"] == "0.0"
    assert by_id["S01"]["Email address"] == "s01@uni.edu"


def current_results(out, course) -> dict:
    """What a gradebook says each learner has, test by test: what must not depend on how the batch ran."""
    with Gradebook.open(out, create=False) as book:
        return {grade.learner: {test.id: (test.status, test.points) for test in grade.report.tests()}
                for grade in grades.current(book, course)}


@pytest.mark.full
def test_one_job_two_jobs_and_two_shards_give_the_same_gradebook(tmp_path):
    course = term.write(tmp_path / "course")
    kinds = ["r1", "s1", "big", "abs"]
    sources = {"r1": term.REFERENCE, "s1": term.STUB, **term.MUTANTS}
    paths = [term.submission(tmp_path / "class" / name, sources[name], triple=False) for name in kinds]
    template = runner.GradingRun(Path("."), [course.task_named("01")], limits=Limits(),
                                 isolation=levels.resolve("none", "worker", Limits()))
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        with Gradebook.open(out) as book:
            batch.grade(paths, template, out, jobs=jobs, record=Recorder(book, "local"))
    sharded = tmp_path / "shards"
    for index in range(2):        # each shard leaves reports only; the owner records the folder once all have ended
        batch.grade(paths, template, sharded, shard=Shard(index, 2))
    assert not (sharded / "gradebook.sqlite").exists()
    with Gradebook.open(sharded) as book:
        record = Recorder(book, "reports on disk")
        for entry in [*load_entries(sharded), *load_entries(sharded)]:      # twice: recording again adds nothing
            record(entry)
        assert book.count("gradings") == len(kinds)
    one = current_results(tmp_path / "jobs1", course)
    assert len(one) == len(kinds) and one["abs"] != one["big"]
    assert current_results(tmp_path / "jobs2", course) == one
    assert current_results(sharded, course) == one


@pytest.mark.full
def test_the_regrade_prints_who_lost_what_and_why(rehearsal):
    said, _ = rehearsal
    console = Console(record=True, width=200)
    console.print(commands._delta_table(said["deltas"]))
    console.print(commands._per_test_table(said["deltas"]))
    text = console.export_text()
    lines = [line for line in text.splitlines() if line.lstrip("│ ").startswith("zabs")]
    assert len(lines) == 4 and all("-1" in line and "test_doubles_small" in line for line in lines)
    assert "a negative input keeps its sign" in text                # why: the new assert's own message
    redone = len(said["deltas"])
    assert f"{redone} task grading(s) redone: 4 changed, {redone - 4} unchanged" in " ".join(text.split())
    (per_test,) = [line for line in text.splitlines() if "test_doubles_small" in line and "zabs1, zabs2" in line]
    assert [cell.strip() for cell in per_test.split("│")[1:4]] == ["test_doubles_small", "0", "4"]


def test_grader_regrade_grades_what_an_older_suite_graded_and_says_why(tmp_path):
    """The command itself, on the course's exercise 01: a grading recorded by an older suite (one
    test, since removed, failed) is graded again at the default isolation and the deltas printed."""
    from grader.course import COURSE
    from grader.schema.report import ModuleInfo, ScoreReport, TaskResult, TestResult
    task = COURSE.task_named("01")
    tree = tmp_path / "ada" / task.name
    tree.mkdir(parents=True)
    tree.joinpath(f"{task.module}.py").write_bytes(task.reference_module.read_bytes())
    old = TestResult(f"tests/hidden/{task.name}/test_old.py::test_removed", task.name, "hidden", "removed", "failed",
                     True, 2.0, feedback="expected 1, got 2")
    report = ScoreReport(run={"run_id": "old-run"}, submission={"path": str(tmp_path / "ada")},
                         tasks=[TaskResult(task.name, task.title, ModuleInfo("m", True, "abc"), [old], "an older suite")])
    out = tmp_path / "batch"
    with Gradebook.open(out) as book:
        book.record("ada", report)
    dry = subprocess.run([sys.executable, "-m", "grader.cli", "regrade", str(out), "--dry-run"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300)
    assert dry.returncode == 0 and "would be graded again" in dry.stdout, dry.stdout + dry.stderr
    done = subprocess.run([sys.executable, "-m", "grader.cli", "regrade", str(out)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600, env={**os.environ, "COLUMNS": "300"})
    said = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_removed" in said and "no longer in the suite" in said and "1 changed, 0 unchanged" in said
    with Gradebook.open(out, create=False) as book:
        (ada,) = grades.current(book, COURSE)
        assert book.count("gradings") == 2 and ada.raw == ada.max_points > 0
        assert ada.task(task.name).result.suite_sha256 == task.suite_sha256(hidden=True)
    with open(out / "summary.csv") as f:
        (row,) = csv.DictReader(f)
    assert row["submission"] == "ada" and float(row["points"]) == ada.max_points
