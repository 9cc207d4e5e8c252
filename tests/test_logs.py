"""The grader's log: silent by default, and what the code recovered from is there to read with
`grader --verbose` (or GRADER_VERBOSE=1, which the processes of a grading inherit)."""
import os
import subprocess
import sys

from grader.course import COURSE

# A leftover cgroup folder the sweep cannot remove (it is not empty): an error it swallows.
SWEEP = """
import os, pathlib, sys
from grader import logs
logs.configure(verbose=len(sys.argv) > 2)
from grader.isolation.cgroups import _sweep
parent = pathlib.Path(sys.argv[1])
(parent / "old" / "inside").mkdir(parents=True)
os.utime(parent / "old", (0, 0))
_sweep(parent)
print("swept")
"""


def _run(code: str, *args: str, env=None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "GRADER_VERBOSE"} | (env or {})
    return subprocess.run([sys.executable, "-c", code, *args], cwd=COURSE.root, env=environ,
                          capture_output=True, text=True, timeout=120)


def test_a_swallowed_error_is_silent_by_default(tmp_path):
    done = _run(SWEEP, str(tmp_path))
    assert done.returncode == 0 and done.stdout.strip() == "swept", done.stderr
    assert done.stderr == ""


def test_verbose_shows_what_was_swallowed(tmp_path):
    done = _run(SWEEP, str(tmp_path), "--verbose")
    assert done.returncode == 0, done.stderr
    assert "grader.isolation.cgroups: left the cgroup" in done.stderr and str(tmp_path / "old") in done.stderr


def test_the_environment_asks_for_it_too(tmp_path):
    done = _run(SWEEP, str(tmp_path), env={"GRADER_VERBOSE": "1"})
    assert "left the cgroup" in done.stderr, done.stderr


def test_grader_verbose_passes_the_wish_on():
    """`grader --verbose` sets GRADER_VERBOSE for the processes it starts (the pool's, and
    through them the pytest sessions)."""
    done = _run("import os\nfrom grader.cli import main\nmain(['--verbose'])\n"
                "print('VERBOSE=' + os.environ.get('GRADER_VERBOSE', ''))")
    assert "VERBOSE=1" in done.stdout, done.stdout + done.stderr
