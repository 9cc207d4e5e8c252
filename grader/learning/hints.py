"""Hint ladders: each exercise's `hints.md` (and `hints.zh-CN.md`) gives every concept a few hints,
from a question that points the way to the last step before the answer. A learner sees them one
at a time, asked for (`grader hint NN [concept]`) or offered when a concept keeps failing; which
were seen is kept with the progress (`grader.learning.progress`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from grader.course import Task
from grader.learning import progress

LANGUAGES = ("en", "zh-CN")
HINT_FILES = {"en": "hints.md", "zh-CN": "hints.zh-CN.md"}
LANGUAGE_ENV = "GRADER_LANG"


class HintFormatError(ValueError):
    pass


@dataclass(frozen=True)
class Hint:
    concept: str
    number: int        # 1-based
    total: int
    text: str
    repeated: bool     # every hint had been seen: this is the last one again


def read_hints(path: Path) -> tuple[str, dict[str, list[str]]]:
    """A hints file as (title, {section: [hint, ...]}). The format: a `# ` title line first; then per
    concept a `## <English README section>` heading followed by an ordered list `1. ...`, `2. ...`,
    each item one paragraph, its continuation lines indented."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("# "):
        raise HintFormatError(f"{path.name} must start with a '# ' title line")
    sections: dict[str, list[str]] = {}
    current = None
    for number, line in enumerate(lines[1:], start=2):
        item = re.match(r"^(\d+)\. (\S.*)$", line)
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif not line.strip():
            continue
        elif current is None:
            raise HintFormatError(f"{path.name}:{number}: text before the first '## ' section")
        elif item:
            if int(item.group(1)) != len(current) + 1:
                raise HintFormatError(f"{path.name}:{number}: hint {item.group(1)} follows hint {len(current)}")
            current.append(item.group(2))
        elif line.startswith("   ") and current:
            current[-1] += " " + line.strip()
        else:
            raise HintFormatError(f"{path.name}:{number}: neither a heading, a numbered hint nor its continuation")
    return lines[0][2:].strip(), sections


def language(wanted: str | None = None) -> str:
    """The hints' language: `wanted` when given, else GRADER_LANG, else Chinese when the locale
    (LC_ALL, LC_MESSAGES, LANG, in the order the C library reads them) is a Chinese one."""
    if wanted:
        return wanted
    chosen = os.environ.get(LANGUAGE_ENV)
    if chosen in LANGUAGES:
        return chosen
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:
            return "zh-CN" if value.lower().startswith("zh") else "en"
    return "en"


def ladders(task: Task, lang: str) -> dict[str, list[str]]:
    """{concept: hints} of the task, {} for an exercise without a hints file. The Chinese file
    keeps the English section names, which are the concepts' names."""
    path = task.exercise_dir / HINT_FILES[lang]
    if not path.is_file():
        path = task.exercise_dir / HINT_FILES["en"]
    return read_hints(path)[1] if path.is_file() else {}


def concept_named(task: Task, name: str, lang: str = "en") -> str:
    """The concept a learner means: its exact name, else the one name that starts with or holds
    `name` (any case). KeyError, listing the concepts, when there is none or several."""
    names = list(ladders(task, lang))
    lowered = name.strip().lower()
    for matches in ([n for n in names if n.lower() == lowered], [n for n in names if n.lower().startswith(lowered)],
                    [n for n in names if lowered in n.lower()]):
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise KeyError(f"{name!r} could mean {', '.join(matches)}")
    raise KeyError(f"no concept {name!r} in {task.name}; its concepts: {', '.join(names) or 'none'}")


def concept_to_work_on(task: Task, lang: str = "en") -> str | None:
    """Without a concept named, the one to hint at, in the README's order: the first that the last
    run left failing among those worked on (a run reached its code), else the first left failing,
    else the first never tried, else None (every concept passed)."""
    entry = progress.load().get(task.name)
    names = list(ladders(task, lang))            # the hints file follows the README
    seen = entry.concepts if entry else {}
    failing = [n for n in names if n in seen and seen[n].status != progress.PASSED]
    worked_on = [n for n in failing if seen[n].stuck_runs or seen[n].best_points]
    untried = [n for n in names if n not in seen]
    return next(iter(worked_on or failing or untried), None)


def next_command(task_name: str, concept: str) -> str:
    """The command that shows a concept's next hint."""
    return f'grader hint {task_name[:2]} "{concept}"'


def next_hint(task: Task, concept: str, lang: str, asked: bool) -> Hint | None:
    """The first hint of `concept` not seen yet, now marked seen (asked for by the learner, or
    offered); once all were seen, the last one again. None when the concept has no hints."""
    ladder = ladders(task, lang).get(concept)
    if not ladder:
        return None
    entry = progress.load().get(task.name)
    seen = entry.hints_seen.get(concept, 0) if entry else 0
    number = min(seen + 1, len(ladder))
    progress.mark_hint_seen(task.name, concept, number, asked)
    return Hint(concept, number, len(ladder), ladder[number - 1], repeated=seen >= len(ladder))
