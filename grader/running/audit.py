"""The suite audit: does each hidden suite tell right from wrong?

For every task: the reference must score 100%, the stub 0, every mutant must lose points with
a failing test whose concept is the one the mutant broke, every alternative correct solution
must score 100% (a miss there is a false reject), and every rule the README states
(`grader.readme`) must have a mutant that breaks it and is killed. Mutants and
alternatives come from two authors, the course and an independent one (`grader.running.variants`);
the audit counts them apart, since a suite can be sharp against its own authors' bugs only.
Asked to, it also grades the operator mutants a mutation-testing tool makes of the reference
(`grader.running.operators`): each must lose points to some test, or be declared equivalent in
the variants file with its reason.
"""
from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.course import COURSE, Task
from grader.readme import Rule, rules_of
from grader.running import runner
from grader.running.operators import OPERATOR_AUTHOR, OperatorSample, operator_mutants, stale_declarations
from grader.running.variants import equivalents_of, materialize, variants_of, write_tree
from grader.spec import ANY_CONCEPT


@dataclass
class AuditEntry:
    task: str
    name: str
    kind: str                       # "reference", "stub", "mutant", "alternative" or "operator"
    concept: str | None = None
    rule: str | None = None
    origin: str = "course"          # who wrote it: "course", "independent", or OPERATOR_AUTHOR
    points: float = 0.0
    max_points: float = 0.0
    failing_concepts: list[str] = field(default_factory=list)
    failing_tests: dict[str, str] = field(default_factory=dict)    # each lost test's id -> its feedback's first line
    problems: list[str] = field(default_factory=list)
    equivalent: str | None = None   # an operator mutant declared equivalent: why (it is not graded)

    @property
    def killed(self) -> bool:
        return self.max_points > 0 and self.points < self.max_points

    @property
    def ok(self) -> bool:
        if self.problems:
            return False
        if self.kind in ("reference", "alternative"):
            return self.max_points > 0 and self.points == self.max_points
        if self.kind == "stub":
            return self.points == 0
        if self.kind == "operator":
            return self.equivalent is not None or self.killed
        return self.killed and self.concept in self.failing_concepts

    @property
    def verdict(self) -> str:
        if self.problems:
            return "problem: " + "; ".join(self.problems)
        if self.kind == "operator":
            return f"equivalent: {self.equivalent}" if self.equivalent is not None else \
                "killed" if self.killed else "SURVIVED: lost no points"
        if self.kind == "mutant":
            if not self.killed:
                return "SURVIVED: lost no points"
            if self.concept not in self.failing_concepts:
                return f"killed, but no failing test names {self.concept!r}"
            return "killed"
        if self.kind == "stub":
            return "scores 0" if self.ok else "stub earns points"
        if self.ok:
            return "full marks"
        lost = "; ".join(f"{test.rpartition('::')[2]} ({why})" for test, why in self.failing_tests.items())
        return f"FALSE REJECT: lost {lost or 'points'}"


@dataclass
class TaskAudit:
    task: str
    entries: list[AuditEntry]
    rules: list[Rule] = field(default_factory=list)
    operators_generated: int = 0    # operator mutants made of the reference, graded or not
    stale_equivalents: list[str] = field(default_factory=list)     # declared, but no such mutant now

    def _of(self, kind, origin=None):
        return [e for e in self.entries if e.kind == kind and origin in (None, e.origin)]

    @property
    def kill_rate(self) -> float:
        mutants = self._of("mutant")
        return sum(e.ok for e in mutants) / len(mutants) if mutants else 0.0

    @property
    def false_rejects(self) -> int:
        return sum(not e.ok for e in self._of("alternative"))

    @property
    def killed_rules(self) -> set[str]:
        return {e.rule for e in self._of("mutant") if e.ok and e.rule}

    @property
    def uncovered_rules(self) -> list[Rule]:
        """README rules that no killed mutant breaks: sentences no test is known to enforce."""
        return [rule for rule in self.rules if rule.id not in self.killed_rules]

    def counts(self) -> dict:
        """The audit in figures: rules, mutants and alternatives by author."""
        figures = {"rules": len(self.rules), "rules_killed": len(self.rules) - len(self.uncovered_rules)}
        for origin in ("course", "independent"):
            mutants, alternatives = self._of("mutant", origin), self._of("alternative", origin)
            figures[f"{origin}_mutants"] = len(mutants)
            figures[f"{origin}_mutants_killed"] = sum(e.ok for e in mutants)
            figures[f"{origin}_alternatives"] = len(alternatives)
            figures[f"{origin}_alternatives_accepted"] = sum(e.ok for e in alternatives)
        if self.operators_generated:
            operators = self._of("operator")
            equivalent = sum(e.equivalent is not None for e in operators)
            figures.update(operators_generated=self.operators_generated, operators_graded=len(operators) - equivalent,
                           operators_killed=sum(e.ok for e in operators) - equivalent, operators_equivalent=equivalent,
                           operators_survived=sum(not e.ok for e in operators))
        return figures

    @property
    def ok(self) -> bool:
        return (bool(self._of("mutant")) and bool(self._of("alternative")) and not self.uncovered_rules
                and not self.stale_equivalents and all(e.ok for e in self.entries))

    def to_json(self) -> dict:
        return {"task": self.task, "ok": self.ok, "kill_rate": self.kill_rate, "false_rejects": self.false_rejects,
                "counts": self.counts(), "uncovered_rules": [vars(r) for r in self.uncovered_rules],
                "stale_equivalents": self.stale_equivalents,
                "entries": [{**vars(e), "ok": e.ok, "verdict": e.verdict} for e in self.entries]}


