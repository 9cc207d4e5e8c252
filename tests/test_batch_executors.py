"""The batch and its executors without a grading: what the batch hands an executor (the units
its resume ledger, the out-dir, leaves to grade, each with its folder), and the progress line
of a long batch. The real gradings are in test_cli.py, test_shards.py and test_slurm_grading.py."""
import io
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from grader.running import batch, runner
from grader.running.executors import NOT_FINISHED, Unit
from grader.running.progress import PLAIN_EVERY_S, BatchProgress, Counts, line
from grader.running.shards import Shard
from grader.schema.report import REPORT_NAME, ScoreReport, write_report


@dataclass
class RecordingExecutor:
    """An executor that grades nothing: it records its units and reports each one graded."""
    units: list[Unit] = field(default_factory=list)

    def run(self, units, template, limit_s, on_done, on_poll=None):
        for unit in units:
            self.units.append(unit)
            on_done(unit, ScoreReport.failed("recorded", {"path": unit.path}))


def leave_report(out: Path, folder: str, path: Path, problem: str) -> None:
    write_report(ScoreReport.failed(problem, {"path": str(path)}), out / folder / REPORT_NAME)


def test_resume_grades_again_what_the_scheduler_ended_into_its_own_folder(tmp_path):
    subs = [tmp_path / name for name in ("ann", "ben", "cid")]
    out = tmp_path / "grading"
    leave_report(out, "ann", subs[0], "graded before")
    leave_report(out, "ben", subs[1], f"{NOT_FINISHED}: Slurm ended job 7_1 (CANCELLED) before ...")
    executor = RecordingExecutor()
    entries = batch.grade(subs, runner.GradingRun(Path("."), []), out, resume=True, executor=executor)
    assert [(u.path, u.folder) for u in executor.units] == [(str(subs[1]), out / "ben"), (str(subs[2]), out / "cid")]
    assert [e.report.problems for e in entries] == [["graded before"], ["recorded"], ["recorded"]]


def test_a_shard_hands_its_executor_its_slice_alone(tmp_path):
    subs = [tmp_path / name for name in ("d", "a", "c", "b")]
    executor = RecordingExecutor()
    planned = []
    entries = batch.grade(subs, runner.GradingRun(Path("."), []), tmp_path / "out", shard=Shard(1, 2),
                          executor=executor, on_plan=lambda kept, todo: planned.append((kept, todo)))
    assert [Path(u.path).name for u in executor.units] == ["c", "d"] == [e.name for e in entries]
    assert planned == [(0, 2)]
    assert not (tmp_path / "out" / "summary.csv").exists()       # the whole batch's, written once it is in


def test_the_progress_line_says_how_far_how_fast_and_how_long_still():
    # 5 units ended in 120 s: 2.5 a minute; 10 - 4 done - 1 failed = 5 left: 120 s more
    counts = Counts(total=10, done=4, failed=1, running=2, pending=3)
    assert line(counts, 120.0, 5) == \
        "done 4/10 | running 2, pending 3 | failed 1 (ended by the scheduler) | 2.5/min | ETA 2 min 00 s"
    assert line(Counts(total=3), 10.0, 0) == "done 0/3"            # no rate before a first report


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_log_gets_a_plain_line_now_and_then_not_one_a_report(capsys):
    clock = Clock()
    with BatchProgress(console=Console(file=io.StringIO(), force_terminal=False), clock=clock) as progress:
        progress.planned(kept=2, to_grade=50)
        for _ in range(20):
            clock.now += 1
            progress.finished(ScoreReport.failed("graded", {}))
        clock.now += PLAIN_EVERY_S
        progress.finished(ScoreReport.failed(f"{NOT_FINISHED}: Slurm ended it", {}))
        clock.now += 1
        progress.finished(ScoreReport.failed("graded", {}))        # too soon for a line: the end's says it
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "done 2/52"
    assert lines[1].startswith("done 22/52 | failed 1 ")
    assert lines[2].startswith("done 23/52 | failed 1 ") and len(lines) == 3


def test_a_terminal_gets_a_live_line():
    screen = io.StringIO()
    with BatchProgress(console=Console(file=screen, force_terminal=True, width=100)) as progress:
        progress.planned(kept=0, to_grade=2)
        progress.queue(running=1, pending=1)
        progress.finished(ScoreReport.failed("graded", {}))
    assert "done 1/2 | running 0, pending 1" in screen.getvalue()
