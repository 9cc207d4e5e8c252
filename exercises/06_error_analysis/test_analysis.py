"""Visible tests for exercise 06. Run: pytest exercises/06_error_analysis

One or more checks per README section, each aimed at the bug people make there. They use small
runs written by the tests themselves (what is right is decided by Python's own string methods,
the tables by pandas' own groupby and cut, the interval by the README's recipe in NumPy) and the
shipped results (datasets/eval_results), whose planted effects are documented in
datasets/eval_results/planted_regressions.json. The graded suite checks much more, on runs it
generates for each grading: other categories, sizes and effects, every normalisation, ties,
empty slices, drawn seeds for the bootstrap, figures of drawn runs. A pass here is a start, not
a grade.
"""
import ast
import json
import math

import numpy as np
import pandas as pd
import pytest

from grader.course import COURSE
from grader.suite.checks import shown, sibling_module
from grader.suite.learner_files import learner_file
from grader.suite.plot_reading import read_figure

# by path: a notebook has no __file__
probes = sibling_module(COURSE.exercises / "06_error_analysis" / "test_analysis.py", "probes")

# Seconds for a test of quick calls: its own work is milliseconds, but the first test of a task also
# waits for the worker that runs your module to start (4 s on a 2-core machine at load 2, several
# times that on a loaded one).
QUICK = 30

SHIPPED = str(COURSE.datasets / "eval_results" / "eval_results.jsonl")
PLANTED_FILE = COURSE.datasets / "eval_results" / "planted_regressions.json"
PLANTED = {e["name"]: e for e in json.loads(PLANTED_FILE.read_text())["effects"]}
ACCURACY = 1e-9      # accuracies are fractions of a few hundred questions: only rounding may differ
# Means of a few dozen 0/1 values and quantiles between them: pandas, polars and NumPy agree to
# ~1e-16; a bug is off by a whole question, 1 / n >= 0.01 here.
EXACT = 1e-12
TABLE = ["n", "accuracy", "accuracy_base", "delta"]
BOOT = ["n", "delta", "low", "high", "significant"]
# Python's own string methods, one per normalisation step of the README's table.
STEPS = {"strip": str.strip, "backticks": lambda text: text.strip("`"), "lower": str.lower}


# ---------------------------------------------------------------- runs written by the tests

def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def two_runs(folder):
    """Four questions; the baseline's file lists them in another order."""
    questions = [("a1", "math", 100, "42"), ("a2", "math", 900, "7"), ("b1", "code", 300, "sorted(xs)"),
                 ("b2", "code", 2500, "len(xs)")]
    new = {"a1": " 42 ", "a2": "8", "b1": "`sorted(xs)`", "b2": None}
    base = {"a1": "41", "a2": "7", "b1": "sorted(xs)", "b2": "len(xs)"}
    rows = [{"id": i, "category": c, "prompt_tokens": t, "gold": g} for i, c, t, g in questions]
    new_path = write_jsonl(folder / "new.jsonl", [{**r, "pred_new": new[r["id"]]} for r in rows])
    base_path = write_jsonl(folder / "base.jsonl", [{**r, "pred_baseline": base[r["id"]]} for r in reversed(rows)])
    return new_path, base_path


def exact(answer, gold, normalize=("strip",)):
    """The tests' exact match: both sides through the steps, in order; no answer is wrong."""
    if not isinstance(answer, str):          # None in the file, NaN in a table
        return False
    for step in normalize:
        answer, gold = STEPS[step](answer), STEPS[step](gold)
    return answer == gold


def planted(rng, category, lengths, outcomes, **columns):
    """One question per letter of `outcomes`: B both models right, L lost (only the baseline right),
    G gained (only the new model right), N neither, U neither and the new model silent; prompt
    lengths drawn in `lengths` (both ends included), or taken from it when it is a list."""
    rows = []
    for index, outcome in enumerate(outcomes):
        gold = f"{category[:3]}-{int(rng.integers(100, 999))}"
        tokens = lengths[index] if isinstance(lengths, list) else int(rng.integers(lengths[0], lengths[1] + 1))
        written = gold + str(rng.choice(["", " ", "\n"]))          # right, once surrounding whitespace is gone
        new = written if outcome in "BG" else None if outcome == "U" else gold + "?"
        base = written if outcome in "BL" else gold[::-1]
        rows.append({"category": category, "prompt_tokens": tokens, "gold": gold, **columns, "new": new, "base": base})
    return rows


def write_runs(folder, questions, order_seed):
    """The questions as two runs (pred_new and pred_baseline), each file listing them in an order
    of its own; ids are given here. Returns the two paths and the questions as a table with the
    tests' own `correct` and `correct_base` (exact match after stripping whitespace)."""
    questions = [{"id": f"q{1000 + 37 * index % 997}", **q} for index, q in enumerate(questions)]
    rng = np.random.default_rng(order_seed)
    paths = []
    for name, model, key in (("new.jsonl", "new", "new"), ("base.jsonl", "baseline", "base")):
        lines = [{**{k: v for k, v in q.items() if k not in ("new", "base")}, f"pred_{model}": q[key]} for q in questions]
        paths.append(write_jsonl(folder / name, [lines[i] for i in rng.permutation(len(lines))]))
    truth = pd.DataFrame(questions)
    truth["correct"] = [exact(a, g) for a, g in zip(truth["new"], truth["gold"])]
    truth["correct_base"] = [exact(a, g) for a, g in zip(truth["base"], truth["gold"])]
    return (*paths, truth)


