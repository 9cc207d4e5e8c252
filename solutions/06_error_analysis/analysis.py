"""Exercise 06: error analysis with pandas, and the curves that diagnose a run (reference solution).

An evaluation run is a JSON-lines file, one question per line: `id`, `category`, `prompt_tokens`,
`gold` and the model's answer in `pred_<model>` (the shipped file holds two runs side by side:
`pred_baseline` and `pred_new`). Every table function takes the paths of the two runs and returns
a pandas DataFrame; README.md, section "What your functions return", says how the grader reads it.
"""
from pathlib import Path

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
    unknown = [step for step in normalize if step not in NORMALIZATIONS]
    if unknown:
        raise ValueError(f"unknown normalisation steps {unknown}; the steps are {NORMALIZATIONS}")
    # dtype=False: answers are text, and read_json would otherwise turn "007" and "7" into 7
    table = pd.read_json(path, lines=True, dtype=False)
    pred = table[f"pred_{model}"]
    # a missing pred normalises to NaN, which equals nothing: wrong, and never a null `correct`
    correct = _normalized(pred, normalize).eq(_normalized(table["gold"], normalize))
    questions = table.drop(columns=[c for c in table.columns if c.startswith("pred_")])
    return questions.assign(pred=pred, correct=correct.astype(bool))


def paired(new_path, base_path, normalize=("strip",)):
    """The two runs side by side, one row per question, paired by id (the files may list the
    questions in different orders).

    Columns: the new run's table (load_results) and, from the baseline run, `pred_base` and
    `correct_base`: merge(base, on="id", suffixes=("", "_base")).
    """
    new = load_results(new_path, NEW, normalize)
    base = load_results(base_path, BASELINE, normalize)
    # on="id": pair by question, never by position; one_to_one: a duplicated id is an error, not a fan-out
    return new.merge(base[["id", "pred", "correct"]], on="id", suffixes=("", "_base"), validate="one_to_one")


def lost_and_gained(new_path, base_path, normalize=("strip",)):
    """The questions the new model lost (baseline right, new wrong) and gained (baseline wrong,
    new right): {"lost": [id, ...], "gained": [id, ...]}, each id once, in any order."""
    table = paired(new_path, base_path, normalize)
    lost = table.query("not correct and correct_base")["id"]
    gained = table.query("correct and not correct_base")["id"]
    return {"lost": lost.tolist(), "gained": gained.tolist()}


def accuracy_by(new_path, base_path, by, normalize=("strip",)):
    """Accuracy per group for both models: one row per combination of the `by` column(s) (a
    name or a list of names) present in the data.

    Columns: the `by` columns, `n` (the group's questions, unanswered ones included),
    `accuracy` (new), `accuracy_base` (baseline) and `delta` = accuracy - accuracy_base.
    """
    table = paired(new_path, base_path, normalize)
    return _summary(table.groupby(by)).reset_index()


def overall(new_path, base_path, normalize=("strip",)):
    """Accuracy over all questions for both models:
    {"n", "accuracy", "accuracy_base", "delta"}, every question weighing the same."""
    table = paired(new_path, base_path, normalize)
    accuracy, accuracy_base = table["correct"].mean(), table["correct_base"].mean()   # per question, not per group
    return {"n": len(table), "accuracy": float(accuracy), "accuracy_base": float(accuracy_base),
            "delta": float(accuracy - accuracy_base)}


def accuracy_by_length(new_path, base_path, edges, by=None, normalize=("strip",)):
    """Accuracy per prompt-length bucket, for both models: buckets (edges[i], edges[i + 1]]
    (pd.cut's right-closed intervals), every bucket listed, the empty ones too.

    With `by` (a column name or a list of names), one row per combination of a group present in
    the data and a bucket. Columns: the `by` columns, `low` and `high` (the bucket's edges),
    `n`, `accuracy`, `accuracy_base` and `delta`; accuracies and delta are null where n is 0.
    Rows are ordered by the `by` columns, then by bucket.
    """
    table = paired(new_path, base_path, normalize)
    bucket = pd.cut(table["prompt_tokens"], bins=list(edges), right=True).rename("bucket")
    # observed=False keeps the buckets (and group x bucket slices) that no question falls into
    summary = _summary(table.groupby([*_names(by), bucket], observed=False)).reset_index()
    intervals = pd.IntervalIndex(summary.pop("bucket"))
    position = len(_names(by))
    summary.insert(position, "low", intervals.left)
    summary.insert(position + 1, "high", intervals.right)
    return summary


