"""The evaluation runs the hidden suite grades on, generated for each test from the run's seed.

As in datasets/eval_results_builder.py, a run is planned cell by cell (a category, a band of
prompt lengths, how many questions each pair of outcomes gets), so an effect can be planted
exactly; what differs is drawn from the test's generator: the categories and their sizes, the ids
and their order in each file, the answers and their surface (whitespace, backticks, case), the
missing answers. What is right is decided here, by Python's own string methods on the strings
written to the files (`python_correct`), never by the code under test.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

CATEGORIES = ["arithmetic", "reasoning", "code", "retrieval", "extraction", "translation", "summaries", "tool_use",
              "word_problems", "dialogue", "units", "dates"]
SOURCES = ["exam", "forum", "synthetic"]
SHORT, MEDIUM, LONG = (40, 600), (601, 2000), (2001, 8000)
CODE = ["sorted(xs)", "len(set(xs))", "xs[::-1]", "max(xs) - min(xs)", "sum(xs) / len(xs)", "dict(zip(ks, vs))",
        "s.split()", "' '.join(ws)", "list(range(n))", "any(x < 0 for x in xs)", "xs.index(max(xs))", "min(xs, key=abs)"]
NAMES = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Emmy Noether", "Claude Shannon", "Barbara Liskov",
         "Donald Knuth", "Edsger Dijkstra", "Frances Allen", "Lise Meitner", "Niels Bohr", "Katherine Johnson"]
FRUITS = ["apple", "kiwi", "mango", "pear", "plum", "lime", "fig", "grape", "peach", "cherry"]
# How a right answer may be written, and the normalisation steps that undo it.
SURFACES = {"plain": (), "spaces": ("strip",), "backticks": ("backticks",), "spaced_backticks": ("strip", "backticks"),
            "upper": ("lower",)}
STEPS = {"strip": str.strip, "backticks": lambda text: text.strip("`"), "lower": str.lower}


@dataclass(frozen=True)
class Cell:
    """`both` questions both runs answer right, `lost` only the baseline, `gained` only the new
    run, `neither` none; their prompt lengths drawn in `tokens` (inclusive)."""
    category: str
    tokens: tuple[int, int]
    both: int = 0
    lost: int = 0
    gained: int = 0
    neither: int = 0

    @property
    def n(self) -> int:
        return self.both + self.lost + self.gained + self.neither


def normalized(text: str, steps) -> str:
    for step in steps:
        text = STEPS[step](text)
    return text


def python_correct(pred, gold: str, steps) -> bool:
    """The oracle of exact match: both sides normalised by Python's str methods; no answer is wrong."""
    return isinstance(pred, str) and normalized(pred, steps) == normalized(gold, steps)   # None or NaN: no answer


def random_cells(rng, categories=None, sizes=(1, 45)) -> list[Cell]:
    """Cells of drawn categories, bands and sizes, with outcomes of drawn rates."""
    names = categories or list(rng.choice(CATEGORIES, size=int(rng.integers(3, 6)), replace=False))
    cells = []
    for name in names:
        for band in rng.permutation(np.array([SHORT, MEDIUM, LONG]))[:int(rng.integers(1, 4))]:
            n = int(rng.integers(*sizes))
            counts = rng.multinomial(n, rng.dirichlet([3.0, 1.0, 1.0, 2.0]))
            cells.append(Cell(str(name), (int(band[0]), int(band[1])), *map(int, counts)))
    return cells


def questions(rng, cells, digits_only: bool = False) -> pd.DataFrame:
    """One row per planted question: id, category, prompt_tokens, gold, source and the planted
    outcomes right_new and right_base (right in content, before any surface)."""
    rows = []
    for cell in cells:
        outcomes = [(True, True)] * cell.both + [(False, True)] * cell.lost + [(True, False)] * cell.gained \
            + [(False, False)] * cell.neither
        for right_new, right_base in outcomes:
            rows.append({"category": cell.category, "prompt_tokens": int(rng.integers(cell.tokens[0], cell.tokens[1] + 1)),
                         "gold": _gold(rng, cell.category, digits_only), "source": str(rng.choice(SOURCES)),
                         "right_new": right_new, "right_base": right_base})
    table = pd.DataFrame(rows)
    numbers = rng.choice(np.arange(10 ** 4, 10 ** 5), size=len(table), replace=False)
    table.insert(0, "id", [f"{k:06d}" if digits_only else f"q{k}" for k in numbers])
    return table


def answers(rng, table, right_column: str, surfaces=("plain", "spaces"), missing: float = 0.1,
            digits_only: bool = False) -> list:
    """A run's answers: right ones written in one of `surfaces`, wrong ones another answer of the
    category (or, with probability `missing`, no answer at all)."""
    answers = []
    for row in table.itertuples():
        if getattr(row, right_column):
            answers.append(_written(rng, row.gold, str(rng.choice(surfaces))))
        elif rng.random() < missing:
            answers.append(None)
        else:
            answers.append(_written(rng, _wrong(rng, row.category, row.gold, digits_only), str(rng.choice(surfaces))))
    return answers


