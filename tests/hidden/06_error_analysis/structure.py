"""Whether the learner's table functions run Python code once per row, read from their source in
the test process (as exercise 01 reads its einsum rules): results cannot show it, and a probe
beside the learner's code could be rewritten by it; the source file, parsed here, cannot.

What counts as running once per row (README.md, section "Vectorised, not row by row"):
- `.iterrows()`, `.itertuples()`, polars `.iter_rows()`;
- `.apply(..., axis=1)`; `.apply`, `.map`, `.transform` of a Python function (a lambda, a def of
  the module or of the function, a builtin such as `len`, an attribute such as `str.strip`),
  unless the receiver is grouped (`groupby`, `group_by`, `rolling`, ...), which runs per group;
  polars `.map_elements`, `.map_rows`; `np.vectorize`;
- a `for` loop or comprehension over a column (`table["pred"]`, `table.pred`, `table[f"pred_{m}"]`),
  `.values`, `.index`, `.tolist()`, `.to_list()`, `.to_numpy()`, `.to_dict(...)`, the row
  iterators above, `zip`/`enumerate`/`sorted`/`list` of any of these, or `range(len(...))`;
  the builtins `map` and `filter` over any of these; a `while` loop whose test takes a `len` or
  a `.shape`.
Anything else is let through: a loop over a name (the steps of `normalize`), over `.columns`,
over a written-out list. The reading is lenient where the source is ambiguous: a check that
rejects a correct solution is worse than one that misses a trick.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from pathlib import Path

from grader.worker.loading import learner_source

TABLE_FUNCTIONS = ("load_results", "paired", "lost_and_gained", "accuracy_by", "overall", "accuracy_by_length",
                   "largest_drop", "paired_bootstrap")
COLUMNS = {"id", "category", "prompt_tokens", "gold", "pred", "pred_new", "pred_baseline", "pred_base", "correct",
           "correct_base", "source", "n", "accuracy", "accuracy_base", "delta", "low", "high", "bucket", "d", "diff"}
ROW_ITERATORS = {"iterrows", "itertuples", "iter_rows"}
ROW_SEQUENCES = {"tolist", "to_list", "to_numpy", "to_dict", "to_dicts", "rows"} | ROW_ITERATORS
ROW_ATTRIBUTES = {"values", "index", "array"}
ALWAYS_PER_ROW = {"map_elements", "map_rows", "vectorize"}
ELEMENTWISE = {"apply", "map", "transform", "applymap"}
GROUPED = {"groupby", "group_by", "rolling", "expanding", "resample", "ewm", "group_by_dynamic"}
WRAPPERS = {"zip", "enumerate", "sorted", "list", "tuple", "reversed", "iter", "set"}
_BUILTIN_FUNCTIONS = {name for name in dir(builtins) if callable(getattr(builtins, name)) and name[0].islower()}


@dataclass
class Finding:
    function: str
    line: int
    code: str
    what: str


class Source:
    def __init__(self, path: Path):
        self.text = learner_source(path)             # as Python decodes it: a coding line counts
        self.tree = ast.parse(self.text)
        self.functions = {node.name: node for node in self.tree.body
                          if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in self.tree.body:                 # accuracy_by = _accuracy_by
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in self.functions:
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in self.functions:
                        self.functions[target.id] = self.functions[node.value.id]

    def reachable(self, entries) -> list[str]:
        seen, todo = [], [e for e in entries if e in self.functions]
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.append(name)
            todo += [n.id for n in ast.walk(self.functions[name])
                     if isinstance(n, ast.Name) and n.id in self.functions and n.id not in seen]
        return seen

    def per_row_code(self, entries=TABLE_FUNCTIONS) -> list[Finding]:
        findings = []
        for name in self.reachable(entries):
            function = self.functions[name]
            local_functions = {n.name for n in ast.walk(function) if isinstance(n, (ast.FunctionDef, ast.Lambda))
                               and hasattr(n, "name")} | {t.id for n in ast.walk(function) if isinstance(n, ast.Assign)
                                                          and isinstance(n.value, ast.Lambda) for t in n.targets
                                                          if isinstance(t, ast.Name)}
            python_functions = set(self.functions) | local_functions | _BUILTIN_FUNCTIONS
            rows = _names_of_rows(function)
            for node in ast.walk(function):
                what = self._per_row(node, python_functions, rows)
                if what:
                    line = node.iter.lineno if isinstance(node, ast.comprehension) else node.lineno
                    findings.append(Finding(name, line, self._line(node), what))
        return sorted(findings, key=lambda f: f.line)

    def _per_row(self, node, python_functions, rows) -> str | None:
        if isinstance(node, ast.Call):
            attribute = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if attribute in ROW_ITERATORS:
                return f"`.{attribute}()` runs Python once per row"
            if attribute in ALWAYS_PER_ROW:
                return f"`{attribute}` runs a Python function once per row"
            if attribute in ELEMENTWISE and not _grouped(node.func.value):
                if any(_keyword_is(k, "axis", (1, "columns")) for k in node.keywords):
                    return f"`.{attribute}(..., axis=1)` runs Python once per row"
                function = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("func", "arg")), None)
                if function is not None and _is_python_function(function, python_functions):
                    return f"`.{attribute}` of a Python function runs it once per value"
            if isinstance(node.func, ast.Name) and node.func.id in ("map", "filter") \
                    and any(_rowish(a, rows) for a in node.args[1:]):
                return f"`{node.func.id}` over a column runs Python once per value"
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and _rowish(node.iter, rows):
            return "a Python loop over rows"
        if isinstance(node, ast.While) and any(_takes_length(n) for n in ast.walk(node.test)):
            return "a while loop over rows"
        return None

    def _line(self, node) -> str:
        if isinstance(node, ast.comprehension):
            return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
        return (ast.get_source_segment(self.text, node) or "").splitlines()[0].strip()


def _grouped(receiver) -> bool:
    """Whether a method's receiver is a grouped object (`table.groupby("c")["x"]`, `df.rolling(3)`)."""
    while True:
        if isinstance(receiver, ast.Call):
            receiver = receiver.func
        elif isinstance(receiver, ast.Attribute):
            if receiver.attr in GROUPED:
                return True
            receiver = receiver.value
        elif isinstance(receiver, ast.Subscript):
            receiver = receiver.value
        else:
            return False