def call(submission, function, keep, *args, **kwargs):
    """submission.<function>(*args, **kwargs), its tables read as rows of the columns in `keep`."""
    return submission.probe(getattr(probes, function), keep, *args, **kwargs)


def rows_of(submission, function, keep, *args, what=None, **kwargs):
    return probes.table_rows(call(submission, function, keep, *args, **kwargs), what or f"{function}()", keep)


def is_null(value):
    return value is None or (isinstance(value, float) and math.isnan(value))


def same(got, expected):
    if is_null(expected):
        return is_null(got)
    return isinstance(got, (int, float)) and not is_null(got) and abs(got - expected) <= EXACT


def expected_table(truth, keys):
    """pandas' own groupby of the tests' table: n, both accuracies and delta per group."""
    groups = truth.groupby(keys, observed=False)
    table = pd.DataFrame({"n": groups.size(), "accuracy": groups["correct"].mean(),
                          "accuracy_base": groups["correct_base"].mean()})
    return table.assign(delta=table["accuracy"] - table["accuracy_base"]).reset_index()


def assert_same_rows(rows, expected, keys, what):
    """One row per expected group, found by its keys, with its n, accuracies and delta; nothing else."""
    __tracebackhide__ = True
    got = {tuple(row[k] for k in keys): row for row in rows}
    wanted = {tuple(row[k] for k in keys): row for row in expected.to_dict("records")}
    assert len(rows) == len(got), \
        f"{what}: expected one row per group, got {len(rows)} rows for {len(got)} groups (a group comes more than once)"
    missing, extra = sorted(set(wanted) - set(got)), sorted(set(got) - set(wanted), key=str)
    assert not missing, f"{what}: no row for {len(missing)} of the {len(wanted)} groups, e.g. {dict(zip(keys, missing[0]))}"
    assert not extra, f"{what}: rows for groups that are not in the data, e.g. {dict(zip(keys, extra[0]))}"
    for key, want in wanted.items():
        for column in TABLE:
            assert same(got[key][column], want[column]), \
                f"{what}, group {shown(dict(zip(keys, key)))}: expected {column} {shown(want[column])}, " \
                f"got {shown(got[key][column])} (of {shown(want['n'])} questions)"


# ---------------------------------------------------------------- exact match

@pytest.mark.points(1)
@pytest.mark.concept("Exact match")
@pytest.mark.timeout(QUICK)
def test_load_results_marks_exact_matches(submission, tmp_path):
    """whitespace is stripped by default, backticks only when asked, a missing answer is wrong"""
    new_path, _ = two_runs(tmp_path)
    for normalize, expected in ((None, [True, False, False, False]), (("strip", "backticks"), [True, False, True, False])):
        arguments = () if normalize is None else (normalize,)
        what = f"load_results(path, 'new'{'' if normalize is None else f', {normalize}'})"
        rows = probes.table_rows(call(submission, "load_results", ["id", "correct"], new_path, "new", *arguments),
                                 what, ["id", "correct"])
        ids, got = [row["id"] for row in rows], [row["correct"] for row in rows]
        assert ids == ["a1", "a2", "b1", "b2"], \
            f"{what}: expected the file's ids in order, ['a1', 'a2', 'b1', 'b2'], got {shown(ids)}"
        assert got == expected, f"{what}: expected correct {shown(expected)}, got {shown(got)}" + \
            (" (without normalize, surrounding whitespace is removed)" if normalize is None else "")


@pytest.mark.points(1)
@pytest.mark.concept("Exact match")
@pytest.mark.timeout(QUICK)
def test_gold_is_normalised_like_the_prediction(submission, tmp_path):
    """gold answers with capitals and surrounding whitespace: every step applies to gold and prediction alike"""
    lines = [("c1", "Paris ", " PARIS"), ("c2", "\tOslo", "oslo"), ("c3", "Lima", "LIMA"), ("c4", "Bern", "Rome"),
             ("c5", "Quito", None)]
    path = write_jsonl(tmp_path / "capitals.jsonl", [{"id": i, "category": "capitals", "prompt_tokens": 50 + len(g),
                                                      "gold": g, "pred_new": p} for i, g, p in lines])
    for normalize in (("strip", "lower"), ("lower",)):
        expected = [exact(p, g, normalize) for _, g, p in lines]
        what = f"load_results(path, 'new', {normalize})"
        rows = probes.table_rows(call(submission, "load_results", ["id", "correct"], path, "new", normalize), what,
                                 ["id", "correct"])
        got = [row["correct"] for row in rows]
        assert got == expected, f"{what}: expected correct {shown(expected)}, got {shown(got)} for gold " \
                                f"{shown([g for _, g, _ in lines])} and answers {shown([p for _, _, p in lines])} " \
                                "(normalise both sides, with exactly the steps given)"


