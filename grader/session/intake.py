"""Taking a learner's module out of a submission, with care: what is graded is the bytes read
here, once, after the checks (never a path the learner could change later)."""
from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader.worker.loading import StudentImportError

MODULE_LIMIT_BYTES = 1 << 20       # a learner's module: 1 MiB is hundreds of times a real one
GIT_TIMEOUT_S = 10                 # one commit read from a submission's objects
COMMIT_HEAD_BYTES = 1 << 16         # of it: its headers, with room for long names


class Unreadable(Exception):
    """Why `read_inside` did not read a file: `kind` is "missing", "outside", "not a file",
    "too large" (with the file's `size`), "grew" or "unreadable" (with the system's `reason`)."""

    def __init__(self, kind: str, size: int | None = None, reason: str = ""):
        super().__init__(kind)
        self.kind, self.size, self.reason = kind, size, reason


def resolved_inside(root: Path, path: Path) -> Path:
    """`path` with its links resolved, if that lies inside `root` (not `root` itself); else
    Unreadable("outside")."""
    resolved, root = Path(path).resolve(), Path(root).resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise Unreadable("outside")
    return resolved


def read_inside(root: Path, path: Path, limit: int) -> bytes:
    """The bytes of `path`, a file a learner named, if with its links resolved it is a regular
    file inside `root` of at most `limit` bytes; else Unreadable saying which it is not. It is
    opened without following a last link or waiting on a pipe, and read no further than the
    limit, so a file that changed or grew after the checks is caught too."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise Unreadable("missing")
    resolved = resolved_inside(root, path)
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise Unreadable("unreadable", reason=exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("not a file")
        if info.st_size > limit:
            raise Unreadable("too large", size=info.st_size)
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Unreadable("grew")
    return data


def read_module(root: Path, path: Path) -> bytes:
    """The module's bytes, or StudentImportError saying why it cannot be graded: missing, a link
    that leaves the submission, not a regular file, or over the size limit."""
    path = Path(path)
    try:
        return read_inside(root, path, MODULE_LIMIT_BYTES)
    except Unreadable as exc:
        why = {"missing": f"was not found (looked for {path})",
               "outside": "is a link to a file outside the submission; only files inside the submission are graded",
               "not a file": "is not a regular file",
               "too large": f"is {exc.size or 0:,} bytes; a module may be at most {MODULE_LIMIT_BYTES:,} bytes",
               "grew": "changed while it was being read",
               "unreadable": f"could not be read: {exc.reason}"}[exc.kind]
        raise StudentImportError(f"{path.name} {why}") from None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_head(folder: Path, stop_at: Path | None = None, follow_files: bool = True) -> str | None:
    """HEAD of the git repository holding `folder` (looking no higher than `stop_at`), read from
    its files: a submission's repository is learner data, and running git on it would run
    whatever its configuration asks for (hooks, filters, fsmonitor). None outside git or when
    HEAD cannot be resolved. `follow_files`: see `find_git_dir`."""
    git_dir = find_git_dir(folder, stop_at, follow_files)
    return None if git_dir is None else _head_of(git_dir)


def commit_time(git_dir: Path, commit: str) -> datetime | None:
    """When `commit` says it was committed: its committer line's time and UTC offset, which whoever
    made the commit sets. git reads the submission's objects alone (`GIT_OBJECT_DIRECTORY`) from a
    repository folder of ours: no file of the submission's `.git` but its objects is read, so none
    of its configuration (hooks, filters, signature programs) can run. Only the commit's first
    `COMMIT_HEAD_BYTES` are read, within `GIT_TIMEOUT_S` (a commit can be made to inflate to
    gigabytes, an object file can be a pipe that never answers). None when git is missing or the
    commit cannot be read."""
    with tempfile.TemporaryDirectory() as ours:
        (Path(ours) / "refs").mkdir()
        (Path(ours) / "HEAD").write_text("ref: refs/heads/main\n", encoding="ascii")
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": ours, "GIT_DIR": ours,
               "GIT_OBJECT_DIRECTORY": str(git_dir / "objects"), "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": os.devnull, "GIT_NO_REPLACE_OBJECTS": "1"}
        reading = f'git cat-file commit "$0" | head -c {COMMIT_HEAD_BYTES}'
        try:
            with subprocess.Popen(["sh", "-c", reading, commit], env=env, cwd=ours, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, start_new_session=True) as shell:
                try:
                    shown, _ = shell.communicate(timeout=GIT_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    os.killpg(shell.pid, signal.SIGKILL)
                    return None
        except OSError:
            return None
    for line in shown.split(b"\n"):
        if not line:                               # the headers end at the first empty line
            break
        if line.startswith(b"committer "):
            return _git_time(line)
    return None


def _git_time(line: bytes) -> datetime | None:
    """`committer NAME <EMAIL> SECONDS +HHMM` as a time with its offset."""
    try:
        seconds, offset = line.rsplit(b" ", 2)[1:]
        sign = -1 if offset.startswith(b"-") else 1
        zone = timezone(sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[3:5])))
        return datetime.fromtimestamp(int(seconds), zone)
    except (ValueError, OverflowError, OSError):
        return None


def _head_of(git_dir: Path) -> str | None:
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref: "):
            return head if _is_sha(head) else None
        return _resolve_ref(head[5:].strip(), [git_dir, _common_dir(git_dir)])
    except (OSError, UnicodeDecodeError):
        return None


def jailed_commit(module: Path, submission_root: Path, course_root: Path) -> str | None:
    """The commit a jailed worker finds beside `module`: HEAD of the submission's own repository
    (a `.git` folder between the module and the submission's root, never the course's), or None.
    The jail holds this commit alone, never the repository (`head_only_repository`)."""
    git_dir = find_git_dir(module.parent, stop_at=submission_root, follow_files=False)
    if git_dir is None or git_dir.parent.resolve() == course_root.resolve():
        return None
    return _head_of(git_dir)


def head_only_repository(folder: Path, commit: str) -> None:
    """A `.git` in `folder` whose HEAD is `commit` (detached) and which holds nothing else: the
    worker's `git rev-parse HEAD` prints the commit, and no file of the submission's history (a
    table of answers committed there) is in the jail to read."""
    git = folder / ".git"
    (git / "objects").mkdir(parents=True)
    (git / "refs").mkdir()
    (git / "HEAD").write_text(commit + "\n", encoding="ascii")


def find_git_dir(folder: Path, stop_at: Path | None = None, follow_files: bool = True) -> Path | None:
    """The git folder of the repository holding `folder`. With `follow_files`, a `.git` file
    (`gitdir: ...`, as a worktree or a submodule has) is followed to the folder it names;
    without, only a `.git` folder counts (what a sandbox can show on its own)."""
    folder = Path(folder).resolve()
    stop = Path(stop_at).resolve() if stop_at else None
    for candidate in (folder, *folder.parents):
        dot_git = candidate / ".git"
        if dot_git.is_symlink():           # a link could lead anywhere, the course's own root included
            return None
        if dot_git.is_dir():
            return dot_git
        if follow_files and dot_git.is_file():
            try:
                line = dot_git.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return None
            target = (candidate / line[len("gitdir:"):].strip()).resolve() if line.startswith("gitdir:") else None
            return target if target is not None and target.is_dir() else None
        if candidate == stop:
            return None
    return None


def _common_dir(git_dir: Path) -> Path:
    """Where a worktree's branches live: its `commondir`, else the git folder itself."""
    try:
        return (git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return git_dir


def _resolve_ref(ref: str, git_dirs: list[Path]) -> str | None:
    for git_dir in git_dirs:
        loose = git_dir / ref
        if loose.is_file() and loose.resolve().is_relative_to(git_dir.resolve()):
            value = loose.read_text(encoding="utf-8").strip()
            return value if _is_sha(value) else None
        packed = git_dir / "packed-refs"
        for line in packed.read_text(encoding="utf-8").splitlines() if packed.is_file() else []:
            sha, _, name = line.partition(" ")
            if name == ref and _is_sha(sha):
                return sha
    return None


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
