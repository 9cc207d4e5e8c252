"""Exercise 06's README promises findings in the shipped results (section "What the shipped results
show"): the reference solution, run on datasets/eval_results/eval_results.jsonl, must find exactly
the effects the data was built with. The expected numbers are read from
datasets/eval_results/planted_regressions.json, which the builder derives from its cells (the
specification), not from the rows: nothing here is produced by the code under test."""
import json
import math

import pytest

from grader.course import COURSE
from grader.worker.loading import load_module

SHIPPED = str(COURSE.datasets / "eval_results" / "eval_results.jsonl")
PLANTED = json.loads((COURSE.datasets / "eval_results" / "planted_regressions.json").read_text(encoding="utf-8"))
EFFECTS = {effect["name"]: effect for effect in PLANTED["effects"]}
LONG = PLANTED["long_prompt_threshold_tokens"]
EDGES = [0, LONG, 8000]                     # the README's cut: short prompts, long prompts (the builder's widest band)
ROUNDED = 1e-4                              # planted_regressions.json rounds accuracies to four decimals
STRIP_BACKTICKS = ("strip", "backticks")    # the file's "after stripping backticks" metric: pred.strip().strip('`')


@pytest.fixture(scope="module")
def analysis():
    return load_module(COURSE.solutions / "06_error_analysis" / "analysis.py")


def by_category(analysis, normalize=("strip",)):
    table = analysis.accuracy_by(SHIPPED, SHIPPED, "category", normalize)
    return table.set_index("category")


def close(value, expected):
    return math.isclose(value, expected, abs_tol=ROUNDED)


def test_the_long_retrieval_collapse_is_the_largest_drop_and_real(analysis):
    """retrieval 0.75 -> 0.35 on its 80 long prompts: the slice largest_drop finds, significant"""
    effect = EFFECTS["long_prompt_retrieval_regression"]
    slices = analysis.accuracy_by_length(SHIPPED, SHIPPED, EDGES, by="category").set_index(["category", "low"])
    long_retrieval = slices.loc[("retrieval", LONG)]
    assert long_retrieval["n"] == effect["n"] == 80
    assert close(long_retrieval["accuracy_base"], effect["baseline_accuracy"]) and effect["baseline_accuracy"] == 0.75
    assert close(long_retrieval["accuracy"], effect["new_accuracy"]) and effect["new_accuracy"] == 0.35
    drop = analysis.largest_drop(SHIPPED, SHIPPED, EDGES)
    assert (drop["category"], drop["low"], drop["n"]) == ("retrieval", LONG, effect["n"])
    test = analysis.paired_bootstrap(SHIPPED, SHIPPED, effect["where"])
    assert test["n"] == effect["n"] and test["significant"] and test["high"] < 0


def test_the_retrieval_average_hides_the_collapse(analysis):
    """retrieval as a whole drops far less than its long prompts, and its short prompts improve"""
    effect = EFFECTS["long_prompt_retrieval_regression"]
    retrieval = by_category(analysis).loc["retrieval"]
    collapse = effect["new_accuracy"] - effect["baseline_accuracy"]
    assert collapse < retrieval["delta"] < 0
    short = analysis.accuracy_by_length(SHIPPED, SHIPPED, EDGES, by="category").set_index(["category", "low"])
    assert short.loc[("retrieval", 0), "delta"] > 0


def test_code_is_a_format_regression(analysis):
    """code 0.65 -> 0.45 under exact match, 0.75 once backticks are stripped"""
    effect = EFFECTS["code_answers_wrapped_in_backticks"]
    assert (effect["baseline_accuracy"], effect["new_accuracy"], effect["new_accuracy_after_stripping_backticks"]) \
        == (0.65, 0.45, 0.75)
    code = by_category(analysis).loc["code"]
    assert code["n"] == effect["n"]
    assert close(code["accuracy_base"], effect["baseline_accuracy"]) and close(code["accuracy"], effect["new_accuracy"])
    stripped = by_category(analysis, STRIP_BACKTICKS).loc["code"]
    assert close(stripped["accuracy"], effect["new_accuracy_after_stripping_backticks"])
    assert close(stripped["accuracy_base"], effect["baseline_accuracy"])


def test_arithmetic_is_a_real_gain(analysis):
    """arithmetic 0.55 -> 0.75, an interval clear of zero"""
    effect = EFFECTS["arithmetic_improvement"]
    assert (effect["baseline_accuracy"], effect["new_accuracy"]) == (0.55, 0.75)
    arithmetic = by_category(analysis).loc["arithmetic"]
    assert close(arithmetic["accuracy_base"], 0.55) and close(arithmetic["accuracy"], 0.75)
    test = analysis.paired_bootstrap(SHIPPED, SHIPPED, effect["where"])
    assert test["significant"] and test["low"] > 0


def test_the_long_prompt_control_reads_as_noise(analysis):
    """reasoning and extraction over 2000 tokens: 0.70 vs 0.72 on 50 questions, an interval around zero"""
    effect = EFFECTS["long_prompts_outside_retrieval_unchanged"]
    assert (effect["n"], effect["baseline_accuracy"], effect["new_accuracy"]) == (50, 0.7, 0.72)
    test = analysis.paired_bootstrap(SHIPPED, SHIPPED, effect["where"])
    assert test["n"] == effect["n"]
    assert close(test["delta"], effect["new_accuracy"] - effect["baseline_accuracy"])
    assert not test["significant"] and test["low"] < 0 < test["high"]


def test_the_overall_number_shows_none_of_it(analysis):
    """overall 0.68 -> 0.647, 0.707 with backticks stripped; neither difference is significant"""
    effect = EFFECTS["overall"]
    for normalize, new_accuracy in ((("strip",), effect["new_accuracy"]),
                                    (STRIP_BACKTICKS, effect["new_accuracy_after_stripping_backticks"])):
        overall = analysis.overall(SHIPPED, SHIPPED, normalize)
        assert overall["n"] == effect["n"] == 600
        assert close(overall["accuracy_base"], effect["baseline_accuracy"]) and close(overall["accuracy"], new_accuracy)
        assert not analysis.paired_bootstrap(SHIPPED, SHIPPED, normalize=normalize)["significant"]


def test_the_lost_questions_are_where_the_effects_are(analysis):
    """the lost questions hold the 48 backtick-wrapped code answers, which stripping backticks gives back"""
    code_lost = set(analysis.lost_and_gained(SHIPPED, SHIPPED)["lost"])
    stripped_lost = set(analysis.lost_and_gained(SHIPPED, SHIPPED, STRIP_BACKTICKS)["lost"])
    assert stripped_lost < code_lost
    rows = analysis.load_results(SHIPPED, "new").set_index("id")
    recovered = rows.loc[sorted(code_lost - stripped_lost)]
    assert (recovered["category"] == "code").all() and recovered["pred"].str.startswith("`").all()
