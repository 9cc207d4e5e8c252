"""Hidden suite for exercise 06 (error analysis with pandas, and the curves). PYTEST_DONT_REWRITE

Every run graded here is generated for the test from the grading's seed (`runs.py`): other
categories, sizes, ids and effects than the shipped file, answers written with whitespace,
backticks or another case, missing answers. Oracles, all in the test process: Python's own string
methods decide what is right (`runs.python_correct`), pandas' own groupby, cut and merge compute
every table from that, NumPy's Generator and quantile follow the bootstrap recipe. Figures are
read from the SVG file the learner's code wrote (grader.suite.plot_reading), never by running
anything beside it; how the table functions are written is read from the learner's source
(`structure.py`).
"""
import json
import math

import numpy as np
import pandas as pd
import pytest

from grader.course import COURSE
from grader.session.submission import StudentError
from grader.suite.checks import shown, sibling_module
from grader.suite.learner_files import learner_file, learner_path
from grader.suite.plot_reading import FigureUnreadable, read_figure
from grader.worker.loading import load_module

runs = sibling_module(__file__, "runs")
structure = sibling_module(__file__, "structure")
probes = load_module(COURSE.exercises / "06_error_analysis" / "probes.py")     # the visible tests' reading, shared

# Accuracies are fractions of at most a few hundred questions and the bootstrap's quantiles
# interpolate between such fractions: correct solutions (pandas and polars alike) agree with the
# oracle to 1e-15; the nearest mutants differ by a whole question, 1 / n >= 1e-3.
EXACT = 1e-12
# A plotted point sits where its data says up to matplotlib's path simplification (1/9 px) and
# the file's six decimals; the nearest mutants (a band from two of the seeds, every other logged
# point) miss by several pixels.
PIXELS = 0.5
TABLE = ["n", "accuracy", "accuracy_base", "delta"]
NORMALIZATIONS = [(), ("strip",), ("strip", "backticks"), ("backticks", "strip"), ("strip", "lower"),
                  ("lower", "backticks", "strip"), ("strip", "backticks", "lower")]

# The orders of the three steps that undo every surface runs.SURFACES writes (strip before backticks: " `x` ").
UNDO_ALL = [("strip", "backticks", "lower"), ("strip", "lower", "backticks"), ("lower", "strip", "backticks")]
UNKNOWN_STEPS = ["casefold", "upper", "Strip", "backtick", "whitespace", "quotes"]

EXACT_MATCH = "Exact match"            # the README sections the tests are about
PAIRING = "Pairing by id"
CHANGES = "Lost and gained"
GROUPS = "Accuracy per group"
BUCKETS = "Length buckets"
SLICE = "The slice the average hides"
BOOTSTRAP = "Is the difference real?"
VECTORISED = "Vectorised, not row by row"
LOSS_CURVE = "The loss curve"
SEEDS = "Seeds: a mean and a band"


def call(submission, function, keep, *args, **kwargs):
    """submission.<function>(*args, **kwargs), its tables read as rows of the columns in `keep`."""
    return submission.probe(getattr(probes, function), keep, *args, **kwargs)


def rows_of(submission, function, keep, *args, **kwargs):
    return probes.table_rows(call(submission, function, keep, *args, **kwargs), f"{function}()", keep)


def raised(submission, function, *args, **kwargs):
    """The name of the exception submission.<function>(*args, **kwargs) raised, or None when it returned."""
    try:
        call(submission, function, [], *args, **kwargs)
    except StudentError as exc:
        if exc.not_implemented:
            raise
        return exc.info["type"]
    return None


def undo_all(rng):
    return UNDO_ALL[int(rng.integers(len(UNDO_ALL)))]


def is_null(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def same(got, expected) -> bool:
    if is_null(expected):
        return is_null(got)
    return isinstance(got, (int, float)) and not is_null(got) and abs(got - expected) <= EXACT


def summary(groups) -> pd.DataFrame:
    """The oracle's table of a grouped `truth` frame: n, both accuracies, delta."""
    table = groups.agg(n=("correct", "size"), accuracy=("correct", "mean"), accuracy_base=("correct_base", "mean"))
    return table.assign(delta=table["accuracy"] - table["accuracy_base"]).reset_index()


def assert_rows_match(got_rows, expected: pd.DataFrame, keys, what):
    """Every expected row, by its keys, with the same n, accuracies and delta; no other rows."""
    __tracebackhide__ = True
    got = {}
    for row in got_rows:
        key = tuple(row[k] for k in keys)
        assert key not in got, f"{what}: the group {dict(zip(keys, key))} comes twice"
        got[key] = row
    expected_keys = [tuple(r[k] for k in keys) for r in expected.to_dict("records")]
    missing = [k for k in expected_keys if k not in got]
    assert not missing, f"{what}: {len(missing)} of {len(expected_keys)} groups are missing, e.g. " \
                        f"{dict(zip(keys, missing[0]))}"
    extra = [k for k in got if k not in set(expected_keys)]
    assert not extra, f"{what}: {len(extra)} rows for groups that are not in the data, e.g. {dict(zip(keys, extra[0]))}"
    for row in expected.to_dict("records"):
        found = got[tuple(row[k] for k in keys)]
        for column in TABLE:
            assert same(found[column], row[column]), \
                f"{what}, group {dict((k, row[k]) for k in keys)}: {column} is {found[column]!r}, expected " \
                f"{row[column]!r} (of {row['n']} questions)"


def correct_by_id(rows, what, column="correct"):
    __tracebackhide__ = True
    for row in rows:
        value = row[column]
        assert isinstance(value, bool), f"{what}: {column} of question {row['id']!r} is {value!r}, expected True or " \
                                        "False (a missing answer is wrong, never null)"
    return {row["id"]: row[column] for row in rows}


# ---------------------------------------------------------------- exact match

def first_difference(got: dict, expected: dict, known: pd.DataFrame, pred="pred", column="correct"):
    for qid, want in expected.items():
        if got.get(qid) != want:
            row = known.set_index("id").loc[qid]
            return f"question {qid!r} (gold {row['gold']!r}, answer {row[pred]!r}): {column} is {got.get(qid)!r}, " \
                   f"expected {want}"
    return None


@pytest.mark.points(2)
@pytest.mark.concept(EXACT_MATCH)
def test_correct_matches_python_string_methods(submission, rng, tmp_path):
    """`correct` for drawn normalisations, answers with whitespace, backticks, other case or none at all"""
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, runs.random_cells(rng), surfaces=list(runs.SURFACES),
                                                    missing=0.15)
    order = runs.file_order(new_path)       # read before any call: the worker may write the file
    for index in rng.permutation(len(NORMALIZATIONS))[:4]:
        normalize = NORMALIZATIONS[index]
        rows = rows_of(submission, "load_results", ["id", "correct"], new_path, "new", normalize)
        what = f"load_results(new run, 'new', normalize={normalize})"
        assert [row["id"] for row in rows] == order, \
            f"{what}: expected one row per line of the file, in the file's order ({len(known)} rows); got {len(rows)}"
        oracle = runs.truth(known, known["pred"].tolist(), known["pred_base"].tolist(), normalize)
        difference = first_difference(correct_by_id(rows, what), dict(zip(oracle["id"], oracle["correct"])), oracle)
        assert difference is None, f"{what}: {difference}"