def truth(table, pred_new, pred_base, normalize=("strip",)) -> pd.DataFrame:
    """The questions with what the oracle says of each answer: correct and correct_base."""
    return table.assign(pred=pred_new, pred_base=pred_base,
                        correct=[python_correct(p, g, normalize) for p, g in zip(pred_new, table["gold"])],
                        correct_base=[python_correct(p, g, normalize) for p, g in zip(pred_base, table["gold"])])


def write_runs(folder, rng, table, pred_new, pred_base, wide: bool = False) -> tuple[str, str]:
    """The two runs as JSON-lines files, each listing the questions in an order of its own (or,
    `wide`, one file holding both answers, the shipped layout, passed as both paths)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    columns = ["id", "category", "prompt_tokens", "gold", "source"]
    records = table[columns].to_dict("records")
    if wide:
        rows = [{**r, "pred_baseline": b, "pred_new": a} for r, a, b in zip(records, pred_new, pred_base)]
        path = _write(folder / "results.jsonl", [rows[i] for i in rng.permutation(len(rows))])
        return path, path
    new_rows = [{**r, "pred_new": a} for r, a in zip(records, pred_new)]
    base_rows = [{**r, "pred_baseline": b} for r, b in zip(records, pred_base)]
    return (_write(folder / "new.jsonl", [new_rows[i] for i in rng.permutation(len(new_rows))]),
            _write(folder / "baseline.jsonl", [base_rows[i] for i in rng.permutation(len(base_rows))]))


def file_order(path) -> list[str]:
    return [json.loads(line)["id"] for line in Path(path).read_text().splitlines() if line.strip()]


def planted_run(folder, rng, cells, surfaces=("plain", "spaces"), missing=0.1, normalize=("strip",), wide=False):
    """Questions, answers and files of `cells`, and the oracle's table, checked to show what was
    planted (a generator that planted something else would make a test's claim false)."""
    table = questions(rng, cells)
    pred_new = answers(rng, table, "right_new", surfaces, missing)
    pred_base = answers(rng, table, "right_base", surfaces, missing)
    paths = write_runs(folder, rng, table, pred_new, pred_base, wide)
    known = truth(table, pred_new, pred_base, normalize)
    undone = all(set(SURFACES[s]) <= set(normalize) for s in surfaces)
    planted = (known["correct"] == known["right_new"]).all() and (known["correct_base"] == known["right_base"]).all()
    assert not undone or planted, \
        "the generated answers do not show the planted outcomes"
    return paths, known


def _write(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _gold(rng, category: str, digits_only: bool) -> str:
    if digits_only:
        return str(rng.choice(["007", "12", "0", "40", "0042", "5", "99", "100", "3"]))
    kind = CATEGORIES.index(category) % 5 if category in CATEGORIES else 0
    if kind == 0:
        return str(int(rng.integers(10, 99)) * int(rng.integers(2, 40)) + int(rng.integers(0, 99)))
    if kind == 1:
        return str(rng.choice(list("ABCDE")))
    if kind == 2:
        return str(rng.choice(CODE))
    if kind == 3:
        return f"{rng.choice(FRUITS)}-{int(rng.integers(1000, 9999))}"
    return str(rng.choice(NAMES))


def _wrong(rng, category: str, gold: str, digits_only: bool) -> str:
    """Another answer of the same kind, different from gold under every normalisation."""
    while True:
        guess = _numeric_near_miss(rng, gold) if digits_only else _gold(rng, category, False)
        if normalized(guess, ("strip", "backticks", "lower")) != normalized(gold, ("strip", "backticks", "lower")):
            return guess


def _numeric_near_miss(rng, gold: str) -> str:
    """A wrong answer that read_json's number guessing would turn right: the same number written
    otherwise ("7" for "007", "12.0" for "12"), or another number."""
    value = int(gold)
    same_number = [f"{value}.0"] + ([str(value)] if str(value) != gold else [])
    return str(rng.choice(same_number)) if rng.random() < 0.7 else str(value + int(rng.integers(1, 9)))


def _written(rng, answer: str, surface: str) -> str:
    if surface == "spaces":
        return str(rng.choice([" ", "  ", "\n", "\t"])) + answer + str(rng.choice(["", " ", "\n"]))
    if surface == "backticks":
        return f"`{answer}`"
    if surface == "spaced_backticks":
        return f" `{answer}` "
    if surface == "upper":
        return answer.upper() if answer.upper() != answer else answer.swapcase()
    return answer