@pytest.mark.points(0.5)
@pytest.mark.concept("Exact match")
@pytest.mark.timeout(QUICK)
def test_digit_answers_and_ids_stay_text(submission, tmp_path):
    """ids and answers made of digits only: "05" is not "5", "12" is not "12.0", the ids come back as written"""
    lines = [("0107", "05", "5"), ("0311", "12", "12.0"), ("0042", "40", "40"), ("1000", "3", "3")]
    path = write_jsonl(tmp_path / "digits.jsonl", [{"id": i, "category": "arithmetic", "prompt_tokens": 80, "gold": g,
                                                    "pred_new": p} for i, g, p in lines])
    rows = probes.table_rows(call(submission, "load_results", ["id", "correct"], path, "new"),
                             "load_results(path, 'new')", ["id", "correct"])
    ids, got = [row["id"] for row in rows], [row["correct"] for row in rows]
    assert ids == [i for i, _, _ in lines], \
        f"load_results(path, 'new'): expected the ids as the file writes them, {shown([i for i, _, _ in lines])}, " \
        f"got {shown(ids)} (answers and ids are text: read with dtype=False)"
    assert got == [False, False, True, True], \
        f"load_results(path, 'new'): expected correct [False, False, True, True], got {shown(got)} for gold " \
        f"{shown([g for _, g, _ in lines])} and answers {shown([p for _, _, p in lines])}"


@pytest.mark.points(0.5)
@pytest.mark.concept("Exact match")
@pytest.mark.timeout(QUICK)
def test_each_model_reads_its_own_column(submission, tmp_path):
    """one file holding both runs: load_results(path, 'baseline') reads pred_baseline, as written"""
    lines = [("d1", "9", "9", "8"), ("d2", "ab", " ab", None), ("d3", "k", "j", "k")]
    path = write_jsonl(tmp_path / "both.jsonl", [{"id": i, "category": "mixed", "prompt_tokens": 60, "gold": g,
                                                  "pred_new": new, "pred_baseline": base} for i, g, base, new in lines])
    rows = probes.table_rows(call(submission, "load_results", ["id", "pred", "correct"], path, "baseline"),
                             "load_results(path, 'baseline')", ["id", "pred", "correct"])
    preds = [row["pred"] for row in rows]
    assert preds == [base for _, _, base, _ in lines], \
        f"load_results(path, 'baseline'): expected pred to be the file's pred_baseline " \
        f"{shown([base for _, _, base, _ in lines])}, got {shown(preds)}"
    correct = [row["correct"] for row in rows]
    assert correct == [True, True, False], \
        f"load_results(path, 'baseline'): expected correct [True, True, False], got {shown(correct)}"


# ---------------------------------------------------------------- pairing, lost and gained

@pytest.mark.points(1)
@pytest.mark.concept("Pairing by id")
@pytest.mark.timeout(QUICK)
def test_paired_matches_questions_by_id(submission, tmp_path):
    """the baseline's file lists the questions in reverse: pairing must go by id, not by position"""
    rows = probes.table_rows(call(submission, "paired", ["id", "correct", "correct_base"], *two_runs(tmp_path)),
                             "paired(new_path, base_path)", ["id", "correct", "correct_base"])
    got = {row["id"]: (row["correct"], row["correct_base"]) for row in rows}
    expected = {"a1": (True, False), "a2": (False, True), "b1": (False, True), "b2": (False, True)}
    assert len(rows) == 4, f"paired(new_path, base_path): expected 4 rows, one per question, got {len(rows)}"
    assert got == expected, \
        f"paired(new_path, base_path): expected (correct, correct_base) by id {shown(expected)}, got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("Lost and gained")
@pytest.mark.timeout(QUICK)
def test_lost_and_gained(submission, tmp_path):
    """lost: the baseline right and the new model wrong; gained: the other way round"""
    got = call(submission, "lost_and_gained", ["lost", "gained"], *two_runs(tmp_path))
    what = "lost_and_gained(new_path, base_path)"
    assert isinstance(got, dict) and {"lost", "gained"} <= set(got), \
        f"{what}: expected a dict with 'lost' and 'gained', got {shown(got, 80)}"
    assert sorted(got["lost"]) == ["a2", "b1", "b2"], \
        f"{what}['lost']: expected ['a2', 'b1', 'b2'] in any order, got {shown(got['lost'])}"
    assert sorted(got["gained"]) == ["a1"], f"{what}['gained']: expected ['a1'], got {shown(got['gained'])}"


@pytest.mark.points(1)
@pytest.mark.concept("Lost and gained")
@pytest.mark.timeout(QUICK)
def test_lost_and_gained_leave_out_unchanged_questions(submission, tmp_path):
    """questions both models answer right, or both wrong, are neither lost nor gained, under either normalisation"""
    rng = np.random.default_rng(61)
    questions = planted(rng, "trivia", (50, 400), "BBBNNLLG") + planted(rng, "code", (50, 400), "BNNGGL")
    for q in questions[-3:]:
        q["new"] = f"`{q['gold']}`"          # the new model's code answers in backticks
    new_path, base_path, truth = write_runs(tmp_path, questions, 62)
    for normalize in (("strip",), ("strip", "backticks")):
        new = [exact(a, g, normalize) for a, g in zip(truth["new"], truth["gold"])]
        base = [exact(a, g, normalize) for a, g in zip(truth["base"], truth["gold"])]
        expected = {"lost": sorted(i for i, n, b in zip(truth["id"], new, base) if b and not n),
                    "gained": sorted(i for i, n, b in zip(truth["id"], new, base) if n and not b)}
        got = call(submission, "lost_and_gained", ["lost", "gained"], new_path, base_path, normalize)
        what = f"lost_and_gained(new, base, {normalize})"
        assert isinstance(got, dict) and {"lost", "gained"} <= set(got), \
            f"{what}: expected a dict with 'lost' and 'gained', got {shown(got, 80)}"
        for side in ("lost", "gained"):
            ids = list(got[side])
            assert sorted(ids) == expected[side], \
                f"{what}[{shown(side)}]: expected {shown(expected[side])}, got {shown(sorted(ids))}; should not be there: " \
                f"{shown(sorted(set(ids) - set(expected[side])))} (a question both models get right, or both wrong, " \
                "did not change)"