@pytest.mark.points(1)
@pytest.mark.concept(EXACT_MATCH)
def test_gold_answers_are_normalised_too(submission, rng, tmp_path):
    """gold answers with capitals and surrounding whitespace, compared after lower-casing and stripping both sides"""
    cells = [runs.Cell("extraction", runs.SHORT, both=12, lost=5, gained=5, neither=8),
             runs.Cell("code", runs.MEDIUM, both=10, lost=4, gained=4, neither=6)]
    table = runs.questions(rng, cells)
    table["gold"] = [g + str(rng.choice(["", " ", "\n"])) if i % 2 else g for i, g in enumerate(table["gold"])]
    pred_new = runs.answers(rng, table, "right_new", ["plain", "upper", "spaces"])
    pred_base = runs.answers(rng, table, "right_base", ["plain", "upper"])
    new_path, _ = runs.write_runs(tmp_path, rng, table, pred_new, pred_base)
    normalize = ("strip", "lower")
    oracle = runs.truth(table, pred_new, pred_base, normalize)
    rows = rows_of(submission, "load_results", ["id", "correct"], new_path, "new", normalize)
    what = f"load_results(path, 'new', normalize={normalize})"
    difference = first_difference(correct_by_id(rows, what), dict(zip(oracle["id"], oracle["correct"])), oracle)
    assert difference is None, f"{what}: {difference} (normalise the gold answer as well as the prediction)"


@pytest.mark.points(1)
@pytest.mark.concept(EXACT_MATCH)
def test_default_normalisation_strips_whitespace(submission, rng, tmp_path):
    """called without `normalize`, answers are compared after removing surrounding whitespace only"""
    (new_path, _), known = runs.planted_run(tmp_path, rng, runs.random_cells(rng), surfaces=["plain", "spaces", "backticks"])
    rows = rows_of(submission, "load_results", ["id", "correct"], new_path, "new")
    oracle = runs.truth(known, known["pred"].tolist(), known["pred_base"].tolist(), ("strip",))
    difference = first_difference(correct_by_id(rows, "load_results(path, 'new')"), dict(zip(oracle["id"], oracle["correct"])),
                                  oracle)
    assert difference is None, f"load_results(path, 'new') without normalize: {difference} (the default is ('strip',))"


@pytest.mark.points(1)
@pytest.mark.concept(EXACT_MATCH)
def test_digit_answers_and_ids_stay_text(submission, rng, tmp_path):
    """a run whose ids and answers are all digits: "007" is not "7", "12" is not "12.0", ids come back as written"""
    cells = [runs.Cell("arithmetic", runs.SHORT, both=15, lost=10, gained=5, neither=20)]
    table = runs.questions(rng, cells, digits_only=True)
    pred_new = runs.answers(rng, table, "right_new", ["plain"], missing=0.0, digits_only=True)
    pred_base = runs.answers(rng, table, "right_base", ["plain"], missing=0.0, digits_only=True)
    new_path, _ = runs.write_runs(tmp_path, rng, table, pred_new, pred_base)
    order = runs.file_order(new_path)       # read before the call: the worker may write the file
    rows = rows_of(submission, "load_results", ["id", "gold", "correct"], new_path, "new")
    ids = [row["id"] for row in rows]
    assert ids == order, \
        f"load_results: the ids come back as {ids[:3]}..., the file holds {order[:3]}... " \
        "(read_json turned them into numbers: read with dtype=False)"
    oracle = runs.truth(table, pred_new, pred_base)
    difference = first_difference(correct_by_id(rows, "load_results"), dict(zip(oracle["id"], oracle["correct"])), oracle)
    assert difference is None, f"load_results on digit-only answers: {difference} (answers are text: read with dtype=False)"


@pytest.mark.points(1)
@pytest.mark.concept(EXACT_MATCH)
def test_each_model_reads_its_own_column(submission, rng, tmp_path):
    """a file holding both runs (pred_baseline and pred_new): `model` picks the column"""
    (path, _), known = runs.planted_run(tmp_path, rng, runs.random_cells(rng), wide=True)
    for model, column in (("baseline", "correct_base"), ("new", "correct")):
        rows = rows_of(submission, "load_results", ["id", "correct"], path, model)
        what = f"load_results(path, {model!r})"
        difference = first_difference(correct_by_id(rows, what), dict(zip(known["id"], known[column])), known,
                                      "pred_base" if model == "baseline" else "pred")
        assert difference is None, f"{what} reads pred_{model}: {difference}"


# Answers that only the table's string methods judge right: code beginning with "x" written in capitals (a capital X
# once "backticks" has run), a capital sharp s and a Kelvin sign that str.lower turns into "ß" and "k" (str.upper
# does not), a final sigma that str.lower keeps apart from σ (str.upper and casefold do not); and wrong ones, right
# answers in quotes, which no step removes. Each kind: its gold answers, and how its answer is written from the gold.
EDGE_ANSWERS = {"capitals": ([c for c in runs.CODE if c.startswith("x")], str.upper),
                "backticked_capitals": ([c for c in runs.CODE if c.startswith("x")], lambda gold: f"`{gold.upper()}`"),
                "quoted": (runs.CODE, lambda gold: f"'{gold}'"),
                "double_quoted": (runs.NAMES, lambda gold: f'"{gold}"'),
                "capital_sharp_s": (["Straße", "Gauß", "Weißbier"], lambda gold: gold.replace("ß", "ẞ").upper()),
                "kelvin_sign": (["Kelvin", "Knuth", "Kafka"], lambda gold: "\u212a" + gold[1:].upper()),
                "final_sigma": (["λογος", "κοσμος", "νομος"], lambda gold: gold[:-1] + "σ")}


@pytest.mark.points(1)
@pytest.mark.concept(EXACT_MATCH)
def test_each_step_is_the_string_method_the_table_names(submission, rng, tmp_path):
    """capitals beginning with X, answers in quotes, a capital sharp s, a Kelvin sign, a final sigma: "backticks"
    removes backticks and nothing else, "lower" is str.lower (neither upper nor casefold)"""
    n = int(rng.integers(2, 4)) * len(EDGE_ANSWERS)
    table = runs.questions(rng, [runs.Cell("code", runs.SHORT, both=n)])
    kinds = [list(EDGE_ANSWERS)[k] for k in rng.permutation(np.arange(n) % len(EDGE_ANSWERS))]
    table["gold"] = [str(rng.choice(EDGE_ANSWERS[kind][0])) for kind in kinds]
    pred_new = [EDGE_ANSWERS[kind][1](gold) for kind, gold in zip(kinds, table["gold"])]
    new_path, _ = runs.write_runs(tmp_path, rng, table, pred_new, list(table["gold"]))
    for normalize in (("strip", "backticks", "lower"), ("backticks", "lower")):
        oracle = runs.truth(table, pred_new, list(table["gold"]), normalize)
        rows = rows_of(submission, "load_results", ["id", "correct"], new_path, "new", normalize)
        what = f"load_results(path, 'new', normalize={normalize})"
        difference = first_difference(correct_by_id(rows, what), dict(zip(oracle["id"], oracle["correct"])), oracle)
        assert difference is None, f"{what}: {difference} (each step is the str method of the table: .str.strip('`') " \
                                   "removes backticks only, .str.lower() lowers)"


