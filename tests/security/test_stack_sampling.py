"""A call past its time limit is asked where it is (`WorkerHost.stack_of`) before its worker is
killed. The answer is the worker's to write, so learner code can take the signal over: answer with
a flood, a forged stack, or nothing at all. Whatever it does, the test is a timeout, the grading
goes on to the next test at once, and the learner's feedback names at most a line of the
learner's own file (a forged answer only misleads its own author)."""
import time
from pathlib import Path

from grader.worker.loading import load_module

synthetic = load_module(Path(__file__).parent.parent / "synthetic_course.py")

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


def test_a_worker_that_takes_over_the_stack_signal_still_times_out_alone(tmp_path):
    assert HIJACKED != synthetic.REFERENCE, "the learner's hang() changed: hijack it again"
    course = synthetic.write(tmp_path / "course")
    started = time.monotonic()
    report = synthetic.grade(tmp_path, course, synthetic.learner_tree(tmp_path / "learner", HIJACKED))
    took = time.monotonic() - started
    graded = synthetic.results(report)
    hang = graded["test_that_hangs"]
    assert hang["status"] == "timeout", hang
    assert hang["location"] is None or hang["location"]["function"] == "hang", hang["location"]
    assert "passwd" not in hang["feedback"] and "xxxx" not in hang["feedback"], hang["feedback"]
    assert graded["test_runs_last"]["status"] == "passed"
    assert graded["test_doubles_two"]["status"] == "passed"
    print(f"graded in {took:.1f} s")
