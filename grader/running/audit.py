"""The suite audit: does each hidden suite tell right from wrong?

For every task: the reference must score 100%, the stub 0, every mutant must lose points with
a failing test whose concept is the one the mutant broke, every alternative correct solution
must score 100% (a miss there is a false reject), and every rule the README states
(`grader.running.contracts`) must have a mutant that breaks it and is killed. Mutants and
alternatives come from two authors, the course and an independent one (`grader.running.variants`);
the audit counts them apart, since a suite can be sharp against its own authors' bugs only.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.running import runner
from grader.running.contracts import Rule, rules_of
from grader.running.variants import materialize, variants_of
from grader.tasks import EXERCISES, SOLUTIONS, Task


@dataclass
class AuditEntry:
    task: str
    name: str
    kind: str                       # "reference", "stub", "mutant" or "alternative"
    concept: str | None = None
    rule: str | None = None
    origin: str = "course"          # who wrote it: "course" or "independent"
    points: float = 0.0
    max_points: float = 0.0
    failing_concepts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

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
        return self.killed and self.concept in self.failing_concepts

    @property
    def verdict(self) -> str:
        if self.problems:
            return "problem: " + "; ".join(self.problems)
        if self.kind == "mutant":
            if not self.killed:
                return "SURVIVED: lost no points"
            if self.concept not in self.failing_concepts:
                return f"killed, but no failing test names {self.concept!r}"
            return "killed"
        if self.kind == "stub":
            return "scores 0" if self.ok else "stub earns points"
        return "full marks" if self.ok else "FALSE REJECT: lost points"


@dataclass
class TaskAudit:
    task: str
    entries: list[AuditEntry]
    rules: list[Rule] = field(default_factory=list)

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
        return figures

    @property
    def ok(self) -> bool:
        return (bool(self._of("mutant")) and bool(self._of("alternative")) and not self.uncovered_rules
                and all(e.ok for e in self.entries))

    def to_json(self) -> dict:
        return {"task": self.task, "ok": self.ok, "kill_rate": self.kill_rate, "false_rejects": self.false_rejects,
                "counts": self.counts(), "uncovered_rules": [vars(r) for r in self.uncovered_rules],
                "entries": [{**vars(e), "ok": e.ok, "verdict": e.verdict} for e in self.entries]}


def audit(tasks: list[Task], jobs: int = 2, backend: str = "inprocess") -> list[TaskAudit]:
    with tempfile.TemporaryDirectory(prefix="grader-audit-") as scratch:
        plans = [plan for task in tasks for plan in _plans(task, Path(scratch), backend)]
        # The gradings that run a whole suite first, the mutants (which stop at their concept's
        # first failure) after: the batch then ends on short gradings, with no job idle long.
        order = sorted(range(len(plans)), key=lambda i: plans[i][0].kind == "mutant")
        reports = [None] * len(plans)
        for i, report in zip(order, runner.run_many([plans[i][1] for i in order], jobs)):
            reports[i] = report
    by_task: dict[str, list[AuditEntry]] = {t.name: [] for t in tasks}
    for (entry, _), report in zip(plans, reports):
        _score(entry, report)
        by_task[entry.task].append(entry)
    return [TaskAudit(task.name, by_task[task.name], rules_of(task)) for task in tasks]


def _plans(task: Task, scratch: Path, backend: str) -> list[tuple[AuditEntry, runner.GradingRun]]:
    plans = [(AuditEntry(task.name, "reference", "reference"), runner.GradingRun(SOLUTIONS, [task], backend=backend)),
             (AuditEntry(task.name, "stub", "stub"), runner.GradingRun(EXERCISES, [task], backend=backend))]
    for variant in variants_of(task):
        tree = materialize(task, variant, scratch / task.name)
        # A mutant's verdict is settled once a test of its concept fails: stop there.
        extra = ["--stop-on-concept", variant.concept] if variant.kind == "mutant" else []
        plans.append((AuditEntry(task.name, variant.name, variant.kind, variant.concept, variant.rule, variant.origin),
                      runner.GradingRun(tree, [task], backend=backend, extra_args=extra)))
    return plans


def _score(entry: AuditEntry, report) -> None:
    result = report.task(entry.task)
    entry.problems = list(report.problems) + ([] if result else ["no result for the task"])
    if not result:
        return
    entry.points, entry.max_points = result.points, result.max_points
    entry.failing_concepts = sorted({t.concept for t in result.tests if t.lost and t.concept})