@pytest.mark.points(1)
@pytest.mark.concept(EXACT_MATCH)
def test_an_unknown_step_raises_value_error(submission, rng, tmp_path):
    """a normalisation step that is not in the table, alone or among known ones, raises ValueError"""
    (new_path, _), _ = runs.planted_run(tmp_path, rng, runs.random_cells(rng, sizes=(3, 10)))
    unknown = str(rng.choice(UNKNOWN_STEPS))
    known = [str(step) for step in rng.permutation(["strip", "backticks", "lower"])][:int(rng.integers(1, 3))]
    mixed = tuple(known[:1] + [unknown] + known[1:]) if rng.random() < 0.5 else (*known, unknown)
    for normalize in ((unknown,), mixed):
        got = raised(submission, "load_results", new_path, "new", normalize)
        assert got == "ValueError", f"load_results(path, 'new', normalize={normalize}): {unknown!r} is not a step of " \
                                    "the table; expected a ValueError, " + ("got a result" if got is None else f"got {got}")


# ---------------------------------------------------------------- pairing by id

@pytest.mark.points(2)
@pytest.mark.concept(PAIRING)
def test_paired_pairs_the_runs_by_id(submission, rng, tmp_path):
    """two files listing the questions in different orders: one row per question, correct and correct_base by id,
    both runs normalised alike"""
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, runs.random_cells(rng))
    rows = rows_of(submission, "paired", ["id", "correct", "correct_base"], new_path, base_path)
    assert len(rows) == len(known), \
        f"paired: {len(rows)} rows for {len(known)} questions (a merge without on='id' multiplies the rows)"
    ids = [row["id"] for row in rows]
    assert sorted(ids) == sorted(known["id"]), "paired: every question once, each by its id"
    got = {row["id"]: (row["correct"], row["correct_base"]) for row in rows}
    expected = dict(zip(known["id"], zip(known["correct"], known["correct_base"])))
    swapped = sum(got[i] == (b, a) and a != b for i, (a, b) in expected.items())
    wrong = [i for i in expected if got[i] != expected[i]]
    if wrong and swapped == len(wrong):
        pytest.fail(f"paired: correct and correct_base are swapped on {swapped} questions: correct is the new run's "
                    "(suffixes=('', '_base') marks the baseline's columns)")
    assert not wrong, f"paired: {len(wrong)} of {len(known)} questions are paired with another question's answers, e.g. " \
                      f"{wrong[0]!r}: (correct, correct_base) is {got[wrong[0]]}, expected {expected[wrong[0]]} " \
                      "(pair on id, not by position)"
    # both runs written with whitespace, backticks and capitals: normalize applies to the baseline's answers too
    normalize = undo_all(rng)
    (new_path, base_path), known = runs.planted_run(tmp_path / "normalised", rng, runs.random_cells(rng),
                                                    surfaces=list(runs.SURFACES), normalize=normalize)
    rows = rows_of(submission, "paired", ["id", "correct", "correct_base"], new_path, base_path, normalize)
    what = f"paired(new, base, normalize={normalize})"
    for column, pred in (("correct", "pred"), ("correct_base", "pred_base")):
        difference = first_difference(correct_by_id(rows, what, column), dict(zip(known["id"], known[column])), known,
                                      pred, column)
        assert difference is None, f"{what}: {difference} (both runs use the same normalize)"


@pytest.mark.points(1)
@pytest.mark.concept(PAIRING)
def test_paired_on_one_file_holding_both_runs(submission, rng, tmp_path):
    """the shipped layout, one file with pred_baseline and pred_new, passed as both paths"""
    (path, _), known = runs.planted_run(tmp_path, rng, runs.random_cells(rng), wide=True)
    rows = rows_of(submission, "paired", ["id", "correct", "correct_base"], path, path)
    got = {row["id"]: (row["correct"], row["correct_base"]) for row in rows}
    expected = dict(zip(known["id"], zip(known["correct"], known["correct_base"])))
    assert len(rows) == len(known) and got == expected, \
        f"paired(path, path) on a file of both runs: {len(rows)} rows for {len(known)} questions, " \
        f"{sum(got.get(i) != e for i, e in expected.items())} paired wrongly"


# ---------------------------------------------------------------- lost and gained

def check_changes(got, known, what):
    __tracebackhide__ = True
    assert isinstance(got, dict) and {"lost", "gained"} <= set(got), \
        f"{what} returned {shown(got, 80)}, expected {{'lost': [...], 'gained': [...]}}"
    expected = {"lost": sorted(known.query("not correct and correct_base")["id"]),
                "gained": sorted(known.query("correct and not correct_base")["id"])}
    for side, other in (("lost", "gained"), ("gained", "lost")):
        ids = got[side]
        assert isinstance(ids, list), f"{what}[{side!r}] is {type(ids).__name__}, expected a list of ids"
        assert len(ids) == len(set(ids)), f"{what}[{side!r}] lists {len(ids) - len(set(ids))} ids more than once"
        if sorted(ids) != expected[side] and sorted(ids) == expected[other]:
            pytest.fail(f"{what}: {side!r} holds the {other} questions: lost is baseline right and new wrong")
        assert sorted(ids) == expected[side], \
            f"{what}[{side!r}]: {len(ids)} ids, expected {len(expected[side])}; " \
            f"{len(set(ids) - set(expected[side]))} should not be there, {len(set(expected[side]) - set(ids))} are missing"


@pytest.mark.points(2)
@pytest.mark.concept(CHANGES)
def test_lost_and_gained_questions(submission, rng, tmp_path):
    """the ids of the questions the new model lost and gained, against pandas' own merge and query"""
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, runs.random_cells(rng))
    check_changes(call(submission, "lost_and_gained", ["lost", "gained"], new_path, base_path), known,
                  "lost_and_gained(new, base)")


@pytest.mark.points(1)
@pytest.mark.concept(CHANGES)
def test_lost_and_gained_follow_the_normalisation(submission, rng, tmp_path):
    """answers in backticks are lost under exact match and kept once backticks are stripped"""
    cells = runs.random_cells(rng, categories=["code", "retrieval"])
    table = runs.questions(rng, cells)
    pred_new = runs.answers(rng, table, "right_new", ["plain", "backticks", "spaced_backticks"])
    pred_base = runs.answers(rng, table, "right_base", ["plain", "spaces"])
    new_path, base_path = runs.write_runs(tmp_path, rng, table, pred_new, pred_base)
    for normalize in (("strip",), ("strip", "backticks")):
        check_changes(call(submission, "lost_and_gained", ["lost", "gained"], new_path, base_path, normalize),
                      runs.truth(table, pred_new, pred_base, normalize), f"lost_and_gained(new, base, {normalize})")


