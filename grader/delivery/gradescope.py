"""`grader gradescope OUT.zip`: the Gradescope autograder, a zip with at its root

- `setup.sh`: installs the pinned set into a virtual environment, offline from `wheels/` when
  the zip carries one (`--wheels DIR`), else from the package indexes;
- `run_autograder`: grades `/autograder/submission` with `grader grade` and writes
  `/autograder/results/results.json` (`grader.reports.gradescope`), the score report and an
  HTML page;
- the course as the grader needs it: `grader/` (without this builder), the tasks' exercise
  folders and hidden suites (without what only the audit reads, `AUDIT_ONLY`), the data (`datasets/`'
  artifacts and manifest), `pyproject.toml` and `constraints.txt`. Never `solutions/`.

The zip is deterministic: the same course gives the same bytes, so a rebuilt autograder is
recognisably the same one.
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from grader.course import AUDIT_ONLY, COURSE, SECRET_NAME, Task
from grader.delivery import Refused, size_text
from grader.delivery.template import TEMPLATES, fill
from grader.reports.gradescope import DEFAULT_HIDDEN_VISIBILITY, VISIBILITIES
from grader.session import seeds

_SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".hypothesis", ".ipynb_checkpoints"}
_EXECUTABLE = 0o100755 << 16
_FILE = 0o100644 << 16
_EPOCH = (1980, 1, 1, 0, 0, 0)       # the earliest time a zip can hold: no build time in the bytes


class AutograderError(Refused):
    """An autograder that cannot be built as asked; the message says why."""


@dataclass
class Autograder:
    path: Path
    tasks: list[Task]
    files: int
    bytes: int


def deliver(args, tasks: list[Task]) -> str:
    """`grader gradescope`."""
    made = build_autograder(args.out, tasks, hidden_visibility=args.hidden_visibility, wheels=args.wheels)
    return (f"Gradescope autograder written to {made.path}: {', '.join(t.name for t in made.tasks)}; "
            f"{made.files} files, {size_text(made.bytes)}")


def build_autograder(out: Path, tasks: list[Task], *, hidden_visibility: str = DEFAULT_HIDDEN_VISIBILITY,
                     wheels: Path | None = None) -> Autograder:
    if hidden_visibility not in VISIBILITIES:
        raise AutograderError(f"the hidden suites' visibility must be one of {', '.join(VISIBILITIES)}")
    if wheels is not None and not any(Path(wheels).glob("*.whl")):
        raise AutograderError(f"{wheels} holds no wheel (*.whl): fill it with `pip download` first")
    missing = [task.name for task in tasks if not task.hidden_dir.is_dir()]
    if missing:
        raise AutograderError(f"no hidden suite for {', '.join(missing)}: an autograder grades with them")
    entries = [(path.relative_to(COURSE.root).as_posix(), path) for path in _course_files(tasks)]
    if wheels is not None:
        entries += [(f"wheels/{wheel.name}", wheel) for wheel in sorted(Path(wheels).glob("*.whl"))]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        _add(archive, "setup.sh", (TEMPLATES / "setup.sh").read_bytes(), executable=True)
        _add(archive, "run_autograder", fill("run_autograder", HIDDEN_VISIBILITY=hidden_visibility).encode(),
             executable=True)
        for name, path in entries:
            _add(archive, name, path.read_bytes())
        # The course's secret, so that a resubmission graded in a fresh container draws the same
        # inputs as before (seeds.submission_seed); the zip is the instructor's, never a learner's.
        _add(archive, SECRET_NAME, (seeds.course_secret().hex() + "\n").encode())
    return Autograder(out, list(tasks), len(entries) + 3, out.stat().st_size)


def _course_files(tasks: list[Task]) -> list[Path]:
    roots = [COURSE.root / "grader", *[task.exercise_dir for task in tasks], *[task.hidden_dir for task in tasks]]
    files = [path for root in roots for path in root.rglob("*") if path.is_file()]
    files = [path for path in files if not (set(path.relative_to(COURSE.root).parts) & _SKIPPED_PARTS)
             and path.suffix != ".pyc" and not path.is_relative_to(COURSE.root / "grader" / "delivery")
             and not _audit_only(path)]
    data = [path for path in COURSE.datasets.rglob("*") if path.is_file() and path.parent != COURSE.datasets
            and not set(path.relative_to(COURSE.datasets).parts) & _SKIPPED_PARTS]
    files += [*data, COURSE.datasets / "MANIFEST.json", COURSE.root / "pyproject.toml", COURSE.root / "constraints.txt"]
    return sorted(set(files))


def _audit_only(path: Path) -> bool:
    """A file that only `grader audit` reads: an `AUDIT_ONLY` entry beside a hidden suite."""
    parts = path.relative_to(COURSE.hidden).parts if path.is_relative_to(COURSE.hidden) else ()
    return len(parts) > 1 and parts[1] in AUDIT_ONLY


def _add(archive: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.external_attr = _EXECUTABLE if executable else _FILE
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)
