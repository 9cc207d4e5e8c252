"""Mutants and alternative solutions, written as edits of the reference solution.

A mutant is a realistic learner bug: a correct solution with one thing done wrong, and the README
rule it breaks (`grader.readme`). Its feedback must name the README section the rule stands in,
or, where a suite catches the bug elsewhere first, the section given as `concept`. An
alternative is a different but correct solution that must score full marks. Both live beside
each hidden suite in `variants.py`, under the same names in every suite:

    COURSE_MUTANTS = [Mutant("no_scale", rule="attention.scale", edits={"* scale": ""})]
    INDEPENDENT_MUTANTS = [Mutant("mask_after_softmax", rule="mask.before_softmax", ..., base=INDEPENDENT)]
    MUTANTS = COURSE_MUTANTS + INDEPENDENT_MUTANTS
    ALTERNATIVES = [Alternative("lse_softmax", functions={"softmax": '''def softmax(...): ...'''}), Independent()]

A variant is an edit of one of two bases: the course's reference (`solutions/`), or the
independent solution kept beside the suite (`independent/<module>.py`), which someone wrote
from the learner's README and stub alone, without seeing the reference or the suite
(`base=INDEPENDENT`; `Independent()` is that solution itself, as an alternative). Bugs planted
in the independent solution land where the README speaks, not where the reference keeps its
concepts, which is what keeps a suite honest.

`edits` replace text that must occur exactly once in the base; `functions` replace a whole
top-level function. Writing variants as edits keeps each one a readable diff and makes an edit
that no longer applies (after the base changed) an error, not a silent pass.
"""
from __future__ import annotations

import ast
import hashlib
import textwrap
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.course import Task
from grader.readme import rules_of
from grader.session.intake import head_only_repository
from grader.worker.loading import load_module

REFERENCE, INDEPENDENT = "reference", "independent"


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
    rule: str | None = None         # mutants: the README rule they break
    base: str = REFERENCE           # the solution the edits apply to

    @property
    def origin(self) -> str:
        """Who wrote the code the variant is made of: the course, or an independent author."""
        return "independent" if self.base == INDEPENDENT else "course"

    def apply(self, base_source: str) -> str:
        source = base_source
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
        if source == base_source and not (self.kind == "alternative" and self.base == INDEPENDENT):
            raise VariantError(f"{self.name}: changes nothing")
        return source


def Mutant(name: str, *, rule: str, concept: str | None = None, edits=None, functions=None, note: str = "",
           base: str = REFERENCE) -> Variant:
    return Variant(name, "mutant", concept, dict(edits or {}), dict(functions or {}), note, rule, base)


def Alternative(name: str, *, edits=None, functions=None, note: str = "", base: str = REFERENCE) -> Variant:
    return Variant(name, "alternative", None, dict(edits or {}), dict(functions or {}), note, None, base)


def Independent(name: str = "independent", note: str = "written from the README and stub alone") -> Variant:
    """The independent solution itself, which must score full marks like any alternative."""
    return Variant(name, "alternative", None, {}, {}, note, None, INDEPENDENT)


# The audit writes each task's variants in a thread of its own. CPython 3.11 before 3.11.8 keeps
# ast.parse's recursion depth in state every thread shares (python/cpython#106905): two parses at
# once can fail with "SystemError: AST constructor recursion depth mismatch".
_PARSING = threading.Lock()


def _replace_function(source: str, name: str, replacement: str, variant: str) -> str:
    with _PARSING:
        tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            lines = source.splitlines()
            return "\n".join(lines[:start] + replacement.splitlines() + lines[node.end_lineno:]) + "\n"
    raise VariantError(f"{variant}: the reference has no top-level function {name!r}")


def variants_of(task: Task) -> list[Variant]:
    """The mutants and alternatives declared beside the task's hidden suite, each mutant with the
    concept its feedback must name."""
    path = task.variants_file
    if not path.is_file():
        return []
    module = load_module(path)
    sections = {rule.id: rule.section for rule in rules_of(task)}
    return [_with_concept(variant, sections) for variant in [*module.MUTANTS, *module.ALTERNATIVES]]


def equivalents_of(task: Task) -> dict[str, str]:
    """The operator mutants (`grader.running.operators`) the variants file declares equivalent, each
    with its reason: `EQUIVALENT = {"definition: before -> after": "why no test can tell"}`."""
    path = task.variants_file
    return dict(getattr(load_module(path), "EQUIVALENT", {})) if path.is_file() else {}


def _with_concept(variant: Variant, sections: dict[str, str]) -> Variant:
    if variant.kind != "mutant" or variant.concept:
        return variant
    if variant.rule not in sections:
        raise VariantError(f"{variant.name}: README.md marks no rule {variant.rule!r}")
    return replace(variant, concept=sections[variant.rule])


def reference_source(task: Task) -> str:
    return task.reference_module.read_text(encoding="utf-8")


def base_source(task: Task, base: str) -> str:
    if base == REFERENCE:
        return reference_source(task)
    if base == INDEPENDENT:
        return task.independent_module.read_text(encoding="utf-8")
    raise VariantError(f"unknown base {base!r}")


def materialize(task: Task, variant: Variant, root: Path) -> Path:
    """Write the variant as a submission tree under `root`, with a repository whose HEAD is a
    commit of its own (what official grading puts in a jail: `head_only_repository`), so that
    what a variant records of its commit (a run record's `commit`) is observable, not null both
    ways; return the tree. No git process runs: an audit writes hundreds of trees."""
    return write_tree(task, variant.name, variant.apply(base_source(task, variant.base)), root)


def write_tree(task: Task, name: str, source: str, root: Path) -> Path:
    """A submission tree `root/name` whose module is `source`, as `materialize` writes a variant's."""
    tree = Path(root) / name
    (tree / task.name).mkdir(parents=True, exist_ok=True)
    (tree / task.name / f"{task.module}.py").write_text(source, encoding="utf-8")
    head_only_repository(tree, hashlib.sha1(f"{task.name}/{name}\n{source}".encode()).hexdigest())
    return tree
