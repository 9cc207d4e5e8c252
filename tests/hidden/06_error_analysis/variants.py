"""Mutants (realistic learner bugs) and alternative correct solutions for exercise 06, as edits of
solutions/06_error_analysis/analysis.py. Each mutant breaks one rule its README marks.
`grader audit 06` grades them all.

The alternatives are other ways to a correct answer: the whole module in polars (the map's "pandas
or polars, be fluent in one"), the same in another pandas style (boolean masks, `np.searchsorted`
and a reindex instead of `cut` and `observed=False`, matplotlib's object API without pyplot), one
that returns plain records instead of DataFrames, and figures with every harmless style choice.
"""
from grader.running.variants import INDEPENDENT, Alternative, Independent, Mutant

COURSE_MUTANTS = [
    # ------------------------------------------------------------ exact match
    Mutant("reads_pred_new_whatever_the_model", rule="load.pred_column",
           note="a file holding both runs: always the new model's column",
           edits={'    pred = table[f"pred_{model}"]\n':
                  '    pred = table["pred_new"] if "pred_new" in table.columns else table[f"pred_{model}"]\n'}),
    Mutant("backticks_stripped_on_the_left", rule="load.normalize",
           note="lstrip: only the opening backtick goes",
           edits={'answers = answers.str.strip("`")': 'answers = answers.str.lstrip("`")'}),
    Mutant("lower_ignored", rule="load.normalize", note="the 'lower' step does nothing",
           edits={"            answers = answers.str.lower()\n": "            pass\n"}),
    Mutant("prediction_normalised_not_gold", rule="load.both_sides",
           note="the gold answer compared as written",
           edits={'.eq(_normalized(table["gold"], normalize))': '.eq(table["gold"])'}),
    Mutant("gold_normalised_not_prediction", rule="load.both_sides",
           note="normalisation applied to gold but not to the predictions",
           edits={'correct = _normalized(pred, normalize).eq(': 'correct = pred.eq('}),
    Mutant("no_normalisation_by_default", rule="load.default",
           note="normalize=() by default: raw equality",
           edits={'def load_results(path, model, normalize=("strip",)):': 'def load_results(path, model, normalize=()):'}),
    Mutant("read_json_guesses_types", rule="load.strings",
           note="read_json's dtype guessing turns a column of digits into numbers: '007' == '7'",
           edits={"table = pd.read_json(path, lines=True, dtype=False)": "table = pd.read_json(path, lines=True)"}),
    Mutant("missing_answer_is_unknown", rule="load.missing",
           note="correct left NaN where there is no answer: mean and count skip those questions",
           edits={"return questions.assign(pred=pred, correct=correct.astype(bool))":
                  "return questions.assign(pred=pred, correct=correct.where(pred.notna()))"}),
    Mutant("unanswered_rows_dropped", rule="load.missing",
           note="dropna on the prediction: the unanswered questions disappear",
           edits={'    pred = table[f"pred_{model}"]\n':
                  '    table = table.dropna(subset=[f"pred_{model}"])\n    pred = table[f"pred_{model}"]\n'}),
    # ------------------------------------------------------------ pairing
    Mutant("paired_by_position", rule="pair.by_id", note="the baseline's columns assigned row by row",
           edits={'return new.merge(base[["id", "pred", "correct"]], on="id", suffixes=("", "_base"), validate="one_to_one")':
                  'return new.assign(pred_base=base["pred"].to_numpy(), correct_base=base["correct"].to_numpy())'}),
    Mutant("cartesian_merge", rule="pair.one_row", note="a merge without the key: every pair of questions",
           edits={'return new.merge(base[["id", "pred", "correct"]], on="id", suffixes=("", "_base"), validate="one_to_one")':
                  'return new.merge(base[["id", "pred", "correct"]], how="cross", suffixes=("", "_base"))'}),
    Mutant("suffixes_swapped", rule="pair.suffixes", note='suffixes=("_base", ""): correct is the baseline\'s',
           edits={'on="id", suffixes=("", "_base"), validate="one_to_one")':
                  'on="id", suffixes=("_base", ""), validate="one_to_one")'}),
    # ------------------------------------------------------------ lost and gained
    Mutant("lost_query_reversed", rule="changes.lost", note="the query's condition the wrong way round",
           edits={'lost = table.query("not correct and correct_base")["id"]':
                  'lost = table.query("correct and not correct_base")["id"]'}),
    Mutant("gained_is_every_right_answer", rule="changes.gained",
           note="gained: everything the new model gets right, the baseline's answer ignored",
           edits={'gained = table.query("correct and not correct_base")["id"]': 'gained = table.query("correct")["id"]'}),
    # ------------------------------------------------------------ accuracy per group
    Mutant("grouped_by_the_first_column_only", rule="acc.groups", note="a list of columns cut to its first",
           edits={"    return _summary(table.groupby(by)).reset_index()":
                  "    return _summary(table.groupby(_names(by)[0])).reset_index()"}),
    Mutant("count_of_answers", rule="acc.n", note="n counts the non-null predictions, not the questions",
           edits={'summary = groups.agg(n=("correct", "size"),': 'summary = groups.agg(n=("pred", "count"),'}),
    Mutant("delta_reversed", rule="acc.delta", note="baseline minus new",
           edits={'return summary.assign(delta=summary["accuracy"] - summary["accuracy_base"])':
                  'return summary.assign(delta=summary["accuracy_base"] - summary["accuracy"])'}),
    Mutant("overall_mean_of_category_means", rule="overall.per_question",
           note="every category weighs the same",
           edits={'accuracy, accuracy_base = table["correct"].mean(), table["correct_base"].mean()':
                  'per_category = table.groupby("category")[["correct", "correct_base"]].mean()\n'
                  '    accuracy, accuracy_base = per_category["correct"].mean(), per_category["correct_base"].mean()'}),
    # ------------------------------------------------------------ length buckets
    Mutant("buckets_closed_on_the_left", rule="buckets.right_closed",
           note="right=False: a prompt on an edge moves to the next bucket",
           edits={'bins=list(edges), right=True)': 'bins=list(edges), right=False)'}),
    Mutant("empty_buckets_dropped", rule="buckets.empty", note="pandas 3's default observed=True",
           edits={"table.groupby([*_names(by), bucket], observed=False)": "table.groupby([*_names(by), bucket], observed=True)"}),
    Mutant("bucket_range_from_the_prompts", rule="buckets.edges",
           note="low and high as the shortest and longest prompt in the bucket, not its edges",
           functions={"accuracy_by_length": '''
def accuracy_by_length(new_path, base_path, edges, by=None, normalize=("strip",)):
    table = paired(new_path, base_path, normalize)
    bucket = pd.cut(table["prompt_tokens"], bins=list(edges), right=True).rename("bucket")
    groups = table.groupby([*_names(by), bucket], observed=False)
    summary = _summary(groups).join(groups["prompt_tokens"].agg(low="min", high="max")).reset_index()
    return summary.drop(columns="bucket")
'''}),
    Mutant("buckets_ignore_by", rule="buckets.groups", note="`by` accepted and never used",
           edits={"summary = _summary(table.groupby([*_names(by), bucket], observed=False)).reset_index()":
                  "summary = _summary(table.groupby([bucket], observed=False)).reset_index()",
                  "    position = len(_names(by))\n": "    position = 0\n"}),
    Mutant("buckets_cross_every_column", rule="buckets.groups",
           note="by two columns: the product of each column's values, so a combination absent from the data gets rows",
           functions={"accuracy_by_length": '''
def accuracy_by_length(new_path, base_path, edges, by=None, normalize=("strip",)):
    table = paired(new_path, base_path, normalize)
    edges, names = np.asarray(edges), _names(by)
    table["bucket"] = np.searchsorted(edges, table["prompt_tokens"].to_numpy(), side="left") - 1
    summary = _summary(table.groupby([*names, "bucket"]))
    groups = [sorted(table[name].unique()) for name in names]
    full = pd.MultiIndex.from_product([*groups, range(len(edges) - 1)], names=[*names, "bucket"]) if names \\
        else pd.RangeIndex(len(edges) - 1, name="bucket")
    summary = summary.reindex(full)
    summary["n"] = summary["n"].fillna(0).astype(int)
    summary = summary.reset_index()
    summary["low"], summary["high"] = edges[summary["bucket"]], edges[summary["bucket"] + 1]
    return summary.drop(columns="bucket")
'''}),
    # ------------------------------------------------------------ the slice the average hides
    Mutant("largest_drop_without_min_count", rule="drop.min_count", note="every slice is a candidate",
           edits={'candidates = slices[(slices["n"] >= min_count) & (slices["delta"] < 0)]':
                  'candidates = slices[slices["delta"] < 0]'}),
    Mutant("smallest_drop", rule="drop.largest", note="idxmax: the slice that drops the least",
           edits={'return candidates.loc[candidates["delta"].idxmin()]': 'return candidates.loc[candidates["delta"].idxmax()]'}),
    Mutant("ties_to_the_last_slice", rule="drop.ties", note="of equal deltas, the last one listed",
           edits={'return candidates.loc[candidates["delta"].idxmin()]':
                  'return candidates.loc[candidates["delta"][::-1].idxmin()]'}),
    Mutant("largest_drop_that_is_a_gain", rule="drop.none",
           note="returns the lowest delta even when every slice improves",
           edits={'candidates = slices[(slices["n"] >= min_count) & (slices["delta"] < 0)]':
                  'candidates = slices[slices["n"] >= min_count]'}),
    # ------------------------------------------------------------ is the difference real?
    Mutant("filter_bounds_exclusive", rule="boot.where", note="min and max prompt lengths left out",
           edits={'keep &= table["prompt_tokens"] >= where["min_prompt_tokens"]':
                  'keep &= table["prompt_tokens"] > where["min_prompt_tokens"]',
                  'keep &= table["prompt_tokens"] <= where["max_prompt_tokens"]':
                  'keep &= table["prompt_tokens"] < where["max_prompt_tokens"]'}),
    Mutant("unpaired_bootstrap", rule="boot.paired",
           note="the two runs resampled independently: the correlation between them thrown away",
           edits={"    resamples = rng.integers(0, len(diff), size=(n_resamples, len(diff)))\n"
                  "    means = diff[resamples].mean(axis=1)\n":
                  '    new, base = table["correct"].to_numpy(dtype=int), table["correct_base"].to_numpy(dtype=int)\n'
                  "    means = (new[rng.integers(0, len(diff), size=(n_resamples, len(diff)))].mean(axis=1)\n"
                  "             - base[rng.integers(0, len(diff), size=(n_resamples, len(diff)))].mean(axis=1))\n"}),
    Mutant("bootstrap_in_file_order", rule="boot.recipe",
           note="questions not sorted by id: the interval depends on the order of the file",
           edits={'table = _selected(paired(new_path, base_path, normalize), where or {}).sort_values("id")':
                  'table = _selected(paired(new_path, base_path, normalize), where or {})'}),
    Mutant("alpha_in_each_tail", rule="boot.interval",
           note="quantiles alpha and 1 - alpha: a 90% interval called 95%",
           edits={"low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])":
                  "low, high = np.quantile(means, [alpha, 1 - alpha])"}),
    Mutant("interval_tails_swapped", rule="boot.interval", note="low from the upper tail, high from the lower",
           edits={"low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])":
                  "high, low = np.quantile(means, [alpha / 2, 1 - alpha / 2])"}),
    Mutant("only_drops_are_significant", rule="boot.significant", note="a gain is never significant",
           edits={'"significant": bool(low > 0 or high < 0)}': '"significant": bool(high < 0)}'}),
    # ------------------------------------------------------------ vectorised
    Mutant("correct_by_row_wise_apply", rule="vector.no_row_loops",
           note="right values, but a Python function per row with apply(axis=1)",
           functions={"load_results": '''
def load_results(path, model, normalize=("strip",)):
    table = pd.read_json(path, lines=True, dtype=False)

    def right(row):
        pred, gold = row[f"pred_{model}"], row["gold"]
        if not isinstance(pred, str):
            return False
        for step in normalize:
            if step == "strip":
                pred, gold = pred.strip(), gold.strip()
            elif step == "backticks":
                pred, gold = pred.strip("`"), gold.strip("`")
            else:
                pred, gold = pred.lower(), gold.lower()
        return pred == gold

    correct = table.apply(right, axis=1) if len(table) else pd.Series([], dtype=bool)
    questions = table.drop(columns=[c for c in table.columns if c.startswith("pred_")])
    return questions.assign(pred=table[f"pred_{model}"], correct=correct.astype(bool))
'''}),
    Mutant("largest_drop_by_iterrows", rule="vector.no_row_loops",
           note="right slice, found with a loop over iterrows",
           functions={"largest_drop": '''
def largest_drop(new_path, base_path, edges, by="category", min_count=30, normalize=("strip",)):
    slices = accuracy_by_length(new_path, base_path, edges, by, normalize)
    best = None
    for _, row in slices.iterrows():
        if row["n"] >= min_count and row["delta"] < 0 and (best is None or row["delta"] < best["delta"]):
            best = row
    return best
'''}),
    Mutant("lost_and_gained_by_comprehension", rule="vector.no_row_loops",
           note="right ids, from a comprehension over zipped columns",
           functions={"lost_and_gained": '''
def lost_and_gained(new_path, base_path, normalize=("strip",)):
    table = paired(new_path, base_path, normalize)
    rows = zip(table["id"], table["correct"], table["correct_base"])
    changes = [(qid, new, base) for qid, new, base in rows if new != base]
    return {"lost": [qid for qid, new, _ in changes if not new], "gained": [qid for qid, new, _ in changes if new]}
'''}),
    # ------------------------------------------------------------ the loss curve
    Mutant("out_dir_not_created", rule="curves.file", note="savefig into a folder that does not exist yet",
           edits={"    path.parent.mkdir(parents=True, exist_ok=True)\n": ""}),
    Mutant("text_as_glyph_paths", rule="curves.svg_text",
           note="matplotlib's default svg.fonttype: every label drawn as outlines",
           edits={'    with plt.rc_context({"svg.fonttype": "none"}):     # tick labels stay <text>, readable by the grader\n'
                  "        figure.savefig(path, format=\"svg\")\n": '    figure.savefig(path, format="svg")\n'}),
    Mutant("linear_step_axis", rule="curves.log_x", note="the loss curve on a linear x-axis",
           edits={"    axes.set_xscale(\"log\")        # the first steps decide whether initialisation and warmup were right\n": ""}),
    Mutant("seed_band_on_linear_steps", concept="Seeds: a mean and a band", rule="curves.log_x", note="the seed band on a linear x-axis",
           edits={'    axes.plot(curve.index, curve["mean"], label="mean")\n    axes.set_xscale("log")\n':
                  '    axes.plot(curve.index, curve["mean"], label="mean")\n'}),
    Mutant("loss_against_line_number", rule="curves.loss_vs_step",
           note="plot(losses): the x is the line number, not the step",
           edits={'    axes.plot(log["step"], log["loss"])\n': '    axes.plot(log["loss"].to_numpy())\n'}),
    Mutant("smoothed_loss", rule="curves.loss_vs_step", note="a rolling mean instead of the logged loss",
           edits={'    axes.plot(log["step"], log["loss"])\n':
                  '    axes.plot(log["step"], log["loss"].rolling(5, min_periods=1).mean())\n'}),
    # ------------------------------------------------------------ seeds
    Mutant("seeds_drawn_as_lines", rule="band.no_seed_lines",
           note="the mean and the band, and every seed drawn as a thin line too",
           edits={'    axes.plot(curve.index, curve["mean"], label="mean")\n':
                  '    axes.plot(curve.index, curve["mean"], label="mean")\n'
                  '    for path in log_paths:\n'
                  '        log = pd.read_json(path, lines=True)\n'
                  '        axes.plot(log["step"], log["loss"], linewidth=0.5, color="grey")\n'}),
    Mutant("seeds_drawn_as_a_collection", rule="band.no_seed_lines",
           note="the mean and the band, and every seed drawn in one LineCollection",
           edits={'    axes.plot(curve.index, curve["mean"], label="mean")\n':
                  '    axes.plot(curve.index, curve["mean"], label="mean")\n'
                  '    from matplotlib.collections import LineCollection\n'
                  '    seeds = [pd.read_json(path, lines=True) for path in log_paths]\n'
                  '    axes.add_collection(LineCollection([list(zip(log["step"], log["loss"])) for log in seeds],\n'
                  '                                       linewidths=0.5, colors="grey"))\n'}),
    Mutant("seeds_drawn_with_a_gid", rule="band.no_seed_lines",
           note="the mean and the band, and every seed drawn as a line named by its gid",
           edits={'    axes.plot(curve.index, curve["mean"], label="mean")\n':
                  '    axes.plot(curve.index, curve["mean"], label="mean")\n'
                  '    for seed, path in enumerate(log_paths):\n'
                  '        log = pd.read_json(path, lines=True)\n'
                  '        axes.plot(log["step"], log["loss"], linewidth=0.5, color="grey", gid=f"seed-{seed}")\n'}),
    Mutant("seeds_only_as_lines", rule="band.mean", note="one line per seed, no mean and no band",
           functions={"plot_seed_band": '''
def plot_seed_band(log_paths, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for path in log_paths:
        log = pd.read_json(path, lines=True)
        axes.plot(log["step"], log["loss"], label=str(path))
    axes.set_xscale("log")
    return _save_svg(figure, out_dir, "seed_band.svg")
'''}),
    Mutant("mean_of_two_seeds", rule="band.mean", note="the mean line from the first two seeds only",
           edits={'    axes.plot(curve.index, curve["mean"], label="mean")\n':
                  '    first_two = pd.concat([pd.read_json(path, lines=True) for path in log_paths[:2]])\n'
                  '    axes.plot(curve.index, first_two.groupby("step")["loss"].mean(), label="mean")\n'}),
    Mutant("band_between_two_seeds", rule="band.range", note="fill_between(steps, seed_0, seed_1)",
           edits={'    axes.fill_between(curve.index, curve["min"], curve["max"], alpha=0.3, label=f"min-max of {len(log_paths)} seeds")\n':
                  '    seed_0, seed_1 = (pd.read_json(path, lines=True)["loss"].to_numpy() for path in log_paths[:2])\n'
                  '    axes.fill_between(curve.index, seed_0, seed_1, alpha=0.3)\n'}),
    Mutant("band_of_one_standard_deviation", rule="band.range", note="mean plus and minus one std, not the range",
           edits={'curve = runs.groupby("step")["loss"].agg(["mean", "min", "max"])':
                  'curve = runs.groupby("step")["loss"].agg(["mean", "std"])\n'
                  '    curve = curve.assign(min=curve["mean"] - curve["std"], max=curve["mean"] + curve["std"])'}),
]

