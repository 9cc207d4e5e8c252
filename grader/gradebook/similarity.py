"""`grader similarity DIR TASK`: which learners' modules of a task share more code than chance,
with copydetect (fingerprints of the tokenised code, so renamed variables, reordered functions
and added comments still match), the task's stub left out as boilerplate.

Every pair above the threshold is listed, and the most shared are drawn side by side with the
shared code marked, on one self-contained page. A pair is a reason to read two submissions,
never a verdict: short exercises with one natural solution make honest learners alike, and the
report says how much of each file is shared, not why.

Each learner's current submission is read as grading reads it (`grader.session.intake`): a
module that is missing, a link out of the submission, or too large is listed as not compared.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from html import escape
from pathlib import Path

import numpy as np

from grader.course import Task, locate_module
from grader.gradebook import grades
from grader.gradebook.store import Gradebook
from grader.running import archives
from grader.schema.report import write_text_atomically
from grader.session.intake import read_module
from grader.worker.loading import StudentImportError

THRESHOLD = 0.5               # the share of a module's code found in the other
MAX_DRAWN = 50                # pairs drawn side by side in the report, the most shared first; every pair is listed
# The shortest shared run counted, in characters of tokenised code (names become V, F or O,
# strings S): shorter runs are what any two solutions of one exercise share. Every run that long
# is compared (copydetect's guarantee equal to its noise threshold: no winnowing), so a report is
# the same at every run; winnowing samples by Python's per-process string hash.
SHORTEST_SHARED_RUN = 40


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    first_shared: float         # the share of the first's code found in the second
    second_shared: float
    tokens: int                 # tokens the two share


@dataclass
class Similarity:
    pairs: list[Pair]
    compared: list[str]
    not_compared: dict[str, str]       # learner -> why


def similarity(book: Gradebook, task: Task, html: Path | None, threshold: float = THRESHOLD) -> Similarity:
    """The pairs of `task`'s modules above `threshold`, the report drawn into `html`."""
    from copydetect import CopyDetector

    not_compared: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="grader-similarity-") as scratch:
        modules = Path(scratch) / "modules"
        for grade in grades.current(book, task.course):
            why = _copy_module(grade.path, task, modules / grade.learner, Path(scratch) / "unpacked" / grade.learner)
            if why:
                not_compared[grade.learner] = why
        compared = sorted(p.name for p in modules.iterdir()) if modules.is_dir() else []
        if len(compared) < 2:
            return Similarity([], compared, not_compared)
        detector = CopyDetector(test_dirs=[str(modules)], extensions=["py"], noise_t=SHORTEST_SHARED_RUN,
                                guarantee_t=SHORTEST_SHARED_RUN, autoopen=False, silent=True)
        detector.add_file(str(task.exercise_dir / f"{task.module}.py"), type="boilerplate")     # the stub
        detector.run()
        for path in detector.test_files:
            if path not in detector.file_data:            # copydetect skips a file it cannot read as UTF-8
                not_compared[Path(path).parent.name] = "the module is not UTF-8 text"
        compared = [name for name in compared if name not in not_compared]
        pairs = _pairs(detector, threshold)
        if html is not None and len(compared) >= 2:
            write_text_atomically(html, _page(task, detector, pairs, threshold, len(compared)))
    return Similarity(pairs, compared, not_compared)


def _copy_module(path: str, task: Task, into: Path, unpack_into: Path) -> str | None:
    """The learner's module of `task`, copied to `into`; or why it is not compared."""
    tree = Path(path)
    if tree.is_file():
        try:
            tree = archives.unpack(tree, unpack_into).root
        except (ValueError, OSError) as exc:
            return f"the archive could not be unpacked: {exc}"
    if not tree.is_dir():
        return f"{path} is no longer there"
    try:
        data = read_module(tree, locate_module(tree, task))
    except StudentImportError as exc:
        return str(exc)
    into.mkdir(parents=True)
    (into / f"{task.module}.py").write_bytes(data)
    return None


def _pairs(detector, threshold: float) -> list[Pair]:
    """Each pair once, where either module shares more than `threshold` of itself with the other,
    the most shared first."""
    shares, tokens, files = detector.similarity_matrix, detector.token_overlap_matrix, detector.test_files
    pairs = []
    for i, j in zip(*np.triu_indices(len(files), k=1)):
        first, second = float(shares[i, j, 0]), float(shares[i, j, 1])
        if max(first, second) > threshold:
            pairs.append(Pair(Path(files[i]).parent.name, Path(files[j]).parent.name, first, second, int(tokens[i, j])))
    return sorted(pairs, key=lambda pair: (-max(pair.first_shared, pair.second_shared), pair.first, pair.second))


def _page(task: Task, detector, pairs: list[Pair], threshold: float, compared: int) -> str:
    """Every pair listed; the `MAX_DRAWN` most shared drawn side by side, the shared code marked."""
    from copydetect.utils import highlight_overlap

    from grader.reports.html import page
    files = {Path(path).parent.name: path for path in detector.test_files}
    body = [f"<h1>{escape(task.name)}: modules sharing more than {threshold:.0%}</h1>",
            f'<p class="meta">{compared} modules compared, {len(pairs)} pairs listed. A pair is a reason to read both '
            "submissions, never a verdict: two honest solutions of a short exercise can be alike.</p>",
            "<table><tr><th>learner</th><th class=\"num\">shares</th><th>with</th><th class=\"num\">who shares</th>"
            '<th class="num">tokens</th></tr>']
    body += [f"<tr><td>{escape(p.first)}</td><td class=\"num\">{p.first_shared:.0%}</td><td>{escape(p.second)}</td>"
             f'<td class="num">{p.second_shared:.0%}</td><td class="num">{p.tokens}</td></tr>' for p in pairs]
    body.append("</table>")
    for pair in pairs[:MAX_DRAWN]:
        first, second = files[pair.first], files[pair.second]
        slices = detector.slice_matrix.get((first, second)) or list(reversed(detector.slice_matrix[(second, first)]))
        sides = [highlight_overlap(detector.file_data[path].raw_code, part, "<mark>", "</mark>", escape_html=True)[0]
                 for path, part in ((first, slices[0]), (second, slices[1]))]
        body += [f"<h2>{escape(pair.first)} ({pair.first_shared:.0%}) and {escape(pair.second)} "
                 f"({pair.second_shared:.0%})</h2>",
                 '<div style="display: grid; grid-template-columns: 1fr 1fr; gap: 1em">',
                 *(f"<pre>{side}</pre>" for side in sides), "</div>"]
    if len(pairs) > MAX_DRAWN:
        body.append(f'<p class="muted">The {len(pairs) - MAX_DRAWN} pairs after the first {MAX_DRAWN} are listed, '
                    "not drawn: raise --threshold to draw fewer.</p>")
    return page(f"{task.name}: similarity", body)
