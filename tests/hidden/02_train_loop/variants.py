"""Mutants (the ways a loop can be almost right) and alternative correct solutions for exercise 02,
as edits of solutions/02_train_loop/train_loop.py (the course's) or of independent/train_loop.py (an
independent solution, written from the README and stub alone, and the bugs its author planted in
it). Every mutant breaks one rule its README marks. `grader audit 02` grades them all.

Sentences the README states but no run can observe carry no rule marker: `pad_id` inside `train`
(right padding under a causal mask never reaches a counted position), the file order of the eval
batches (the token mean does not depend on it), and the GPU-only advice on pinned memory (the GPU
tests check it on CUDA machines)."""
from grader.running.variants import INDEPENDENT, Alternative, Independent, Mutant

BACKWARD = "            (loss / tokens).backward()          # every token of the step weighs the same\n"
CLIP = '        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip_norm"]).item()\n'
NEXT_LR = '''        state["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"])
'''
RESTORE = '        state = _restore(out_dir / "checkpoint.pt", model, optimizer, generator)\n'
LOG_EVERY = '        if state["step"] % cfg["log_every"] == 0:\n'
EVAL_EVERY = '        if state["step"] % cfg["eval_every"] == 0:\n'
FINAL_EVAL = '''    with autocast():
        final_eval_loss = evaluate(model, eval_batches)
'''
AUTOCAST = ('    autocast = partial(torch.autocast, device_type=device.type, dtype=torch.bfloat16, '
            'enabled=cfg["amp"] == "bf16")\n')
LOADER = '''    loader = DataLoader(train_set, batch_size=cfg["batch_size"], shuffle=True, drop_last=True,
                        generator=generator, collate_fn=batch_of, pin_memory=device.type == "cuda")
'''
SUBPLOTS = '    figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))\n'

