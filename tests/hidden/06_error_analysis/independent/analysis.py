"""Exercise 06: error analysis with pandas, and the curves that diagnose a run.

Fill in every function below; README.md explains each one. An evaluation run is a JSON-lines
file, one question per line: `id`, `category`, `prompt_tokens`, `gold` and the model's answer in
`pred_<model>`. The table functions take the paths of two runs of the same questions, the new
model's (answers in `pred_new`) and the baseline's (`pred_baseline`), and return pandas (or
polars) DataFrames; README.md, section "What your functions return", says how they are read.
Run the visible tests with:  pytest exercises/06_error_analysis
"""
import os

import numpy as np
import pandas as pd

NEW, BASELINE = "new", "baseline"      # the model names of the two runs: columns pred_new, pred_baseline
NORMALIZATIONS = ("strip", "backticks", "lower")

_STATS = ["n", "accuracy", "accuracy_base", "delta"]


# ---------------------------------------------------------------- private helpers

def _steps(normalize):
    """The normalisation steps as a tuple, each one checked."""
    if normalize is None:
        normalize = ("strip",)
    if isinstance(normalize, str):
        normalize = (normalize,)
    steps = tuple(normalize)
    unknown = [step for step in steps if step not in NORMALIZATIONS]
    if unknown:
        raise ValueError(f"unknown normalisation step(s) {unknown}; known: {NORMALIZATIONS}")
    return steps


def _normalised(column, steps):
    """A column of answers as pandas strings (missing stays <NA>), with the steps applied in order."""
    text = column.astype("string")
    for step in steps:
        if step == "strip":
            text = text.str.strip()
        elif step == "backticks":
            text = text.str.strip("`")
        elif step == "lower":
            text = text.str.lower()
    return text


def _keys(by):
    """`by` (None, a column name or a list of names) as a list of column names."""
    if by is None:
        return []
    if isinstance(by, str):
        return [by]
    return list(by)


def _with_delta(table):
    table["delta"] = table["accuracy"] - table["accuracy_base"]
    return table


def _read_log(log_path):
    """Exercise 02's log.jsonl as a table, sorted by step."""
    log = pd.read_json(log_path, lines=True)
    return log.sort_values("step", kind="stable").reset_index(drop=True)


def _save_svg(fig, out_dir, name):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    fig.savefig(path, format="svg")
    return path


# ---------------------------------------------------------------- the table functions

def load_results(path, model, normalize=("strip",)):
    """One model's run as a table: one row per line of the JSON-lines file at `path`, in file order.

    Columns: the file's question columns (id, category, prompt_tokens, gold and any other column
    that is not a prediction), `pred` (the file's `pred_<model>` as written, null where the model
    gave no answer) and `correct` (bool, never null): the normalised pred equals the normalised
    gold. `normalize` names the steps applied, in order, to both: "strip" (surrounding
    whitespace), "backticks" (surrounding backticks), "lower" (lower case).
    """
    steps = _steps(normalize)
    raw = pd.read_json(path, lines=True, dtype=False)
    questions = raw.columns[~raw.columns.astype(str).str.startswith("pred_")]
    table = raw.loc[:, questions].copy()
    table["pred"] = raw[f"pred_{model}"]
    same = _normalised(table["pred"], steps) == _normalised(table["gold"], steps)
    table["correct"] = same.fillna(False).astype(bool)
    return table


def paired(new_path, base_path, normalize=("strip",)):
    """The two runs side by side, one row per question, paired by id (the files may list the
    questions in different orders).

    Columns: the new run's table (load_results) and, from the baseline run, `pred_base` and
    `correct_base`: merge(base, on="id", suffixes=("", "_base")).
    """
    new = load_results(new_path, NEW, normalize)
    base = load_results(base_path, BASELINE, normalize)
    return new.merge(base[["id", "pred", "correct"]], on="id", how="inner",
                     suffixes=("", "_base"), validate="one_to_one")


def lost_and_gained(new_path, base_path, normalize=("strip",)):
    """The questions the new model lost (baseline right, new wrong) and gained (baseline wrong,
    new right): {"lost": [id, ...], "gained": [id, ...]}, each id once, in any order."""
    both = paired(new_path, base_path, normalize)
    lost = both.loc[~both["correct"] & both["correct_base"], "id"]
    gained = both.loc[both["correct"] & ~both["correct_base"], "id"]
    return {"lost": lost.tolist(), "gained": gained.tolist()}


def accuracy_by(new_path, base_path, by, normalize=("strip",)):
    """Accuracy per group for both models: one row per combination of the `by` column(s) (a
    name or a list of names) present in the data.

    Columns: the `by` columns, `n` (the group's questions, unanswered ones included),
    `accuracy` (new), `accuracy_base` (baseline) and `delta` = accuracy - accuracy_base.
    """
    keys = _keys(by)
    both = paired(new_path, base_path, normalize)
    table = (both.groupby(keys, observed=True)
             .agg(n=("correct", "size"), accuracy=("correct", "mean"), accuracy_base=("correct_base", "mean"))
             .reset_index())
    return _with_delta(table)


def overall(new_path, base_path, normalize=("strip",)):
    """Accuracy over all questions for both models:
    {"n", "accuracy", "accuracy_base", "delta"}, every question weighing the same."""
    both = paired(new_path, base_path, normalize)
    accuracy = float(both["correct"].mean())
    accuracy_base = float(both["correct_base"].mean())
    return {"n": int(len(both)), "accuracy": accuracy, "accuracy_base": accuracy_base,
            "delta": accuracy - accuracy_base}


