"""Synthetic evaluation results of two models on the same benchmark, for the error-analysis exercise.

Nothing here is measured: the rows are generated so that a handful of effects are planted with exact,
documented sizes (planted_regressions.json). Each "cell" (category x prompt-length band) states how many
rows it has and how many of them each model gets right; which rows, and what the wrong answers look
like, is drawn from a fixed seed. The aggregate hides the most important regression, which is the point
of the exercise: new is better overall once a formatting problem is fixed, yet it collapses on long
retrieval prompts.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from jsonl import write_json, write_jsonl
from stable_random import randint, shuffled

SEED = 7
LONG = 2000  # prompts with more than this many tokens are "long"


@dataclass(frozen=True)
class Cell:
    category: str
    long: bool            # prompt_tokens in (LONG, 8000] rather than [40, LONG]
    n: int
    baseline_correct: int
    new_correct: int      # judged on content: for code, before the backtick problem below
    new_wrapped_correct: int = 0  # code only: correct answers the new model wraps in `backticks`
    new_wrapped_wrong: int = 0    # code only: wrong answers it wraps too


CELLS = [
    Cell("arithmetic", False, 120, baseline_correct=66, new_correct=90),
    Cell("reasoning", False, 90, baseline_correct=63, new_correct=65),
    Cell("reasoning", True, 30, baseline_correct=21, new_correct=21),
    Cell("code", False, 120, baseline_correct=78, new_correct=90, new_wrapped_correct=36, new_wrapped_wrong=12),
    Cell("retrieval", False, 80, baseline_correct=64, new_correct=70),
    Cell("retrieval", True, 80, baseline_correct=60, new_correct=28),
    Cell("extraction", False, 60, baseline_correct=42, new_correct=45),
    Cell("extraction", True, 20, baseline_correct=14, new_correct=15),
]

# The documented effects, each a filter over rows plus what it should show. Filters use only columns of
# eval_results.jsonl, so anyone can recompute them (the tests do, with pandas).
EFFECTS = [
    {
        "name": "long_prompt_retrieval_regression",
        "kind": "regression",
        "where": {"categories": ["retrieval"], "min_prompt_tokens": LONG + 1},
        "description": "On retrieval prompts longer than 2000 tokens the new model finds the answer far less "
                       "often (it often returns a distractor key or nothing). Short retrieval prompts improve, so "
                       "the retrieval average alone understates the collapse.",
    },
    {
        "name": "code_answers_wrapped_in_backticks",
        "kind": "regression",
        "where": {"categories": ["code"]},
        "description": "The new model wraps some code answers in single backticks (`...`), so exact match "
                       "fails although the expression is right. Stripping backticks before comparing turns the "
                       "apparent regression into an improvement.",
    },
    {
        "name": "arithmetic_improvement",
        "kind": "improvement",
        "where": {"categories": ["arithmetic"]},
        "description": "The new model is clearly better at arithmetic.",
    },
    {
        "name": "long_prompts_outside_retrieval_unchanged",
        "kind": "control",
        "where": {"categories": ["reasoning", "extraction"], "min_prompt_tokens": LONG + 1},
        "description": "Long prompts as such are not the problem: outside retrieval the new model holds steady "
                       "on them.",
    },
    {
        "name": "overall",
        "kind": "aggregate",
        "where": {},
        "description": "Exact match over all rows. New looks worse before backticks are stripped and better "
                       "after, and neither number shows the long-prompt retrieval collapse.",
    },
]

CODE_ANSWERS = [
    "sorted(xs)", "sorted(xs, reverse=True)", "len(set(xs))", "sum(xs) / len(xs)", "xs[::-1]",
    "max(xs) - min(xs)", "[x for x in xs if x % 2 == 0]", "sum(x * x for x in xs)", "dict(zip(keys, values))",
    "s.split()", "' '.join(words)", "s.lower().count('a')", "min(xs, key=abs)", "list(range(n))",
    "any(x < 0 for x in xs)", "xs.index(max(xs))",
]
NAMES = [
    "Ada Lovelace", "Alan Turing", "Grace Hopper", "Marie Curie", "Emmy Noether", "Claude Shannon",
    "Katherine Johnson", "John von Neumann", "Barbara Liskov", "Donald Knuth", "Edsger Dijkstra",
    "Frances Allen", "Rosalind Franklin", "Niels Bohr", "Lise Meitner", "Srinivasa Ramanujan",
]
FRUITS = ["apple", "kiwi", "mango", "pear", "plum", "lime", "fig", "grape", "peach", "cherry"]


def _gold(rng: random.Random, category: str) -> str:
    if category == "arithmetic":
        return str(randint(rng, 10, 99) * randint(rng, 2, 40) + randint(rng, 0, 99))
    if category == "reasoning":
        return "ABCD"[randint(rng, 0, 3)]
    if category == "code":
        return CODE_ANSWERS[randint(rng, 0, len(CODE_ANSWERS) - 1)]
    if category == "retrieval":
        return f"{FRUITS[randint(rng, 0, len(FRUITS) - 1)]}-{randint(rng, 1000, 9999)}"
    return NAMES[randint(rng, 0, len(NAMES) - 1)]  # extraction


def _wrong(rng: random.Random, category: str, gold: str, long: bool) -> str:
    """A plausible wrong answer: close to gold where that makes sense, never equal to it."""
    while True:
        if category == "arithmetic":
            guess = str(int(gold) + (randint(rng, 1, 20) * (1 if rng.random() < 0.5 else -1)))
        elif category == "reasoning":
            guess = "ABCD"[randint(rng, 0, 3)]
        elif category == "code":
            guess = CODE_ANSWERS[randint(rng, 0, len(CODE_ANSWERS) - 1)]
        elif category == "retrieval":
            # lost in a long context, models often answer with nothing at all
            guess = "" if long and rng.random() < 0.3 else _gold(rng, "retrieval")
        else:
            guess = NAMES[randint(rng, 0, len(NAMES) - 1)]
        if guess != gold:
            return guess


def _pick(rng: random.Random, n: int, k: int) -> set[int]:
    """Exactly k of the indices 0..n-1."""
    return set(shuffled(rng, range(n))[:k])


def make_rows(seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for cell in CELLS:
        base_ok = _pick(rng, cell.n, cell.baseline_correct)
        new_ok = _pick(rng, cell.n, cell.new_correct)
        wrapped = set(shuffled(rng, sorted(new_ok))[:cell.new_wrapped_correct])
        wrapped |= set(shuffled(rng, sorted(set(range(cell.n)) - new_ok))[:cell.new_wrapped_wrong])
        for i in range(cell.n):
            gold = _gold(rng, cell.category)
            tokens = randint(rng, LONG + 1, 8000) if cell.long else randint(rng, 40, LONG)
            pred_baseline = gold if i in base_ok else _wrong(rng, cell.category, gold, cell.long)
            pred_new = gold if i in new_ok else _wrong(rng, cell.category, gold, cell.long)
            if i in wrapped:
                pred_new = f"`{pred_new}`"
            rows.append({"category": cell.category, "prompt_tokens": tokens, "gold": gold,
                         "pred_baseline": pred_baseline, "pred_new": pred_new})
    rows = shuffled(rng, rows)  # interleave categories, as a real results file would be
    for i, row in enumerate(rows):
        row["id"] = f"q{i:04d}"
    return rows


def _band(cell: Cell) -> tuple[int, int]:
    return (LONG + 1, 8000) if cell.long else (40, LONG)


def planted_counts(where: dict) -> dict:
    """What the rows matching `where` must show, derived from CELLS (the specification), not from the
    generated rows: the tests measure the rows and compare."""
    low, high = where.get("min_prompt_tokens", 0), where.get("max_prompt_tokens", 10**9)
    counts = dict.fromkeys(("n", "baseline_correct", "new_correct", "new_correct_after_stripping_backticks",
                            "new_wrapped_in_backticks"), 0)
    for cell in CELLS:
        band_low, band_high = _band(cell)
        in_band = low <= band_low and band_high <= high
        assert in_band or band_high < low or band_low > high, "filters must not split a cell's length band"
        if not in_band or (where.get("categories") and cell.category not in where["categories"]):
            continue
        counts["n"] += cell.n
        counts["baseline_correct"] += cell.baseline_correct
        counts["new_correct"] += cell.new_correct - cell.new_wrapped_correct
        counts["new_correct_after_stripping_backticks"] += cell.new_correct
        counts["new_wrapped_in_backticks"] += cell.new_wrapped_correct + cell.new_wrapped_wrong
    n = counts["n"]
    counts.update(baseline_accuracy=round(counts["baseline_correct"] / n, 4),
                  new_accuracy=round(counts["new_correct"] / n, 4),
                  new_accuracy_after_stripping_backticks=round(counts["new_correct_after_stripping_backticks"] / n, 4))
    return counts


def measured_counts(rows: list[dict], where: dict) -> dict:
    """The same numbers measured on generated rows; the build refuses to write rows that disagree."""
    chosen = [r for r in rows
              if (not where.get("categories") or r["category"] in where["categories"])
              and where.get("min_prompt_tokens", 0) <= r["prompt_tokens"] <= where.get("max_prompt_tokens", 10**9)]
    return {"n": len(chosen),
            "baseline_correct": sum(r["pred_baseline"].strip() == r["gold"] for r in chosen),
            "new_correct": sum(r["pred_new"].strip() == r["gold"] for r in chosen),
            "new_correct_after_stripping_backticks": sum(r["pred_new"].strip().strip("`") == r["gold"] for r in chosen),
            "new_wrapped_in_backticks": sum(r["pred_new"].startswith("`") for r in chosen)}


def build_eval_results(out_dir: Path) -> dict:
    """Write eval_results.jsonl and planted_regressions.json; return a summary for the manifest."""
    rows = make_rows()
    effects = []
    for effect in EFFECTS:
        planted = planted_counts(effect["where"])
        measured = measured_counts(rows, effect["where"])
        assert all(planted[k] == v for k, v in measured.items()), (effect["name"], planted, measured)
        effects.append({**effect, **planted})
    write_jsonl(out_dir / "eval_results.jsonl", rows)
    doc = {
        "metric": "exact match: pred.strip() == gold (gold never has surrounding whitespace); "
                  "'after stripping backticks' compares pred.strip().strip('`') instead",
        "long_prompt_threshold_tokens": LONG,
        "where_semantics": "categories: row.category in the list (absent = all); min_prompt_tokens / "
                           "max_prompt_tokens: inclusive bounds on row.prompt_tokens",
        "columns": {"id": "row id", "category": "task family", "prompt_tokens": "prompt length in tokens",
                    "gold": "reference answer", "pred_baseline": "baseline model's answer",
                    "pred_new": "new model's answer"},
        "seed": SEED,
        "effects": effects,
    }
    write_json(out_dir / "planted_regressions.json", doc)
    return {"rows": len(rows), "effects": {e["name"]: {k: e[k] for k in ("n", "baseline_accuracy", "new_accuracy")}
                                           for e in effects}}
