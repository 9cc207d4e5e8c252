"""A module whose bytes never change can keep its hidden inputs while what it answers from grows:
a table harvested from earlier feedback, committed to the submission's `.git`. So the jail holds
the submission's commit alone (a `.git` whose HEAD is the commit, for the learner's `git rev-parse
HEAD`), never its history, and the seed covers that commit: every commit draws new inputs."""
import shutil
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.schema.report import read_report
from grader.session import seeds
from grader.worker.loading import sibling_module

harness = sibling_module(__file__, "harness")
hostile = sibling_module(__file__, "hostile")
attacks = sibling_module(__file__, "attacks")

TABLE = "answers.json"
# The stub, unless the table its history holds can be read: then the reference, which stands for
# "answers from the table" (a recorded table answers exactly what the reference would).
TABLE_READER = f'''
import pathlib as _pathlib
if any((folder / ".git" / {TABLE!r}).exists() for folder in _pathlib.Path(__file__).resolve().parents):
    exec(compile({hostile.REFERENCE!r}, __file__, "exec"))
'''


def committed(folder: Path, source: str, message: str) -> str:
    """`source` as exercise 01's module in a fork clone at `folder`, committed; the table planted
    in its `.git`; HEAD."""
    _, head = attacks.git_clone(folder, source, message)
    (folder / ".git" / TABLE).write_text('{"attention": "recorded"}', encoding="utf-8")
    return head


def test_every_commit_draws_new_inputs_for_the_same_module(tmp_path):
    task = COURSE.task_named("01")
    first = committed(tmp_path / "fork", hostile.STUB, "round 1")
    seed_1 = seeds.submission_seed(tmp_path / "fork", [task], secret=b"course secret")
    assert seeds.submission_seed(tmp_path / "fork", [task], secret=b"course secret") == seed_1   # a regrade: the same
    second = committed(tmp_path / "fork", hostile.STUB, "round 2: the table grew")
    assert second != first
    assert seeds.submission_seed(tmp_path / "fork", [task], secret=b"course secret") != seed_1


def grade(folder: Path, work: Path, level: str, isolation: str):
    out = work / f"out-{level}-{isolation}"
    cli = harness.run_cli(["grade", folder, "--tasks", "01", "--out-dir", out, "--isolation", isolation],
                          harness.grading_env(work), cwd=work, timeout_s=600, level=level)
    reports = list(out.glob("*/score_report.json"))
    assert len(reports) == 1, cli.output[-2000:]
    return read_report(reports[0])


def graded_at(level: str, source: str, message: str):
    """`source` committed in a fork clone and graded officially at `level`: the report, and HEAD."""
    if harness.level_skip_reason(level):
        pytest.skip(harness.level_skip_reason(level))
    work = harness.work_folder("git-table")
    try:
        head = committed(work / "fork", source, message)
        report = grade(work / "fork", work, level, "required")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert report.isolation.get("level") == level, report.isolation
    assert report.submission["commit"] == head
    return report


# The default tier grades at the sandbox level; the full tier at every level, the control and the commit.
@pytest.mark.parametrize("level", [pytest.param(level, marks=[] if level == "sandbox" else [pytest.mark.full])
                                   for level in harness.LEVELS], ids=list(harness.LEVELS))
def test_a_table_in_the_history_is_not_in_the_jail(level):
    report = graded_at(level, hostile.STUB + TABLE_READER, "answers from the table")
    assert report.total.points == 0, f"the module read its history's table at the {level} level: {report.total}"


@pytest.mark.full
def test_five_rounds_of_a_growing_table_gain_nothing():
    """The replay as a learner would run it: the module's bytes never change, and between rounds
    the table in its history grows, a commit each. Every round scores the stub's 0 and draws new
    inputs."""
    work = harness.work_folder("git-table-rounds")
    try:
        rounds = []
        for round_ in range(1, 6):
            committed(work / "fork", hostile.STUB + TABLE_READER, f"round {round_}: the table grew")
            report = grade(work / "fork", work, "sandbox", "required")
            rounds.append((report.total.points, report.run["seed"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert [points for points, _ in rounds] == [0] * 5, rounds
    assert len({seed for _, seed in rounds}) == 5, rounds


@pytest.mark.full
def test_the_table_reader_scores_where_it_can_read_its_history(tmp_path):
    """The control: ungraded by any jail, the same module finds its table and earns the reference's
    points, but for the structural tests (its source holds the reference as a string)."""
    committed(tmp_path / "fork", hostile.STUB + TABLE_READER, "answers from the table")
    report = grade(tmp_path / "fork", tmp_path, "sandbox", "none")
    lost = {attacks.test_name(t) for t in report.tests() if t.lost}
    assert report.total.points > 0 and lost <= set(attacks.STRUCTURAL_TESTS), (report.total, lost)


# The reference, which will not import unless `git rev-parse HEAD` in its folder prints a commit,
# as exercise 02's run record asks of the learner.
COMMIT_RECORDER = '''
import re as _re, subprocess as _subprocess, pathlib as _pathlib
_head = _subprocess.run(["git", "rev-parse", "HEAD"], cwd=_pathlib.Path(__file__).resolve().parent,
                        capture_output=True, text=True)
if not _re.fullmatch("[0-9a-f]{40}", _head.stdout.strip()):
    raise ImportError("git rev-parse HEAD printed %r: %s" % (_head.stdout, _head.stderr.strip()))
'''


@pytest.mark.full
@pytest.mark.parametrize("level", harness.LEVELS)
def test_the_learners_git_finds_its_commit_in_the_jail(level):
    report = graded_at(level, COMMIT_RECORDER + hostile.REFERENCE, "records its commit")
    lost = [(t.id, t.feedback[:300]) for t in report.tests() if t.lost]
    assert not lost and report.total.points == report.total.max_points, lost
