"""The rules an exercise's README states, listed so that the audit can prove each one is tested.

Every rule a README promises (each **Contract**, unit, convention, order, boundary, edge case,
exclusion) carries a marker right after its sentence, invisible when the Markdown is rendered:

    labels are -100 on padding. <!-- rule: collate.pad_labels -->

and a line in `contracts.py` beside the hidden suite:

    RULES = [Rule("collate.pad_labels", "Batching and padding", "labels are -100 on padding")]

The audit then requires, for every rule, a mutant in `variants.py` declared with
`rule="collate.pad_labels"` that the suite kills: a rule without one is a README sentence that
no test enforces. The Chinese README carries the same markers, so the two stay in step.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grader.tasks import Task
from grader.worker.loading import load_module

_MARKER = re.compile(r"<!--\s*rule:\s*([a-z0-9_.\-]+)\s*-->")


@dataclass(frozen=True)
class Rule:
    id: str
    section: str      # the README "## " heading the rule belongs to (the concept a failure names)
    text: str         # the rule in one line


def rules_of(task: Task) -> list[Rule]:
    """The rules listed beside the task's hidden suite (none before the list exists)."""
    path = task.contracts_file
    return list(load_module(path).RULES) if path.is_file() else []


def readme_rule_ids(readme: Path) -> list[str]:
    """The rule markers of a README, in order of appearance."""
    return _MARKER.findall(Path(readme).read_text(encoding="utf-8"))


def readme_rule_sections(readme: Path) -> dict[str, str]:
    """Each marked rule of a README and the "## " section it stands in."""
    section, found = "", {}
    for line in Path(readme).read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        for rule_id in _MARKER.findall(line):
            found[rule_id] = section
    return found
