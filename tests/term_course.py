"""A quick course for rehearsing a term (the gradebook, regrades, overrides, deadlines, exports):
two tasks whose tests each take milliseconds, and the submissions a class hands in.

`01_demo` doubles: a visible test (1 point) and three hidden ones (2 + 1 + 1). `tighten`
makes `test_doubles_small` check a negative input too, which only the `abs` mutant gets wrong.
`02_other` triples: one visible test (3 points)."""
import os
import subprocess
from datetime import datetime
from pathlib import Path

from grader.course import Course

VISIBLE = '''import pytest


@pytest.mark.points(1)
@pytest.mark.concept("Doubling")
def test_doubles_two(submission):
    assert submission.double(2) == 4
'''

HIDDEN = '''import pytest


@pytest.mark.points(2)
@pytest.mark.concept("Doubling")
def test_doubles_a_hidden_input(submission):
    assert submission.double(12345) == 24690


@pytest.mark.points(1)
@pytest.mark.concept("Doubling")
def test_doubles_small(submission):
    assert submission.double(3) == 6


@pytest.mark.points(1)
@pytest.mark.concept("Doubling")
def test_doubles_zero(submission):
    assert submission.double(0) == 0
'''
TIGHTENED = ("assert submission.double(3) == 6\n",
             "assert submission.double(3) == 6\n    assert submission.double(-3) == -6, \"a negative input keeps its sign\"\n")

REFERENCE = "def double(x):\n    return 2 * x\n"
STUB = 'def double(x):\n    raise NotImplementedError("see the README")\n'
MUTANTS = {
    "abs": "def double(x):\n    return 2 * abs(x)\n",                        # right until a negative input
    "big": "def double(x):\n    return 2 * x if x < 1000 else 0\n",          # loses the hidden input
    "plus1": "def double(x):\n    return 2 * x + 1\n",                         # loses every test
}
TRIPLE = "def triple(x):\n    return 3 * x\n"

FILES = {
    "pyproject.toml": "[tool.pytest.ini_options]\ntimeout = 60\n",
    "exercises/01_demo/README.md": "# Exercise 01: doubling\n\n## Doubling\nReturn twice the input.\n",
    "exercises/01_demo/demo.py": STUB,
    "exercises/01_demo/test_demo.py": VISIBLE,
    "tests/hidden/01_demo/test_demo_hidden.py": HIDDEN,
    "solutions/01_demo/demo.py": REFERENCE,
    "exercises/02_other/README.md": "# Exercise 02: tripling\n\n## Tripling\nReturn three times the input.\n",
    "exercises/02_other/other.py": "def triple(x):\n    raise NotImplementedError\n",
    "exercises/02_other/test_other.py": "import pytest\n\n\n@pytest.mark.points(3)\n@pytest.mark.concept(\"Tripling\")\n"
                                        "def test_triples(submission):\n    assert submission.triple(2) == 6\n",
    "solutions/02_other/other.py": TRIPLE,
}
MAX_01, MAX_02 = 5.0, 3.0


def write(root: Path) -> Course:
    for path, text in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return Course(root)


def tighten(course: Course) -> None:
    hidden = course.hidden / "01_demo" / "test_demo_hidden.py"
    hidden.write_text(hidden.read_text().replace(*TIGHTENED))


def submission(folder: Path, demo: str, triple: bool = True) -> Path:
    (folder / "01_demo").mkdir(parents=True)
    (folder / "01_demo" / "demo.py").write_text(demo)
    if triple:
        (folder / "02_other").mkdir()
        (folder / "02_other" / "other.py").write_text(TRIPLE)
    return folder


def commit_all(folder: Path, when: datetime) -> str:
    """`folder` committed in a git repository of its own, the commit dated `when` (as any learner
    can date theirs); its id."""
    git = ["git", "-C", str(folder), "-c", "user.name=learner", "-c", "user.email=learner@example.invalid",
           "-c", "commit.gpgsign=false"]
    dated = {**os.environ, "GIT_AUTHOR_DATE": when.isoformat(), "GIT_COMMITTER_DATE": when.isoformat()}
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "my answers"], check=True, env=dated)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
