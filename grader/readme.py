"""What an exercise's README declares, read from the README itself: its sections, which are the
concepts that tests, hints and feedback name, and its rules.

Every rule a README promises (each **Contract**, unit, convention, order, boundary, edge case,
exclusion) carries a marker right after its sentence, invisible when the Markdown is rendered:

    labels are -100 on padding. <!-- rule: collate.pad_labels -->

The rule belongs to the `## ` section it stands in. `grader audit` then requires, for every rule,
a mutant in the suite's `variants.py` declared with `rule="collate.pad_labels"` that the suite
kills: a rule without one is a README sentence that no test enforces. The Chinese README carries
the same markers in its sections of the same names, so the two stay in step.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grader.course import Task

RULE_MARKER = re.compile(r"<!--\s*rule:\s*([a-z0-9_.\-]+)\s*-->")
# Where a rule's sentence cannot have started earlier: a blank line, a heading, a bullet, a table
# row. (Not a numbered line: "0." can end a sentence wrapped in a paragraph.)
_BLOCK_START = re.compile(r"^\s*$|^#|^\s*[-*]\s|^\s*\|")


@dataclass(frozen=True)
class Rule:
    id: str
    section: str      # the README "## " heading the rule stands in (the concept a failure names)
    text: str         # the README's words for it, the marker taken out


def readme_parts(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The introduction (title and text before the first `## ` heading) and each section as
    (heading, Markdown with its heading); headings inside code fences do not count."""
    intro: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    fenced = False
    current = intro
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            sections.append((line[3:].strip(), [line]))
            current = sections[-1][1]
            continue
        current.append(line)
    return "\n".join(intro).strip(), [(heading, "\n".join(body).strip()) for heading, body in sections]


def readme_file(task: Task, lang: str = "en") -> Path:
    return task.readme if lang == "en" else task.exercise_dir / f"README.{lang}.md"


def concepts_of(task: Task, lang: str = "en") -> list[str]:
    """The README's `## ` headings, in order: the concepts a test, a hint or a mutant can name."""
    _, sections = readme_parts(readme_file(task, lang).read_text(encoding="utf-8"))
    return [heading for heading, _ in sections]


GRADED_CHECKS = "What the graded suite checks"      # the section whose table lists the hidden suite's checks


def graded_checks(task: Task, lang: str = "en") -> dict[str, list[str]]:
    """{concept: what the graded suite checks of it}, from the table `| check | section |` of the
    README's section GRADED_CHECKS (a row naming several sections, comma-separated, counts for
    each; a section's own name may hold a comma)."""
    sections = dict(readme_parts(readme_file(task, lang).read_text(encoding="utf-8"))[1])
    checks: dict[str, list[str]] = {}
    for line in sections.get(GRADED_CHECKS, "").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").rsplit("|", 1)]     # a check may quote a |
        if len(cells) != 2 or cells[0] in ("check", "") or set(cells[0]) <= set("-: "):
            continue
        named, pending = [], ""
        for part in cells[1].split(", "):
            pending = f"{pending}, {part}" if pending else part
            if pending in sections:
                named.append(pending)
                pending = ""
        for concept in named:
            checks.setdefault(concept, []).append(cells[0].replace("`", ""))
    return checks


def rules_of(task: Task, lang: str = "en") -> list[Rule]:
    """The rules the README marks, in order of appearance."""
    return marked_rules(readme_file(task, lang).read_text(encoding="utf-8"))


def marked_rules(text: str) -> list[Rule]:
    """Each `<!-- rule: id -->` marker of a README text, with its section and the words that lead
    up to it (from the previous marker, list item or paragraph start)."""
    rules: list[Rule] = []
    _, sections = readme_parts(text)
    for heading, body in sections:
        words: list[str] = []
        for line in body.splitlines()[1:]:
            if _BLOCK_START.match(line):
                words = []
            pieces = RULE_MARKER.split(line)
            for index, piece in enumerate(pieces):
                if index % 2:
                    rules.append(Rule(piece, heading, _plain(" ".join(words))))
                    words = []
                else:
                    words.append(piece)
    return rules


def _plain(words: str) -> str:
    """The words without list bullets, table bars and line breaks."""
    words = re.sub(r"^\s*(?:[-*]|\d+\.)\s+", "", words)
    return re.sub(r"\s+", " ", re.sub(r"(?:\s*\|)+\s*", " | ", words)).strip(" |")