# ---------------------------------------------------------------- accuracy per group

def with_single_question(rng, cells):
    """The cells and a category of one question, which the baseline gets right and the new run not."""
    name = next(c for c in rng.permutation(runs.CATEGORIES) if c not in {cell.category for cell in cells})
    return [*cells, runs.Cell(str(name), runs.SHORT, lost=1)]


@pytest.mark.points(2)
@pytest.mark.concept(GROUPS)
def test_accuracy_by_category_against_pandas(submission, rng, tmp_path):
    """n, both accuracies and delta per category, a category of one question included"""
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, with_single_question(rng, runs.random_cells(rng)))
    rows = rows_of(submission, "accuracy_by", ["category", *TABLE], new_path, base_path, "category")
    assert_rows_match(rows, summary(known.groupby("category")), ["category"], "accuracy_by(new, base, 'category')")


@pytest.mark.points(2)
@pytest.mark.concept(GROUPS)
def test_accuracy_by_two_columns(submission, rng, tmp_path):
    """grouping by a list of columns, one of them a question column the README never names; answers that need the
    drawn normalisation"""
    normalize = undo_all(rng)
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, runs.random_cells(rng), surfaces=list(runs.SURFACES),
                                                    normalize=normalize)
    by = ["source", "category"] if rng.random() < 0.5 else ["category", "source"]
    rows = rows_of(submission, "accuracy_by", [*by, *TABLE], new_path, base_path, by, normalize)
    assert_rows_match(rows, summary(known.groupby(by)), by, f"accuracy_by(new, base, {by}, normalize={normalize})")


@pytest.mark.points(1)
@pytest.mark.concept(GROUPS)
def test_n_counts_unanswered_questions(submission, rng, tmp_path):
    """a run that leaves many questions unanswered: n counts them, and they count as wrong"""
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, runs.random_cells(rng, sizes=(10, 40)), missing=0.6)
    assert known["pred"].isna().any()
    rows = rows_of(submission, "accuracy_by", ["category", *TABLE], new_path, base_path, "category")
    assert_rows_match(rows, summary(known.groupby("category")), ["category"],
                      "accuracy_by on a run with unanswered questions")


@pytest.mark.points(1)
@pytest.mark.concept(GROUPS)
def test_overall_weighs_every_question_the_same(submission, rng, tmp_path):
    """categories of very different sizes and accuracies: the overall accuracy is over questions, not categories;
    by default and, on answers that need it, with a drawn normalisation"""
    big, small = (str(c) for c in rng.choice(runs.CATEGORIES, size=2, replace=False))
    cells = [runs.Cell(big, runs.SHORT, both=int(rng.integers(150, 200)), lost=10, gained=30, neither=10),
             runs.Cell(small, runs.LONG, both=2, lost=6, gained=1, neither=int(rng.integers(8, 12)))]
    normalize = undo_all(rng)
    plain = runs.planted_run(tmp_path, rng, cells)
    written = runs.planted_run(tmp_path / "normalised", rng, cells, surfaces=list(runs.SURFACES), normalize=normalize)
    for ((new_path, base_path), known), args in ((plain, ()), (written, (normalize,))):
        expected = {"n": len(known), "accuracy": float(known["correct"].mean()),
                    "accuracy_base": float(known["correct_base"].mean())}
        expected["delta"] = expected["accuracy"] - expected["accuracy_base"]
        got = call(submission, "overall", TABLE, new_path, base_path, *args)
        what = "overall(new, base" + "".join(f", normalize={a}" for a in args) + ")"
        assert isinstance(got, dict) and set(TABLE) <= set(got), f"{what} returned {shown(got, 80)}, expected a dict of {TABLE}"
        for key, value in expected.items():
            assert same(got[key], value), f"{what}: {key} is {got[key]!r}, expected {value!r} (every question weighs " \
                                          "the same: not the mean of the categories' accuracies)"


# ---------------------------------------------------------------- length buckets

def drawn_edges(rng, known, n_buckets):
    """Increasing edges around the prompt lengths, some prompts moved exactly onto an edge, one bucket
    left empty; returns the edges and the table with its moved prompts."""
    inner = np.sort(rng.choice(np.arange(100, 7900), size=n_buckets - 1, replace=False))
    edges = [0, *map(int, inner), 8000]
    empty = int(rng.integers(0, n_buckets))
    tokens = known["prompt_tokens"].to_numpy().copy()
    inside = (tokens > edges[empty]) & (tokens <= edges[empty + 1])
    others = [b for b in range(n_buckets) if b != empty]
    tokens[inside] = [int(rng.integers(edges[b] + 1, edges[b + 1] + 1)) for b in rng.choice(others, size=inside.sum())]
    for edge in edges[1:-1]:                    # a few prompts exactly on an edge (that bucket's last value)
        if edge != edges[empty + 1]:
            tokens[rng.choice(len(tokens), size=2, replace=False)] = edge
    return edges, known.assign(prompt_tokens=tokens)


def bucket_oracle(known, edges, by):
    bucket = pd.cut(known["prompt_tokens"], bins=edges, right=True).rename("bucket")
    table = summary(known.groupby([*by, bucket], observed=False))
    intervals = pd.IntervalIndex(table.pop("bucket"))
    return table.assign(low=intervals.left, high=intervals.right)


def run_with_edges(tmp_path, rng, cells, n_buckets, surfaces=("plain", "spaces"), normalize=("strip",)):
    table = runs.questions(rng, cells)
    edges, table = drawn_edges(rng, table, n_buckets)
    pred_new, pred_base = runs.answers(rng, table, "right_new", surfaces), runs.answers(rng, table, "right_base", surfaces)
    paths = runs.write_runs(tmp_path, rng, table, pred_new, pred_base)
    return paths, edges, runs.truth(table, pred_new, pred_base, normalize)


@pytest.mark.points(2)
@pytest.mark.concept(BUCKETS)
def test_buckets_are_right_closed_and_empty_ones_listed(submission, rng, tmp_path):
    """prompts exactly on an edge belong to the bucket that ends there; an empty bucket is listed with n 0"""
    (new_path, base_path), edges, known = run_with_edges(tmp_path, rng, runs.random_cells(rng), int(rng.integers(3, 6)))
    rows = rows_of(submission, "accuracy_by_length", ["low", "high", *TABLE], new_path, base_path, edges)
    expected = bucket_oracle(known, edges, [])
    got = [(row["low"], row["high"]) for row in rows]
    assert got == list(zip(expected["low"], expected["high"])), \
        f"accuracy_by_length(edges={edges}): (low, high) of the rows are {got}, expected every bucket in order"
    for row, want in zip(rows, expected.to_dict("records")):
        for column in TABLE:
            assert same(row[column], want[column]), \
                f"accuracy_by_length(edges={edges}), bucket ({want['low']}, {want['high']}]: {column} is " \
                f"{row[column]!r}, expected {want[column]!r} (a prompt of exactly `high` tokens is in this bucket; " \
                "an empty bucket has n 0 and null accuracies)"