# ---------------------------------------------------------------- accuracy per group

@pytest.mark.points(1)
@pytest.mark.concept("Accuracy per group")
@pytest.mark.timeout(QUICK)
def test_accuracy_by_category_on_the_shipped_results(submission):
    """code falls from 0.65 to 0.45 under exact match, arithmetic rises from 0.55 to 0.75"""
    rows = probes.table_rows(call(submission, "accuracy_by", ["category", *TABLE], SHIPPED, SHIPPED, "category"),
                             "accuracy_by(shipped, shipped, 'category')", ["category", *TABLE])
    by_category = {row["category"]: row for row in rows}
    for effect, category in (("code_answers_wrapped_in_backticks", "code"), ("arithmetic_improvement", "arithmetic")):
        planted_effect, got = PLANTED[effect], by_category.get(category)
        what = f"accuracy_by(shipped, shipped, 'category'), {shown(category)}"
        assert got is not None, f"{what}: expected a row, got rows for {shown(sorted(by_category))} only"
        expected = (planted_effect["n"], planted_effect["new_accuracy"], planted_effect["baseline_accuracy"])
        assert got["n"] == expected[0] and math.isclose(got["accuracy"], expected[1], abs_tol=1e-4) \
            and math.isclose(got["accuracy_base"], expected[2], abs_tol=1e-4), \
            f"{what}: expected (n, accuracy, accuracy_base) {shown(expected)} (accuracies within 1e-4), " \
            f"got {shown((got['n'], got['accuracy'], got['accuracy_base']))}"
        assert math.isclose(got["delta"], got["accuracy"] - got["accuracy_base"], abs_tol=ACCURACY), \
            f"{what}: expected delta within 1e-9 of accuracy - accuracy_base = " \
            f"{shown(got['accuracy'] - got['accuracy_base'])}, got {shown(got['delta'])}"


@pytest.mark.points(1)
@pytest.mark.concept("Accuracy per group")
@pytest.mark.timeout(QUICK)
def test_accuracy_by_two_columns_counts_unanswered_questions(submission, tmp_path):
    """by a list of two columns, one the README never names; questions the new model left unanswered count in n"""
    rng = np.random.default_rng(63)
    questions = []
    for category in ("geo", "chem", "law"):
        for language in ("en", "fr"):
            outcomes = "".join(rng.choice(list("BBLGNU"), size=int(rng.integers(3, 8))))
            questions += planted(rng, category, (30, 900), outcomes, language=language)
    new_path, base_path, truth = write_runs(tmp_path, questions, 64)
    assert truth["new"].isna().any()
    keys = ["language", "category"]
    rows = rows_of(submission, "accuracy_by", [*keys, *TABLE], new_path, base_path, keys,
                   what=f"accuracy_by(new, base, {keys})")
    assert_same_rows(rows, expected_table(truth, keys), keys, f"accuracy_by(new, base, {keys})")


@pytest.mark.points(0.5)
@pytest.mark.concept("Accuracy per group")
@pytest.mark.timeout(QUICK)
def test_overall_weighs_every_question_the_same(submission, tmp_path):
    """a category of 40 questions and one of 5: the overall accuracy is over questions, not over categories"""
    rng = np.random.default_rng(65)
    questions = planted(rng, "large", (30, 900), "B" * 22 + "G" * 8 + "N" * 10) + planted(rng, "small", (30, 900), "LLLLN")
    new_path, base_path, truth = write_runs(tmp_path, questions, 66)
    got = call(submission, "overall", TABLE, new_path, base_path)
    assert isinstance(got, dict) and set(TABLE) <= set(got), \
        f"overall(new, base): expected a dict with the keys {TABLE}, got {shown(got, 80)}"
    expected = {"n": len(truth), "accuracy": truth["correct"].mean(), "accuracy_base": truth["correct_base"].mean()}
    expected["delta"] = expected["accuracy"] - expected["accuracy_base"]
    for key, value in expected.items():
        assert same(got[key], value), f"overall(new, base)[{shown(key)}]: expected {shown(value)}, got {shown(got[key])} " \
                                      "(every question weighs the same: not the mean of the categories' accuracies)"


# ---------------------------------------------------------------- length buckets

@pytest.mark.points(1)
@pytest.mark.concept("Length buckets")
@pytest.mark.timeout(QUICK)
def test_length_buckets_keep_empty_buckets(submission, tmp_path):
    """three buckets, the middle one empty: listed with n 0 and no accuracy"""
    rows = probes.table_rows(call(submission, "accuracy_by_length", ["low", "high", *TABLE], *two_runs(tmp_path),
                                  [0, 1000, 2000, 3000]),
                             "accuracy_by_length(new, base, [0, 1000, 2000, 3000])", ["low", "high", *TABLE])
    got = [(row["low"], row["high"], row["n"]) for row in rows]
    what = "accuracy_by_length(new, base, [0, 1000, 2000, 3000])"
    assert got == [(0, 1000, 3), (1000, 2000, 0), (2000, 3000, 1)], \
        f"{what}: expected (low, high, n) per bucket [(0, 1000, 3), (1000, 2000, 0), (2000, 3000, 1)], got {shown(got)}"
    empty = rows[1]["accuracy"]
    assert empty is None or math.isnan(empty), f"{what}: expected the empty bucket's accuracy NaN or None, got {shown(empty)}"