POLARS_FUNCTIONS = {
    "load_results": '''
def load_results(path, model, normalize=("strip",)):
    unknown = [step for step in normalize if step not in NORMALIZATIONS]
    if unknown:
        raise ValueError(f"unknown normalisation steps {unknown}")
    table = pl.read_ndjson(path, infer_schema_length=None)
    pred = pl.col(f"pred_{model}").cast(pl.String)
    gold = pl.col("gold").cast(pl.String)
    correct = (_normalized(pred, normalize) == _normalized(gold, normalize)).fill_null(False)
    predictions = [c for c in table.columns if c.startswith("pred_")]
    return table.with_columns(pred=pred, correct=correct).drop(predictions)
''',
    "paired": '''
def paired(new_path, base_path, normalize=("strip",)):
    new = load_results(new_path, NEW, normalize)
    base = load_results(base_path, BASELINE, normalize).select(
        "id", pl.col("pred").alias("pred_base"), pl.col("correct").alias("correct_base"))
    return new.join(base, on="id", how="inner", validate="1:1")
''',
    "lost_and_gained": '''
def lost_and_gained(new_path, base_path, normalize=("strip",)):
    table = paired(new_path, base_path, normalize)
    lost = table.filter(~pl.col("correct") & pl.col("correct_base"))["id"]
    gained = table.filter(pl.col("correct") & ~pl.col("correct_base"))["id"]
    return {"lost": lost, "gained": gained}
''',
    "accuracy_by": '''
def accuracy_by(new_path, base_path, by, normalize=("strip",)):
    names = _names(by)
    return (paired(new_path, base_path, normalize).group_by(names).agg(_aggregates())
            .with_columns(delta=pl.col("accuracy") - pl.col("accuracy_base")).sort(names))
''',
    "overall": '''
def overall(new_path, base_path, normalize=("strip",)):
    row = paired(new_path, base_path, normalize).select(_aggregates()).row(0, named=True)
    return {**row, "delta": row["accuracy"] - row["accuracy_base"]}
''',
    "accuracy_by_length": '''
def accuracy_by_length(new_path, base_path, edges, by=None, normalize=("strip",)):
    table = paired(new_path, base_path, normalize)
    edges, names = list(edges), _names(by)
    buckets = pl.DataFrame({"bucket": list(range(len(edges) - 1)), "low": edges[:-1], "high": edges[1:]})
    # (low, high]: the number of edges below the prompt, less one
    index = np.searchsorted(np.asarray(edges), table["prompt_tokens"].to_numpy(), side="left") - 1
    table = table.with_columns(bucket=pl.Series(index, dtype=pl.Int64))
    grid = table.select(names).unique().join(buckets, how="cross") if names else buckets
    counts = table.group_by([*names, "bucket"]).agg(_aggregates())
    slices = grid.join(counts, on=[*names, "bucket"], how="left").with_columns(
        n=pl.col("n").fill_null(0), delta=pl.col("accuracy") - pl.col("accuracy_base"))
    return slices.sort([*names, "bucket"]).select([*names, "low", "high", "n", "accuracy", "accuracy_base", "delta"])
''',
    "largest_drop": '''
def largest_drop(new_path, base_path, edges, by="category", min_count=30, normalize=("strip",)):
    slices = accuracy_by_length(new_path, base_path, edges, by, normalize).with_row_index("order")
    candidates = slices.filter((pl.col("n") >= min_count) & (pl.col("delta") < 0))
    if candidates.height == 0:
        return None
    return candidates.sort(["delta", "order"]).drop("order").row(0, named=True)
''',
    "paired_bootstrap": '''
def paired_bootstrap(new_path, base_path, where=None, n_resamples=10_000, alpha=0.05, seed=0, normalize=("strip",)):
    where = where or {}
    keep = pl.lit(True)
    if "categories" in where:
        keep = keep & pl.col("category").is_in(list(where["categories"]))
    if "min_prompt_tokens" in where:
        keep = keep & (pl.col("prompt_tokens") >= where["min_prompt_tokens"])
    if "max_prompt_tokens" in where:
        keep = keep & (pl.col("prompt_tokens") <= where["max_prompt_tokens"])
    chosen = paired(new_path, base_path, normalize).filter(keep).sort("id")
    diff = (chosen["correct"].cast(pl.Int64) - chosen["correct_base"].cast(pl.Int64)).to_numpy()
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(n_resamples, len(diff)))].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return {"n": len(diff), "delta": diff.mean(), "low": low, "high": high, "significant": bool(low > 0 or high < 0)}
''',
    "plot_loss_curve": '''
def plot_loss_curve(log_path, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = pl.read_ndjson(log_path)
    figure, axes = plt.subplots()
    axes.loglog(log["step"].to_numpy(), log["loss"].to_numpy())
    return _save_svg(figure, out_dir, "curve.svg")
''',
    "plot_seed_band": '''
def plot_seed_band(log_paths, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = pl.concat([pl.read_ndjson(path).select("step", "loss") for path in log_paths])
    curve = runs.group_by("step").agg(mean=pl.col("loss").mean(), low=pl.col("loss").min(),
                                      high=pl.col("loss").max()).sort("step")
    figure, axes = plt.subplots()
    steps = curve["step"].to_numpy()
    axes.fill_between(steps, curve["low"].to_numpy(), curve["high"].to_numpy(), alpha=0.25)
    axes.semilogx(steps, curve["mean"].to_numpy())
    return _save_svg(figure, out_dir, "band.svg")
''',
    "_normalized": '''
def _normalized(answers, steps):
    for step in steps:
        if step == "strip":
            answers = answers.str.strip_chars()
        elif step == "backticks":
            answers = answers.str.strip_chars("`")
        else:
            answers = answers.str.to_lowercase()
    return answers
''',
}

