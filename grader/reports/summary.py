"""A class's results, from one score report per submission: what an instructor reads after a batch.

- `summary.csv`: the gradebook, one row per submission, one column per task, the totals and
  the grading's status;
- `concepts.csv`: one row per task and README section, with how many submissions lost points
  there and how many points they lost on average, most often lost first: what to reteach;
- `class.html`: the score distribution and the concepts most often lost, on one page.

`grader grade --out-dir DIR` writes all three after a batch; `grader summary DIR` rebuilds them
from the reports in DIR (`DIR/<submission>/score_report.json`), e.g. after grading in parts.
A report that cannot be read still gets its row, with the reason as its status.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from grader.reports import figures
from grader.reports.html import bar, image, page
from grader.schema.report import (
    REPORT_NAME,
    ReportError,
    ScoreReport,
    read_report,
    unwritten_reason,
    write_text_atomically,
)

if TYPE_CHECKING:
    from grader.gradebook.grades import LearnerGrade

CLASS_FILES = ("summary.csv", "concepts.csv", "class.html")    # beside the submissions' folders
GRADEBOOK_FILES = ("gradebook.sqlite", "gradebook.sqlite-journal")    # there too: the gradebook and its journal
BATCH_FILES = (*CLASS_FILES, *GRADEBOOK_FILES)         # no submission's folder is ever named one of these
MOST_OFTEN_LOST = 10


@dataclass
class Entry:
    """One submission of a batch: its name (its folder under the batch's directory) and report,
    or why there is none."""
    name: str
    path: str
    report: ScoreReport | None
    unreadable: str | None = None
    unwritten: list[str] = field(default_factory=list)     # its pages that could not be written, and why
    grade: LearnerGrade | None = None      # from the gradebook: overrides and the late penalty applied

    @property
    def graded(self) -> ScoreReport:
        """The report of a submission the batch graded (every one, once it has ended)."""
        if self.report is None:
            return ScoreReport.failed(self.unreadable or "no score report", {"path": self.path})
        return self.report

    @property
    def status(self) -> str:
        if self.report is None:
            return f"unreadable: {self.unreadable}" if self.unreadable else "not graded yet"
        status = "complete" if self.report.complete else "incomplete"
        starved = self.report.out_of_memory()
        return f"{status}; {len(starved)} test(s) ran out of memory" if starved else status


def load_entries(folder: Path) -> list[Entry]:
    """Every `<folder>/<submission>/score_report.json`, in name order."""
    entries = []
    for report_path in sorted(Path(folder).glob(f"*/{REPORT_NAME}")):
        try:
            report = read_report(report_path)
        except ReportError as exc:
            entries.append(Entry(report_path.parent.name, "", None, str(exc)))
            continue
        entries.append(Entry(report_path.parent.name, report.submission.get("path", ""), report))
    return entries


def write_class_summary(folder: Path, entries: list[Entry]) -> tuple[list[Path], list[str]]:
    """summary.csv, concepts.csv and class.html: the files written, and each one that could not
    be and why. Each is written on its own, so one that fails costs no other."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written, failed = [], []
    concepts = None

    def gradebook(path):
        write_gradebook(path, entries)

    def concept_csv(path):
        nonlocal concepts
        concepts = concept_table(entries)
        write_text_atomically(path, concepts.to_csv(index=False))

    def page(path):
        write_text_atomically(path, class_html(entries, concepts if concepts is not None else concept_table(entries)))

    for name, write in zip(CLASS_FILES, (gradebook, concept_csv, page)):
        try:
            write(folder / name)
        except Exception as exc:        # a renderer's failure on some learner's data: this file alone
            failed.append(unwritten_reason(name, folder / name, exc))
        else:
            written.append(folder / name)
    return written, failed


def write_gradebook(path: Path, entries: list[Entry]) -> None:
    """summary.csv: one row per submission, one column per task (its points: from the gradebook,
    after overrides and the late penalty), the total, then the raw points, the penalty and the
    notes an instructor should read; written atomically, so a batch killed while writing it
    leaves the previous one."""
    tasks = sorted({t.task for e in entries if e.report for t in e.report.tasks})
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["submission", "path", *tasks, "points", "max_points", "percent", "status", "problems",
                     "raw_points", "late_penalty_points", "notes"])
    for entry in entries:
        report = entry.report
        if report is None:
            writer.writerow(inert([entry.name, entry.path, *[""] * len(tasks), "", "", "", entry.status, "",
                                   "", "", ""]))
            continue
        raw = report.total
        if entry.grade is None:
            cells = ["" if (result := report.task(t)) is None else result.points for t in tasks]
            points, penalty, notes = raw.points, 0.0, []
        else:
            cells = ["" if (grade := entry.grade.task(t)) is None else grade.final for t in tasks]
            points, penalty, notes = entry.grade.final, entry.grade.penalty, entry.grade.notes
        percent = round(100.0 * points / raw.max_points, 2) if raw.max_points else 0.0
        writer.writerow(inert([entry.name, entry.path, *cells, points, raw.max_points, percent,
                               entry.status, " | ".join([*report.problems, *entry.unwritten]),
                               raw.points, penalty, " | ".join(notes)]))
    write_text_atomically(Path(path), buffer.getvalue())


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CELL_LIMIT = 32_000         # characters: a spreadsheet cell holds 32,767, Python's csv reader 131,072