@pytest.mark.points(0.5)
@pytest.mark.concept("Length buckets")
@pytest.mark.timeout(QUICK)
def test_a_prompt_on_an_edge_is_in_the_bucket_below(submission, tmp_path):
    """prompts of exactly 250 and 900 tokens belong to the buckets that end there: (low, high]"""
    rng = np.random.default_rng(67)
    edges = [0, 250, 900, 3000]
    questions = planted(rng, "mixed", [250, 250, 120, 900, 900, 900, 400, 1500, 2999], "BLGNBLGNB")
    new_path, base_path, truth = write_runs(tmp_path, questions, 68)
    rows = rows_of(submission, "accuracy_by_length", ["low", "high", *TABLE], new_path, base_path, edges,
                   what=f"accuracy_by_length(new, base, {edges})")
    inside = [(truth["prompt_tokens"] > low) & (truth["prompt_tokens"] <= high) for low, high in zip(edges, edges[1:])]
    expected = [(low, high, int(mask.sum())) for (low, high), mask in zip(zip(edges, edges[1:]), inside)]
    got = [(row["low"], row["high"], row["n"]) for row in rows]
    assert got == expected, f"accuracy_by_length(new, base, {edges}): expected (low, high, n) per bucket {shown(expected)}, " \
                            f"got {shown(got)} (a prompt of exactly `high` tokens is in the bucket that ends there)"


@pytest.mark.points(1)
@pytest.mark.concept("Length buckets")
@pytest.mark.timeout(QUICK)
def test_buckets_cross_every_group(submission, tmp_path):
    """by category: every category crossed with every bucket, a category with no long prompt included"""
    rng = np.random.default_rng(69)
    edges = [0, 600, 5000]
    questions = planted(rng, "poems", (20, 600), "BBLGN") + planted(rng, "poems", (601, 5000), "LLNB") \
        + planted(rng, "sums", (20, 600), "BGGNU")
    new_path, base_path, truth = write_runs(tmp_path, questions, 70)
    # a categorical key with observed=False: every category crossed with every bucket, the empty ones too
    expected = expected_table(truth.assign(bucket=pd.cut(truth["prompt_tokens"], edges)), ["category", "bucket"])
    expected["low"] = [interval.left for interval in expected.pop("bucket")]
    assert (expected["n"] == 0).any()
    rows = rows_of(submission, "accuracy_by_length", ["category", "low", "high", *TABLE], new_path, base_path, edges,
                   by="category", what=f"accuracy_by_length(new, base, {edges}, by='category')")
    assert_same_rows(rows, expected, ["category", "low"], f"accuracy_by_length(edges={edges}, by='category')")


# ---------------------------------------------------------------- the slice the average hides

SLICE_KEEP = ["category", "low", "high", *TABLE]
SLICE_EDGES = [0, 500, 4000]
SHORT_PROMPTS, LONG_PROMPTS = (10, 500), (501, 4000)


@pytest.mark.points(1)
@pytest.mark.concept("The slice the average hides")
@pytest.mark.timeout(QUICK)
def test_largest_drop_is_long_retrieval(submission):
    """among category x length slices of 30 questions or more, long retrieval prompts lose the most"""
    got = probes.one_row(call(submission, "largest_drop", SLICE_KEEP, SHIPPED, SHIPPED, [0, 2000, 8000]),
                         "largest_drop(shipped, shipped, [0, 2000, 8000])", SLICE_KEEP)
    effect = PLANTED["long_prompt_retrieval_regression"]
    what = "largest_drop(shipped, shipped, [0, 2000, 8000])"
    assert (got["category"], got["low"], got["n"]) == ("retrieval", 2000, effect["n"]), \
        f"{what}: expected the slice 'retrieval' (2000, 8000] of {shown(effect['n'])} questions, " \
        f"got {shown(got['category'])} ({shown(got['low'])}, {shown(got['high'])}] of {shown(got['n'])} questions"
    drop = effect["new_accuracy"] - effect["baseline_accuracy"]
    assert math.isclose(got["delta"], drop, abs_tol=1e-4), \
        f"{what}: expected delta within 1e-4 of {shown(drop)}, got {shown(got['delta'])}"


@pytest.mark.points(0.5)
@pytest.mark.concept("The slice the average hides")
@pytest.mark.timeout(QUICK)
def test_largest_drop_leaves_out_small_slices(submission, tmp_path):
    """a slice of 3 questions loses all of them, below min_count=6: the largest drop is elsewhere"""
    rng = np.random.default_rng(71)
    questions = planted(rng, "alpha", SHORT_PROMPTS, "BBBBLLNG") + planted(rng, "alpha", LONG_PROMPTS, "LLL") \
        + planted(rng, "beta", SHORT_PROMPTS, "BBGGNNB") + planted(rng, "beta", LONG_PROMPTS, "BBBBBLLGNN")
    new_path, base_path, _ = write_runs(tmp_path, questions, 72)
    got = probes.one_row(call(submission, "largest_drop", SLICE_KEEP, new_path, base_path, SLICE_EDGES, min_count=6),
                         "largest_drop(min_count=6)", SLICE_KEEP)
    assert (got["category"], got["low"]) == ("alpha", 0), \
        f"largest_drop(min_count=6): expected the slice 'alpha' (0, 500], got {shown(got['category'])} " \
        f"({shown(got['low'])}, {shown(got['high'])}] of {shown(got['n'])} questions: a slice of fewer than min_count " \
        "questions is no candidate"
    assert same(got["delta"], -1 / 8), f"largest_drop(min_count=6): expected delta {shown(-1 / 8)}, got {shown(got['delta'])}"