POLARS_HELPERS = '''# ---------------------------------------------------------------- helpers

def _aggregates():
    return [pl.len().alias("n"), pl.col("correct").mean().alias("accuracy"),
            pl.col("correct_base").mean().alias("accuracy_base")]

'''

PANDAS_STYLE = {
    "load_results": '''
def load_results(path, model, normalize=("strip",)):
    if set(normalize) - set(NORMALIZATIONS):
        raise ValueError(f"unknown normalisation steps in {normalize}")
    table = pd.read_json(path, lines=True, dtype=False)
    pred = table.pop(f"pred_{model}")
    table = table.drop(columns=table.columns[table.columns.str.startswith("pred_")])
    answer, gold = pred, table["gold"]
    for step in normalize:
        answer, gold = (_STEP[step](answer), _STEP[step](gold))
    table["pred"] = pred
    table["correct"] = (answer == gold).fillna(False).to_numpy(dtype=bool)
    return table
''',
    "paired": '''
def paired(new_path, base_path, normalize=("strip",)):
    base = load_results(base_path, BASELINE, normalize).set_index("id")[["pred", "correct"]].add_suffix("_base")
    return load_results(new_path, NEW, normalize).join(base, on="id", validate="one_to_one")
''',
    "lost_and_gained": '''
def lost_and_gained(new_path, base_path, normalize=("strip",)):
    table = paired(new_path, base_path, normalize)
    new, base = table["correct"], table["correct_base"]
    return {"lost": table.loc[~new & base, "id"].to_numpy(), "gained": table.loc[new & ~base, "id"].to_numpy()}
''',
    "accuracy_by": '''
def accuracy_by(new_path, base_path, by, normalize=("strip",)):
    table = paired(new_path, base_path, normalize)
    summary = table.groupby(by, as_index=False).agg(n=("id", "size"), accuracy=("correct", "mean"),
                                                    accuracy_base=("correct_base", "mean"))
    summary["delta"] = summary["accuracy"] - summary["accuracy_base"]
    return summary
''',
    "overall": '''
def overall(new_path, base_path, normalize=("strip",)):
    means = paired(new_path, base_path, normalize)[["correct", "correct_base"]].astype(float).agg(["mean", "size"])
    return pd.Series({"n": int(means.loc["size", "correct"]), "accuracy": means.loc["mean", "correct"],
                      "accuracy_base": means.loc["mean", "correct_base"],
                      "delta": means.loc["mean", "correct"] - means.loc["mean", "correct_base"]})
''',
    "accuracy_by_length": '''
def accuracy_by_length(new_path, base_path, edges, by=None, normalize=("strip",)):
    table = paired(new_path, base_path, normalize)
    edges, names = np.asarray(edges), _names(by)
    table["bucket"] = np.searchsorted(edges, table["prompt_tokens"].to_numpy(), side="left") - 1
    summary = _summary(table.groupby([*names, "bucket"]))
    if names:       # the combinations of the by columns present in the data, each crossed with every bucket
        grid = table[names].drop_duplicates().merge(pd.DataFrame({"bucket": range(len(edges) - 1)}), how="cross")
        full = pd.MultiIndex.from_frame(grid.sort_values([*names, "bucket"]))
    else:
        full = pd.RangeIndex(len(edges) - 1, name="bucket")
    summary = summary.reindex(full)
    summary["n"] = summary["n"].fillna(0).astype(int)
    summary = summary.reset_index()
    summary["low"], summary["high"] = edges[summary["bucket"]], edges[summary["bucket"] + 1]
    return summary.drop(columns="bucket")
''',
    "largest_drop": '''
def largest_drop(new_path, base_path, edges, by="category", min_count=30, normalize=("strip",)):
    slices = accuracy_by_length(new_path, base_path, edges, by, normalize)
    eligible = slices.query("n >= @min_count and delta < 0")
    ranked = eligible.sort_values("delta", kind="stable")
    return None if ranked.empty else ranked.iloc[0].to_dict()
''',
    "plot_loss_curve": '''
def plot_loss_curve(log_path, out_dir):
    import matplotlib
    from matplotlib.figure import Figure

    log = pd.read_json(log_path, lines=True)
    figure = Figure(figsize=(8, 3), dpi=120)
    axes = figure.subplots()
    axes.semilogx(log["step"], log["loss"], marker=".", color="tab:red", label="train")
    axes.axhline(log["loss"].min(), linestyle="--", color="grey")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    axes.set_title("loss")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        figure.savefig(out / "train.svg", format="svg", bbox_inches="tight")
    return out / "train.svg"
''',
}

