"""Visible tests for exercise 06. Run: pytest exercises/06_error_analysis

They use a few hand-written runs and the shipped results (datasets/eval_results), whose planted
effects are documented in datasets/eval_results/planted_regressions.json. The graded suite
checks much more, on runs it generates for each grading: other categories, sizes and effects,
every normalisation, ties, empty slices, drawn seeds for the bootstrap, figures of drawn runs.
"""
import json
import math

import pytest

from grader.core.checks import learner_file, sibling_module
from grader.core.plot_reading import read_figure
from grader.tasks import DATASETS, EXERCISES

probes = sibling_module(EXERCISES / "06_error_analysis" / "test_analysis.py", "probes")   # by path: a notebook has no __file__

SHIPPED = str(DATASETS / "eval_results" / "eval_results.jsonl")
PLANTED = {e["name"]: e for e in json.loads((DATASETS / "eval_results" / "planted_regressions.json").read_text())["effects"]}
ACCURACY = 1e-9      # accuracies are fractions of a few hundred questions: only rounding may differ
TABLE = ["n", "accuracy", "accuracy_base", "delta"]


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


def call(submission, function, keep, *args, **kwargs):
    """submission.<function>(*args, **kwargs), its tables read as rows of the columns in `keep`."""
    return submission.probe(getattr(probes, function), keep, *args, **kwargs)


@pytest.mark.points(1)
@pytest.mark.concept("Exact match")
def test_load_results_marks_exact_matches(submission, tmp_path):
    """whitespace is stripped by default, backticks only when asked, a missing answer is wrong"""
    new_path, _ = two_runs(tmp_path)
    for normalize, expected in ((("strip",), [True, False, False, False]), (("strip", "backticks"), [True, False, True, False])):
        rows = probes.table_rows(call(submission, "load_results", ["id", "correct"], new_path, "new", normalize),
                                 f"load_results(path, 'new', {normalize})", ["id", "correct"])
        got = [row["correct"] for row in rows]
        assert [row["id"] for row in rows] == ["a1", "a2", "b1", "b2"], "load_results keeps the file's rows, in order"
        assert got == expected, f"load_results(path, 'new', normalize={normalize}): correct is {got}, expected {expected}"


@pytest.mark.points(1)
@pytest.mark.concept("Pairing by id")
def test_paired_matches_questions_by_id(submission, tmp_path):
    """the baseline's file lists the questions in reverse: pairing must go by id, not by position"""
    rows = probes.table_rows(call(submission, "paired", ["id", "correct", "correct_base"], *two_runs(tmp_path)),
                             "paired(new_path, base_path)", ["id", "correct", "correct_base"])
    got = {row["id"]: (row["correct"], row["correct_base"]) for row in rows}
    expected = {"a1": (True, False), "a2": (False, True), "b1": (False, True), "b2": (False, True)}
    assert len(rows) == 4 and got == expected, f"paired: (correct, correct_base) by id is {got}, expected {expected}"


@pytest.mark.points(1)
@pytest.mark.concept("Lost and gained")
def test_lost_and_gained(submission, tmp_path):
    """lost: the baseline right and the new model wrong; gained: the other way round"""
    got = call(submission, "lost_and_gained", ["lost", "gained"], *two_runs(tmp_path))
    assert isinstance(got, dict) and {"lost", "gained"} <= set(got), f"lost_and_gained returned {got!r}"
    assert sorted(got["lost"]) == ["a2", "b1", "b2"], f"lost: got {got['lost']}, expected a2, b1 and b2"
    assert sorted(got["gained"]) == ["a1"], f"gained: got {got['gained']}, expected a1"


@pytest.mark.points(1)
@pytest.mark.concept("Accuracy per group")
def test_accuracy_by_category_on_the_shipped_results(submission):
    """code falls from 0.65 to 0.45 under exact match, arithmetic rises from 0.55 to 0.75"""
    rows = probes.table_rows(call(submission, "accuracy_by", ["category", *TABLE], SHIPPED, SHIPPED, "category"),
                             "accuracy_by(shipped, shipped, 'category')", ["category", *TABLE])
    by_category = {row["category"]: row for row in rows}
    for effect, category in (("code_answers_wrapped_in_backticks", "code"), ("arithmetic_improvement", "arithmetic")):
        planted, got = PLANTED[effect], by_category.get(category)
        assert got is not None, f"accuracy_by: no row for {category!r}; rows for {sorted(by_category)}"
        expected = (planted["n"], planted["new_accuracy"], planted["baseline_accuracy"])
        assert got["n"] == expected[0] and math.isclose(got["accuracy"], expected[1], abs_tol=1e-4) \
            and math.isclose(got["accuracy_base"], expected[2], abs_tol=1e-4), \
            f"{category}: (n, accuracy, accuracy_base) is {(got['n'], got['accuracy'], got['accuracy_base'])}, expected {expected}"
        assert math.isclose(got["delta"], got["accuracy"] - got["accuracy_base"], abs_tol=ACCURACY), \
            f"{category}: delta is {got['delta']}, expected accuracy - accuracy_base"


