"""Taking a learner's module out of a submission, with care: what is graded is the bytes read
here, once, after the checks (never a path the learner could change later)."""
from __future__ import annotations

import hashlib
from pathlib import Path

from grader.core.loading import StudentImportError

MODULE_LIMIT_BYTES = 1 << 20       # a learner's module: 1 MiB is hundreds of times a real one


def read_module(root: Path, path: Path) -> bytes:
    """The module's bytes, or StudentImportError saying why it cannot be graded: missing, a link
    that leaves the submission, not a regular file, or over the size limit."""
    path, root = Path(path), Path(root)
    if not path.exists() and not path.is_symlink():
        raise StudentImportError(f"{path.name} was not found (looked for {path})")
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise StudentImportError(f"{path.name} is a link to a file outside the submission; "
                                 "only files inside the submission are graded")
    if not resolved.is_file():
        raise StudentImportError(f"{path.name} is not a regular file")
    size = resolved.stat().st_size
    if size > MODULE_LIMIT_BYTES:
        raise StudentImportError(f"{path.name} is {size:,} bytes; a module may be at most "
                                 f"{MODULE_LIMIT_BYTES:,} bytes")
    data = resolved.read_bytes()[: MODULE_LIMIT_BYTES + 1]
    if len(data) > MODULE_LIMIT_BYTES:          # it grew after the check
        raise StudentImportError(f"{path.name} changed while it was being read")
    return data


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_head(folder: Path, stop_at: Path | None = None) -> str | None:
    """HEAD of the git repository holding `folder` (looking no higher than `stop_at`), read from
    its files: a submission's repository is learner data, and running git on it would run
    whatever its configuration asks for (hooks, filters, fsmonitor). None outside git or when
    HEAD cannot be resolved."""
    git_dir = find_git_dir(folder, stop_at)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref: "):
            return head if _is_sha(head) else None
        ref = head[5:].strip()
        loose = git_dir / ref
        if loose.is_file() and loose.resolve().is_relative_to(git_dir.resolve()):
            value = loose.read_text(encoding="utf-8").strip()
            return value if _is_sha(value) else None
        packed = git_dir / "packed-refs"
        for line in packed.read_text(encoding="utf-8").splitlines() if packed.is_file() else []:
            sha, _, name = line.partition(" ")
            if name == ref and _is_sha(sha):
                return sha
    except (OSError, UnicodeDecodeError):
        return None
    return None


def find_git_dir(folder: Path, stop_at: Path | None = None) -> Path | None:
    """The `.git` folder of the repository holding `folder`. Neither a `.git` file (as in
    worktrees) nor a `.git` that is a link is followed: a link could lead anywhere, the course's
    own root included, and a sandboxed worker is shown this folder."""
    folder = Path(folder).resolve()
    stop = Path(stop_at).resolve() if stop_at else None
    for candidate in (folder, *folder.parents):
        git_dir = candidate / ".git"
        if git_dir.is_symlink():
            return None
        if git_dir.is_dir():
            return git_dir
        if candidate == stop:
            return None
    return None


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