COURSE_MUTANTS = [
    # Batching and padding
    Mutant("pad_to_fixed_width", rule="collate.batch_width", note="pads to a global 32, as max_length padding",
           edits={'    width = max(len(example["input_ids"]) for example in examples)\n':
                  '    width = max(32, max(len(example["input_ids"]) for example in examples))\n'}),
    Mutant("left_padding", rule="collate.right_pad", note="pads on the left, as for generation",
           edits={'''        input_ids[row, :n] = torch.tensor(example["input_ids"])
        labels[row, :n] = torch.tensor(example.get("labels", example["input_ids"]))
        attention_mask[row, :n] = 1
''': '''        input_ids[row, width - n:] = torch.tensor(example["input_ids"])
        labels[row, width - n:] = torch.tensor(example.get("labels", example["input_ids"]))
        attention_mask[row, width - n:] = 1
'''}),
    Mutant("given_labels_ignored", rule="collate.labels", note="an SFT example's prompt mask is lost",
           edits={'        labels[row, :n] = torch.tensor(example.get("labels", example["input_ids"]))\n':
                  '        labels[row, :n] = torch.tensor(example["input_ids"])\n'}),
    Mutant("pad_labels_kept", rule="collate.pad_labels", note="padding is trained on and counted",
           edits={"    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)\n":
                  "    labels = torch.full((len(examples), width), pad_id, dtype=torch.long)\n"}),
    Mutant("attention_mask_all_ones", rule="collate.attention_mask", note="padding is attended to",
           edits={"    attention_mask = torch.zeros((len(examples), width), dtype=torch.long)\n":
                  "    attention_mask = torch.ones((len(examples), width), dtype=torch.long)\n"}),
    Mutant("collate_pads_every_key", rule="collate.other_keys", note="a generic padder for every key",
           functions={"collate": '''
def collate(examples, pad_id):
    width = max(len(example["input_ids"]) for example in examples)
    fills = {"input_ids": pad_id, "labels": IGNORE_INDEX}
    examples = [{"labels": example["input_ids"], **example} for example in examples]
    batch = {key: torch.tensor([list(example[key]) + [fills.get(key, 0)] * (width - len(example[key]))
                                for example in examples], dtype=torch.long) for key in examples[0]}
    batch["attention_mask"] = (torch.arange(width)[None, :] < torch.tensor([len(e["input_ids"]) for e in examples])[:, None]).long()
    return batch
'''}),

    # The loss
    Mutant("labels_not_shifted", rule="loss.shift", note="the model learns to copy its input",
           edits={"    logits = logits[:, :-1, :].float()\n    targets = labels[:, 1:]\n":
                  "    logits = logits.float()\n    targets = labels\n"}),
    Mutant("labels_shifted_twice", rule="loss.shift",
           note="shifted in the loop and again in the loss: predicts two tokens ahead",
           edits={'            loss = causal_lm_loss(logits, batch["labels"], reduction="sum")\n':
                  '''            shifted = torch.cat([batch["labels"][:, 1:], torch.full_like(batch["labels"][:, :1], IGNORE_INDEX)], 1)
            loss = causal_lm_loss(logits, shifted, reduction="sum")
'''}),
    Mutant("mean_over_all_positions", rule="loss.ignore_index", note="masked positions still count in the mean",
           functions={"causal_lm_loss": '''
def causal_lm_loss(logits, labels, reduction="mean"):
    logits = logits[:, :-1, :].float()
    targets = labels[:, 1:]
    total = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=IGNORE_INDEX,
                            reduction="sum")
    return total if reduction == "sum" else total / targets.numel()
'''}),
    Mutant("loss_in_bf16", rule="loss.float32", note="no .float() before the cross-entropy",
           edits={"    logits = logits[:, :-1, :].float()\n": "    logits = logits[:, :-1, :]\n"}),
    Mutant("upcast_half_only", rule="loss.float32_result", note="float64 logits give a float64 loss",
           edits={"    logits = logits[:, :-1, :].float()\n":
                  "    logits = logits[:, :-1, :]\n    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits\n"}),
    Mutant("sum_reduction_ignored", rule="loss.reductions", note="always the mean",
           edits={"ignore_index=IGNORE_INDEX, reduction=reduction)": 'ignore_index=IGNORE_INDEX, reduction="mean")'}),
    Mutant("empty_mean_is_zero", rule="loss.no_tokens", note="a mean over nothing hidden as 0",
           functions={"causal_lm_loss": '''
def causal_lm_loss(logits, labels, reduction="mean"):
    logits = logits[:, :-1, :].float()
    targets = labels[:, 1:]
    total = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=IGNORE_INDEX,
                            reduction="sum")
    return total if reduction == "sum" else total / (targets != IGNORE_INDEX).sum().clamp(min=1)
'''}),

    # Weight decay groups
    Mutant("decay_everything", rule="groups.ndim", note="biases and norm gains decay too",
           edits={'''    return [{"params": [p for p in trainable if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in trainable if p.ndim < 2], "weight_decay": 0.0}]''':
                  '''    return [{"params": trainable, "weight_decay": weight_decay}]'''}),
    Mutant("frozen_parameters_included", rule="groups.frozen", note="frozen parameters go to the optimizer",
           edits={"    trainable = [p for p in model.parameters() if p.requires_grad]\n":
                  "    trainable = list(model.parameters())\n"}),
    Mutant("tied_parameter_twice", rule="groups.once", note="tied embeddings listed under both names",
           edits={"    trainable = [p for p in model.parameters() if p.requires_grad]\n":
                  "    trainable = [p for _, p in model.named_parameters(remove_duplicate=False) if p.requires_grad]\n"}),

    # Warmup and cosine
    Mutant("warmup_from_max_lr", rule="lr.warmup", note="no warmup at all",
           edits={"        return max_lr * step / warmup_steps\n": "        return max_lr\n"}),
    Mutant("cosine_rises_past_total", rule="lr.floor", note="transformers' cosine, which rises again",
           edits={"    if step >= total_steps:\n        return min_lr\n": ""}),
    Mutant("floor_after_total", rule="lr.floor", note="step == total_steps still on the cosine",
           edits={"    if step >= total_steps:\n": "    if step > total_steps:\n"}),
    Mutant("schedule_per_micro_batch", rule="lr.per_optimizer_step", note="the schedule advances per micro-batch",
           edits={NEXT_LR: '''        state["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"] * cfg["grad_accum_steps"])
'''}),
    Mutant("first_step_at_max_lr", rule="lr.first_step", note="the optimizer built with lr=max_lr",
           edits={'param_groups(model, cfg["weight_decay"]), lr=schedule(0),': 'param_groups(model, cfg["weight_decay"]), lr=cfg["max_lr"],'}),

    # Zeroing gradients
    Mutant("no_zero_grad", rule="zero.once_per_step", note="gradients of every step pile up",
           edits={"        optimizer.zero_grad(set_to_none=True)\n": ""}),
    Mutant("zero_grad_keeps_tensors", rule="zero.set_to_none", note="zero_grad(set_to_none=False)",
           edits={"        optimizer.zero_grad(set_to_none=True)\n": "        optimizer.zero_grad(set_to_none=False)\n"}),

    # Gradient accumulation
    Mutant("zero_grad_per_micro_batch", rule="accum.micro_batches", note="only the last micro-batch survives",
           edits={BACKWARD: "            optimizer.zero_grad(set_to_none=True)\n" + BACKWARD}),
    Mutant("no_normalisation", rule="accum.token_weighting", note="summed token losses, never divided",
           edits={BACKWARD: "            loss.backward()\n"}),
    Mutant("divide_by_accum_steps", rule="accum.token_weighting",
           note="the primer's loss / accumulation_steps",
           edits={BACKWARD: '            (causal_lm_loss(logits, batch["labels"]) / cfg["grad_accum_steps"]).backward()\n'}),

    # Clipping
    Mutant("clip_each_parameter", rule="clip.global", note="per-parameter clipping changes the direction",
           edits={CLIP: '''        grad_norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()
        for parameter in model.parameters():
            torch.nn.utils.clip_grad_norm_(parameter, cfg["clip_norm"])
'''}),
    Mutant("no_clipping", rule="clip.bound", note="the norm is logged, never enforced",
           edits={CLIP: '        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")).item()\n'}),
    Mutant("clip_after_step", rule="clip.before_step", note="clips gradients that were already applied",
           edits={CLIP: "", "        optimizer.step()\n": "        optimizer.step()\n" + CLIP}),
    Mutant("log_norm_after_clipping", rule="clip.log_pre_clip", note="the norm measured after the clip",
           edits={CLIP: CLIP + '        grad_norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()\n'}),

    # The optimizer step
    Mutant("adam_eps_1e-6", rule="opt.adamw", note="another eps than the contract's",
           edits={"betas=tuple(cfg[\"betas\"]), eps=1e-8)": "betas=tuple(cfg[\"betas\"]), eps=1e-6)"}),
    Mutant("schedule_off_by_one", concept="Warmup and cosine", rule="opt.next_lr", note="each step runs with the next step's rate",
           edits={NEXT_LR: '''        state["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"] + 1)
'''}),

    # Mixed precision
    Mutant("amp_ignored", rule="amp.autocast", note="amp='bf16' trains in fp32",
           edits={AUTOCAST: AUTOCAST.replace('enabled=cfg["amp"] == "bf16"', "enabled=False")}),
    Mutant("autocast_always", rule="amp.autocast", note="autocast whatever amp says",
           edits={AUTOCAST: AUTOCAST.replace('enabled=cfg["amp"] == "bf16"', "enabled=True")}),
    Mutant("bf16_weights", rule="amp.fp32_master", note="model.to(bfloat16) instead of autocast",
           edits={"    model = _build_model(cfg).to(device)\n":
                  '    model = _build_model(cfg).to(device)\n    if cfg["amp"] == "bf16":\n        model = model.to(torch.bfloat16)\n'}),

    # Evaluation mode
    Mutant("evaluate_with_grad", rule="eval.no_grad", note="builds a graph for nothing",
           edits={"    with torch.no_grad():\n        for batch in batches:": "    with torch.enable_grad():\n        for batch in batches:"}),
    Mutant("evaluate_in_train_mode", rule="eval.eval_mode", note="dropout stays on while evaluating",
           edits={"    model.eval()\n    total, count = 0.0, 0\n": "    total, count = 0.0, 0\n"}),
    Mutant("evaluate_leaves_eval_mode", rule="eval.restore", note="training goes on in eval mode",
           edits={"    model.train(was_training)\n": ""}),
    Mutant("evaluate_mean_of_batch_means", rule="eval.token_mean", note="a short batch's tokens weigh more",
           edits={'            total += causal_lm_loss(logits, batch["labels"], reduction="sum").item()\n'
                  '            count += int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())\n':
                  '            total += causal_lm_loss(logits, batch["labels"]).item()\n            count += 1\n'}),
    Mutant("evaluate_returns_tensor", rule="eval.float", note="the losses summed as tensors",
           edits={'            total += causal_lm_loss(logits, batch["labels"], reduction="sum").item()\n':
                  '            total += causal_lm_loss(logits, batch["labels"], reduction="sum")\n'}),

    # Resuming
    Mutant("resume_forgets_weights", rule="resume.model", note="the model starts from its initialisation",
           edits={'    model.load_state_dict(checkpoint["model"])\n': ""}),
    Mutant("resume_forgets_optimizer", rule="resume.optimizer", note="AdamW's moments start from zero again",
           edits={'    optimizer.load_state_dict(checkpoint["optimizer"])\n': ""}),
    Mutant("resume_restarts_step", rule="resume.step", note="the step starts from 0 again",
           edits={RESTORE: RESTORE + '        state["step"] = 0\n'}),
    Mutant("resume_restarts_data", rule="resume.data", note="the data order starts over from the seed",
           edits={RESTORE: RESTORE + '''        state["epoch_generator_state"] = torch.Generator().manual_seed(cfg["seed"]).get_state()
        state["batches_into_epoch"] = 0
'''}),
    Mutant("resume_forgets_rng", rule="resume.rng", note="dropout draws from the state after the build",
           edits={'    torch.set_rng_state(checkpoint["rng"])\n': ""}),
    Mutant("resume_appends_to_log", rule="resume.log_file", note="log lines after the checkpoint stay",
           edits={'    _write_jsonl(out_dir / "log.jsonl", state["log"])\n':
                  '    if not cfg["resume"]:\n        _write_jsonl(out_dir / "log.jsonl", state["log"])\n'}),
    Mutant("resume_returns_new_entries_only", rule="resume.returned", note="the returned log starts at the resume",
           edits={'    _write_jsonl(out_dir / "log.jsonl", state["log"])\n':
                  '    _write_jsonl(out_dir / "log.jsonl", state["log"])\n    resumed_from = len(state["log"])\n',
                  '    return {"log": state["log"], "eval": state["eval"],':
                  '    return {"log": state["log"][resumed_from:], "eval": state["eval"],'}),
    Mutant("resume_without_checkpoint_starts_afresh", rule="resume.missing", note="a missing checkpoint ignored",
           edits={'    if cfg["resume"]:\n': '    if cfg["resume"] and (out_dir / "checkpoint.pt").exists():\n'}),
    Mutant("resume_ignored", rule="resume.step", note="resume=True trains again from step 0",
           edits={'    if cfg["resume"]:\n': "    if False:\n"}),
    Mutant("resume_truncates_log", rule="resume.log_file",
           note='log.jsonl reopened with "w" on resume: the lines before the checkpoint are lost',
           edits={'    _write_jsonl(out_dir / "log.jsonl", state["log"])\n': '    _write_jsonl(out_dir / "log.jsonl", [])\n'}),

    # The run record
    Mutant("run_id_from_seed", rule="record.run_id", note="two runs of one seed share an id",
           edits={'"run_id": uuid.uuid4().hex,': '"run_id": f"run-{cfg[\'seed\']}",'}),
    Mutant("commit_short_describe", rule="record.commit", note="git describe's short hash",
           edits={'["git", "rev-parse", "HEAD"]': '["git", "describe", "--always"]'}),
    Mutant("config_as_given", rule="record.config", note="the defaults are not recorded",
           edits={'    cfg = {**DEFAULTS, **cfg}\n': '    given, cfg = dict(cfg), {**DEFAULTS, **cfg}\n',
                  '"config": {key: list(value) if isinstance(value, tuple) else value for key, value in cfg.items()},':
                  '"config": {key: list(value) if isinstance(value, tuple) else value for key, value in cfg["given"].items()},',
                  '    record = _write_record(out_dir / "run.json", cfg, final_eval_loss':
                  '    record = _write_record(out_dir / "run.json", {**cfg, "given": given}, final_eval_loss'}),
    Mutant("data_version_by_name", rule="record.data_version", note="a file name is not a data version",
           edits={'"data_version": {"train_path": _sha256(cfg["train_path"]), "eval_path": _sha256(cfg["eval_path"])},':
                  '"data_version": {"train_path": cfg["train_path"], "eval_path": cfg["eval_path"]},'}),
    Mutant("record_seed_default", rule="record.seed", note="the default seed, not the run's",
           edits={'        "seed": cfg["seed"],\n': '        "seed": DEFAULTS["seed"],\n'}),
    Mutant("environment_without_versions", rule="record.environment", note="the platform alone",
           edits={'''        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": transformers.__version__, "platform": platform.platform(),
                        "device": cfg["device"]},''': '''        "environment": {"platform": platform.platform(), "device": cfg["device"]},'''}),
    Mutant("metrics_final_loss_only", rule="record.metrics", note="no steps, tokens or throughput",
           edits={'''        "metrics": {"final_eval_loss": final_eval_loss, "steps": state["step"], "tokens": state["tokens"],
                    "tokens_per_s": state["tokens"] / max(seconds, 1e-9), "wall_s": seconds},''':
                  '''        "metrics": {"final_eval_loss": final_eval_loss},'''}),
    Mutant("log_lr_of_next_step", rule="record.log_fields", note="the rate already set for the next step",
           edits={'"lr": lr, "grad_norm": grad_norm, "tokens": tokens}': '"lr": optimizer.param_groups[0]["lr"], "grad_norm": grad_norm, "tokens": tokens}'}),

    # Curves
    Mutant("one_axes", rule="curves.two_subplots", note="loss and learning rate drawn on one axes",
           edits={SUBPLOTS: '    figure, loss_axes = plt.subplots(figsize=(7, 6))\n    lr_axes = loss_axes\n'}),
    Mutant("linear_step_axis", rule="curves.log_steps", note="the first steps vanish into a few pixels",
           edits={'    loss_axes.set_xscale("log")\n': ""}),
    Mutant("lr_axis_not_shared", rule="curves.log_steps", note="the lr's step axis stays linear",
           edits={SUBPLOTS: SUBPLOTS.replace("sharex=True", "sharex=False")}),
    Mutant("lr_above_loss", rule="curves.order", note="the subplots swapped",
           edits={SUBPLOTS: SUBPLOTS.replace("(loss_axes, lr_axes)", "(lr_axes, loss_axes)")}),
    Mutant("saved_as_svg", rule="curves.png", note="an SVG behind a .png name",
           edits={'    figure.savefig(png_path, format="png")\n': '    figure.savefig(png_path, format="svg")\n'}),

    # The determinism contract
    Mutant("unseeded_init", rule="det.seed_model", note="the model's initialisation is not seeded",
           edits={'    torch.manual_seed(cfg["seed"])          # a scratch model\'s weights and every dropout mask draw from here\n': ""}),
    Mutant("pretrained_unseeded", rule="det.seed_model", note="seeded for scratch only: dropout unseeded",
           edits={'    torch.manual_seed(cfg["seed"])          # a scratch model\'s weights and every dropout mask draw from here\n':
                  '    if config is not None:\n        torch.manual_seed(cfg["seed"])\n'}),
    Mutant("init_ignored", rule="det.init", note="always a fresh model from the config",
           edits={'    config = None if cfg["init"] == "pretrained" else AutoConfig.from_pretrained(cfg["model_dir"])\n':
                  '    config = AutoConfig.from_pretrained(cfg["model_dir"])\n'}),
    Mutant("pretrained_in_checkpoint_dtype", rule="det.float32", note="a bf16 file loads as bf16",
           edits={'        return AutoModelForCausalLM.from_pretrained(cfg["model_dir"], dtype=torch.float32)\n':
                  '        return AutoModelForCausalLM.from_pretrained(cfg["model_dir"])\n'}),
    Mutant("unseeded_shuffle", rule="det.data_order", note="the shuffle ignores the seed",
           edits={'    generator = torch.Generator().manual_seed(cfg["seed"])\n': '    generator = torch.Generator()\n'}),
    Mutant("keeps_last_partial_batch", rule="det.drop_last", note="an incomplete last batch is trained on",
           edits={LOADER: LOADER.replace("drop_last=True", "drop_last=False")}),
    Mutant("same_order_every_epoch", rule="det.epochs", note="the generator reseeded at every epoch",
           edits={'        skip = 0\n        state["batches_into_epoch"] = 0\n':
                  '        skip = 0\n        state["batches_into_epoch"] = 0\n        generator.set_state(state["epoch_generator_state"])\n'}),
    Mutant("steps_within_epochs", rule="det.straddle", note="an epoch's batches that cannot fill a step skipped",
           edits={"    micro_batches = _micro_batches(loader, generator, state)\n":
                  '    micro_batches = _micro_batches(loader, generator, state, cfg["grad_accum_steps"])\n',
                  "def _micro_batches(loader, generator, state):\n": "def _micro_batches(loader, generator, state, whole=1):\n",
                  "            if index < skip:\n                continue\n":
                  "            if index < skip:\n                continue\n            if index >= len(loader) - len(loader) % whole:\n                break\n"}),
    Mutant("eval_drops_last_batch", rule="det.eval_batches", note="the smaller last eval batch left out",
           edits={'for i in range(0, len(eval_set), cfg["batch_size"])]': 'for i in range(0, len(eval_set) - cfg["batch_size"] + 1, cfg["batch_size"])]'}),
    Mutant("tokens_before_shift", rule="det.step_tokens", note="the first label of every row counted too",
           edits={'        tokens = sum(int((b["labels"][:, 1:] != IGNORE_INDEX).sum()) for b in step_batches)\n':
                  '        tokens = sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in step_batches)\n'}),
    Mutant("never_train_mode", rule="det.train_mode", note="a pretrained model trains in eval mode",
           edits={"    model.train()\n    while": "    while"}),
    Mutant("log_from_step_zero", rule="det.log_every", note="logs steps 1, 1 + log_every, ...",
           edits={LOG_EVERY: '        if (state["step"] - 1) % cfg["log_every"] == 0:\n'}),
    Mutant("eval_from_step_zero", rule="det.eval_every", note="evaluates steps 1, 1 + eval_every, ...",
           edits={EVAL_EVERY: '        if (state["step"] - 1) % cfg["eval_every"] == 0:\n'}),
    Mutant("checkpoint_every_log_line", concept="Resuming", rule="det.eval_every", note="a checkpoint at every log line",
           edits={'            _write_jsonl(out_dir / "log.jsonl", [entry], mode="a")\n':
                  '            _write_jsonl(out_dir / "log.jsonl", [entry], mode="a")\n            _save(out_dir / "checkpoint.pt", model, optimizer, state)\n'}),
    Mutant("final_eval_listed", rule="det.eval_entries", note="the final evaluation appended to eval",
           edits={FINAL_EVAL: FINAL_EVAL + '    if not state["eval"] or state["eval"][-1]["step"] != state["step"]:\n'
                                           '        state["eval"].append({"step": state["step"], "eval_loss": final_eval_loss})\n'}),
    Mutant("final_eval_listed_twice", rule="det.eval_entries", note="step max_steps listed twice",
           edits={FINAL_EVAL: FINAL_EVAL + '    state["eval"].append({"step": state["step"], "eval_loss": final_eval_loss})\n'}),
    Mutant("final_eval_is_last_periodic", rule="det.final_eval", note="the last periodic evaluation reused",
           edits={FINAL_EVAL: '''    with autocast():
        final_eval_loss = state["eval"][-1]["eval_loss"] if state["eval"] else evaluate(model, eval_batches)
'''}),
    Mutant("resume_runs_max_steps_more", concept="Resuming", rule="det.resume_to_max", note="max_steps more after the resume",
           edits={'    while state["step"] < cfg["max_steps"]:\n':
                  '    last_step = state["step"] + cfg["max_steps"]\n    while state["step"] < last_step:\n'}),
    Mutant("log_file_rounded", rule="det.returns", note="log.jsonl holds rounded numbers",
           edits={'            _write_jsonl(out_dir / "log.jsonl", [entry], mode="a")\n':
                  '            _write_jsonl(out_dir / "log.jsonl", [{k: round(v, 4) for k, v in entry.items()}], mode="a")\n'}),

    # Configuration
    Mutant("default_eval_every_10", rule="config.defaults", note="another default than the README's",
           edits={'"log_every": 1, "eval_every": 50,': '"log_every": 1, "eval_every": 10,'}),
    Mutant("out_dir_must_exist", rule="config.out_dir", note="out_dir not created",
           edits={"    out_dir.mkdir(parents=True, exist_ok=True)\n": ""}),
]