STEP_HELPERS = '''_STEP = {"strip": lambda s: s.str.strip(), "backticks": lambda s: s.str.strip("`"), "lower": lambda s: s.str.lower()}


# ---------------------------------------------------------------- helpers
'''

ALTERNATIVES = [
    Alternative("polars", note="the whole module in polars; numpy for the resampling, matplotlib's loglog and semilogx",
                edits={"import pandas as pd\n": "import pandas as pd\nimport polars as pl\n",
                       "# ---------------------------------------------------------------- helpers\n": POLARS_HELPERS},
                functions=POLARS_FUNCTIONS),
    Alternative("pandas_other_style",
                note="pop and drop by a column mask, a join on an id index, boolean masks, searchsorted and a reindex on the "
                     "present groups crossed with the buckets, a stable sort for ties, a Series for overall, matplotlib's object API",
                edits={"# ---------------------------------------------------------------- helpers\n": STEP_HELPERS},
                functions=PANDAS_STYLE),
    Alternative("plain_records", note="tables returned as lists of row dicts (read back with pd.DataFrame), a row as a dict",
                edits={"    return _summary(table.groupby(by)).reset_index()":
                       '    return _summary(table.groupby(by)).reset_index().to_dict("records")',
                       "    slices = accuracy_by_length(new_path, base_path, edges, by, normalize)\n":
                       "    slices = pd.DataFrame(accuracy_by_length(new_path, base_path, edges, by, normalize))\n",
                       "    return candidates.loc[candidates[\"delta\"].idxmin()]       # idxmin: the first of equal minima":
                       "    return candidates.loc[candidates[\"delta\"].idxmin()].to_dict()",
                       "    summary.insert(position + 1, \"high\", intervals.right)\n    return summary\n":
                       "    summary.insert(position + 1, \"high\", intervals.right)\n    return summary.to_dict(\"records\")\n"}),
    Alternative("styled_figures", note="colours, markers, a grid, a legend, titles, a style sheet, a log y-axis, "
                                       "a target line, tight bounding box, another figure size and file name",
                functions={"plot_loss_curve": '''
def plot_loss_curve(log_path, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = pd.read_json(log_path, lines=True)
    with plt.style.context("ggplot"):
        figure, axes = plt.subplots(figsize=(9, 5), dpi=150)
        axes.plot(log["step"], log["loss"], "o-", color="#8a2be2", markersize=2, linewidth=1, label="training loss")
        axes.axhline(2.0, color="black", linewidth=0.5, label="target")
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.grid(True, which="minor", linestyle=":")
        axes.legend(loc="upper right")
        axes.set_title("run 1")
        figure.tight_layout()
    return _save_svg(figure, out_dir, "figures/loss.svg")
''', "plot_seed_band": '''
def plot_seed_band(log_paths, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = pd.concat([pd.read_json(path, lines=True).assign(seed=i) for i, path in enumerate(log_paths)])
    wide = runs.pivot(index="step", columns="seed", values="loss")
    figure, axes = plt.subplots(figsize=(4, 3))
    axes.semilogx(wide.index, wide.mean(axis=1), color="k", linestyle="--", linewidth=2, label="mean")
    axes.fill_between(wide.index, wide.min(axis=1), wide.max(axis=1), color="orange", alpha=0.5, linewidth=0,
                      label="range")
    axes.legend(frameon=False)
    axes.set_xlabel("step")
    axes.grid(True)
    return _save_svg(figure, out_dir, "band.svg")
'''}),
    Independent(),
]


