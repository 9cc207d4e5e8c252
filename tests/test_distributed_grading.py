"""A test marked `distributed` runs ranks of a real gloo process group beside the learner's code
(`grader.worker.ranks`): graded in the sandbox (whose network namespace is the grading's own) and
without isolation; at the uid level, whose filter refuses learner code sockets, not graded here,
with its reason in the report and the total's note. A rank that raises while its peer waits in a
collective costs that test alone, within the probe's limit, with the rank named."""
import shutil
import time
from pathlib import Path

import pytest

from grader.schema.report import NO_SOCKETS, ScoreReport, not_graded_note
from grader.worker.loading import load_module, sibling_module

synthetic = sibling_module(__file__, "synthetic_course")
harness = load_module(Path(__file__).parent / "security" / "harness.py")

LEARNER = synthetic.REFERENCE + '''
from datetime import timedelta

import torch
import torch.distributed as dist


def summed(rank):
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    dist.destroy_process_group()
    return value.item()
'''

ONE_RANK_FAILS = LEARNER.replace('''def summed(rank):
''', '''def summed(rank):
    if rank == 1:
        raise ValueError("rank 1 read a file that is not there")
''')

PROBES = '''from grader.worker.ranks import run_ranks


def ranks_of(module, name, world_size, limit_s):
    return [outcome.as_data() for outcome in run_ranks(world_size, getattr(module, name), limit_s=limit_s)]
'''

SUITE = '''import pytest

from grader.worker.loading import load_module, sibling_module
from grader.worker.ranks import RankOutcome, describe_failures

probes = sibling_module(__file__, "probes")


@pytest.mark.points(2)
@pytest.mark.concept("Doubling")
@pytest.mark.distributed
@pytest.mark.timeout(60)
@pytest.mark.parametrize("world_size", [2, 4])
def test_the_ranks_sum_their_numbers(submission, world_size):
    ranks = [RankOutcome(**data) for data in submission.probe(probes.ranks_of, "summed", world_size, 8)]
    assert not describe_failures(ranks), describe_failures(ranks)
    assert [rank.value for rank in ranks] == [world_size * (world_size + 1) / 2] * world_size


@pytest.mark.points(1)
@pytest.mark.concept("Doubling")
def test_runs_after(submission):
    assert submission.double(2) == 4
'''
SUITE_FILE = "tests/hidden/01_demo/test_ranks_hidden.py"


@pytest.fixture
def work():
    """A folder the uid level's worker may enter (it reads the course's probes there)."""
    folder = harness.work_folder("distributed")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def graded(work: Path, learner: str, level: str) -> ScoreReport:
    """The suite above, graded at `level` ("none", or a level official grading uses)."""
    if level != "none" and (why := harness.level_skip_reason(level)) is not None:
        pytest.skip(why)
    course = synthetic.write(work / "course")
    (course.hidden / "01_demo" / "probes.py").write_text(PROBES)
    (course.root / SUITE_FILE).write_text(SUITE)
    launch = tuple(harness.launcher(level)) if level != "none" else ()
    data = synthetic.grade(work, course, synthetic.learner_tree(work / "learner", learner), isolation=level,
                           suite_files=(SUITE_FILE,), launch=launch)
    report = ScoreReport.from_json(data)
    assert report.isolation["level"] == level and report.complete, (report.isolation, report.problems)
    return report


@pytest.mark.parametrize("level", ["none", "sandbox"])
def test_ranks_are_graded_where_learner_code_may_open_sockets(work, level):
    report = graded(work, LEARNER, level)
    assert [(t.title, t.status, t.graded) for t in report.tests()] == [
        ("the ranks sum their numbers[2]", "passed", True), ("the ranks sum their numbers[4]", "passed", True),
        ("runs after", "passed", True)], [(t.title, t.feedback) for t in report.tests()]
    assert report.total.points == report.total.max_points == 5 and not_graded_note(report.tests()) == ""


def test_at_the_uid_level_they_are_not_graded_here_and_the_note_says_why(work):
    report = graded(work, LEARNER, "uid")
    tests = {t.title: t for t in report.tests()}
    ranks = [tests["the ranks sum their numbers[2]"], tests["the ranks sum their numbers[4]"]]
    assert [(t.graded, t.feedback) for t in ranks] == [(False, NO_SOCKETS.feedback)] * 2
    assert tests["runs after"].status == "passed"
    assert (report.total.points, report.total.max_points, report.total.not_graded_points) == (1, 1, 4)
    assert not_graded_note(report.tests()) == ("Distributed tests worth 4 points were not graded here (the uid level "
                                               "gives learner code no sockets): they are left out of the total, not "
                                               "counted as failed.")


def test_a_rank_that_raises_while_its_peer_waits_costs_that_test_alone_and_is_named(work):
    started = time.monotonic()
    report = graded(work, ONE_RANK_FAILS, "sandbox")
    took = time.monotonic() - started
    tests = {t.title: t for t in report.tests()}
    for world_size in (2, 4):
        lost = tests[f"the ranks sum their numbers[{world_size}]"]
        assert lost.status == "failed" and lost.graded, lost
        assert "rank 1 raised ValueError: rank 1 read a file that is not there" in lost.feedback, lost.feedback
        assert "rank 0 was still running after the limit of 8 s" in lost.feedback, lost.feedback
    assert tests["runs after"].status == "passed"
    print(f"graded in {took:.1f} s")