Samples = OperatorSample | dict[str, OperatorSample] | None     # one for every task, or one per task name


def audit(tasks: list[Task], jobs: int = 2, backend: str = "inprocess", seed: int = 0,
          operators: Samples = None) -> list[TaskAudit]:
    """Every task's audit at one seed of the suites' random inputs, with the `operators` sample of
    its operator mutants (none when None, or when a dict of samples names it not)."""
    return [audits[0] for audits in sweep(tasks, [seed], jobs, backend, operators)]


def sweep(tasks: list[Task], seeds: list[int], jobs: int = 2, backend: str = "inprocess",
          operators: Samples = None) -> list[list[TaskAudit]]:
    """Every task's audit at each of `seeds` (per task, one TaskAudit per seed, in order): the
    variants are written once; each task's suite is collected once per seed, and each tree graded
    in a fork of that session, `jobs` at a time (`grader.session.variant_forks`)."""
    sample_of = operators.get if isinstance(operators, dict) else lambda name: operators
    with tempfile.TemporaryDirectory(prefix="grader-audit-") as scratch, ThreadPoolExecutor(max(1, jobs)) as writers:
        written = writers.map(lambda task: _subjects(task, Path(scratch), sample_of(task.name)), tasks)
        found_by_task = {task.name: found for task, found in zip(tasks, written)}
        subjects = {name: found.subjects for name, found in found_by_task.items()}
        orders = {name: _grading_order(found) for name, found in subjects.items()}
        plans = [(task, seed) for seed in seeds for task in tasks]
        groups = [runner.ForkedGradings(task, [(subjects[task.name][i][1], _stop_at(subjects[task.name][i][0]))
                                               for i in orders[task.name]], seed, backend, warm=True)
                  for task, seed in plans]
        reports = runner.run_forked(groups, jobs)
    audits: dict[tuple[str, int], TaskAudit] = {}
    for (task, seed), group_reports in zip(plans, reports):
        entries = [replace(entry) for entry, _ in subjects[task.name]]      # in the order they are declared
        for index, report in zip(orders[task.name], group_reports):
            score_entry(entries[index], report)
        found = found_by_task[task.name]
        audits[(task.name, seed)] = TaskAudit(task.name, entries + [replace(e) for e in found.equivalent], rules_of(task),
                                              found.operators_generated, found.stale_equivalents)
    return [[audits[(task.name, seed)] for seed in seeds] for task in tasks]


def _grading_order(subjects: list[tuple[AuditEntry, Path]]) -> list[int]:
    """The reference first (graded in the task's session itself, it warms the oracles' caches for
    every fork: `warm`), then the gradings that run a whole suite, the mutants (which stop at their
    concept's first failure) last: a task's session then ends on short gradings, with no fork slot
    idle long."""
    return sorted(range(len(subjects)), key=lambda i: (subjects[i][0].kind != "reference",
                                                       subjects[i][0].kind in ("mutant", "operator")))