@pytest.mark.points(2)
@pytest.mark.concept(BUCKETS)
def test_buckets_cross_every_group(submission, rng, tmp_path):
    """by a column, named alone or in a list: every group present crossed with every bucket, the empty slices
    included; answers that need the drawn normalisation"""
    cells = runs.random_cells(rng)
    normalize = undo_all(rng)
    (new_path, base_path), edges, known = run_with_edges(tmp_path, rng, cells, int(rng.integers(3, 5)),
                                                         list(runs.SURFACES), normalize)
    expected = bucket_oracle(known, edges, ["category"])
    assert (expected["n"] == 0).any()
    for by in ("category", ["category"]):           # a column name or a list of names, alike
        rows = rows_of(submission, "accuracy_by_length", ["category", "low", *TABLE], new_path, base_path, edges,
                       by=by, normalize=normalize)
        assert_rows_match(rows, expected, ["category", "low"],
                          f"accuracy_by_length(edges={edges}, by={by!r}, normalize={normalize})")


@pytest.mark.points(1)
@pytest.mark.concept(BUCKETS)
def test_buckets_cross_only_the_groups_present(submission, rng, tmp_path):
    """by two columns: a row for every combination of their values present in the data and every bucket, and none
    for a combination the data does not hold (not the cross product of each column's values)"""
    table = runs.questions(rng, runs.random_cells(rng, sizes=(6, 30)))
    edges, table = drawn_edges(rng, table, int(rng.integers(3, 5)))
    lonely = str(rng.choice(sorted(set(table["category"]))))
    table.loc[table["category"] == lonely, "source"] = runs.SOURCES[0]     # (lonely, any other source) is not in the data
    pred_new, pred_base = runs.answers(rng, table, "right_new"), runs.answers(rng, table, "right_base")
    new_path, base_path = runs.write_runs(tmp_path, rng, table, pred_new, pred_base)
    known = runs.truth(table, pred_new, pred_base)
    assert (known["source"] != runs.SOURCES[0]).any()          # another source is in the data, not with `lonely`
    by = ["category", "source"] if rng.random() < 0.5 else ["source", "category"]
    expected = bucket_oracle(known, edges, by).merge(known[by].drop_duplicates(), on=by)     # present groups only
    rows = rows_of(submission, "accuracy_by_length", [*by, "low", *TABLE], new_path, base_path, edges, by=by)
    assert_rows_match(rows, expected, [*by, "low"], f"accuracy_by_length(edges={edges}, by={by})")

# ---------------------------------------------------------------- the slice the average hides

def slice_cells(rng, names, min_count, deltas):
    """One cell per (name, band, delta): `min_count` to 2 * min_count questions, baseline at about
    70%, the new run `delta` away, the changes made of lost and gained questions."""
    cells = []
    for (name, band), delta in zip(names, deltas):
        n = int(rng.integers(min_count, 2 * min_count))
        base_right = int(round(0.7 * n))
        new_right = base_right + int(round(delta * n))
        lost, gained = max(base_right - new_right, 0) + 1, max(new_right - base_right, 0) + 1
        both = base_right - lost
        cells.append(runs.Cell(name, band, both=both, lost=lost, gained=gained, neither=n - both - lost - gained))
    return cells