@pytest.mark.points(0.5)
@pytest.mark.concept("The slice the average hides")
@pytest.mark.timeout(QUICK)
def test_largest_drop_ties_go_to_the_first_slice(submission, tmp_path):
    """two slices with the same drop: the one listed first (by category, then bucket) is returned"""
    rng = np.random.default_rng(73)
    questions = planted(rng, "ocean", SHORT_PROMPTS, "BBLLLNG") + planted(rng, "lake", LONG_PROMPTS, "LLLBBNG") \
        + planted(rng, "lake", SHORT_PROMPTS, "BBBGNNN") + planted(rng, "ocean", LONG_PROMPTS, "BBBBGNN")
    new_path, base_path, _ = write_runs(tmp_path, questions, 74)
    got = probes.one_row(call(submission, "largest_drop", SLICE_KEEP, new_path, base_path, SLICE_EDGES, min_count=5),
                         "largest_drop(min_count=5)", SLICE_KEEP)
    assert (got["category"], got["low"]) == ("lake", 500), \
        f"largest_drop(min_count=5): expected 'lake' (500, 4000], got {shown(got['category'])} " \
        f"({shown(got['low'])}, {shown(got['high'])}]: 'lake' (500, 4000] and 'ocean' (0, 500] lose the same, and the " \
        "first in accuracy_by_length's order wins"


@pytest.mark.points(0.5)
@pytest.mark.concept("The slice the average hides")
@pytest.mark.timeout(QUICK)
def test_largest_drop_is_none_when_nothing_drops(submission, tmp_path):
    """every slice of min_count questions holds or improves, a smaller one drops: None"""
    rng = np.random.default_rng(75)
    questions = planted(rng, "north", SHORT_PROMPTS, "BBBGGNL") + planted(rng, "north", LONG_PROMPTS, "LL") \
        + planted(rng, "south", LONG_PROMPTS, "BBLGNNN")
    new_path, base_path, _ = write_runs(tmp_path, questions, 76)
    got = call(submission, "largest_drop", SLICE_KEEP, new_path, base_path, SLICE_EDGES, min_count=5)
    assert got is None, f"largest_drop(min_count=5): expected None (no slice of at least 5 questions drops), " \
                        f"got {shown(got, 120)}"


# ---------------------------------------------------------------- is the difference real?

def bootstrap_recipe(truth, where, n_resamples, alpha, seed):
    """The README's recipe, step by step, on the tests' own table."""
    keep = truth["category"].isin(where.get("categories", truth["category"].unique()))
    keep &= truth["prompt_tokens"].between(where.get("min_prompt_tokens", 0), where.get("max_prompt_tokens", 10 ** 9))
    chosen = truth[keep].sort_values("id")
    d = chosen["correct"].astype(int).to_numpy() - chosen["correct_base"].astype(int).to_numpy()
    n = len(d)
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, n, size=(n_resamples, n))
    low, high = np.quantile(d[indices].mean(axis=1), [alpha / 2, 1 - alpha / 2])
    leaves_out_zero = not low <= 0 <= high
    return {"n": n, "delta": d.mean(), "low": low, "high": high, "significant": leaves_out_zero}


@pytest.mark.points(1)
@pytest.mark.concept("Is the difference real?")
@pytest.mark.timeout(QUICK)
def test_bootstrap_tells_the_collapse_from_the_control(submission):
    """the long-retrieval collapse is significant, the long-prompt control is not"""
    for name, significant in (("long_prompt_retrieval_regression", True), ("long_prompts_outside_retrieval_unchanged", False)):
        effect = PLANTED[name]
        got = call(submission, "paired_bootstrap", BOOT, SHIPPED, SHIPPED, effect["where"], n_resamples=2000)
        what = f"paired_bootstrap(shipped, shipped, {shown(effect['where'])}, n_resamples=2000)"
        assert isinstance(got, dict) and got.get("n") == effect["n"], \
            f"{what}: expected n {shown(effect['n'])}, got {shown(got.get('n') if isinstance(got, dict) else got, 80)}"
        assert got["low"] <= got["delta"] <= got["high"], \
            f"{what}: expected low <= delta <= high, got [low, high] [{shown(got['low'])}, {shown(got['high'])}] " \
            f"and delta {shown(got['delta'])}"
        assert got["significant"] is significant, \
            f"{what} ({name}): expected significant {significant}, got {shown(got['significant'])}"