def _stop_at(entry: AuditEntry) -> str | None:
    """A mutant's verdict is settled once a test of its concept fails, an operator mutant's once any
    test fails: its grading stops there."""
    if entry.kind == "operator":
        return ANY_CONCEPT
    return entry.concept if entry.kind == "mutant" and entry.concept else None


@dataclass
class _Subjects:
    subjects: list[tuple[AuditEntry, Path]]         # what is graded, each with its tree
    equivalent: list[AuditEntry]                    # operator mutants declared equivalent: not graded
    operators_generated: int = 0
    stale_equivalents: list[str] = field(default_factory=list)


def _subjects(task: Task, scratch: Path, operators: OperatorSample | None) -> _Subjects:
    """The reference, the stub, every variant and the `operators` sample of the operator mutants."""
    root = scratch / task.name
    found = _Subjects([(AuditEntry(task.name, "reference", "reference"), COURSE.solutions),
                       (AuditEntry(task.name, "stub", "stub"), COURSE.exercises)], [])
    for variant in variants_of(task):
        found.subjects.append((AuditEntry(task.name, variant.name, variant.kind, variant.concept, variant.rule,
                                          variant.origin), materialize(task, variant, root)))
    if operators is None:
        return found
    mutants, declared = operator_mutants(task), equivalents_of(task)
    found.operators_generated, found.stale_equivalents = len(mutants), stale_declarations(declared, mutants)
    found.equivalent = [AuditEntry(task.name, m.name, "operator", origin=OPERATOR_AUTHOR, equivalent=declared[m.name])
                        for m in mutants if m.name in declared]
    for index, mutant in enumerate(operators.drawn([m for m in mutants if m.name not in declared])):
        found.subjects.append((AuditEntry(task.name, mutant.name, "operator", origin=OPERATOR_AUTHOR),
                               write_tree(task, f"operator-{index:04d}", mutant.source, root)))
    return found


def score_entry(entry: AuditEntry, report) -> None:
    """What `report` (the grading of `entry`'s tree) says of the entry: its points, lost tests and why."""
    result = report.task(entry.task)
    entry.problems = list(report.problems) + ([] if result else ["no result for the task"])
    if not result:
        return
    entry.points, entry.max_points = result.points, result.max_points
    entry.failing_concepts = sorted({t.concept for t in result.tests if t.lost and t.concept})
    entry.failing_tests = {t.id: _first_line(t.feedback) for t in result.tests if t.lost}


def _first_line(feedback: str, limit: int = 200) -> str:
    line = next((line.strip() for line in feedback.splitlines() if line.strip()), "no feedback")
    return line if len(line) <= limit else line[:limit - 1] + "…"


@dataclass
class Sweep:
    """One task's audit at several seeds: what a per-submission seed asks of a suite."""
    task: str
    seeds: list[int]
    audits: list[TaskAudit]

    def _seeds_where(self, wrong) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for seed, task_audit in zip(self.seeds, self.audits):
            for entry in task_audit.entries:
                if wrong(entry):
                    found.setdefault(entry.name, []).append(seed)
        return found

    @property
    def false_rejects(self) -> dict[str, list[int]]:
        """The reference, stub or alternatives that missed their verdict, with the seeds."""
        return self._seeds_where(lambda e: e.kind != "mutant" and not e.ok)

    @property
    def survivors(self) -> dict[str, list[int]]:
        """The mutants not killed (with their concept named) at more than half the seeds."""
        missed = self._seeds_where(lambda e: e.kind == "mutant" and not e.ok)
        return {name: seeds for name, seeds in missed.items() if len(seeds) * 2 >= len(self.seeds)}

    @property
    def flaky_tests(self) -> dict[str, list[int]]:
        """Tests that the reference or an alternative failed at some seed: their verdict flips with
        the inputs, a test to fix or a tolerance to restate."""
        found: dict[str, list[int]] = {}
        for seed, task_audit in zip(self.seeds, self.audits):
            for entry in task_audit.entries:
                if entry.kind in ("reference", "alternative"):
                    for test in entry.failing_tests:
                        found.setdefault(test, []).append(seed)
        return {test: sorted(set(seeds)) for test, seeds in found.items()}

    @property
    def ok(self) -> bool:
        return not self.false_rejects and not self.survivors

    def to_json(self) -> dict:
        return {"task": self.task, "seeds": self.seeds, "ok": self.ok, "false_rejects": self.false_rejects,
                "survivors": self.survivors, "flaky_tests": self.flaky_tests}
