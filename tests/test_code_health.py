"""The lint and type gates: the whole tree passes ruff with the rules pyproject.toml declares
(pyflakes, pycodestyle, bugbear, pyupgrade, isort), and `grader/` passes mypy with its bodies
checked, so an unused import, a name that does not exist, a closure over a loop variable or a
None where a report is expected fails the tests, not a reader months later."""
import shutil
import subprocess
import sys
from pathlib import Path

from grader.course import COURSE


def _tool(name: str) -> str:
    installed = Path(sys.executable).with_name(name)     # the test extra installs it beside pytest
    found = str(installed) if installed.is_file() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -c constraints.txt -e '.[test]'"
    return found


def test_the_tree_passes_ruff():
    done = subprocess.run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "."], cwd=COURSE.root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_finds_what_it_is_asked_to(tmp_path):
    """The gate can fail: the project's configuration, given a file with an unused import and an
    undefined name, reports both."""
    (tmp_path / "pyproject.toml").write_text((COURSE.root / "pyproject.toml").read_text(encoding="utf-8"))
    (tmp_path / "bad.py").write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    done = subprocess.run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "."], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "F401" in done.stdout and "F821" in done.stdout, done.stdout


def test_the_grader_passes_mypy(tmp_path):
    """With the settings of pyproject.toml (`check_untyped_defs`); its cache kept out of the course."""
    done = subprocess.run([_tool("mypy"), "--cache-dir", str(tmp_path / "cache")], cwd=COURSE.root,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_a_none_where_a_value_is_needed(tmp_path):
    """The type gate can fail: the project's settings, given a function whose unannotated body
    uses an optional value as if it were there, report it."""
    (tmp_path / "pyproject.toml").write_text((COURSE.root / "pyproject.toml").read_text(encoding="utf-8"))
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "bad.py").write_text("import re\n\n\ndef f():\n    return re.match('a', 'b').group(0)\n")
    done = subprocess.run([_tool("mypy"), "--cache-dir", str(tmp_path / "cache")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "union-attr" in done.stdout, done.stdout
