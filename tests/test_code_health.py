"""The lint gate: the whole tree passes ruff with the rules pyproject.toml declares (pyflakes,
pycodestyle, bugbear, pyupgrade, isort), so an unused import, a name that does not exist or a
closure over a loop variable fails the tests, not a reader months later."""
import shutil
import subprocess
import sys
from pathlib import Path

from grader.tasks import COURSE_ROOT


def _ruff() -> str:
    installed = Path(sys.executable).with_name("ruff")     # the test extra installs it beside pytest
    found = str(installed) if installed.is_file() else shutil.which("ruff")
    assert found, "ruff is not installed: pip install -c constraints.txt -e '.[test]'"
    return found


def test_the_tree_passes_ruff():
    done = subprocess.run([_ruff(), "check", "--no-cache", "--output-format", "concise", "."], cwd=COURSE_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_finds_what_it_is_asked_to(tmp_path):
    """The gate can fail: the project's configuration, given a file with an unused import and an
    undefined name, reports both."""
    (tmp_path / "pyproject.toml").write_text((COURSE_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (tmp_path / "bad.py").write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    done = subprocess.run([_ruff(), "check", "--no-cache", "--output-format", "concise", "."], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "F401" in done.stdout and "F821" in done.stdout, done.stdout