def largest_drop(new_path, base_path, edges, by="category", min_count=30, normalize=("strip",)):
    """The slice (group x length bucket) where the new model loses the most accuracy, among the
    slices of at least `min_count` questions: a row of accuracy_by_length, as a dict (or a
    Series), or None when no such slice has a negative delta. Ties go to the slice that comes
    first in accuracy_by_length's order."""
    slices = accuracy_by_length(new_path, base_path, edges, by, normalize)
    # the minimum count first: a slice of three questions can lose 100% by chance
    candidates = slices[(slices["n"] >= min_count) & (slices["delta"] < 0)]
    if candidates.empty:
        return None
    return candidates.loc[candidates["delta"].idxmin()]       # idxmin: the first of equal minima


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
    table = _selected(paired(new_path, base_path, normalize), where or {}).sort_values("id")
    # one difference per question: resampling questions keeps both answers to each question together
    diff = table["correct"].to_numpy(dtype=int) - table["correct_base"].to_numpy(dtype=int)
    rng = np.random.default_rng(seed)
    resamples = rng.integers(0, len(diff), size=(n_resamples, len(diff)))
    means = diff[resamples].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])     # two-sided: alpha / 2 in each tail
    return {"n": len(diff), "delta": float(diff.mean()), "low": float(low), "high": float(high),
            "significant": bool(low > 0 or high < 0)}


def plot_loss_curve(log_path, out_dir):
    """Draw a run's training loss (exercise 02's log.jsonl: one line per logged step, with `step`
    and `loss`) against the step on a log x-axis; save it as an SVG file with its text kept as
    text (svg.fonttype "none") inside `out_dir` (created if missing); return the file's path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = pd.read_json(log_path, lines=True)
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(log["step"], log["loss"])
    axes.set_xscale("log")        # the first steps decide whether initialisation and warmup were right
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("training loss (nats/token)")
    return _save_svg(figure, out_dir, "loss_curve.svg")


def plot_seed_band(log_paths, out_dir):
    """Draw several runs of one configuration (one log.jsonl per seed, logging the same steps)
    as the mean loss over seeds, a line, and a shaded band from the lowest to the highest seed
    at each step, on a log x-axis; no seed is drawn as a line of its own. Save as SVG (text kept
    as text) inside `out_dir` (created if missing); return the file's path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = pd.concat([pd.read_json(path, lines=True) for path in log_paths])
    curve = runs.groupby("step")["loss"].agg(["mean", "min", "max"])      # over the seeds, step by step
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.fill_between(curve.index, curve["min"], curve["max"], alpha=0.3, label=f"min-max of {len(log_paths)} seeds")
    axes.plot(curve.index, curve["mean"], label="mean")
    axes.set_xscale("log")
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("training loss (nats/token)")
    axes.legend()
    return _save_svg(figure, out_dir, "seed_band.svg")


# ---------------------------------------------------------------- helpers

def _normalized(answers, steps):
    for step in steps:        # the few steps asked for, each vectorised over the whole column
        if step == "strip":
            answers = answers.str.strip()
        elif step == "backticks":
            answers = answers.str.strip("`")
        elif step == "lower":
            answers = answers.str.lower()
    return answers


def _summary(groups):
    """n, both accuracies and their difference for each group of a grouped paired table."""
    summary = groups.agg(n=("correct", "size"), accuracy=("correct", "mean"),
                         accuracy_base=("correct_base", "mean"))       # size counts rows, nulls or not
    return summary.assign(delta=summary["accuracy"] - summary["accuracy_base"])


def _names(by):
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def _selected(table, where):
    keep = pd.Series(True, index=table.index)
    if "categories" in where:
        keep &= table["category"].isin(where["categories"])
    if "min_prompt_tokens" in where:
        keep &= table["prompt_tokens"] >= where["min_prompt_tokens"]
    if "max_prompt_tokens" in where:
        keep &= table["prompt_tokens"] <= where["max_prompt_tokens"]
    return table[keep]


def _save_svg(figure, out_dir, name):
    import matplotlib.pyplot as plt

    path = Path(out_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with plt.rc_context({"svg.fonttype": "none"}):     # tick labels stay <text>, readable by the grader
        figure.savefig(path, format="svg")
    plt.close(figure)
    return str(path)
