"""A call past its time limit is asked where it is (`WorkerHost.stack_of`) before its worker is
killed. The answer is the worker's to write, so learner code can take the signal over: answer with
a flood, a forged stack, or nothing at all. Whatever it does, the test is a timeout, the grading
goes on to the next test at once, and the learner's feedback names at most a line of the
learner's own file (a forged answer only misleads its own author)."""
import time
from pathlib import Path

import pytest

from grader.worker.loading import load_module, sibling_module

synthetic = load_module(Path(__file__).parent.parent / "synthetic_course.py")
harness = sibling_module(__file__, "harness")

HIJACKED = synthetic.REFERENCE.replace('''def hang():
    while True:
        pass''', '''def hang():
    import faulthandler
    faulthandler.unregister(signal.SIGUSR2)

    def answer(*_):
        forged = 'Thread 0x1 (most recent call first):\\n  File "/etc/passwd", line 1 in root\\n'
        for fd in range(3, 64):
            try:
                os.write(fd, forged.encode() + b"x" * (4 << 20))
            except OSError:
                pass
        while True:
            pass
    signal.signal(signal.SIGUSR2, answer)
    while True:
        pass''')


@pytest.mark.parametrize("isolation", ["none", "required"])       # required: the strongest level here
def test_a_worker_that_takes_over_the_stack_signal_still_times_out_alone(tmp_path, isolation):
    assert HIJACKED != synthetic.REFERENCE, "the learner's hang() changed: hijack it again"
    tmp_path.chmod(0o755)            # the uid level's worker enters the learner's folder
    course = synthetic.write(tmp_path / "course")
    started = time.monotonic()
    report = synthetic.grade(tmp_path, course, synthetic.learner_tree(tmp_path / "learner", HIJACKED),
                             isolation=isolation)
    assert report["isolation"]["level"] != "none" or isolation == "none", report["isolation"]
    took = time.monotonic() - started
    graded = synthetic.results(report)
    hang = graded["test_that_hangs"]
    assert hang["status"] == "timeout", hang
    assert hang["location"] is None or hang["location"]["function"] == "hang", hang["location"]
    assert "passwd" not in hang["feedback"] and "xxxx" not in hang["feedback"], hang["feedback"]
    assert graded["test_runs_last"]["status"] == "passed"
    assert graded["test_doubles_two"]["status"] == "passed"
    print(f"graded in {took:.1f} s")


@pytest.mark.parametrize("level", harness.LEVELS)
def test_an_honest_hang_points_at_its_loop_at_each_level(tmp_path, level):
    """The signal and the dump cross the jail: from a sandboxed worker and from one of another uid,
    the loop is named, not the `return` after it."""
    if (why := harness.level_skip_reason(level)) is not None:
        pytest.skip(why)
    tmp_path.chmod(0o755)            # the uid level's worker enters the learner's folder
    report = synthetic.grade(tmp_path, synthetic.write(tmp_path / "course"),
                             synthetic.learner_tree(tmp_path / "learner", synthetic.REFERENCE), isolation=level,
                             launch=tuple(harness.launcher(level)))
    location = synthetic.results(report)["test_that_hangs"]["location"]
    assert report["isolation"]["level"] == level, report["isolation"]
    assert location is not None and location["code"] in ("while True:", "pass"), location
