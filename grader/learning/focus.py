"""The concept the watcher shows in full: the one the learner is working on.

After each check the focus goes to a failing concept whose results changed (its points, or what
its first failing test says) where the learner's code ran (`grader.learning.progress.reached`):
the focused one if it is among them, else the first in the README's order; else it stays
where it was while that concept still fails; else it moves on to the next failing concept in the
README's order. The learner moves it by hand too (`grader watch NN --concept NAME`, the `n` and
`p` keys).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from grader.learning.progress import concept_of, concept_results, unreached_concepts
from grader.schema.report import TaskResult


def in_order(concepts: list[str], order: list[str]) -> list[str]:
    """`concepts` in `order` (the README's sections), any not in it after them as they came."""
    return [c for c in order if c in concepts] + [c for c in concepts if c not in order]


@dataclass
class Focus:
    order: list[str]                    # the README's sections: the concepts in the order they are taught
    concept: str | None = None
    _last: dict[str, tuple] = field(default_factory=dict)       # each concept's results at the last check

    def ordered(self, task: TaskResult) -> list[str]:
        """The task's concepts in the README's order, any other after them in the tests' order."""
        return in_order(list(dict.fromkeys(concept_of(t) for t in task.tests if t.graded)), self.order)

    def failing(self, task: TaskResult) -> list[str]:
        lost = {concept_of(t) for t in task.tests if t.lost}
        return [c for c in self.ordered(task) if c in lost]

    def follow(self, task: TaskResult) -> None:
        """Move the focus after a check of `task`."""
        results = _results(task)
        failing = self.failing(task)
        unreached = unreached_concepts(task.tests)     # not a result of the learner's code: no sign of work there
        changed = [c for c in failing if c in self._last and self._last[c] != results.get(c) and c not in unreached]
        if changed and self.concept not in changed:
            self.concept = changed[0]
        elif self.concept not in failing:
            self.concept = self._next(self.ordered(task), failing, self.concept, 1)
        self._last = results

    def step(self, task: TaskResult, by: int) -> None:
        """The next (`by` 1) or previous (-1) failing concept in the README's order, round the end."""
        self.concept = self._next(self.ordered(task), self.failing(task), self.concept, by)

    @staticmethod
    def _next(ordered: list[str], failing: list[str], after: str | None, by: int) -> str | None:
        if not failing:
            return None
        if after not in ordered:
            return failing[0] if by > 0 else failing[-1]
        start = ordered.index(after)
        for offset in range(1, len(ordered) + 1):
            candidate = ordered[(start + by * offset) % len(ordered)]
            if candidate in failing:
                return candidate
        return None


def _results(task: TaskResult) -> dict[str, tuple]:
    """Per concept: its points and what its first failing test says."""
    said: dict[str, str] = {}
    for test in task.tests:
        if test.lost:
            said.setdefault(concept_of(test), test.feedback)
    return {name: (points, said.get(name)) for name, (points, _, _) in concept_results(task.tests).items()}