@pytest.mark.points(1)
@pytest.mark.concept("Is the difference real?")
@pytest.mark.timeout(QUICK)
def test_bootstrap_follows_the_recipe(submission, tmp_path):
    """files in two orders, a gain, prompts on the filter's bounds: the interval of the README's recipe, exactly"""
    rng = np.random.default_rng(77)
    questions = planted(rng, "units", [300, 300, 1200, 1200, 700, 800, 299, 1201], "GGGBLBGN") \
        + planted(rng, "units", (301, 1199), "GGBGGNGBGG") + planted(rng, "dates", (50, 3000), "BLLNGBLNBBLG")
    new_path, base_path, truth = write_runs(tmp_path, questions, 78)
    for where, n_resamples, alpha, seed in (({}, 700, 0.1, 17),
                                            ({"categories": ["units"], "min_prompt_tokens": 300,
                                              "max_prompt_tokens": 1200}, 900, 0.05, 4)):
        expected = bootstrap_recipe(truth, where, n_resamples, alpha, seed)
        assert not where or (expected["significant"] and expected["delta"] > 0), \
            f"the test's own recipe: expected the planted gain to read as real, got significant " \
            f"{shown(expected['significant'])} and delta {shown(expected['delta'])}"
        what = f"paired_bootstrap(where={where or None}, n_resamples={n_resamples}, alpha={alpha}, seed={seed})"
        got = call(submission, "paired_bootstrap", BOOT, new_path, base_path, where or None, n_resamples=n_resamples,
                   alpha=alpha, seed=seed)
        assert isinstance(got, dict) and set(BOOT) <= set(got), \
            f"{what}: expected a dict with the keys {BOOT}, got {shown(got, 80)}"
        assert got["n"] == expected["n"], \
            f"{what}: expected n {shown(expected['n'])}, got {shown(got['n'])} (the bounds are inclusive)"
        for key in ("delta", "low", "high"):
            assert same(got[key], expected[key]), \
                f"{what}: expected {key} {shown(expected[key])}, got {shown(got[key])} (questions sorted by id, one " \
                "rng.integers(0, n, size=(n_resamples, n)), the means of correct - correct_base, quantiles alpha / 2 " \
                "and 1 - alpha / 2)"
        assert got["significant"] is expected["significant"], \
            f"{what}: expected significant {shown(expected['significant'])} for [low, high] " \
            f"[{shown(expected['low'])}, {shown(expected['high'])}], got {shown(got['significant'])}"


# ---------------------------------------------------------------- vectorised

TABLE_FUNCTIONS = ("load_results", "paired", "lost_and_gained", "accuracy_by", "overall", "accuracy_by_length",
                   "largest_drop", "paired_bootstrap")
# The columns this README names: a loop over one of them runs once per row.
COLUMNS = {"id", "category", "prompt_tokens", "gold", "pred", "pred_new", "pred_baseline", "pred_base", "correct",
           "correct_base", "n", "accuracy", "accuracy_base", "delta", "low", "high"}
ROW_METHODS = {"iterrows", "itertuples", "iter_rows", "map_elements", "map_rows", "vectorize"}
VALUE_METHODS = {"apply", "map", "transform", "applymap"}
ROW_SEQUENCES = {"tolist", "to_list", "to_numpy", "to_dict", "to_dicts", "iterrows", "itertuples", "iter_rows"}
PYTHON_BUILTINS = {"len", "str", "int", "float", "bool"}


def _grouped(node):
    """Whether a method is called on a groupby (or rolling) object: it runs once per group."""
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and node.attr in ("groupby", "group_by", "rolling", "resample"):
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def _over_rows(node, row_names):
    """Whether an expression yields a table's rows or a column's values: a named column, its
    `.values` or `.index`, `.tolist()` and the like, range(len(...)), or zip, enumerate, list,
    sorted of those; `row_names` are the local names assigned such an expression."""
    if isinstance(node, ast.Name):
        return node.id in row_names
    if isinstance(node, ast.Subscript):                 # table["pred"], table[f"pred_{model}"]
        key = node.slice
        return isinstance(key, ast.JoinedStr) or (isinstance(key, ast.Constant) and key.value in COLUMNS)
    if isinstance(node, ast.Attribute):                 # table.pred, table["pred"].values
        return node.attr in COLUMNS or node.attr in ("values", "index")
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return node.func.attr in ROW_SEQUENCES
        name = getattr(node.func, "id", "")
        if name == "range":
            return any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "len" for a in node.args for n in ast.walk(a))
        if name in ("zip", "enumerate", "list", "sorted", "reversed", "tuple"):
            return any(_over_rows(a, row_names) for a in node.args)
    return False


def _python_function(node, own):
    """A lambda, a function of the module or of the function, a builtin, or a method like str.strip."""
    return isinstance(node, ast.Lambda) or (isinstance(node, ast.Name) and node.id in own) \
        or (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "str")


def _per_row(node, own, row_names):
    """What runs Python once per row at this node, or None."""
    if isinstance(node, (ast.For, ast.comprehension)) and _over_rows(node.iter, row_names):
        return "a Python loop over the rows of a table or the values of a column"
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name) and node.func.id in ("map", "filter") \
            and any(_over_rows(a, row_names) for a in node.args[1:]):
        return f"{node.func.id}() over a column runs Python once per value"
    method = node.func.attr if isinstance(node.func, ast.Attribute) else None
    if method in ROW_METHODS:
        return f".{method}() runs Python once per row"
    if method in VALUE_METHODS and not _grouped(node.func.value):
        if any(k.arg == "axis" and isinstance(k.value, ast.Constant) and k.value.value in (1, "columns")
               for k in node.keywords):
            return f".{method}(..., axis=1) runs Python once per row"
        function = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("func", "arg")), None)
        if function is not None and _python_function(function, own):
            return f".{method}() of a Python function runs it once per value"
    return None


