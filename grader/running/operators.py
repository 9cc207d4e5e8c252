"""Operator mutants: the bugs a mutation-testing tool plants in a reference, not the suite's authors.

The course's mutants (`grader.running.variants`) are its authors' guesses at a learner's bugs, and
they cluster where the authors' tests already look. A mutation-testing tool's operators do not:
each mutant here is one change that mutmut's operators make to one spot of the task's reference
(a comparison or its boundary, a constant, a negation, a call's argument removed, a keyword
swapped, an assignment or a return value replaced), applied on its own to the whole module.

A mutant is named by where it is and what it changes, "definition: line before -> line after",
with the lines as the reference writes them, less their comments. That name is what a variants file declares
equivalent (`EQUIVALENT = {name: reason}`): a mutant no test can kill because it changes nothing a
learner could observe, with the reason the audit prints. It holds while the reference keeps that
line; a declaration whose mutant is no longer generated is reported, never silently kept.

mutmut is an instructor's dependency (`pip install -e '.[instructor]'`), imported only when
operator mutants are asked for.
"""
from __future__ import annotations

import difflib
import io
import random
import tokenize
from dataclasses import dataclass

from grader.course import Task
from grader.running.variants import reference_source

MODULE_LEVEL = "module"        # the definition named for a change outside every def and class
OPERATOR_AUTHOR = "mutmut"     # who wrote an operator mutant, as the audit says


@dataclass(frozen=True)
class OperatorMutant:
    name: str                  # "definition: before -> after", unique within its task
    definition: str            # the top-level def or class it changes, or MODULE_LEVEL
    source: str                # the whole mutated module


def operator_mutants(task: Task) -> list[OperatorMutant]:
    """Every mutant mutmut's operators make of the task's reference, in the order of the file.
    Lines marked `# pragma: no mutate` are left alone, as mutmut leaves them."""
    return mutants_of(reference_source(task), str(task.reference_module))


class OperatorsUnavailable(RuntimeError):
    """mutmut, whose operators make the mutants, is not installed."""


def mutants_of(source: str, filename: str = "<reference>") -> list[OperatorMutant]:
    """Every mutant of `source`, one operator's change at one spot each; two changes that read the
    same in one definition are told apart by their order ("(2)")."""
    try:
        import libcst as cst
        from libcst.metadata import MetadataWrapper
        from mutmut.mutation.file_mutation import MutationVisitor
        from mutmut.mutation.mutators import mutation_operators
        from mutmut.mutation.pragma_handling import IgnoredCode, PragmaVisitor
    except ImportError as exc:
        raise OperatorsUnavailable(f"operator mutants need mutmut ({exc}): pip install -e '.[instructor]'") from None
    wrapper = MetadataWrapper(cst.parse_module(source))
    pragmas = PragmaVisitor(filename)
    wrapper.visit(pragmas)
    visitor = MutationVisitor(mutation_operators, IgnoredCode(pragmas.no_mutate_lines, pragmas.ignore_node_lines, set()))
    module = wrapper.visit(visitor)
    statements = _TopLevel(module, source)
    found: list[OperatorMutant] = []
    seen: dict[str, int] = {}
    for mutation in visitor.mutations:
        index = statements.holding(mutation.original_node)
        statement = module.body[index]
        changed = module.code_for_node(statement.deep_replace(mutation.original_node, mutation.mutated_node))
        if changed == statements.code[index]:
            continue
        before, after = _changed_lines(statements.code[index].splitlines(), changed.splitlines())
        definition = statement.name.value if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) else MODULE_LEVEL
        name = f"{definition}: {before} -> {after}"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:                    # the same change at another spot of the same definition
            name = f"{name} ({seen[name]})"
        start = statements.start[index]
        text = source[:start] + changed + source[start + len(statements.code[index]):]
        found.append(OperatorMutant(name, definition, text))
    return found


class _TopLevel:
    """The module's top-level statements: each one's code, where it starts in the source, and which
    one holds a node (a mutant is spliced into its statement alone: the module is not rewritten
    for each of hundreds of mutants)."""

    def __init__(self, module, source: str):
        self.code = [module.code_for_node(statement) for statement in module.body]
        start = source.find("".join(self.code))
        assert start >= 0, "the module's statements are not its source"
        self.start = []
        for code in self.code:
            self.start.append(start)
            start += len(code)
        self._index: dict[int, int] = {}
        for index, statement in enumerate(module.body):
            below = [statement]
            while below:
                node = below.pop()
                self._index[id(node)] = index
                below.extend(node.children)

    def holding(self, node) -> int:
        return self._index[id(node)]


def _changed_lines(before: list[str], after: list[str]) -> tuple[str, str]:
    """The lines where the mutant differs from the reference, before and after, each block joined
    on one line and stripped of its indentation."""
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    tag, i1, i2, j1, j2 = next(op for op in matcher.get_opcodes() if op[0] != "equal")
    return _one_line(before[i1:i2]), _one_line(after[j1:j2])


def _one_line(lines: list[str]) -> str:
    return " ".join(_without_comment(line).strip() for line in lines) or "(nothing)"


def _without_comment(line: str) -> str:
    """The line's code: an operator never changes a comment, so a name leaves them out."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type == tokenize.COMMENT:
                return line[:token.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError):        # a line of a longer statement: its comment came first
        pass
    return line


def stale_declarations(declared: dict[str, str], mutants: list[OperatorMutant]) -> list[str]:
    """Declared equivalents that name no mutant generated now: the reference's line changed."""
    names = {mutant.name for mutant in mutants}
    return [name for name in declared if name not in names]


@dataclass(frozen=True)
class OperatorSample:
    """Which of a task's operator mutants an audit grades: every one (`size` None), or `size` of
    them drawn with `seed`; a mutant declared equivalent is never graded."""
    size: int | None = None
    seed: int = 0

    def drawn(self, mutants: list[OperatorMutant]) -> list[OperatorMutant]:
        if self.size is None or self.size >= len(mutants):
            return list(mutants)
        picked = set(random.Random(self.seed).sample(range(len(mutants)), self.size))
        return [mutant for index, mutant in enumerate(mutants) if index in picked]
