"""What the learner's attention code is made of, read from its source in the test process.

The Einsum rules are about how the code is written (the scores come out of an einsum; no Python
loop runs over batch or heads), which its results cannot show. Observing the code while it runs
would mean trusting probes that run beside it, where the learner's module can rewrite them; the
source file, parsed here, cannot answer back. What it cannot show either: which names are
aliases of which at run time. The reading below is deliberately lenient where the source is
ambiguous (a check that rejects a correct solution is worse than one that misses a trick).

Reading rules:
- A function reaches the top-level functions it names (calls or references), transitively.
- `np.einsum` / `torch.einsum` are found through the file's imports and module-level aliases.
- The scores einsum is one whose operands come from `q` and `k` but not from `v` (followed
  through assignments and into helpers), or whose subscripts contract the last axis of both
  operands (`...qd,...kd`); two or more einsum calls also count, as only the scores and the
  output are products.
- A loop is data-driven unless it runs over a collection written out in the source
  (`for w in (w_q, w_k, w_v)`, `zip(...)` of such) or over `range` of constants.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from grader.worker.loading import learner_source

EINSUM = {"numpy": {"numpy.einsum"}, "torch": {"torch.einsum", "torch.functional.einsum"}}
_FIXED_WRAPPERS = {"zip", "enumerate", "reversed", "sorted", "list", "tuple"}


@dataclass
class Loop:
    function: str
    line: int
    header: str


@dataclass
class EinsumCall:
    function: str
    line: int
    subscripts: str | None
    operand_sources: list[set[str]] = field(default_factory=list)   # parameters of the entry each operand comes from


class Source:
    """A learner's module as a syntax tree: its top-level functions and the names it imports."""

    def __init__(self, path: Path):
        self.text = learner_source(path)             # as Python decodes it: a coding line counts
        self.tree = ast.parse(self.text)
        self.functions = {node.name: node for node in self.tree.body
                          if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.aliases = self._aliases()
        for node in self.tree.body:                 # attention = _attention_impl
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
                    and node.value.id in self.functions):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in self.functions:
                        self.functions[target.id] = self.functions[node.value.id]

    def _aliases(self) -> dict[str, str]:
        """Local name -> dotted name of what it stands for (`np` -> `numpy`, `einsum` -> `numpy.einsum`)."""
        aliases: dict[str, str] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for name in node.names:
                    if name.asname:
                        aliases[name.asname] = name.name
                    else:
                        top = name.name.split(".")[0]
                        aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for name in node.names:
                    aliases[name.asname or name.name] = f"{node.module}.{name.name}"
        for node in self.tree.body:                 # einsum = np.einsum
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                dotted = self.dotted(node.value, aliases)
                if dotted:
                    aliases[node.targets[0].id] = dotted
        return aliases

    def dotted(self, node, aliases=None) -> str | None:
        """`np.einsum` -> "numpy.einsum" when `np` is an import of numpy; None for anything else."""
        aliases = self.aliases if aliases is None else aliases
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in aliases:
            return None
        return ".".join([aliases[node.id], *reversed(parts)])

    def reachable(self, entry: str) -> list[str]:
        """`entry` and every top-level function it names, transitively, in discovery order."""
        seen, todo = [], [entry]
        while todo:
            name = todo.pop(0)
            if name in seen or name not in self.functions:
                continue
            seen.append(name)
            todo += [n.id for n in ast.walk(self.functions[name])
                     if isinstance(n, ast.Name) and n.id in self.functions and n.id not in seen]
        return seen

    def line(self, node) -> str:
        return (ast.get_source_segment(self.text, node) or "").splitlines()[0].strip()

    # ------------------------------------------------------------ loops

    def data_loops(self, entries) -> list[Loop]:
        """Loops in the entries and their callees that run over data rather than a written-out list."""
        loops, done = [], set()
        for entry in entries:
            for name in self.reachable(entry):
                if name in done:
                    continue
                done.add(name)
                for node in ast.walk(self.functions[name]):
                    if isinstance(node, ast.While):
                        loops.append(Loop(name, node.lineno, self.line(node)))
                    elif isinstance(node, (ast.For, ast.AsyncFor)) and not _fixed(node.iter):
                        loops.append(Loop(name, node.lineno, self.line(node)))
                    elif isinstance(node, ast.comprehension) and not _fixed(node.iter):
                        header = f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
                        loops.append(Loop(name, node.iter.lineno, header))
        return sorted(loops, key=lambda loop: loop.line)

    # ------------------------------------------------------------ einsum

    def einsum_calls(self, entry: str, library: str) -> list[EinsumCall]:
        """The einsum calls of `library` reachable from `entry`, each operand with the entry's
        first three parameters (q, k, v by position) it is computed from."""
        names = self.reachable(entry)
        entry_params = _params(self.functions[entry]) if entry in self.functions else []
        roles = dict(zip(entry_params[:3], "qkv"))
        sources: dict[str, dict[str, set[str]]] = {name: {} for name in names}
        sources.get(entry, {}).update({param: {role} for param, role in roles.items()})
        for _ in range(10):                      # flow-insensitive, to a fixed point
            changed = False
            for name in names:
                changed |= self._propagate(name, sources)
            if not changed:
                break
        calls = []
        for name in names:
            for node in ast.walk(self.functions[name]):
                if isinstance(node, ast.Call) and self.dotted(node.func) in EINSUM[library]:
                    subscripts = _literal_subscripts(node)
                    operands = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
                    operands = [a for a in operands if not (isinstance(a, ast.Constant) and isinstance(a.value, str))]
                    calls.append(EinsumCall(name, node.lineno, subscripts,
                                            [_sources(a, sources[name]) for a in operands]))
        return calls

    def _propagate(self, name: str, sources: dict) -> bool:
        """One pass of "a name depends on what its assigned expression depends on", and of call
        arguments flowing into the parameters of the module's own functions."""
        local, changed = sources[name], False

        def add(target, found):
            nonlocal changed
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name) and not found <= local.get(leaf.id, set()):
                    local[leaf.id] = local.get(leaf.id, set()) | found
                    changed = True

        for node in ast.walk(self.functions[name]):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if (isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List))
                            and len(target.elts) == len(node.value.elts)):
                        for t, v in zip(target.elts, node.value.elts):
                            add(t, _sources(v, local))
                    else:
                        add(target, _sources(node.value, local))
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                add(node.target, _sources(node.value, local) | _sources(node.target, local))
            elif isinstance(node, ast.NamedExpr):
                add(node.target, _sources(node.value, local))
            elif isinstance(node, (ast.For, ast.comprehension)):
                add(node.target, _sources(node.iter, local))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                add(node.optional_vars, _sources(node.context_expr, local))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in self.functions and node.func.id in sources):
                callee = self.functions[node.func.id]
                params = _params(callee)
                into = sources[node.func.id]
                flows = [(p, _sources(a, local)) for p, a in zip(params, node.args) if not isinstance(a, ast.Starred)]
                flows += [(kw.arg, _sources(kw.value, local)) for kw in node.keywords if kw.arg in params]
                spread = set().union(*[_sources(a, local) for a in node.args if isinstance(a, ast.Starred)],
                                     *[_sources(kw.value, local) for kw in node.keywords if kw.arg is None])
                flows += [(p, spread) for p in params] if spread else []
                for param, found in flows:
                    if not found <= into.get(param, set()):
                        into[param] = into.get(param, set()) | found
                        changed = True
        return changed

    def scores_einsum(self, entry: str, library: str) -> tuple[bool, list[EinsumCall]]:
        """Whether the scores of `entry` come out of an einsum of `library`, and the calls seen."""
        calls = self.einsum_calls(entry, library)
        for call in calls:
            if _contracts_last_axes(call.subscripts):
                return True, calls
            found = set().union(*call.operand_sources) if call.operand_sources else set()
            if {"q", "k"} <= found and "v" not in found:
                return True, calls
        return len(calls) >= 2, calls


def _params(function) -> list[str]:
    args = function.args
    return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]


def _sources(expr, local: dict[str, set[str]]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            found |= local.get(node.id, set())
    return found


def _fixed(iterable) -> bool:
    """A collection written out in the source, or range() of constants: not a loop over data."""
    if isinstance(iterable, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
        return True
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name):
        if iterable.func.id == "range":
            return all(isinstance(a, ast.Constant) for a in iterable.args)
        if iterable.func.id in _FIXED_WRAPPERS:
            return bool(iterable.args) and all(_fixed(a) for a in iterable.args)
    return False


def _literal_subscripts(call) -> str | None:
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _contracts_last_axes(subscripts: str | None) -> bool:
    """`bhqd,bhkd->bhqk`: a summed letter last in both operands, the Q K^T pattern (the output
    product `bhqk,bhkv` sums the last letter of one and the second last of the other)."""
    if not subscripts or "->" not in subscripts:
        return False
    inputs, output = subscripts.replace(" ", "").split("->")
    operands = [op.replace("...", "") for op in inputs.split(",")]
    if len(operands) != 2 or not all(operands):
        return False
    (a, b), out = operands, output.replace("...", "")
    return a[-1] == b[-1] and a[-1] not in out