def _keyword_is(keyword, name, values) -> bool:
    return keyword.arg == name and isinstance(keyword.value, ast.Constant) and keyword.value.value in values


def _is_python_function(node, python_functions) -> bool:
    if isinstance(node, ast.Lambda):
        return True
    if isinstance(node, ast.Name):
        return node.id in python_functions
    if isinstance(node, ast.Attribute):          # str.strip, math.sqrt, np.char.strip is not a per-row call
        return isinstance(node.value, ast.Name) and node.value.id in ("str", "math", "operator", "re")
    return False


def _rowish(node, rows=frozenset()) -> bool:
    """An expression that yields the rows (or the values of a column) of a table; `rows` are the
    local names assigned such an expression (`pairs = zip(table["id"], table["correct"])`)."""
    if isinstance(node, ast.Name):
        return node.id in rows
    if isinstance(node, ast.Subscript):
        key = node.slice
        return (isinstance(key, ast.Constant) and key.value in COLUMNS) or isinstance(key, ast.JoinedStr) \
            or _rowish(node.value, rows)
    if isinstance(node, ast.Attribute):
        return node.attr in COLUMNS or node.attr in ROW_ATTRIBUTES or _rowish(node.value, rows)
    if isinstance(node, ast.BinOp):
        return _rowish(node.left, rows) or _rowish(node.right, rows)
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr in ROW_SEQUENCES:
            return True
        if isinstance(node.func, ast.Name):
            if node.func.id == "range":
                return any(_takes_length(n) for a in node.args for n in ast.walk(a))
            if node.func.id in WRAPPERS:
                return any(_rowish(a, rows) for a in node.args)
        if isinstance(node.func, ast.Attribute):
            return _rowish(node.func.value, rows) and node.func.attr not in ("unique", "drop_duplicates", "keys", "items",
                                                                             "groupby", "group_by")
    if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return any(_rowish(generator.iter, rows) for generator in node.generators)
    return False


def _names_of_rows(function) -> frozenset:
    """The function's local names that hold rows or column values: assigned a row-yielding
    expression, or one built from such names, followed to a fixed point."""
    rows: set[str] = set()
    assignments = [(target, node.value) for node in ast.walk(function) if isinstance(node, ast.Assign)
                   for target in node.targets]
    changed = True
    while changed:
        changed = False
        for target, value in assignments:
            if _rowish(value, frozenset(rows)):
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name) and leaf.id not in rows:
                        rows.add(leaf.id)
                        changed = True
    return frozenset(rows)


def _takes_length(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len") \
        or (isinstance(node, ast.Attribute) and node.attr in ("shape", "height", "size"))
