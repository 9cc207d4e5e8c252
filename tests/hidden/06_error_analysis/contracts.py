"""The rules exercise 06's README states, in README order; each is marked in README.md and
README.zh-CN.md (`<!-- rule: id -->`) and broken by at least one mutant in `variants.py`."""
from grader.running.contracts import Rule

EXACT_MATCH, PAIRING, CHANGES = "Exact match", "Pairing by id", "Lost and gained"
GROUPS, BUCKETS, SLICE, BOOTSTRAP = "Accuracy per group", "Length buckets", "The slice the average hides", \
    "Is the difference real?"
VECTORISED, LOSS_CURVE, SEEDS = "Vectorised, not row by row", "The loss curve", "Seeds: a mean and a band"

RULES = [
    Rule("load.pred_column", EXACT_MATCH, "`pred` is the file's pred_<model> column, of the model asked for"),
    Rule("load.normalize", EXACT_MATCH,
         "correct: the normalised pred equals the normalised gold, the steps (strip, backticks, lower) in the order given"),
    Rule("load.both_sides", EXACT_MATCH, "the normalisation applies to pred and gold alike"),
    Rule("load.default", EXACT_MATCH, "without normalize, only surrounding whitespace is removed"),
    Rule("load.strings", EXACT_MATCH, "answers and ids stay the file's strings: \"007\" is not \"7\""),
    Rule("load.missing", EXACT_MATCH, "a null prediction is wrong: correct is False, never null, and the row stays"),
    Rule("pair.one_row", PAIRING, "paired has one row per question"),
    Rule("pair.by_id", PAIRING, "the runs are paired by id, whatever the order of either file"),
    Rule("pair.suffixes", PAIRING, "correct is the new model's, correct_base the baseline's"),
    Rule("changes.lost", CHANGES, "lost: the baseline right and the new model wrong"),
    Rule("changes.gained", CHANGES, "gained: the baseline wrong and the new model right"),
    Rule("acc.groups", GROUPS, "one row per combination of the `by` columns' values present, any question columns"),
    Rule("acc.n", GROUPS, "n counts the group's questions, unanswered ones included"),
    Rule("acc.delta", GROUPS, "delta = accuracy - accuracy_base: positive where the new model is better"),
    Rule("overall.per_question", GROUPS, "the overall accuracy weighs every question the same"),
    Rule("buckets.edges", BUCKETS, "one row per bucket, with low and high its edges"),
    Rule("buckets.right_closed", BUCKETS, "a bucket holds the prompts with low < prompt_tokens <= high"),
    Rule("buckets.empty", BUCKETS, "every bucket is listed, an empty one with n 0 and null accuracies"),
    Rule("buckets.groups", BUCKETS, "with by, every group present crossed with every bucket, empty slices included"),
    Rule("drop.largest", SLICE, "largest_drop returns the slice with the most negative delta"),
    Rule("drop.min_count", SLICE, "only slices of at least min_count questions are candidates"),
    Rule("drop.ties", SLICE, "equal deltas go to the slice listed first in accuracy_by_length's order"),
    Rule("drop.none", SLICE, "None when no slice of at least min_count questions has a negative delta"),
    Rule("boot.where", BOOTSTRAP, "where selects by categories and inclusive prompt-length bounds; None selects all"),
    Rule("boot.paired", BOOTSTRAP, "one difference per question: questions are resampled, never the runs apart"),
    Rule("boot.recipe", BOOTSTRAP,
         "sorted by id, default_rng(seed), one integers(0, n, size=(n_resamples, n)), the resamples' mean differences"),
    Rule("boot.interval", BOOTSTRAP, "low and high are the alpha / 2 and 1 - alpha / 2 quantiles"),
    Rule("boot.significant", BOOTSTRAP, "significant exactly when the interval leaves out 0"),
    Rule("vector.no_row_loops", VECTORISED, "the table functions run no Python code once per row"),
    Rule("curves.file", LOSS_CURVE, "an SVG file inside out_dir (created if missing), its path returned"),
    Rule("curves.svg_text", LOSS_CURVE, "the SVG keeps its text as text (svg.fonttype none)"),
    Rule("curves.log_x", LOSS_CURVE, "the step axis is logarithmic"),
    Rule("curves.loss_vs_step", LOSS_CURVE, "one line through every logged (step, loss)"),
    Rule("band.mean", SEEDS, "one line is the mean loss over all the seeds at each step"),
    Rule("band.range", SEEDS, "the band spans the lowest to the highest loss of all the seeds at each step"),
    Rule("band.no_seed_lines", SEEDS, "no seed is drawn as a line of its own"),
]
