"""A small course written on the fly, for testing the engine without grading a real exercise.

Two tasks: `01_demo` (a learner module `demo.py`, a visible and a hidden suite whose tests pass,
fail, skip, hang, crash and run out of memory as the learner's module makes them) and
`02_other` (one function, one visible test). `write` lays the course out as the real one is laid
out; `learner_tree` writes a submission in the course layout; `grade` grades one in a pytest session of
its own, with a spec, as the runner starts one, and `results` reads the report it wrote."""
import json
import subprocess
import sys
from pathlib import Path

from grader.course import Course
from grader.isolation import levels, sandbox
from grader.isolation.sandbox import Limits
from grader.spec import GradingSpec

README = """# Exercise 01: doubling

## Doubling
Return twice the input.
"""

STUB = '''def double(x):
    raise NotImplementedError("double: see README section \\"Doubling\\"")
'''

REFERENCE = '''import os
import signal


def double(x):
    return 2 * x


def hang():
    while True:
        pass
    return "never reached"


def crash():
    os.kill(os.getpid(), signal.SIGSEGV)


def hog():
    blocks = []
    while True:
        blocks.append(bytearray(64 << 20))
'''

FIRST_TEST_LIMIT_S = 10      # the first test's limit also covers the worker's start: room for a loaded machine

VISIBLE = f'''import pytest


@pytest.mark.points(1)
@pytest.mark.concept("Doubling")
@pytest.mark.timeout({FIRST_TEST_LIMIT_S})
def test_doubles_two(submission):
    assert submission.double(2) == 4


@pytest.mark.points(1)
@pytest.mark.concept("Doubling")
def test_doubles_zero(submission):
    assert submission.double(0) == 0
'''

HIDDEN = '''import pytest

SECRET_INPUT = 12345


@pytest.mark.points(2)
@pytest.mark.concept("Doubling")
def test_doubles_a_hidden_input(submission):
    assert submission.double(SECRET_INPUT) == 2 * SECRET_INPUT


@pytest.mark.points(1)
@pytest.mark.concept("Doubling")
def test_doubling_is_exact(submission):
    assert submission.double(3) == 6, "3 doubled should be 6"


@pytest.mark.points(1)
def test_skipped_by_its_own_code(submission):
    pytest.skip("not today")


@pytest.mark.points(1)
@pytest.mark.gpu
def test_on_a_gpu(submission):
    assert submission.double(1) == 2


@pytest.mark.points(1)
@pytest.mark.timeout(3)
def test_that_hangs(submission):
    submission.hang()


@pytest.mark.points(1)
def test_that_crashes(submission):
    submission.crash()


@pytest.mark.points(1)
def test_that_hogs_memory(submission):
    submission.hog()


@pytest.mark.points(1)
def test_runs_last(submission):
    assert submission.double(0) == 0
'''

OTHER = {"exercises/02_other/README.md": "# Exercise 02: tripling\n\n## Tripling\nReturn three times the input.\n",
         "exercises/02_other/other.py": "def triple(x):\n    raise NotImplementedError\n",
         "exercises/02_other/test_other.py": "import pytest\n\n\n@pytest.mark.points(3)\n@pytest.mark.concept(\"Tripling\")\n"
                                             "def test_triples(submission):\n    assert submission.triple(2) == 6\n",
         "solutions/02_other/other.py": "def triple(x):\n    return 3 * x\n"}

PYPROJECT = """[tool.pytest.ini_options]
timeout = 60
"""


def write(root: Path) -> Course:
    for path, text in {"pyproject.toml": PYPROJECT, "exercises/01_demo/README.md": README,
                       "exercises/01_demo/demo.py": STUB, "exercises/01_demo/test_demo.py": VISIBLE,
                       "tests/hidden/01_demo/test_demo_hidden.py": HIDDEN,
                       "solutions/01_demo/demo.py": REFERENCE, **OTHER}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return Course(root)


def learner_tree(root: Path, demo: str | None, layout: str = "course", other: bool = False) -> Path:
    """A submission: `demo` as 01's module (None: missing) in the course layout, a clone of a fork
    (`exercises/NN_name/`) or a flat upload; with `other`, the reference of 02 beside it."""
    folder = {"course": root / "01_demo", "fork": root / "exercises" / "01_demo", "flat": root}[layout]
    folder.mkdir(parents=True, exist_ok=True)
    if demo is not None:
        (folder / "demo.py").write_text(demo)
    if other:
        (root / "02_other").mkdir()
        (root / "02_other" / "other.py").write_text(OTHER["solutions/02_other/other.py"])
    return root


# ---------------------------------------------------------------- grading it, as the runner does

def pytest_session(where: Path, *args: str, launch: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """A pytest process of its own (started through `launch`, if given), its temporary folders in `where`."""
    return subprocess.run([*launch, sys.executable, "-m", "pytest", *args, f"--basetemp={where / 'basetemp'}"], cwd=where,
                          capture_output=True, text=True, timeout=300)


def spec_for(where: Path, course: Course, impl: Path, backend: str = "worker", concept: str | None = None,
             isolation: str = "none") -> Path:
    """The spec of a grading at `isolation`: a choice `levels.resolve` takes ("none", "required"), or a level
    itself ("sandbox", "uid": for a session started where that level is the strongest, `launch` below)."""
    limits = Limits(memory_mb=256)
    chosen = {"level": isolation, "reason": "the test's", "limits": sandbox.enforcement(limits, isolation)} \
        if isolation in levels.REQUIRED_LEVELS else levels.resolve(isolation, backend, limits)
    return GradingSpec(course=course, impl=impl, backend=backend, isolation=chosen,
                       limits=limits, seed=7, seed_from="a test", run_id="run-1", score_report=where / "report.json",
                       stop_on_concept=concept).write(where / "spec.json")


def grade(where: Path, course: Course, impl: Path, *extra: str, backend: str = "worker", concept: str | None = None,
          suite_files: tuple[str, ...] = (), isolation: str = "none", launch: tuple[str, ...] = ()) -> dict:
    """A session as the runner starts one, with its spec (learner code isolated as `isolation`
    asks: `levels.resolve`'s choices; the session started through `launch`); the report it
    wrote, as JSON."""
    spec = spec_for(where, course, impl, backend, concept, isolation)
    task = course.task_named("01")
    paths = [str(course.root / f) for f in suite_files] or [str(p) for p in task.suite_paths(hidden=True)]
    pytest_session(where, *paths, "--grading-spec", str(spec), *course.session_options(), *extra, launch=launch)
    return json.loads((where / "report.json").read_text())


def results(report: dict) -> dict[str, dict]:
    return {test["id"].rsplit("::", 1)[1]: test for task in report["tasks"] for test in task["tests"]}