def independent(name, rule, note, old, new, concept=None):
    """One of the bugs the independent solution's author planted, as they wrote it."""
    return Mutant(name, rule=rule, concept=concept, note=note, edits={old: new}, base=INDEPENDENT)


INDEPENDENT_MUTANTS = [
    independent("labels_padded_with_pad_id", "collate.pad_labels", "fills label padding with pad_id instead of -100",
                "labels = torch.full((len(examples), width), -100, dtype=torch.long)",
                "labels = torch.full((len(examples), width), pad_id, dtype=torch.long)"),
    independent("attention_mask_bool", "collate.long", "builds the attention mask as a bool tensor",
                "attention_mask = torch.zeros((len(examples), width), dtype=torch.long)",
                "attention_mask = torch.zeros((len(examples), width), dtype=torch.bool)"),
    independent("warmup_off_by_one", "lr.warmup", "warmup starts at max_lr/warmup instead of 0",
                "return max_lr * step / warmup_steps", "return max_lr * (step + 1) / warmup_steps"),
    independent("cosine_ignores_floor", "lr.cosine", "cosine decays from max_lr to 0 and then adds the floor",
                "return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))",
                "return min_lr + max_lr * 0.5 * (1.0 + math.cos(math.pi * progress))"),
    independent("schedule_per_micro_batch_ind", "lr.per_optimizer_step", "advances the schedule by the number of micro-batches",
                "        _set_lr(optimizer, lr_at(step, **schedule))\n        optimizer.zero_grad",
                "        _set_lr(optimizer, lr_at(step * cfg[\"grad_accum_steps\"], **schedule))\n        optimizer.zero_grad"),
    independent("schedule_total_excludes_warmup", "det.total_steps", "passes max_steps - warmup_steps as the schedule's total",
                "total_steps=cfg[\"max_steps\"],", "total_steps=cfg[\"max_steps\"] - cfg[\"warmup_steps\"],", concept="Warmup and cosine"),
    independent("decay_only_ndim_above_2", "groups.ndim", "off-by-one in the ndim threshold: matrices and embeddings stop decaying",
                "(decay if param.ndim >= 2 else no_decay).append(param)", "(decay if param.ndim > 2 else no_decay).append(param)"),
    independent("frozen_params_in_optimizer", "groups.frozen", "forgets to filter out frozen parameters",
                "        if not param.requires_grad:\n            continue\n", ""),
    independent("no_decay_group_decays", "groups.ndim", "gives both groups the configured weight decay",
                "{\"params\": no_decay, \"weight_decay\": 0.0}", "{\"params\": no_decay, \"weight_decay\": weight_decay}"),
    independent("loss_without_shift", "loss.shift", "forgets the shift: scores position t against token t",
                "    shift_logits = logits[:, :-1, :].float()\n    shift_labels = labels[:, 1:].to(shift_logits.device)",
                "    shift_logits = logits.float()\n    shift_labels = labels.to(shift_logits.device)"),
    independent("loss_in_logits_dtype", "loss.float32", "drops the .float(): bf16 logits give a bf16 softmax and loss",
                "shift_logits = logits[:, :-1, :].float()", "shift_logits = logits[:, :-1, :]"),
    independent("accum_mean_over_micro_batches", "accum.token_weighting",
                "the primer's loss / accumulation_steps with a per-micro-batch mean",
                "loss = causal_lm_loss(logits, labels, \"sum\") / divisor",
                "loss = causal_lm_loss(logits, labels) / cfg[\"grad_accum_steps\"]"),
    independent("zero_grad_per_micro_batch_ind", "accum.micro_batches",
                "zeroes before every micro-batch's backward, so only the last micro-batch's gradient is used",
                "            loss.backward()\n", "            optimizer.zero_grad(set_to_none=True)\n            loss.backward()\n"),
    independent("clip_after_step_ind", "clip.before_step", "clips after optimizer.step(), so the update is unclipped",
                "        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg[\"clip_norm\"])\n"
                "        lr_used = optimizer.param_groups[0][\"lr\"]\n        optimizer.step()\n",
                "        lr_used = optimizer.param_groups[0][\"lr\"]\n        optimizer.step()\n"
                "        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg[\"clip_norm\"])\n"),
    independent("adamw_default_betas", "opt.adamw", "does not pass betas, so AdamW uses its own (0.9, 0.999)",
                "betas=tuple(cfg[\"betas\"]), eps=1e-8)", "eps=1e-8)"),
    independent("next_lr_one_step_ahead", "opt.next_lr",
                "sets the next step's rate to lr_at(s + 1): every step after the first runs one step ahead on the schedule",
                "        _set_lr(optimizer, lr_at(step, **schedule))\n        optimizer.zero_grad",
                "        _set_lr(optimizer, lr_at(step + 1, **schedule))\n        optimizer.zero_grad", concept="Warmup and cosine"),
    independent("model_cast_to_bf16", "amp.fp32_master", "casts the model to bf16 when amp is on",
                "model = model.to(device=device, dtype=torch.float32)",
                "model = model.to(device=device, dtype=torch.bfloat16 if cfg[\"amp\"] == \"bf16\" else torch.float32)"),
    independent("eval_mean_of_batch_means", "eval.token_mean", "averages per-batch mean losses",
                "                total += causal_lm_loss(logits, labels, \"sum\").item()\n                count += _count_tokens(labels)\n",
                "                total += causal_lm_loss(logits, labels).item()\n                count += 1\n"),
    independent("eval_leaves_train_mode_on", "eval.restore",
                "always switches back to train mode instead of restoring the previous mode",
                "model.train(was_training)", "model.train()"),
    independent("eval_builds_graph", "eval.no_grad", "forgets torch.no_grad() in evaluate",
                "        with torch.no_grad():\n            for batch in batches:",
                "        with torch.enable_grad():\n            for batch in batches:"),
    independent("resume_restarts_epoch", "resume.data", "does not skip the batches of the epoch already consumed",
                "    for _ in range(consumed):\n        next(batches)\n", ""),
    independent("resume_fresh_optimizer", "resume.optimizer", "restores the weights but not the optimizer state",
                "        optimizer.load_state_dict(ckpt[\"optimizer\"])\n", ""),
    independent("resume_keeps_stale_log", "resume.log_file",
                "appends to the old log instead of rewriting it up to the checkpoint",
                "    with open(log_path, \"w\") as f:", "    with open(log_path, \"a\") as f:"),
    independent("data_version_hashes_path", "record.data_version", "hashes the file name instead of the file's contents",
                "\"data_version\": {key: _sha256(cfg[key]) for key in (\"train_path\", \"eval_path\")},",
                "\"data_version\": {key: hashlib.sha256(cfg[key].encode()).hexdigest() for key in (\"train_path\", \"eval_path\")},"),
    independent("log_lr_after_update", "record.log_fields", "logs the rate already set for the next step",
                "\"lr\": lr_used,", "\"lr\": optimizer.param_groups[0][\"lr\"],"),
    independent("log_loss_last_micro_batch", "record.log_fields", "logs only the last micro-batch's share of the loss",
                "step_loss += loss.item()", "step_loss = loss.item()"),
    independent("config_without_defaults", "record.config", "records the cfg the caller passed, without the defaults",
                "        \"config\": cfg,\n        \"data_version\"",
                "        \"config\": {key: cfg[key] for key in cfg if key not in DEFAULTS or cfg[key] != DEFAULTS[key]},\n"
                "        \"data_version\""),
    independent("curves_linear_step_axis", "curves.log_steps", "leaves the step axis linear",
                "        ax_loss.set_xscale(\"log\")", "        ax_loss.set_xscale(\"linear\")"),
    independent("shuffle_generator_unseeded", "det.data_order",
                "uses a fresh unseeded generator (its fixed default seed), so the data order ignores `seed`",
                "generator = torch.Generator().manual_seed(seed)", "generator = torch.Generator()"),
    independent("tokens_counted_before_shift", "det.step_tokens",
                "counts non-masked labels before the shift (one token too many per row)",
                "return int((labels[:, 1:] != -100).sum())", "return int((labels != -100).sum())"),
    independent("eval_drops_last_batch_ind", "det.eval_batches", "drops the incomplete last eval batch",
                "for i in range(0, len(eval_set), cfg[\"batch_size\"])]",
                "for i in range(0, len(eval_set) - cfg[\"batch_size\"] + 1, cfg[\"batch_size\"])]"),
    independent("seed_after_model_init", "det.seed_model",
                "seeds after building the model, so the initial weights do not depend on the seed",
                "        torch.manual_seed(seed)\n        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg[\"model_dir\"]))\n",
                "        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg[\"model_dir\"]))\n        torch.manual_seed(seed)\n"),
    independent("default_betas_pytorch", "config.defaults", "takes PyTorch's default betas as the config default",
                "\"betas\": (0.9, 0.95),", "\"betas\": (0.9, 0.999),"),
    independent("default_warmup_zero", "config.defaults", "defaults to no warmup",
                "\"warmup_steps\": 10,", "\"warmup_steps\": 0,"),
    # Added by the course on the same base: the resume gap an earlier suite left open (no dropout
    # in the resumed model, so a forgotten RNG state could not show).
    independent("resume_forgets_rng_ind", "resume.rng", "restores everything but the random-number states",
                "        _set_rng_states(ckpt[\"rng\"])\n", ""),
]