def inert(cells: list) -> list:
    """The cells with every text that a spreadsheet would run as a formula (a submission named
    `=HYPERLINK(...)`) opened by a quote, which shows as text, and every text cut to what a cell
    holds (problems can quote learner data at length); numbers stay numbers."""
    return [_within_cell(f"'{c}" if c.startswith(FORMULA_STARTS) else c) if isinstance(c, str) else c for c in cells]


def _within_cell(text: str) -> str:
    return text if len(text) <= CELL_LIMIT else text[:CELL_LIMIT - 12] + " … (cut)"


def concept_table(entries: list[Entry]):
    """Per task and README section: submissions graded there, the section's points, the share of
    submissions that lost points in it and the mean points lost; most often lost first."""
    import pandas as pd

    rows = [{"submission": e.name, "task": task.task, "concept": test.concept or "(no concept)",
             "points": test.points, "max_points": test.max_points}
            for e in entries if e.report for task in e.report.tasks for test in task.tests if test.graded]
    columns = ["task", "concept", "submissions", "max_points", "mean_points", "lost_share", "mean_points_lost"]
    if not rows:
        return pd.DataFrame(columns=columns)
    per_submission = pd.DataFrame(rows).groupby(["task", "concept", "submission"], as_index=False)[
        ["points", "max_points"]].sum()
    per_submission["lost"] = per_submission["max_points"] - per_submission["points"]
    table = per_submission.groupby(["task", "concept"], as_index=False).agg(
        submissions=("submission", "count"), max_points=("max_points", "max"), mean_points=("points", "mean"),
        lost_share=("lost", lambda lost: float((lost > 0).mean())), mean_points_lost=("lost", "mean"))
    table = table.sort_values(["lost_share", "mean_points_lost", "task", "concept"],
                              ascending=[False, False, True, True], kind="stable")
    return table[columns].round({"mean_points": 3, "lost_share": 3, "mean_points_lost": 3}).reset_index(drop=True)


def class_html(entries: list[Entry], concepts) -> str:
    graded = [e for e in entries if e.report is not None]
    percents = [e.graded.total.percent for e in graded]
    body = ["<h1>Class summary</h1>",
            f'<p class="meta">{len(entries)} submissions · {sum(e.status == "complete" for e in entries)} graded '
            f"completely</p>"]
    for entry in entries:
        if entry.status != "complete":
            body.append(f'<p class="problem">{escape(entry.name)}: {escape(entry.status)}</p>')
    if percents:
        mean = sum(percents) / len(percents)
        median = sorted(percents)[len(percents) // 2] if len(percents) % 2 else \
            sum(sorted(percents)[len(percents) // 2 - 1:len(percents) // 2 + 1]) / 2
        body += [f"<p>Mean {mean:.1f}% · median {median:.1f}%</p>",
                 image(figures.score_histogram_png(percents), "score distribution", "Scores, in bins of 10%")]
    lost = concepts[concepts["lost_share"] > 0].head(MOST_OFTEN_LOST)
    body += ["<h2>Concepts most often lost</h2>",
             '<p class="muted">Share of submissions that lost points in each README section: what to reteach.</p>',
             "<table>", '<tr><th>task</th><th>README section</th><th class="num">lost by</th>'
             '<th class="num">mean points lost</th><th></th></tr>']
    body += [f'<tr class="lost-concept"><td>{escape(row.task)}</td><td>{escape(row.concept)}</td>'
             f'<td class="num">{row.lost_share:.0%}</td><td class="num">{row.mean_points_lost:g} / {row.max_points:g}</td>'
             f"<td>{bar(row.lost_share, 1.0, more_is_worse=True)}</td></tr>" for row in lost.itertuples()]
    body.append("</table>")
    if lost.empty:
        body.append('<p class="muted">No points were lost.</p>')
    body += ["<h2>Submissions</h2>", "<table>",
             '<tr><th>submission</th><th class="num">points</th><th></th><th>status</th></tr>']
    for entry in sorted(graded, key=lambda e: -e.graded.total.percent):
        total = entry.graded.total
        body.append(f'<tr class="submission-row"><td>{escape(entry.name)}</td>'
                    f'<td class="num">{total.points:g} / {total.max_points:g}</td>'
                    f"<td>{bar(total.points, total.max_points)}</td><td>{escape(entry.status)}</td></tr>")
    body.append("</table>")
    return page("Class summary", body)