# The independent solution (independent/analysis.py, written from the README and stub alone) and the
# bugs its author planted in it.
INDEPENDENT_MUTANTS = [
    Mutant('read_json_guesses_types_of_ids_and_answers', rule='load.strings', base=INDEPENDENT,
           note="drops dtype=False, so a column of digit-only answers or ids is parsed as numbers and '007' equals '7'",
           edits={'raw = pd.read_json(path, lines=True, dtype=False)': 'raw = pd.read_json(path, lines=True)'}),
    Mutant('normalize_pred_only', rule='load.both_sides', base=INDEPENDENT,
           note='applies the normalisation steps to the prediction only and compares with the raw gold',
           edits={'same = _normalised(table["pred"], steps) == _normalised(table["gold"], steps)': 'same = _normalised(table["pred"], steps) == table["gold"]'}),
    Mutant('pair_by_position', rule='pair.by_id', base=INDEPENDENT,
           note="puts the baseline's columns beside the new run by position (.values) instead of merging on id",
           edits={'    return new.merge(base[["id", "pred", "correct"]], on="id", how="inner",\n                     suffixes=("", "_base"), validate="one_to_one")': '    new["pred_base"] = base["pred"].values\n    new["correct_base"] = base["correct"].values\n    return new'}),
    Mutant('lost_ignores_baseline', rule='changes.lost', base=INDEPENDENT,
           note='lost lists every question the new model gets wrong, including those the baseline also got wrong',
           edits={'lost = both.loc[~both["correct"] & both["correct_base"], "id"]': 'lost = both.loc[~both["correct"], "id"]'}),
    Mutant('n_counts_answered', rule='acc.n', base=INDEPENDENT,
           note="n counts the non-null predictions (count of pred) instead of the group's questions",
           edits={'groupby(keys, observed=True)\n             .agg(n=("correct", "size")': 'groupby(keys, observed=True)\n             .agg(n=("pred", "count")'}),
    Mutant('overall_of_both_runs_from_category_means', rule='overall.per_question', base=INDEPENDENT,
           note='overall accuracy is the mean of the per-category accuracies, weighing categories instead of questions',
           edits={'accuracy = float(both["correct"].mean())': 'accuracy = float(both.groupby("category")["correct"].mean().mean())', 'accuracy_base = float(both["correct_base"].mean())': 'accuracy_base = float(both.groupby("category")["correct_base"].mean().mean())'}),
    Mutant('buckets_left_closed', rule='buckets.right_closed', base=INDEPENDENT,
           note='cuts with right=False, so a prompt of exactly edges[1] tokens lands in the second bucket',
           edits={'bins=edges, right=True, labels=False': 'bins=edges, right=False, labels=False'}),
    Mutant('group_buckets_observed_only', rule='buckets.groups', base=INDEPENDENT,
           note="with by, the grid is built from the (group, bucket) pairs seen in the data, so a group's empty buckets vanish (without by they are still listed)",
           edits={'grid = groups.merge(buckets, how="cross")': 'grid = both.dropna(subset=["_bucket"])[[*keys, "_bucket"]].drop_duplicates().astype({"_bucket": "int64"}).merge(buckets, on="_bucket")'}),
    Mutant('bootstrap_independent_resamples', rule='boot.paired', base=INDEPENDENT,
           note='resamples the new and the baseline runs with two independent index draws, throwing away the pairing',
           edits={'    indices = rng.integers(0, n, size=(n_resamples, n))\n    means = d[indices].mean(axis=1)': '    new_correct = selected["correct"].to_numpy(dtype=float)\n    base_correct = selected["correct_base"].to_numpy(dtype=float)\n    means = (new_correct[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)\n             - base_correct[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1))'}),
    Mutant('band_between_the_first_two_seeds', rule='band.range', base=INDEPENDENT,
           note='shades the band between the first two seeds instead of the lowest and highest of all seeds',
           edits={'ax.fill_between(steps, lowest, highest,': 'ax.fill_between(steps, per_seed.iloc[:, 0].to_numpy(), per_seed.iloc[:, 1].to_numpy(),'}),
]