MUTANTS = COURSE_MUTANTS + INDEPENDENT_MUTANTS

ALTERNATIVES = [
    Alternative("lambda_lr", note="a LambdaLR stepped once per optimizer step, rebuilt at its step on resume",
                edits={'optimizer = torch.optim.AdamW(param_groups(model, cfg["weight_decay"]), lr=schedule(0),':
                       'optimizer = torch.optim.AdamW(param_groups(model, cfg["weight_decay"]), lr=cfg["max_lr"],',
                       '''    generator = torch.Generator().manual_seed(cfg["seed"])
''': '''    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: schedule(s) / cfg["max_lr"])
    generator = torch.Generator().manual_seed(cfg["seed"])
''',
                       '''        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"])
    _write_jsonl''': '''        # the constructor takes one step itself: from last_epoch = step - 1 to step
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: schedule(s) / cfg["max_lr"],
                                                      last_epoch=state["step"] - 1)
    _write_jsonl''',
                       NEXT_LR: '        state["step"] += 1\n        scheduler.step()\n'}),
    Alternative("masked_sum_loss", note="per-token losses, masked and summed by hand",
                functions={"causal_lm_loss": '''
def causal_lm_loss(logits, labels, reduction="mean"):
    shift_logits = logits[..., :-1, :].float()
    shift_labels = labels[..., 1:]
    counted = shift_labels != IGNORE_INDEX
    losses = F.cross_entropy(shift_logits.transpose(1, 2), shift_labels.clamp(min=0), reduction="none")
    total = (losses * counted).sum()
    return total if reduction == "sum" else total / counted.sum()
'''}),
    Alternative("evaluate_with_model_loss", note="the model's own loss with num_items_in_batch, summed",
                functions={"evaluate": '''
@torch.no_grad()
def evaluate(model, batches):
    mode = model.training
    model.eval()
    device = next(model.parameters()).device
    total = count = 0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        total += model(**batch, num_items_in_batch=torch.tensor(1)).loss.item()
        count += (batch["labels"][:, 1:] != -100).sum().item()
    model.train(mode)
    return total / count
'''}),
    Alternative("pad_sequence_collate", note="torch's pad_sequence instead of a filled rectangle",
                functions={"collate": '''
def collate(examples, pad_id):
    pad = torch.nn.utils.rnn.pad_sequence
    ids = [torch.tensor(e["input_ids"], dtype=torch.long) for e in examples]
    labels = [torch.tensor(e.get("labels", e["input_ids"]), dtype=torch.long) for e in examples]
    return {"input_ids": pad(ids, batch_first=True, padding_value=pad_id),
            "labels": pad(labels, batch_first=True, padding_value=IGNORE_INDEX),
            "attention_mask": pad([torch.ones_like(i) for i in ids], batch_first=True, padding_value=0)}
'''}),
    Alternative("log_filtered_on_resume", note="log.jsonl filtered to the checkpoint's step, not rewritten from it",
                edits={'    _write_jsonl(out_dir / "log.jsonl", state["log"])\n': '''    if cfg["resume"]:
        kept = [entry for entry in _read_jsonl(out_dir / "log.jsonl") if entry["step"] <= state["step"]]
        state["log"] = kept
    _write_jsonl(out_dir / "log.jsonl", state["log"])
'''}),
    Alternative("weights_only_checkpoint", note="the checkpoint read back with torch.load(weights_only=True)",
                edits={"    checkpoint = torch.load(path, weights_only=False)\n": "    checkpoint = torch.load(path, weights_only=True)\n"}),
    Independent(),
]


