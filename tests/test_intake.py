"""Taking a module out of a submission: the checks before anything runs, and a submission's git
HEAD read from its files, compared with what git itself says."""
import os
import subprocess

import pytest

from grader.session.intake import MODULE_LIMIT_BYTES, git_head, read_module
from grader.worker.loading import StudentImportError


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "fork"
    (root / "exercises" / "01_x").mkdir(parents=True)
    (root / "exercises" / "01_x" / "attention.py").write_text("x = 1\n")
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "one", cwd=root)
    return root


def test_a_module_is_read_once_with_its_bytes(tmp_path):
    (tmp_path / "attention.py").write_text("def f():\n    return 1\n")
    assert read_module(tmp_path, tmp_path / "attention.py") == b"def f():\n    return 1\n"


@pytest.mark.parametrize("case,message", [
    ("missing", "was not found"), ("outside_link", "link to a file outside the submission"),
    ("folder", "not a regular file"), ("huge", "a module may be at most"),
])
def test_modules_that_cannot_be_graded_say_why(tmp_path, case, message):
    root, outside = tmp_path / "submission", tmp_path / "reference.py"
    root.mkdir()
    outside.write_text("def f(): return 1\n")
    module = root / "attention.py"
    if case == "outside_link":
        module.symlink_to(outside)
    elif case == "folder":
        module.mkdir()
    elif case == "huge":
        module.write_bytes(b"#" * (MODULE_LIMIT_BYTES + 1))
    with pytest.raises(StudentImportError, match=message):
        read_module(root, module)


def test_a_link_inside_the_submission_is_fine(tmp_path):
    (tmp_path / "real.py").write_text("y = 2\n")
    (tmp_path / "attention.py").symlink_to(tmp_path / "real.py")
    assert read_module(tmp_path, tmp_path / "attention.py") == b"y = 2\n"


def test_git_head_agrees_with_git_on_branches_packed_refs_detached_heads_and_worktrees(repo, tmp_path):
    module_dir = repo / "exercises" / "01_x"
    assert git_head(module_dir) == git("rev-parse", "HEAD", cwd=repo)
    git("pack-refs", "--all", cwd=repo)                 # the branch now lives in packed-refs only
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert git_head(module_dir) == git("rev-parse", "HEAD", cwd=repo)
    git("checkout", "-q", "--detach", cwd=repo)
    assert git_head(module_dir) == git("rev-parse", "HEAD", cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    worktree = tmp_path / "other"
    git("worktree", "add", "-q", "-b", "side", str(worktree), cwd=repo)
    (worktree / "f").write_text("2")
    git("add", "-A", cwd=worktree)
    git("commit", "-q", "-m", "two", cwd=worktree)
    assert git_head(worktree / "exercises") == git("rev-parse", "HEAD", cwd=worktree) != git_head(module_dir)
    assert git_head(worktree / "exercises", follow_files=False) is None     # what a sandbox can show


def test_git_head_stops_where_told_and_runs_nothing(repo, tmp_path):
    assert git_head(repo / "exercises", stop_at=repo / "exercises") is None
    marker = tmp_path / "ran"
    with open(repo / ".git" / "config", "a") as config:    # what running git here would execute
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n")
    os.utime(repo / "exercises" / "01_x" / "attention.py")
    assert git_head(repo) is not None and not marker.exists()
    assert git_head(tmp_path / "nowhere") is None