def accuracy_by_length(new_path, base_path, edges, by=None, normalize=("strip",)):
    """Accuracy per prompt-length bucket, for both models: buckets (edges[i], edges[i + 1]]
    (pd.cut's right-closed intervals), every bucket listed, the empty ones too.

    With `by` (a column name or a list of names), one row per combination of a group present in
    the data and a bucket. Columns: the `by` columns, `low` and `high` (the bucket's edges),
    `n`, `accuracy`, `accuracy_base` and `delta`; accuracies and delta are null where n is 0.
    Rows are ordered by the `by` columns, then by bucket.
    """
    keys = _keys(by)
    edges = list(edges)
    both = paired(new_path, base_path, normalize)
    both["_bucket"] = pd.cut(both["prompt_tokens"], bins=edges, right=True, labels=False)

    stats = (both.dropna(subset=["_bucket"])
             .astype({"_bucket": "int64"})
             .groupby([*keys, "_bucket"], observed=True)
             .agg(n=("correct", "size"), accuracy=("correct", "mean"), accuracy_base=("correct_base", "mean"))
             .reset_index())

    buckets = pd.DataFrame({"_bucket": np.arange(len(edges) - 1, dtype="int64"),
                            "low": edges[:-1], "high": edges[1:]})
    if keys:
        groups = both[keys].drop_duplicates()
        groups = groups.dropna(subset=keys)          # a group is a combination of values present
        grid = groups.merge(buckets, how="cross")
    else:
        grid = buckets

    table = grid.merge(stats, on=[*keys, "_bucket"], how="left")
    table["n"] = table["n"].fillna(0).astype("int64")
    table = _with_delta(table)
    table = table.sort_values([*keys, "_bucket"], kind="stable").reset_index(drop=True)
    return table[[*keys, "low", "high", *_STATS]]


def largest_drop(new_path, base_path, edges, by="category", min_count=30, normalize=("strip",)):
    """The slice (group x length bucket) where the new model loses the most accuracy, among the
    slices of at least `min_count` questions: a row of accuracy_by_length, as a dict (or a
    Series), or None when no such slice has a negative delta. Ties go to the slice that comes
    first in accuracy_by_length's order."""
    table = accuracy_by_length(new_path, base_path, edges, by, normalize)
    candidates = table[(table["n"] >= min_count) & (table["delta"] < 0)]
    if candidates.empty:
        return None
    worst = candidates["delta"].min()
    # deltas of equal fractions may differ in the last bit: a tie is within rounding
    tied = candidates[candidates["delta"] <= worst + 1e-12]
    return tied.iloc[0].to_dict()


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
    where = where or {}
    both = paired(new_path, base_path, normalize)
    keep = pd.Series(True, index=both.index)
    if where.get("categories") is not None:
        keep &= both["category"].isin(list(where["categories"]))
    if where.get("min_prompt_tokens") is not None:
        keep &= both["prompt_tokens"] >= where["min_prompt_tokens"]
    if where.get("max_prompt_tokens") is not None:
        keep &= both["prompt_tokens"] <= where["max_prompt_tokens"]
    selected = both[keep].sort_values("id", kind="stable")

    d = selected["correct"].astype("int64").to_numpy() - selected["correct_base"].astype("int64").to_numpy()
    n = len(d)
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, n, size=(n_resamples, n))
    means = d[indices].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    low, high = float(low), float(high)
    return {"n": int(n), "delta": float(d.mean()), "low": low, "high": high,
            "significant": bool(low > 0 or high < 0)}


# ---------------------------------------------------------------- the curves

def plot_loss_curve(log_path, out_dir):
    """Draw a run's training loss (exercise 02's log.jsonl: one line per logged step, with `step`
    and `loss`) against the step on a log x-axis; save it as an SVG file with its text kept as
    text (svg.fonttype "none") inside `out_dir` (created if missing); return the file's path."""
    import matplotlib
    from matplotlib.figure import Figure

    log = _read_log(log_path)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        ax.plot(log["step"].to_numpy(), log["loss"].to_numpy(), label="train loss")
        ax.set_xscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.set_title("training loss")
        fig.tight_layout()
        return _save_svg(fig, out_dir, "loss_curve.svg")


def plot_seed_band(log_paths, out_dir):
    """Draw several runs of one configuration (one log.jsonl per seed, logging the same steps)
    as the mean loss over seeds, a line, and a shaded band from the lowest to the highest seed
    at each step, on a log x-axis; no seed is drawn as a line of its own. Save as SVG (text kept
    as text) inside `out_dir` (created if missing); return the file's path."""
    import matplotlib
    from matplotlib.figure import Figure

    per_seed = pd.concat([_read_log(path).set_index("step")["loss"].rename(f"seed{i}")
                          for i, path in enumerate(log_paths)], axis=1).sort_index()
    steps = per_seed.index.to_numpy()
    mean = per_seed.mean(axis=1).to_numpy()
    lowest = per_seed.min(axis=1).to_numpy()
    highest = per_seed.max(axis=1).to_numpy()

    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        ax.fill_between(steps, lowest, highest, alpha=0.3, linewidth=0, label=f"min-max of {per_seed.shape[1]} seeds")
        ax.plot(steps, mean, label="mean over seeds")
        ax.set_xscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend()
        fig.tight_layout()
        return _save_svg(fig, out_dir, "seed_band.svg")