MUTANTS = COURSE_MUTANTS + INDEPENDENT_MUTANTS


# Operator mutants (grader audit 06 --operators) that change nothing the README lets a grading observe.
EQUIVALENT = {
    'load_results: raise ValueError(f"unknown normalisation steps {unknown}; the steps are {NORMALIZATIONS}") -> raise ValueError(None)':
        'the README promises a ValueError, not its message',
    'load_results: questions = table.drop(columns=[c for c in table.columns if c.startswith("pred_")]) -> questions = table.drop(columns=[c for c in table.columns if c.startswith("XXpred_XX")])':
        'a prediction column kept in the table is a column the README does not name: it may hold anything',
    'load_results: questions = table.drop(columns=[c for c in table.columns if c.startswith("pred_")]) -> questions = table.drop(columns=[c for c in table.columns if c.startswith("PRED_")])':
        'a prediction column kept in the table is a column the README does not name: it may hold anything',
    'paired: return new.merge(base[["id", "pred", "correct"]], on="id", suffixes=("", "_base"), validate="one_to_one") -> return new.merge(base[["id", "pred", "correct"]], on="id", suffixes=("", "_base"), validate=None)':
        'validate only checks that each id appears once on each side, which the README guarantees of both files',
    'paired: return new.merge(base[["id", "pred", "correct"]], on="id", suffixes=("", "_base"), validate="one_to_one") -> return new.merge(base[["id", "pred", "correct"]], on="id", suffixes=("", "_base"), )':
        'validate only checks that each id appears once on each side, which the README guarantees of both files',
    'accuracy_by_length: bucket = pd.cut(table["prompt_tokens"], bins=list(edges), right=True).rename("bucket") -> bucket = pd.cut(table["prompt_tokens"], bins=list(edges), ).rename("bucket")':
        "pd.cut's right defaults to True",
    'accuracy_by_length: summary = _summary(table.groupby([*_names(by), bucket], observed=False)).reset_index() -> summary = _summary(table.groupby([*_names(by), bucket], observed=None)).reset_index()':
        'pandas treats observed=None as falsy, the same as observed=False',
    'accuracy_by_length: summary.insert(position + 1, "high", intervals.right) -> summary.insert(position + 2, "high", intervals.right)':
        'only the column order changes; tables are read by column name',
    'paired_bootstrap: diff = table["correct"].to_numpy(dtype=int) - table["correct_base"].to_numpy(dtype=int) -> diff = table["correct"].to_numpy(dtype=None) - table["correct_base"].to_numpy(dtype=int)':
        'NumPy promotes bool against int: the same differences -1, 0, 1',
    'paired_bootstrap: diff = table["correct"].to_numpy(dtype=int) - table["correct_base"].to_numpy(dtype=int) -> diff = table["correct"].to_numpy(dtype=int) - table["correct_base"].to_numpy(dtype=None)':
        'NumPy promotes bool against int: the same differences -1, 0, 1',
    'paired_bootstrap: resamples = rng.integers(0, len(diff), size=(n_resamples, len(diff))) -> resamples = rng.integers(len(diff), size=(n_resamples, len(diff)))':
        'rng.integers(n) draws from [0, n) exactly as rng.integers(0, n) does, the same stream',
    'plot_loss_curve: matplotlib.use("Agg") -> matplotlib.use("agg")':
        "matplotlib's backend names are case-insensitive",
    'plot_loss_curve: matplotlib.use("Agg") -> matplotlib.use("AGG")':
        "matplotlib's backend names are case-insensitive",
    'plot_loss_curve: figure, axes = plt.subplots(figsize=(6, 4)) -> figure, axes = plt.subplots(figsize=None)':
        "the figure size is a harmless choice (README, 'How your figures are read')",
    'plot_loss_curve: figure, axes = plt.subplots(figsize=(6, 4)) -> figure, axes = plt.subplots(figsize=(7, 4))':
        "the figure size is a harmless choice (README, 'How your figures are read')",
    'plot_loss_curve: figure, axes = plt.subplots(figsize=(6, 4)) -> figure, axes = plt.subplots(figsize=(6, 5))':
        "the figure size is a harmless choice (README, 'How your figures are read')",
    'plot_loss_curve: axes.set_xlabel("optimizer step") -> axes.set_xlabel(None)':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_loss_curve: axes.set_xlabel("optimizer step") -> axes.set_xlabel("XXoptimizer stepXX")':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_loss_curve: axes.set_xlabel("optimizer step") -> axes.set_xlabel("OPTIMIZER STEP")':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_loss_curve: axes.set_ylabel("training loss (nats/token)") -> axes.set_ylabel(None)':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_loss_curve: axes.set_ylabel("training loss (nats/token)") -> axes.set_ylabel("XXtraining loss (nats/token)XX")':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_loss_curve: axes.set_ylabel("training loss (nats/token)") -> axes.set_ylabel("TRAINING LOSS (NATS/TOKEN)")':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_loss_curve: return _save_svg(figure, out_dir, "loss_curve.svg") -> return _save_svg(figure, out_dir, "XXloss_curve.svgXX")':
        'the README asks for an SVG file inside out_dir and its path, not its name',
    'plot_loss_curve: return _save_svg(figure, out_dir, "loss_curve.svg") -> return _save_svg(figure, out_dir, "LOSS_CURVE.SVG")':
        'the README asks for an SVG file inside out_dir and its path, not its name',
    'plot_seed_band: matplotlib.use("Agg") -> matplotlib.use("agg")':
        "matplotlib's backend names are case-insensitive",
    'plot_seed_band: matplotlib.use("Agg") -> matplotlib.use("AGG")':
        "matplotlib's backend names are case-insensitive",
    'plot_seed_band: figure, axes = plt.subplots(figsize=(6, 4)) -> figure, axes = plt.subplots(figsize=None)':
        "the figure size is a harmless choice (README, 'How your figures are read')",
    'plot_seed_band: figure, axes = plt.subplots(figsize=(6, 4)) -> figure, axes = plt.subplots(figsize=(7, 4))':
        "the figure size is a harmless choice (README, 'How your figures are read')",
    'plot_seed_band: figure, axes = plt.subplots(figsize=(6, 4)) -> figure, axes = plt.subplots(figsize=(6, 5))':
        "the figure size is a harmless choice (README, 'How your figures are read')",
    'plot_seed_band: axes.fill_between(curve.index, curve["min"], curve["max"], alpha=0.3, label=f"min-max of {len(log_paths)} seeds") -> axes.fill_between(curve.index, curve["min"], curve["max"], alpha=None, label=f"min-max of {len(log_paths)} seeds")':
        "the band's transparency is a harmless colour choice",
    'plot_seed_band: axes.fill_between(curve.index, curve["min"], curve["max"], alpha=0.3, label=f"min-max of {len(log_paths)} seeds") -> axes.fill_between(curve.index, curve["min"], curve["max"], alpha=0.3, label=None)':
        'a legend label is a harmless choice, not a line of the Axes',
    'plot_seed_band: axes.fill_between(curve.index, curve["min"], curve["max"], alpha=0.3, label=f"min-max of {len(log_paths)} seeds") -> axes.fill_between(curve.index, curve["min"], curve["max"], label=f"min-max of {len(log_paths)} seeds")':
        "the band's transparency is a harmless colour choice",
    'plot_seed_band: axes.fill_between(curve.index, curve["min"], curve["max"], alpha=0.3, label=f"min-max of {len(log_paths)} seeds") -> axes.fill_between(curve.index, curve["min"], curve["max"], alpha=0.3, )':
        'a legend label is a harmless choice, not a line of the Axes',
    'plot_seed_band: axes.plot(curve.index, curve["mean"], label="mean") -> axes.plot(curve.index, curve["mean"], label=None)':
        'a legend label is a harmless choice, not a line of the Axes',
    'plot_seed_band: axes.plot(curve.index, curve["mean"], label="mean") -> axes.plot(curve["mean"], label="mean")':
        'plot of a Series draws it against its index, the steps',
    'plot_seed_band: axes.plot(curve.index, curve["mean"], label="mean") -> axes.plot(curve.index, curve["mean"], )':
        'a legend label is a harmless choice, not a line of the Axes',
    'plot_seed_band: axes.plot(curve.index, curve["mean"], label="mean") -> axes.plot(curve.index, curve["mean"], label="XXmeanXX")':
        'a legend label is a harmless choice, not a line of the Axes',
    'plot_seed_band: axes.plot(curve.index, curve["mean"], label="mean") -> axes.plot(curve.index, curve["mean"], label="MEAN")':
        'a legend label is a harmless choice, not a line of the Axes',
    'plot_seed_band: axes.set_xlabel("optimizer step") -> axes.set_xlabel(None)':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_seed_band: axes.set_xlabel("optimizer step") -> axes.set_xlabel("XXoptimizer stepXX")':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_seed_band: axes.set_xlabel("optimizer step") -> axes.set_xlabel("OPTIMIZER STEP")':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_seed_band: axes.set_ylabel("training loss (nats/token)") -> axes.set_ylabel(None)':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_seed_band: axes.set_ylabel("training loss (nats/token)") -> axes.set_ylabel("XXtraining loss (nats/token)XX")':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_seed_band: axes.set_ylabel("training loss (nats/token)") -> axes.set_ylabel("TRAINING LOSS (NATS/TOKEN)")':
        "axis labels are a harmless choice (README, 'How your figures are read')",
    'plot_seed_band: return _save_svg(figure, out_dir, "seed_band.svg") -> return _save_svg(figure, out_dir, "XXseed_band.svgXX")':
        'the README asks for an SVG file inside out_dir and its path, not its name',
    'plot_seed_band: return _save_svg(figure, out_dir, "seed_band.svg") -> return _save_svg(figure, out_dir, "SEED_BAND.SVG")':
        'the README asks for an SVG file inside out_dir and its path, not its name',
    '_selected: keep &= table["category"].isin(where["categories"]) -> keep = table["category"].isin(where["categories"])':
        'keep is all True before the first filter, so &= and = give the same mask',
    '_save_svg: figure.savefig(path, format="svg") -> figure.savefig(path, format=None)':
        'the file name ends in .svg: savefig infers the SVG format from it',
    '_save_svg: figure.savefig(path, format="svg") -> figure.savefig(path, )':
        'the file name ends in .svg: savefig infers the SVG format from it',
    '_save_svg: figure.savefig(path, format="svg") -> figure.savefig(path, format="SVG")':
        "matplotlib's format names are case-insensitive",
    '_save_svg: plt.close(figure) -> plt.close(None)':
        'plt.close(None) closes the current figure, the one just saved',
}
