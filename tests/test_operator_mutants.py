"""Operator mutants (`grader.running.operators`): mutmut's operators applied to a reference one
change at a time, each mutant the whole module with that one change, named by its definition and
the line it changes; the names are what a variants file declares equivalent, so they must be
unique and must not move when an unrelated part of the file changes."""
import ast
import io
import textwrap

import pytest
from rich.console import Console

pytest.importorskip("mutmut", reason="operator mutants need mutmut: pip install -e '.[instructor]'")

from grader.reports.render import audit_table, operator_table  # noqa: E402
from grader.running.audit import AuditEntry, TaskAudit  # noqa: E402
from grader.running.operators import (  # noqa: E402
    MODULE_LEVEL,
    OPERATOR_AUTHOR,
    OperatorSample,
    mutants_of,
    stale_declarations,
)

REFERENCE = textwrap.dedent('''
    """A reference in small."""
    LIMIT = 3


    def clipped(values, limit=LIMIT):
        if not values:
            raise ValueError("no values")
        return [v for v in values if v <= limit]


    class Counter:
        def __init__(self):
            self.count = 0          # a fresh count

        def add(self, n):
            self.count += n
            return self.count


    def mean(values):
        total = sum(values)
        return total / len(values)     # pragma: no mutate
''')


@pytest.fixture(scope="module")
def mutants():
    return mutants_of(REFERENCE)


def changed(mutant) -> tuple[str, str]:
    """The one line the mutant changes, before and after, less its comment (no string of
    REFERENCE holds a #): its source against the reference's."""
    pairs = [(a, b) for a, b in zip(REFERENCE.splitlines(), mutant.source.splitlines()) if a != b]
    assert len(pairs) == 1 and len(REFERENCE.splitlines()) == len(mutant.source.splitlines()), mutant.name
    return pairs[0][0].split("#")[0].strip(), pairs[0][1].split("#")[0].strip()


def test_each_mutant_is_the_reference_with_one_line_changed_and_named_by_it(mutants):
    assert len(mutants) >= 8
    for mutant in mutants:
        before, after = changed(mutant)
        assert mutant.name.endswith(f": {before} -> {after}"), mutant.name
        ast.parse(mutant.source)
    assert len({m.name for m in mutants}) == len(mutants)


def test_the_operators_cover_boundaries_constants_negations_removed_arguments_and_values(mutants):
    names = {m.name for m in mutants}
    assert "clipped: return [v for v in values if v <= limit] -> return [v for v in values if v < limit]" in names
    assert "module: LIMIT = 3 -> LIMIT = 4" in names
    assert "clipped: if not values: -> if values:" in names
    assert "mean: total = sum(values) -> total = None" in names
    assert "Counter: self.count += n -> self.count = n" in names
    assert "Counter: self.count = 0 -> self.count = 1" in names, "a name leaves the line's comment out"
    assert any(m.name.startswith("clipped: raise ValueError(") for m in mutants)


def test_definitions_name_the_top_level_def_or_class_and_pragmas_are_respected(mutants):
    by_definition = {m.definition for m in mutants}
    assert by_definition == {MODULE_LEVEL, "clipped", "Counter", "mean"}
    assert not any("len(values)" in changed(m)[0] for m in mutants), "a line marked no mutate was mutated"


def test_names_do_not_move_when_an_unrelated_definition_changes(mutants):
    grown = REFERENCE.replace('LIMIT = 3\n', 'LIMIT = 3\n\n\ndef unrelated():\n    return 1\n')
    after = {m.name: m.source for m in mutants_of(grown)}
    assert {m.name for m in mutants} <= set(after)
    assert all(after[m.name] == m.source.replace('LIMIT = 3\n', 'LIMIT = 3\n\n\ndef unrelated():\n    return 1\n', 1)
               for m in mutants if m.definition != MODULE_LEVEL), "a name stands for the same change"


def test_a_declaration_naming_no_mutant_now_is_reported(mutants):
    declared = {mutants[0].name: "a reason", "clipped: return 1 -> return 2": "the line is gone"}
    assert stale_declarations(declared, mutants) == ["clipped: return 1 -> return 2"]


def test_a_sample_draws_its_size_the_same_way_each_time(mutants):
    drawn = OperatorSample(size=5, seed=1).drawn(mutants)
    assert len(drawn) == 5 and len({m.name for m in drawn}) == 5
    assert drawn == OperatorSample(size=5, seed=1).drawn(mutants)
    assert drawn != OperatorSample(size=5, seed=2).drawn(mutants)
    assert OperatorSample().drawn(mutants) == mutants


def operator_entry(name: str, points: float, equivalent: str | None = None) -> AuditEntry:
    return AuditEntry("01_einsum_attention", name, "operator", origin=OPERATOR_AUTHOR, points=points,
                      max_points=0.0 if equivalent else 10.0, equivalent=equivalent)


def test_a_survivor_or_a_stale_declaration_fails_the_audit_and_the_report_names_it():
    killed = operator_entry("attention: a -> b", 7.0)
    survivor = operator_entry("attention: scale = 1 -> scale = 2", 10.0)
    equivalent = operator_entry("attention: x = f(y, axis=-1) -> x = f(y, )", 0.0, "the axis defaults to -1")
    course = [AuditEntry("01_einsum_attention", "some_bug", "mutant", "Heads", points=5.0, max_points=10.0,
                         failing_concepts=["Heads"]),
              AuditEntry("01_einsum_attention", "lse", "alternative", points=10.0, max_points=10.0)]
    clean = TaskAudit("01_einsum_attention", course + [killed, equivalent], operators_generated=3)
    assert clean.ok and [e.verdict for e in (killed, equivalent)] == ["killed", "equivalent: the axis defaults to -1"]
    assert clean.counts()["operators_killed"] == 1 and clean.counts()["operators_equivalent"] == 1

    with_survivor = TaskAudit("01_einsum_attention", course + [killed, survivor, equivalent], operators_generated=3)
    assert not with_survivor.ok and survivor.verdict == "SURVIVED: lost no points"
    assert with_survivor.counts() | {"operators_survived": 1, "operators_graded": 2} == with_survivor.counts()
    shown = rendered(operator_table(with_survivor)) + rendered(audit_table(with_survivor))
    assert "scale = 1 -> scale = 2" in shown and "SURVIVED" in shown
    assert "the axis defaults to -1" in shown, "a declared equivalent is listed with its reason"
    assert "a -> b" not in shown, "killed operator mutants are counted, not listed"
    assert "3 generated, 1 killed, 1 declared equivalent, 1 survived" in shown

    stale = TaskAudit("01_einsum_attention", course + [killed, equivalent], operators_generated=3,
                      stale_equivalents=["attention: gone -> away"])
    assert not stale.ok and "no such operator mutant now: attention: gone -> away" in rendered(audit_table(stale))


def rendered(table) -> str:
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(table)
    return " ".join(console.export_text().split())
