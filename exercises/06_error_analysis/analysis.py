"""Exercise 06: error analysis with pandas, and the curves that diagnose a run.

Fill in every function below; README.md explains each one. An evaluation run is a JSON-lines
file, one question per line: `id`, `category`, `prompt_tokens`, `gold` and the model's answer in
`pred_<model>`. The table functions take the paths of two runs of the same questions, the new
model's (answers in `pred_new`) and the baseline's (`pred_baseline`), and return pandas (or
polars) DataFrames; README.md, section "What your functions return", says how they are read.
Run the visible tests with:  pytest exercises/06_error_analysis
"""
import numpy as np
import pandas as pd

NEW, BASELINE = "new", "baseline"      # the model names of the two runs: columns pred_new, pred_baseline
NORMALIZATIONS = ("strip", "backticks", "lower")


def load_results(path, model, normalize=("strip",)):
    """One model's run as a table: one row per line of the JSON-lines file at `path`, in file order.

    Columns: the file's question columns (id, category, prompt_tokens, gold and any other column
    that is not a prediction), `pred` (the file's `pred_<model>` as written, null where the model
    gave no answer) and `correct` (bool, never null): the normalised pred equals the normalised
    gold. `normalize` names the steps applied, in order, to both: "strip" (surrounding
    whitespace), "backticks" (surrounding backticks), "lower" (lower case).
    """
    raise NotImplementedError('see README.md, section "Exact match"')


def paired(new_path, base_path, normalize=("strip",)):
    """The two runs side by side, one row per question, paired by id (the files may list the
    questions in different orders).

    Columns: the new run's table (load_results) and, from the baseline run, `pred_base` and
    `correct_base`: merge(base, on="id", suffixes=("", "_base")).
    """
    raise NotImplementedError('see README.md, section "Pairing by id"')


def lost_and_gained(new_path, base_path, normalize=("strip",)):
    """The questions the new model lost (baseline right, new wrong) and gained (baseline wrong,
    new right): {"lost": [id, ...], "gained": [id, ...]}, each id once, in any order."""
    raise NotImplementedError('see README.md, section "Lost and gained"')


def accuracy_by(new_path, base_path, by, normalize=("strip",)):
    """Accuracy per group for both models: one row per combination of the `by` column(s) (a
    name or a list of names) present in the data.

    Columns: the `by` columns, `n` (the group's questions, unanswered ones included),
    `accuracy` (new), `accuracy_base` (baseline) and `delta` = accuracy - accuracy_base.
    """
    raise NotImplementedError('see README.md, section "Accuracy per group"')


def overall(new_path, base_path, normalize=("strip",)):
    """Accuracy over all questions for both models:
    {"n", "accuracy", "accuracy_base", "delta"}, every question weighing the same."""
    raise NotImplementedError('see README.md, section "Accuracy per group"')


def accuracy_by_length(new_path, base_path, edges, by=None, normalize=("strip",)):
    """Accuracy per prompt-length bucket, for both models: buckets (edges[i], edges[i + 1]]
    (pd.cut's right-closed intervals), every bucket listed, the empty ones too.

    With `by` (a column name or a list of names), one row per combination of a group present in
    the data and a bucket. Columns: the `by` columns, `low` and `high` (the bucket's edges),
    `n`, `accuracy`, `accuracy_base` and `delta`; accuracies and delta are null where n is 0.
    Rows are ordered by the `by` columns, then by bucket.
    """
    raise NotImplementedError('see README.md, section "Length buckets"')


def largest_drop(new_path, base_path, edges, by="category", min_count=30, normalize=("strip",)):
    """The slice (group x length bucket) where the new model loses the most accuracy, among the
    slices of at least `min_count` questions: a row of accuracy_by_length, as a dict (or a
    Series), or None when no such slice has a negative delta. Ties go to the slice that comes
    first in accuracy_by_length's order."""
    raise NotImplementedError('see README.md, section "The slice the average hides"')


def paired_bootstrap(new_path, base_path, where=None, n_resamples=10_000, alpha=0.05, seed=0, normalize=("strip",)):
    """A paired bootstrap interval for delta = accuracy(new) - accuracy(baseline) on the
    questions `where` selects: {"n", "delta", "low", "high", "significant"}.

    `where` is a filter as in planted_regressions.json: "categories" (a list), "min_prompt_tokens"
    and "max_prompt_tokens" (inclusive), each optional; None selects every question. The selected
    questions, sorted by id, give one difference each, correct - correct_base in {-1, 0, 1};
    `rng = np.random.default_rng(seed)` draws `rng.integers(0, n, size=(n_resamples, n))`, each
    row one resample of questions; low and high are the alpha / 2 and 1 - alpha / 2 quantiles
    (np.quantile) of the resamples' mean differences; significant: the interval leaves out 0.
    """
    raise NotImplementedError('see README.md, section "Is the difference real?"')


def plot_loss_curve(log_path, out_dir):
    """Draw a run's training loss (exercise 02's log.jsonl: one line per logged step, with `step`
    and `loss`) against the step on a log x-axis; save it as an SVG file with its text kept as
    text (svg.fonttype "none") inside `out_dir` (created if missing); return the file's path."""
    raise NotImplementedError('see README.md, section "The loss curve"')


def plot_seed_band(log_paths, out_dir):
    """Draw several runs of one configuration (one log.jsonl per seed, logging the same steps)
    as the mean loss over seeds, a line, and a shaded band from the lowest to the highest seed
    at each step, on a log x-axis; no seed is drawn as a line of its own. Save as SVG (text kept
    as text) inside `out_dir` (created if missing); return the file's path."""
    raise NotImplementedError('see README.md, section "Seeds: a mean and a band"')
