"""Mutants and alternative solutions, written as edits of the reference solution.

A mutant is a realistic learner bug: the reference with one thing done wrong, and the README
concept (section heading) its feedback must name. An alternative is a different but correct
solution that must score full marks. Both live beside each hidden suite in `variants.py`:

    MUTANTS = [Mutant("no_scale", "Scaled dot-product attention",
                      edits={"* scale": ""})]
    ALTERNATIVES = [Alternative("lse_softmax", functions={"softmax": '''def softmax(...): ...'''})]

`edits` replace text that must occur exactly once in the reference; `functions` replace a
whole top-level function. Writing variants as edits keeps each one a readable diff and makes
an edit that no longer applies (after the reference changed) an error, not a silent pass.
"""
from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.loading import load_module
from grader.tasks import SOLUTIONS, Task


class VariantError(ValueError):
    """A variant that does not apply to the reference, or does not compile."""


@dataclass(frozen=True)
class Variant:
    name: str
    kind: str                       # "mutant" or "alternative"
    concept: str | None = None      # mutants: the README section their feedback must name
    edits: dict[str, str] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def apply(self, reference: str) -> str:
        source = reference
        for old, new in self.edits.items():
            count = source.count(old)
            if count != 1:
                raise VariantError(f"{self.name}: the text {old!r} occurs {count} times in the reference, not once")
            source = source.replace(old, new)
        for name, replacement in self.functions.items():
            source = _replace_function(source, name, textwrap.dedent(replacement).strip("\n"), self.name)
        try:
            compile(source, f"<{self.name}>", "exec")
        except SyntaxError as exc:
            raise VariantError(f"{self.name}: the edited source does not compile: {exc}") from None
        if source == reference:
            raise VariantError(f"{self.name}: changes nothing")
        return source


def Mutant(name: str, concept: str, *, edits=None, functions=None, note: str = "") -> Variant:
    return Variant(name, "mutant", concept, dict(edits or {}), dict(functions or {}), note)


def Alternative(name: str, *, edits=None, functions=None, note: str = "") -> Variant:
    return Variant(name, "alternative", None, dict(edits or {}), dict(functions or {}), note)


def _replace_function(source: str, name: str, replacement: str, variant: str) -> str:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            lines = source.splitlines()
            return "\n".join(lines[:start] + replacement.splitlines() + lines[node.end_lineno:]) + "\n"
    raise VariantError(f"{variant}: the reference has no top-level function {name!r}")


def variants_of(task: Task) -> list[Variant]:
    """The mutants and alternatives declared beside the task's hidden suite."""
    path = task.hidden_dir / "variants.py"
    if not path.is_file():
        return []
    module = load_module(path)
    return [*module.MUTANTS, *module.ALTERNATIVES]


def reference_source(task: Task) -> str:
    return (SOLUTIONS / task.name / f"{task.module}.py").read_text(encoding="utf-8")


def materialize(task: Task, variant: Variant, root: Path) -> Path:
    """Write the variant as a submission tree under `root`; return the tree."""
    tree = Path(root) / variant.name
    (tree / task.name).mkdir(parents=True, exist_ok=True)
    (tree / task.name / f"{task.module}.py").write_text(variant.apply(reference_source(task)), encoding="utf-8")
    return tree