def per_row_code(path):
    """(function, line, what) for each place the table functions, and what they call, run Python once per row."""
    tree = ast.parse(path.read_bytes())     # bytes: Python honours a PEP 263 coding line
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    reached, todo = set(), [name for name in TABLE_FUNCTIONS if name in functions]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += [n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name) and n.id in functions]
    found = []
    for name in sorted(reached):
        body = functions[name]
        own = set(functions) | PYTHON_BUILTINS | {n.name for n in ast.walk(body) if isinstance(n, ast.FunctionDef)} \
            | {t.id for n in ast.walk(body) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda)
               for t in n.targets if isinstance(t, ast.Name)}
        row_names = {t.id for n in ast.walk(body) if isinstance(n, ast.Assign) and _over_rows(n.value, set())
                     for t in n.targets if isinstance(t, ast.Name)}
        for node in ast.walk(body):
            what = _per_row(node, own, row_names)
            if what:
                found.append((name, (node.iter if isinstance(node, ast.comprehension) else node).lineno, what))
    return sorted(found, key=lambda finding: finding[1])


@pytest.mark.points(1)
@pytest.mark.concept("Vectorised, not row by row")
@pytest.mark.timeout(QUICK)
def test_table_functions_run_no_python_per_row(submission, tmp_path):
    """read from your source once lost_and_gained and accuracy_by are right: no iterrows, apply(axis=1), apply of a
    Python function, or loop over rows in the table functions and what they call"""
    why = " (the source is read once the values are right)"
    got = call(submission, "lost_and_gained", ["lost", "gained"], *two_runs(tmp_path))
    assert isinstance(got, dict) and sorted(got.get("lost", [])) == ["a2", "b1", "b2"] \
        and sorted(got.get("gained", [])) == ["a1"], \
        "lost_and_gained(new_path, base_path): expected {'lost': ['a2', 'b1', 'b2'], 'gained': ['a1']} in any order, " \
        f"got {shown(got, 80)}" + why
    rows = rows_of(submission, "accuracy_by", ["category", "n"], *two_runs(tmp_path), "category", what="accuracy_by" + why)
    pairs = sorted((row["category"], row["n"]) for row in rows)
    assert pairs == [("code", 2), ("math", 2)], \
        f"accuracy_by(new, base, 'category'): expected (category, n) [('code', 2), ('math', 2)], got {shown(pairs)}" + why
    found = per_row_code(submission.module_path)
    assert not found, f"{len(found)} place(s) run Python once per row, the first in {found[0][0]} at line " \
                      f"{found[0][1]}: {found[0][2]}; use column operations, merge, groupby and cut"


# ---------------------------------------------------------------- the loss curve and the seed band

def loss_log(folder, name, offset, log_every=1):
    steps = list(range(log_every, 100 * log_every + 1, log_every))
    rows = [{"step": s, "loss": 2.0 + offset + 5.0 / s ** 0.5, "lr": 1e-3, "grad_norm": 1.0, "tokens": 64} for s in steps]
    return write_jsonl(folder / name, rows), steps, [r["loss"] for r in rows]


@pytest.mark.points(1)
@pytest.mark.concept("The loss curve")
@pytest.mark.timeout(QUICK)
def test_loss_curve_is_an_svg_with_a_log_step_axis(submission, tmp_path):
    """an SVG inside out_dir (created), a log x-axis, the logged loss against the step, logged every 3 steps"""
    log_path, steps, losses = loss_log(tmp_path, "log.jsonl", 0.0, log_every=3)
    out_dir = tmp_path / "report" / "figures"
    path = submission.plot_loss_curve(log_path, str(out_dir))
    axes = read_figure(learner_file(path, out_dir))
    assert axes[0].x.scale, axes[0].x.problem
    assert axes[0].x.scale.kind == "log", \
        f"plot_loss_curve: expected a log step axis, got {shown(axes[0].x.scale.kind)}: put it on a log scale " \
        "(set_xscale('log'))"
    assert axes[0].y.scale, axes[0].y.problem
    assert axes[0].lines_following(steps, losses), "no line of the figure draws the logged loss against the step " \
                                                   "(every logged line, unsmoothed, at its step)"


@pytest.mark.points(1)
@pytest.mark.concept("Seeds: a mean and a band")
@pytest.mark.timeout(QUICK)
def test_seed_band_draws_the_mean_and_the_spread(submission, tmp_path):
    """three seeds: one mean line, a band from the lowest to the highest seed"""
    logs = [loss_log(tmp_path, f"seed{i}.jsonl", offset) for i, offset in enumerate((0.0, 0.4, -0.3))]
    steps = logs[0][1]
    out_dir = tmp_path / "figures"
    path = submission.plot_seed_band([log for log, _, _ in logs], str(out_dir))
    axes = read_figure(learner_file(path, out_dir))[0]
    assert axes.x.scale and axes.y.scale, axes.x.problem or axes.y.problem
    assert axes.x.scale.kind == "log", \
        f"plot_seed_band: expected a log step axis, got {shown(axes.x.scale.kind)}: put it on a log scale"
    mean = [sum(log[2][i] for log in logs) / 3 for i in range(len(steps))]
    assert axes.lines_following(steps, mean), "no line of the figure draws the mean loss of the seeds"
    assert not any(axes.lines_following(steps, log[2]) for log in logs), "a seed is drawn as a line of its own"
    miss = axes.band_miss(steps, [min(log[2][i] for log in logs) for i in range(len(steps))],
                          [max(log[2][i] for log in logs) for i in range(len(steps))])
    assert miss is not None, "nothing is shaded: draw the spread with fill_between"
    assert miss[0] <= 0.5, f"plot_seed_band: expected the band within 0.5 pixels of the seeds' lowest and highest " \
                           f"loss, got {shown(round(float(miss[0]), 3))} pixels off at step {miss[1]:g}"