@pytest.mark.points(2)
@pytest.mark.concept(SLICE)
def test_largest_drop_finds_the_planted_collapse(submission, rng, tmp_path):
    """a collapse in one slice of a category whose other slices improve, a tiny slice losing everything, slices
    of many sizes around them; answers that need the drawn normalisation"""
    min_count = int(rng.integers(15, 30))
    names = [str(c) for c in rng.choice(runs.CATEGORIES, size=4, replace=False)]
    layout = [(names[0], runs.SHORT), (names[0], runs.LONG), (names[1], runs.SHORT), (names[1], runs.MEDIUM),
              (names[2], runs.LONG), (names[3], runs.MEDIUM)]
    deltas = [0.2, -0.4, 0.05, -0.1, -0.05, 0.1]
    cells = slice_cells(rng, layout, min_count, deltas)
    cells.append(runs.Cell(names[3], runs.LONG, lost=int(rng.integers(2, min_count // 2))))     # all lost, too few
    normalize = undo_all(rng)
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, cells, surfaces=list(runs.SURFACES), normalize=normalize)
    edges = [0, runs.SHORT[1], runs.MEDIUM[1], runs.LONG[1]]
    keep = ["category", "low", "high", *TABLE]
    got = probes.one_row(call(submission, "largest_drop", keep, new_path, base_path, edges, min_count=min_count,
                              normalize=normalize), "largest_drop", keep)
    where = (got["category"], got["low"], got["high"])
    if where == (names[3], runs.MEDIUM[1], runs.LONG[1]):
        pytest.fail(f"largest_drop(min_count={min_count}) returned a slice of {got['n']} questions: slices with fewer "
                    "than min_count questions are not candidates")
    assert where == (names[0], runs.MEDIUM[1], runs.LONG[1]), \
        f"largest_drop(min_count={min_count}) returned the slice {where} (delta {got['delta']}), not the one that " \
        "loses the most among slices of at least min_count questions"
    expected = bucket_oracle(known, edges, ["category"]).set_index(["category", "low"]).loc[(names[0], runs.MEDIUM[1])]
    for column in TABLE:
        assert same(got[column], expected[column]), f"largest_drop: {column} is {got[column]!r}, expected {expected[column]!r}"


@pytest.mark.points(1)
@pytest.mark.concept(SLICE)
def test_largest_drop_counts_a_slice_of_exactly_min_count(submission, rng, tmp_path):
    """a slice of exactly min_count questions is a candidate: 30 when min_count is left out, a drawn count when it is
    given; a larger drop one question short of min_count is not"""
    exact, short, over = (str(c) for c in rng.choice(runs.CATEGORIES, size=3, replace=False))
    count = int(rng.integers(31, 46))
    lost = int(rng.integers(10, 14))
    cells = [runs.Cell(exact, runs.LONG, both=8, lost=lost, neither=30 - 8 - lost),             # 30 questions
             runs.Cell(short, runs.SHORT, both=5, lost=18, neither=6),                          # 29, a larger drop
             runs.Cell(over, runs.MEDIUM, both=count // 2, lost=3, neither=count - count // 2 - 3)]
    (new_path, base_path), _ = runs.planted_run(tmp_path, rng, cells)
    edges, keep = [0, runs.SHORT[1], runs.MEDIUM[1], runs.LONG[1]], ["category", "low", "high", *TABLE]
    for kwargs, name, low in (({}, exact, runs.MEDIUM[1]), ({"min_count": count}, over, runs.SHORT[1])):
        what = f"largest_drop({', '.join(f'{k}={v}' for k, v in kwargs.items()) or 'min_count left out'})"
        got = call(submission, "largest_drop", keep, new_path, base_path, edges, **kwargs)
        assert got is not None, f"{what} returned None; a slice of exactly {kwargs.get('min_count', 30)} questions " \
                                "drops (n >= min_count counts it)"
        got = probes.one_row(got, "largest_drop", keep)
        assert (got["category"], got["low"]) == (name, low), \
            f"{what} returned the slice {got['category']!r} ({got['low']}, {got['high']}] of {got['n']} questions, " \
            f"expected {name!r} ({low}, ...]: slices of at least min_count questions (n >= min_count, 30 by " \
            "default) are candidates, smaller ones are not"


@pytest.mark.points(1)
@pytest.mark.concept(SLICE)
def test_largest_drop_ties_go_to_the_first_slice(submission, rng, tmp_path):
    """two slices with the same counts: the first in accuracy_by_length's order wins (group, then bucket)"""
    first, second = sorted(str(c) for c in rng.choice(runs.CATEGORIES, size=2, replace=False))
    n = int(rng.integers(30, 50))
    collapse = dict(both=n // 4, lost=n // 2, gained=0, neither=n - n // 4 - n // 2)
    cells = [runs.Cell(second, runs.SHORT, **collapse), runs.Cell(first, runs.LONG, **collapse),
             runs.Cell(first, runs.SHORT, both=n // 2, lost=2, gained=4, neither=n - n // 2 - 6),
             runs.Cell(second, runs.LONG, both=n // 2, lost=1, gained=2, neither=n - n // 2 - 3)]
    (new_path, base_path), _ = runs.planted_run(tmp_path, rng, cells)
    keep = ["category", "low", "high", *TABLE]
    got = probes.one_row(call(submission, "largest_drop", keep, new_path, base_path, [0, 2000, 8000], min_count=20),
                         "largest_drop", keep)
    assert (got["category"], got["low"]) == (first, 2000), \
        f"largest_drop: two slices lose the same ({first!r} long prompts and {second!r} short ones); got " \
        f"{got['category']!r} ({got['low']}, {got['high']}], expected the first in order: {first!r} (2000, 8000]"


@pytest.mark.points(1)
@pytest.mark.concept(SLICE)
def test_largest_drop_is_none_when_nothing_drops(submission, rng, tmp_path):
    """every slice of min_count questions holds or improves, a small one drops: None"""
    min_count = int(rng.integers(20, 30))
    names = [str(c) for c in rng.choice(runs.CATEGORIES, size=3, replace=False)]
    cells = slice_cells(rng, [(names[0], runs.SHORT), (names[1], runs.SHORT), (names[2], runs.LONG)], min_count,
                        [0.0, 0.1, 0.2])
    cells.append(runs.Cell(names[0], runs.LONG, both=2, lost=min_count // 3, neither=1))
    (new_path, base_path), _ = runs.planted_run(tmp_path, rng, cells)
    got = call(submission, "largest_drop", ["category", "low", "high", *TABLE], new_path, base_path, [0, 2000, 8000],
               min_count=min_count)
    assert got is None, f"largest_drop(min_count={min_count}) returned {shown(got, 120)}: no slice of at least " \
                        f"{min_count} questions drops, expected None"


# ---------------------------------------------------------------- is the difference real?

def differences(known, where):
    """The questions `where` selects, sorted by id: correct - correct_base of each."""
    chosen = known
    if "categories" in where:
        chosen = chosen[chosen["category"].isin(where["categories"])]
    if "min_prompt_tokens" in where:
        chosen = chosen[chosen["prompt_tokens"] >= where["min_prompt_tokens"]]
    if "max_prompt_tokens" in where:
        chosen = chosen[chosen["prompt_tokens"] <= where["max_prompt_tokens"]]
    chosen = chosen.sort_values("id")
    return chosen["correct"].to_numpy(dtype=int) - chosen["correct_base"].to_numpy(dtype=int)


def bootstrap_oracle(known, where, n_resamples, alpha, seed):
    """README's recipe, step by step, on the oracle's table."""
    d = differences(known, where)
    indices = np.random.default_rng(seed).integers(0, len(d), size=(n_resamples, len(d)))
    low, high = np.quantile(d[indices].mean(axis=1), [alpha / 2, 1 - alpha / 2])
    return {"n": len(d), "delta": float(d.mean()), "low": float(low), "high": float(high),
            "significant": bool(low > 0 or high < 0)}


def alpha_between_means(known, rng):
    """An alpha whose lower quantile of the default resamples (10,000, seed 0) of every question falls halfway between
    two different resample means: there one resample more or fewer moves the interval's low end."""
    d = differences(known, {})
    means = np.sort(d[np.random.default_rng(0).integers(0, len(d), size=(DEFAULT_RESAMPLES, len(d)))].mean(axis=1))
    steps = np.flatnonzero(np.diff(means[:DEFAULT_RESAMPLES // 4]) > 0)      # means[i] < means[i + 1], lower tail
    assert len(steps), "the generated run has no spread of resample means"
    return 2 * (int(rng.choice(steps)) + 0.5) / (DEFAULT_RESAMPLES - 1)    # np.quantile's position: i + 0.5


BOOT = ["n", "delta", "low", "high", "significant"]
DEFAULT_RESAMPLES = 10_000          # paired_bootstrap's n_resamples, as the README writes its signature


def check_bootstrap(got, expected, what):
    __tracebackhide__ = True
    assert isinstance(got, dict) and set(BOOT) <= set(got), f"{what} returned {shown(got, 80)}, expected a dict of {BOOT}"
    assert got["n"] == expected["n"], f"{what}: n is {got['n']!r}, expected {expected['n']} selected questions"
    assert same(got["delta"], expected["delta"]), f"{what}: delta is {got['delta']!r}, expected {expected['delta']!r}"
    for key in ("low", "high"):
        assert same(got[key], expected[key]), \
            f"{what}: {key} is {got[key]!r}, expected {expected[key]!r} (questions sorted by id, one " \
            "rng.integers(0, n, size=(n_resamples, n)) of default_rng(seed), each resample's mean of correct - " \
            "correct_base, quantiles alpha / 2 and 1 - alpha / 2)"
    assert got["significant"] is expected["significant"], \
        f"{what}: significant is {got['significant']!r}, expected {expected['significant']} for [{got['low']}, {got['high']}]"


@pytest.mark.points(2)
@pytest.mark.concept(BOOTSTRAP)
def test_bootstrap_follows_the_recipe(submission, rng, tmp_path):
    """drawn filters, seeds, resample counts, alphas and normalisations against the recipe; the default resample
    count and seed"""
    cells = runs.random_cells(rng, sizes=(10, 40))
    normalize = undo_all(rng)
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, cells, surfaces=list(runs.SURFACES), normalize=normalize)
    categories = sorted(set(known["category"]))
    filters = [{}, {"categories": [str(c) for c in rng.choice(categories, size=2, replace=False)]},
               {"min_prompt_tokens": int(rng.integers(300, 3000))},
               {"categories": categories[:1], "max_prompt_tokens": int(rng.integers(1000, 8000))}]
    for where in filters:
        if not bootstrap_oracle(known, where, 1, 0.05, 0)["n"]:
            continue
        n_resamples, alpha = int(rng.integers(300, 2000)), float(rng.choice([0.05, 0.1, 0.2]))
        seed = int(rng.integers(0, 10 ** 6))
        expected = bootstrap_oracle(known, where, n_resamples, alpha, seed)
        got = call(submission, "paired_bootstrap", BOOT, new_path, base_path, where or None, n_resamples=n_resamples,
                   alpha=alpha, seed=seed, normalize=normalize)
        check_bootstrap(got, expected, f"paired_bootstrap(where={where or None}, n_resamples={n_resamples}, alpha={alpha}, "
                                       f"seed={seed}, normalize={normalize})")
    # n_resamples and seed left to their defaults, at an alpha where one resample more or fewer shows
    alpha = alpha_between_means(known, rng)
    expected = bootstrap_oracle(known, {}, DEFAULT_RESAMPLES, alpha, 0)
    got = call(submission, "paired_bootstrap", BOOT, new_path, base_path, alpha=alpha, normalize=normalize)
    check_bootstrap(got, expected, f"paired_bootstrap(alpha={alpha}, normalize={normalize}) with n_resamples and seed "
                                   f"left to their defaults ({DEFAULT_RESAMPLES:_} and 0)")


@pytest.mark.points(2)
@pytest.mark.concept(BOOTSTRAP)
def test_bootstrap_reads_a_collapse_as_real_and_a_control_as_noise(submission, rng, tmp_path):
    """a planted collapse and a planted gain are significant, a planted control (two questions' difference) is not,
    nor is a single question gained or lost, whose interval ends exactly at 0 (the defaults: 10,000 resamples,
    alpha 0.05, seed 0)"""
    collapse, gain, control, touch_gain, touch_loss, *others = \
        (str(c) for c in rng.choice(runs.CATEGORIES, size=7, replace=False))
    n, m = int(rng.integers(60, 90)), int(rng.integers(20, 40))
    cells = [runs.Cell(collapse, runs.LONG, both=n // 3, lost=n // 3, gained=2, neither=n - 2 * (n // 3) - 2),
             runs.Cell(gain, runs.LONG, both=n // 3, lost=2, gained=n // 3, neither=n - 2 * (n // 3) - 2),
             runs.Cell(control, runs.LONG, both=n // 2, lost=4, gained=6, neither=n - n // 2 - 10),
             # one question of m apart: a third of the resamples miss it, so one end of the interval is exactly 0
             runs.Cell(touch_gain, runs.LONG, both=m // 2, gained=1, neither=m - m // 2 - 1),
             runs.Cell(touch_loss, runs.LONG, both=m // 2, lost=1, neither=m - m // 2 - 1),
             *runs.random_cells(rng, categories=others)]
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, cells)
    for name, significant, end in ((collapse, True, None), (gain, True, None), (control, False, None),
                                   (touch_gain, False, "low"), (touch_loss, False, "high")):
        where = {"categories": [name], "min_prompt_tokens": runs.LONG[0]}
        expected = bootstrap_oracle(known, where, DEFAULT_RESAMPLES, 0.05, 0)
        assert expected["significant"] is significant and (end is None or expected[end] == 0)
        got = call(submission, "paired_bootstrap", BOOT, new_path, base_path, where)
        touching = f"; the interval's {end} is 0: it contains 0 (low > 0 or high < 0)" if end else ""
        assert isinstance(got, dict) and got.get("significant") is significant, \
            f"paired_bootstrap(where={where}): significant is {got.get('significant') if isinstance(got, dict) else got!r}, " \
            f"expected {significant} (delta {expected['delta']:.3f} on {expected['n']} questions{touching})"
        check_bootstrap(got, expected, f"paired_bootstrap(where={where}) with the default n_resamples, alpha and seed")


@pytest.mark.points(1)
@pytest.mark.concept(BOOTSTRAP)
def test_bootstrap_filter_bounds_are_inclusive(submission, rng, tmp_path):
    """prompts exactly at min_prompt_tokens and max_prompt_tokens are selected"""
    table = runs.questions(rng, runs.random_cells(rng, sizes=(15, 40)))
    low, high = int(rng.integers(500, 1500)), int(rng.integers(2500, 6000))
    category = str(table["category"].value_counts().index[0])
    rows = rng.choice(np.flatnonzero(table["category"] == category), size=6, replace=False)
    tokens = table["prompt_tokens"].to_numpy().copy()
    tokens[rows] = [low, low, low, high, high, high]        # on the bounds, in the category selected
    table = table.assign(prompt_tokens=tokens)
    pred_new, pred_base = runs.answers(rng, table, "right_new"), runs.answers(rng, table, "right_base")
    new_path, base_path = runs.write_runs(tmp_path, rng, table, pred_new, pred_base)
    known = runs.truth(table, pred_new, pred_base)
    where = {"categories": [category, "no such category"], "min_prompt_tokens": low, "max_prompt_tokens": high}
    got = call(submission, "paired_bootstrap", BOOT, new_path, base_path, where, n_resamples=500, seed=3)
    check_bootstrap(got, bootstrap_oracle(known, where, 500, 0.05, 3), f"paired_bootstrap(where={where})")


# ---------------------------------------------------------------- vectorised

@pytest.mark.points(2)
@pytest.mark.concept(VECTORISED)
def test_table_functions_run_no_python_per_row(submission, rng, tmp_path):
    """from the source: no iterrows, row-wise apply, per-value Python function or loop over rows in the table
    functions and what they call (read once their results are right)"""
    (new_path, base_path), known = runs.planted_run(tmp_path, rng, runs.random_cells(rng, sizes=(5, 20)))
    why = " (the structure is graded once the values are right)"
    check_changes(call(submission, "lost_and_gained", ["lost", "gained"], new_path, base_path), known,
                  "lost_and_gained" + why)
    rows = rows_of(submission, "accuracy_by_length", ["category", "low", *TABLE], new_path, base_path, [0, 2000, 8000],
                   by="category")
    assert_rows_match(rows, bucket_oracle(known, [0, 2000, 8000], ["category"]), ["category", "low"],
                      "accuracy_by_length" + why)
    got = call(submission, "paired_bootstrap", BOOT, new_path, base_path, n_resamples=200)
    check_bootstrap(got, bootstrap_oracle(known, {}, 200, 0.05, 0), "paired_bootstrap" + why)
    try:
        source = structure.Source(submission.module_path)
    except (OSError, SyntaxError, ValueError) as exc:
        pytest.fail(f"could not read {submission.module_path.name}: {type(exc).__name__}: {exc}")
    found = source.per_row_code()
    assert not found, (f"{len(found)} place(s) run Python once per row, the first in {found[0].function} at line "
                       f"{found[0].line}: `{found[0].code}`: {found[0].what}; use column operations, merge, groupby "
                       "and cut")


# ---------------------------------------------------------------- the loss curve

def drawn_logs(folder, rng, seeds):
    """`seeds` runs of one configuration: log.jsonl files logging every `log_every` steps, each seed
    its own offset and noise; returns the paths, the steps and the losses (seeds x steps)."""
    log_every, count = int(rng.choice([1, 2, 5, 10])), int(rng.integers(50, 110))
    steps = log_every * np.arange(1, count + 1)
    floor, amplitude, power = rng.uniform(1.5, 3.0), rng.uniform(3.0, 6.0), rng.uniform(0.3, 0.7)
    # offsets apart by 0.15 or more (several pixels), the extremes never both on seeds 0 and 1: a band
    # between two seeds misses the others
    offsets = np.linspace(-0.4, 0.4, seeds) + rng.uniform(-0.02, 0.02, size=seeds)
    ranks = list(rng.permutation(seeds))
    middle = next(i for i, rank in enumerate(ranks) if 0 < rank < seeds - 1) if seeds >= 3 else 0
    ranks[0], ranks[middle] = ranks[middle], ranks[0]
    spread = offsets[ranks]
    losses = np.array([floor + offset + amplitude * steps ** -power + rng.normal(0, 0.03, len(steps)) for offset in spread])
    paths = []
    for seed, curve in enumerate(losses):
        path = folder / f"seed{seed}" / "log.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [{"step": int(s), "loss": float(loss), "lr": 1e-3 * min(1.0, s / 20), "grad_norm": float(1 + loss / 10),
                  "tokens": 512} for s, loss in zip(steps, curve)]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        paths.append(str(path))
    return paths, steps, losses


def read_axes(path, out_dir, what):
    """The one Axes of the figure a plotting function saved, read from its SVG file."""
    __tracebackhide__ = True
    learner_path(path, out_dir)
    data = learner_file(path, out_dir)
    try:
        axes = read_figure(data)
    except FigureUnreadable as exc:
        pytest.fail(f"{what} wrote {str(path).rsplit('/', 1)[-1]}, which cannot be read as a matplotlib SVG: {exc}")
    drawing = [a for a in axes if a.lines or a.fills]
    assert drawing, f"{what}: the figure's Axes draw no line and no band"
    axes = drawing[0]
    assert axes.x.scale is not None, f"{what}: {axes.x.problem}"
    assert axes.y.scale is not None, f"{what}: {axes.y.problem}"
    assert axes.x.scale.kind == "log", f"{what}: the step axis is linear; put it on a log scale " \
                                       "(axes.set_xscale('log')): the first steps matter most"
    return axes


@pytest.mark.points(1)
@pytest.mark.concept(LOSS_CURVE)
def test_loss_curve_is_an_svg_in_out_dir(submission, rng, tmp_path):
    """the figure is an SVG file inside out_dir (created if missing), its text kept as text, and its path is returned"""
    (log,), _, _ = drawn_logs(tmp_path / "run", rng, 1)
    out_dir = tmp_path / "report" / "figures"
    path = submission.plot_loss_curve(log, str(out_dir))
    assert isinstance(path, (str, type(out_dir))), f"plot_loss_curve returned {type(path).__name__}, expected the path"
    data = learner_file(path, out_dir)
    assert data.lstrip().startswith((b"<?xml", b"<svg")), "plot_loss_curve wrote no SVG file (savefig(path, format='svg'))"
    try:
        axes = read_figure(data)
    except FigureUnreadable as exc:
        pytest.fail(f"plot_loss_curve's SVG cannot be read: {exc}")
    problems = [a.x.problem or a.y.problem for a in axes if a.x.scale is None or a.y.scale is None]
    assert not problems, f"plot_loss_curve's figure: {problems[0]}"


@pytest.mark.points(2)
@pytest.mark.concept(LOSS_CURVE)
def test_loss_curve_draws_every_logged_point_on_log_steps(submission, rng, tmp_path):
    """a log step axis and one line through every logged (step, loss), for drawn run lengths and logging intervals,
    saved into an out_dir that already exists"""
    (log,), steps, losses = drawn_logs(tmp_path / "run", rng, 1)
    out_dir = tmp_path / "figures"
    out_dir.mkdir()
    axes = read_axes(submission.plot_loss_curve(log, str(out_dir)), out_dir, "plot_loss_curve")
    assert axes.lines_following(steps, losses[0], PIXELS), \
        f"plot_loss_curve: none of the {len(axes.lines)} line(s) draws the logged loss against the step " \
        f"({len(steps)} points, steps {steps[0]} to {steps[-1]}): every logged line, unsmoothed"


# ---------------------------------------------------------------- seeds: a mean and a band

@pytest.mark.points(2)
@pytest.mark.concept(SEEDS)
def test_seed_band_draws_the_mean_and_the_full_range(submission, rng, tmp_path):
    """three to five seeds: a line at their mean, a band from the lowest to the highest seed at every step, saved
    into an out_dir that already exists"""
    paths, steps, losses = drawn_logs(tmp_path / "runs", rng, int(rng.integers(3, 6)))
    out_dir = tmp_path / "figures"
    out_dir.mkdir()
    axes = read_axes(submission.plot_seed_band(paths, str(out_dir)), out_dir, "plot_seed_band")
    assert axes.lines_following(steps, losses.mean(axis=0), PIXELS), \
        f"plot_seed_band: no line draws the mean over the {len(paths)} seeds at each step"
    miss = axes.band_miss(steps, losses.min(axis=0), losses.max(axis=0))
    assert miss is not None, "plot_seed_band: nothing is shaded; draw the seeds' spread with fill_between"
    assert miss[0] <= PIXELS, \
        f"plot_seed_band: the band misses the range of the {len(paths)} seeds by {miss[0]:.1f} pixels at step " \
        f"{miss[1]:g}: it must span the lowest to the highest seed, of all of them"


@pytest.mark.points(1)
@pytest.mark.concept(SEEDS)
def test_seed_band_draws_no_seed_alone(submission, rng, tmp_path):
    """no seed is drawn as a line of its own"""
    paths, steps, losses = drawn_logs(tmp_path / "runs", rng, int(rng.integers(3, 6)))
    out_dir = tmp_path / "figures"
    axes = read_axes(submission.plot_seed_band(paths, str(out_dir)), out_dir, "plot_seed_band")
    alone = [seed for seed, curve in enumerate(losses) if axes.lines_following(steps, curve, PIXELS)]
    assert not alone, f"plot_seed_band draws {len(alone)} of the {len(paths)} seeds as lines of their own: draw the " \
                      "mean and a band, never the seeds one by one"