@pytest.mark.points(1)
@pytest.mark.concept("Length buckets")
def test_length_buckets_keep_empty_buckets(submission, tmp_path):
    """three buckets, the middle one empty: listed with n 0 and no accuracy"""
    rows = probes.table_rows(call(submission, "accuracy_by_length", ["low", "high", *TABLE], *two_runs(tmp_path),
                                  [0, 1000, 2000, 3000]),
                             "accuracy_by_length(new, base, [0, 1000, 2000, 3000])", ["low", "high", *TABLE])
    got = [(row["low"], row["high"], row["n"]) for row in rows]
    assert got == [(0, 1000, 3), (1000, 2000, 0), (2000, 3000, 1)], f"(low, high, n) per bucket: {got}"
    empty = rows[1]["accuracy"]
    assert empty is None or math.isnan(empty), f"the empty bucket's accuracy is {empty}, expected NaN or None"


@pytest.mark.points(1)
@pytest.mark.concept("The slice the average hides")
def test_largest_drop_is_long_retrieval(submission):
    """among category x length slices of 30 questions or more, long retrieval prompts lose the most"""
    keep = ["category", "low", "high", *TABLE]
    got = probes.one_row(call(submission, "largest_drop", keep, SHIPPED, SHIPPED, [0, 2000, 8000]),
                         "largest_drop(shipped, shipped, [0, 2000, 8000])", keep)
    planted = PLANTED["long_prompt_retrieval_regression"]
    assert (got["category"], got["low"], got["n"]) == ("retrieval", 2000, planted["n"]), \
        f"largest_drop: got the slice {got['category']!r} ({got['low']}, {got['high']}] of {got['n']} questions"
    assert math.isclose(got["delta"], planted["new_accuracy"] - planted["baseline_accuracy"], abs_tol=1e-4), \
        f"largest_drop: delta {got['delta']}"


@pytest.mark.points(1)
@pytest.mark.concept("Is the difference real?")
def test_bootstrap_tells_the_collapse_from_the_control(submission):
    """the long-retrieval collapse is significant, the long-prompt control is not"""
    for name, significant in (("long_prompt_retrieval_regression", True), ("long_prompts_outside_retrieval_unchanged", False)):
        planted = PLANTED[name]
        got = call(submission, "paired_bootstrap", ["n", "delta", "low", "high", "significant"], SHIPPED, SHIPPED,
                   planted["where"], n_resamples=2000)
        assert isinstance(got, dict) and got.get("n") == planted["n"], \
            f"paired_bootstrap(where={planted['where']}): n is {got.get('n') if isinstance(got, dict) else got!r}, " \
            f"expected {planted['n']}"
        assert got["low"] <= got["delta"] <= got["high"], f"{name}: the interval [{got['low']}, {got['high']}] " \
                                                          f"does not contain delta {got['delta']}"
        assert got["significant"] is significant, f"{name}: significant is {got['significant']}, expected {significant}"


def loss_log(folder, name, offset):
    steps = list(range(1, 101))
    rows = [{"step": s, "loss": 2.0 + offset + 5.0 / s ** 0.5, "lr": 1e-3, "grad_norm": 1.0, "tokens": 64} for s in steps]
    return write_jsonl(folder / name, rows), steps, [r["loss"] for r in rows]


@pytest.mark.points(1)
@pytest.mark.concept("The loss curve")
def test_loss_curve_is_an_svg_with_a_log_step_axis(submission, tmp_path):
    """an SVG inside out_dir, a log x-axis, the logged loss against the step"""
    log_path, steps, losses = loss_log(tmp_path, "log.jsonl", 0.0)
    out_dir = tmp_path / "figures"
    path = submission.plot_loss_curve(log_path, str(out_dir))
    axes = read_figure(learner_file(path, out_dir))
    assert axes[0].x.scale, axes[0].x.problem
    assert axes[0].x.scale.kind == "log", "the step axis is linear: put it on a log scale (set_xscale('log'))"
    assert axes[0].y.scale, axes[0].y.problem
    assert axes[0].lines_following(steps, losses), "no line of the figure draws the logged loss against the step"


@pytest.mark.points(1)
@pytest.mark.concept("Seeds: a mean and a band")
def test_seed_band_draws_the_mean_and_the_spread(submission, tmp_path):
    """three seeds: one mean line, a band from the lowest to the highest seed"""
    logs = [loss_log(tmp_path, f"seed{i}.jsonl", offset) for i, offset in enumerate((0.0, 0.4, -0.3))]
    steps = logs[0][1]
    out_dir = tmp_path / "figures"
    path = submission.plot_seed_band([log for log, _, _ in logs], str(out_dir))
    axes = read_figure(learner_file(path, out_dir))[0]
    assert axes.x.scale and axes.y.scale, axes.x.problem or axes.y.problem
    assert axes.x.scale.kind == "log", "the step axis is linear: put it on a log scale"
    mean = [sum(log[2][i] for log in logs) / 3 for i in range(len(steps))]
    assert axes.lines_following(steps, mean), "no line of the figure draws the mean loss of the seeds"
    assert not any(axes.lines_following(steps, log[2]) for log in logs), "a seed is drawn as a line of its own"
    miss = axes.band_miss(steps, [min(log[2][i] for log in logs) for i in range(len(steps))],
                          [max(log[2][i] for log in logs) for i in range(len(steps))])
    assert miss is not None, "nothing is shaded: draw the spread with fill_between"
    assert miss[0] <= 0.5, f"the band misses the seeds' range by {miss[0]:.1f} pixels at step {miss[1]:g}"