# Operator mutants no test can kill: each changes nothing a learner could observe under the README's
# contract on this machine (the reason says why).
EQUIVALENT = {
    'collate: input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long) -> input_ids = torch.full((len(examples), width), pad_id, dtype=None)':
        'torch.full infers int64 from an int fill value, as dtype=torch.long says',
    'collate: input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long) -> input_ids = torch.full((len(examples), width), pad_id, )':
        'torch.full infers int64 from an int fill value, as dtype=torch.long says',
    'collate: labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long) -> labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=None)':
        'torch.full infers int64 from an int fill value (-100), as dtype=torch.long says',
    'collate: labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long) -> labels = torch.full((len(examples), width), IGNORE_INDEX, )':
        'torch.full infers int64 from an int fill value (-100), as dtype=torch.long says',
    'lr_at: progress = (step - warmup_steps) / max(1, total_steps - warmup_steps) -> progress = (step - warmup_steps) / max(2, total_steps - warmup_steps)':
        'the divisor changes only when total_steps - warmup_steps is 1, where the one cosine step has progress 0 either way',
    'causal_lm_loss: ignore_index=IGNORE_INDEX, reduction=reduction) -> reduction=reduction)':
        "F.cross_entropy's ignore_index defaults to -100",
    'evaluate: device = next(model.parameters()).device -> device = None':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'evaluate: batch = {key: value.to(device) for key, value in batch.items()} -> batch = {key: value.to(None) for key, value in batch.items()}':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'evaluate: logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits -> logits = model(input_ids=batch["input_ids"], attention_mask=None).logits':
        'right padding under a causal mask: no real token attends to a pad, so the mask changes no counted logit',
    'evaluate: logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits -> logits = model(input_ids=batch["input_ids"], ).logits':
        'right padding under a causal mask: no real token attends to a pad, so the mask changes no counted logit',
    'train: logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits -> logits = model(input_ids=batch["input_ids"], attention_mask=None).logits':
        'right padding under a causal mask: no real token attends to a pad, so the mask changes no counted logit',
    'train: logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits -> logits = model(input_ids=batch["input_ids"], ).logits':
        'right padding under a causal mask: no real token attends to a pad, so the mask changes no counted logit',
    'train: model = _build_model(cfg).to(device) -> model = _build_model(cfg).to(None)':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: betas=tuple(cfg["betas"]), eps=1e-8) -> betas=tuple(cfg["betas"]), )':
        "AdamW's eps defaults to 1e-8",
    'train: generator=generator, collate_fn=batch_of, pin_memory=device.type == "cuda") -> generator=generator, collate_fn=batch_of, pin_memory=None)':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: generator=generator, collate_fn=batch_of, pin_memory=device.type == "cuda") -> generator=generator, collate_fn=batch_of, )':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: generator=generator, collate_fn=batch_of, pin_memory=device.type == "cuda") -> generator=generator, collate_fn=batch_of, pin_memory=device.type != "cuda")':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: generator=generator, collate_fn=batch_of, pin_memory=device.type == "cuda") -> generator=generator, collate_fn=batch_of, pin_memory=device.type == "XXcudaXX")':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: generator=generator, collate_fn=batch_of, pin_memory=device.type == "cuda") -> generator=generator, collate_fn=batch_of, pin_memory=device.type == "CUDA")':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: state = _restore(out_dir / "checkpoint.pt", model, optimizer, generator) -> state = _restore(out_dir / "checkpoint.pt", model, optimizer, None)':
        '_restore never reads its generator argument: _micro_batches sets the generator from the restored state',
    'train: group["lr"] = schedule(state["step"]) -> group["XXlrXX"] = schedule(state["step"])':
        'the optimizer state just restored already holds that rate: it was set to schedule(step) before the checkpoint was saved',
    'train: group["lr"] = schedule(state["step"]) -> group["LR"] = schedule(state["step"])':
        'the optimizer state just restored already holds that rate: it was set to schedule(step) before the checkpoint was saved',
    'train: batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()} -> batch = {key: value.to(None, non_blocking=True) for key, value in batch.items()}':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()} -> batch = {key: value.to(non_blocking=True) for key, value in batch.items()}':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()} -> batch = {key: value.to(device, ) for key, value in batch.items()}':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()} -> batch = {key: value.to(device, non_blocking=False) for key, value in batch.items()}':
        'observable on a CUDA device only, where the GPU tests grade it; on the CPU this pin/move/device call changes nothing',
    'train: lr = optimizer.param_groups[0]["lr"] -> lr = optimizer.param_groups[1]["lr"]':
        'both parameter groups are given the same rate from the schedule at every step',
    'plot_curves: matplotlib.use("Agg") -> matplotlib.use("agg")':
        "matplotlib's backend names are case-insensitive",
    'plot_curves: matplotlib.use("Agg") -> matplotlib.use("AGG")':
        "matplotlib's backend names are case-insensitive",
    'plot_curves: figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(7, 6)) -> figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=None)':
        "the figure's size is cosmetic: the README asks for two subplots, their scales and order, not a size",
    'plot_curves: figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(7, 6)) -> figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, )':
        "the figure's size is cosmetic: the README asks for two subplots, their scales and order, not a size",
    'plot_curves: figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(7, 6)) -> figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))':
        "the figure's size is cosmetic: the README asks for two subplots, their scales and order, not a size",
    'plot_curves: figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(7, 6)) -> figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(7, 7))':
        "the figure's size is cosmetic: the README asks for two subplots, their scales and order, not a size",
    'plot_curves: figure, (loss_axes, lr_axes) = plt.subplots(2, 1, sharex=True, figsize=(7, 6)) -> figure, (loss_axes, lr_axes) = plt.subplots(2, sharex=True, figsize=(7, 6))':
        "subplots' ncols defaults to 1",
    'plot_curves: loss_axes.set_ylabel("training loss (nats/token)") -> loss_axes.set_ylabel(None)':
        'an axis label is cosmetic: the README does not ask for labels',
    'plot_curves: loss_axes.set_ylabel("training loss (nats/token)") -> loss_axes.set_ylabel("XXtraining loss (nats/token)XX")':
        'an axis label is cosmetic: the README does not ask for labels',
    'plot_curves: loss_axes.set_ylabel("training loss (nats/token)") -> loss_axes.set_ylabel("TRAINING LOSS (NATS/TOKEN)")':
        'an axis label is cosmetic: the README does not ask for labels',
    'plot_curves: lr_axes.set_ylabel("learning rate") -> lr_axes.set_ylabel(None)':
        'an axis label is cosmetic: the README does not ask for labels',
    'plot_curves: lr_axes.set_ylabel("learning rate") -> lr_axes.set_ylabel("XXlearning rateXX")':
        'an axis label is cosmetic: the README does not ask for labels',
    'plot_curves: lr_axes.set_ylabel("learning rate") -> lr_axes.set_ylabel("LEARNING RATE")':
        'an axis label is cosmetic: the README does not ask for labels',
    'plot_curves: lr_axes.set_xlabel("optimizer step") -> lr_axes.set_xlabel(None)':
        'an axis label is cosmetic: the README does not ask for labels',
    'plot_curves: lr_axes.set_xlabel("optimizer step") -> lr_axes.set_xlabel("XXoptimizer stepXX")':
        'an axis label is cosmetic: the README does not ask for labels',
    'plot_curves: lr_axes.set_xlabel("optimizer step") -> lr_axes.set_xlabel("OPTIMIZER STEP")':
        'an axis label is cosmetic: the README does not ask for labels',
    'plot_curves: return str(png_path) -> return str(None)':
        'the README promises the PNG file, not a return value',
    '_micro_batches: state["batches_into_epoch"] = 0 -> state["batches_into_epoch"] = None':
        "overwritten by the next epoch's first batch before any step or checkpoint can read it",
    '_micro_batches: state["batches_into_epoch"] = 0 -> state["XXbatches_into_epochXX"] = 0':
        "overwritten by the next epoch's first batch before any step or checkpoint can read it",
    '_micro_batches: state["batches_into_epoch"] = 0 -> state["BATCHES_INTO_EPOCH"] = 0':
        "overwritten by the next epoch's first batch before any step or checkpoint can read it",
    '_micro_batches: state["batches_into_epoch"] = 0 -> state["batches_into_epoch"] = 1':
        "overwritten by the next epoch's first batch before any step or checkpoint can read it",
    '_restore: checkpoint = torch.load(path, weights_only=False) -> checkpoint = torch.load(path, weights_only=None)':
        "the checkpoint holds tensors, numbers, lists and dicts only, which weights_only=True (torch.load's default) loads alike",
    '_restore: checkpoint = torch.load(path, weights_only=False) -> checkpoint = torch.load(path, )':
        "the checkpoint holds tensors, numbers, lists and dicts only, which weights_only=True (torch.load's default) loads alike",
    '_restore: checkpoint = torch.load(path, weights_only=False) -> checkpoint = torch.load(path, weights_only=True)':
        "the checkpoint holds tensors, numbers, lists and dicts only, which weights_only=True (torch.load's default) loads alike",
    '_read_jsonl: with open(path, encoding="utf-8") as f: -> with open(path, encoding=None) as f:':
        'the text written and read is ASCII (json.dumps escapes the rest), the same in every encoding',
    '_read_jsonl: with open(path, encoding="utf-8") as f: -> with open(path, ) as f:':
        'the text written and read is ASCII (json.dumps escapes the rest), the same in every encoding',
    '_read_jsonl: with open(path, encoding="utf-8") as f: -> with open(path, encoding="UTF-8") as f:':
        'the text written and read is ASCII (json.dumps escapes the rest), the same in every encoding',
    '_write_jsonl: with open(path, mode, encoding="utf-8") as f: -> with open(path, mode, encoding=None) as f:':
        'the text written and read is ASCII (json.dumps escapes the rest), the same in every encoding',
    '_write_jsonl: with open(path, mode, encoding="utf-8") as f: -> with open(path, mode, ) as f:':
        'the text written and read is ASCII (json.dumps escapes the rest), the same in every encoding',
    '_write_jsonl: with open(path, mode, encoding="utf-8") as f: -> with open(path, mode, encoding="UTF-8") as f:':
        'the text written and read is ASCII (json.dumps escapes the rest), the same in every encoding',
    '_git_commit: capture_output=True, text=True, timeout=10) -> capture_output=True, text=True, timeout=None)':
        'a timeout only matters for a git that hangs; rev-parse answers at once',
    '_git_commit: capture_output=True, text=True, timeout=10) -> capture_output=True, text=True, )':
        'a timeout only matters for a git that hangs; rev-parse answers at once',
    '_git_commit: capture_output=True, text=True, timeout=10) -> capture_output=True, text=True, timeout=11)':
        'a timeout only matters for a git that hangs; rev-parse answers at once',
    '_write_record: "config": {key: list(value) if isinstance(value, tuple) else value for key, value in cfg.items()}, -> "config": {key: list(value) if (isinstance(value, tuple)) and False else value for key, value in cfg.items()},':
        'json.dumps writes a tuple as a list: the record reads back the same',
    '_write_record: "tokens_per_s": state["tokens"] / max(seconds, 1e-9), "wall_s": seconds}, -> "tokens_per_s": state["tokens"] * max(seconds, 1e-9), "wall_s": seconds},':
        "tokens_per_s is timed as the learner sees fit: no correct grading bounds a rate from above, and this one stays at least the run's tokens over its wall time",
    '_write_record: "tokens_per_s": state["tokens"] / max(seconds, 1e-9), "wall_s": seconds}, -> "tokens_per_s": state["tokens"] / max(seconds, 1.000000001), "wall_s": seconds},':
        "tokens_per_s is timed as the learner sees fit: no correct grading bounds a rate from above, and this one stays at least the run's tokens over its wall time",
    '_write_record: "tokens_per_s": state["tokens"] / max(seconds, 1e-9), "wall_s": seconds}, -> "tokens_per_s": state["tokens"] / max(seconds, 1e-9), "XXwall_sXX": seconds},':
        'wall_s is an extra metric the README does not name',
    '_write_record: "tokens_per_s": state["tokens"] / max(seconds, 1e-9), "wall_s": seconds}, -> "tokens_per_s": state["tokens"] / max(seconds, 1e-9), "WALL_S": seconds},':
        'wall_s is an extra metric the README does not name',
    '_write_record: Path(path).write_text(json.dumps(record, indent=2) + "\\n", encoding="utf-8") -> Path(path).write_text(json.dumps(record, indent=2) + "\\n", encoding=None)':
        'the text written and read is ASCII (json.dumps escapes the rest), the same in every encoding',
    '_write_record: Path(path).write_text(json.dumps(record, indent=2) + "\\n", encoding="utf-8") -> Path(path).write_text(json.dumps(record, indent=2) + "\\n", )':
        'the text written and read is ASCII (json.dumps escapes the rest), the same in every encoding',
    '_write_record: Path(path).write_text(json.dumps(record, indent=2) + "\\n", encoding="utf-8") -> Path(path).write_text(json.dumps(record, indent=None) + "\\n", encoding="utf-8")':
        "run.json's indentation is layout: any JSON of the same record reads back the same",
    '_write_record: Path(path).write_text(json.dumps(record, indent=2) + "\\n", encoding="utf-8") -> Path(path).write_text(json.dumps(record, ) + "\\n", encoding="utf-8")':
        "run.json's indentation is layout: any JSON of the same record reads back the same",
    '_write_record: Path(path).write_text(json.dumps(record, indent=2) + "\\n", encoding="utf-8") -> Path(path).write_text(json.dumps(record, indent=3) + "\\n", encoding="utf-8")':
        "run.json's indentation is layout: any JSON of the same record reads back the same",
    '_write_record: Path(path).write_text(json.dumps(record, indent=2) + "\\n", encoding="utf-8") -> Path(path).write_text(json.dumps(record, indent=2) + "\\n", encoding="UTF-8")':
        'the text written and read is ASCII (json.dumps escapes the rest), the same in every encoding',
    'plot_curves: figure.savefig(png_path, format="png") -> figure.savefig(png_path, format=None)':
        "without a format, savefig writes PNG (its default, and png_path's suffix)",
    'plot_curves: figure.savefig(png_path, format="png") -> figure.savefig(png_path, )':
        "without a format, savefig writes PNG (its default, and png_path's suffix)",
    'plot_curves: figure.savefig(png_path, format="png") -> figure.savefig(png_path, format="PNG")':
        'savefig reads the format case-insensitively',
    'plot_curves: plt.close(figure) -> plt.close(None)':
        'plt.close() closes the current figure, which is this one',
    '_build_model: return AutoModelForCausalLM.from_config(config, dtype=torch.float32) -> return AutoModelForCausalLM.from_config(config, dtype=None)':
        "from_config builds in torch's default dtype, float32, as the README's own call (no dtype) does",
    '_build_model: return AutoModelForCausalLM.from_config(config, dtype=torch.float32) -> return AutoModelForCausalLM.from_config(config, )':
        "from_config builds in torch's default dtype, float32, as the README's own call (no dtype) does",
    '_git_commit: return out.stdout.strip() if out.returncode == 0 else None -> return out.stdout.strip() if (out.returncode == 0) or True else None':
        'differs only outside git ("" for null), which test_log_and_run_record checks there; every audited tree has a git HEAD',
}
