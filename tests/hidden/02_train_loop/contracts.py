"""The rules exercise 02's README states, each marked in both READMEs (`<!-- rule: id -->`) and
broken by at least one mutant in variants.py that the hidden suite kills.

Sentences the README states but no run can observe are not listed: `pad_id` inside `train` (right
padding under a causal mask never reaches a counted position), the file order of the eval batches
(the token mean does not depend on it), and the GPU-only advice on pinned memory (the GPU tests
check it on CUDA machines)."""
from grader.running.contracts import Rule

BATCHING = "Batching and padding"
LOSS = "The loss: shift, ignore_index, float32"
GROUPS = "Weight decay groups"
SCHEDULE = "Warmup and cosine"
ZEROING = "Zeroing gradients"
ACCUMULATION = "Gradient accumulation"
CLIPPING = "Clipping"
OPTIMIZER = "The optimizer step"
PRECISION = "Mixed precision"
EVALUATION = "Evaluation mode"
RESUMING = "Resuming"
RECORD = "The run record"
CURVES = "Curves"
CONTRACT = "The determinism contract"
CONFIGURATION = "Configuration"

RULES = [
    Rule("collate.batch_width", BATCHING, "each batch is padded to its own longest example, not to a global maximum"),
    Rule("collate.right_pad", BATCHING, "padding goes on the right: the tokens, then pad_id up to the batch's width"),
    Rule("collate.labels", BATCHING, "labels default to the input itself; an example's own labels are kept"),
    Rule("collate.pad_labels", BATCHING, "labels are -100 over the padding"),
    Rule("collate.attention_mask", BATCHING, "attention_mask is 1 on real tokens, 0 on padding"),
    Rule("collate.long", BATCHING, "input_ids, labels and attention_mask are long tensors of shape (batch, longest)"),
    Rule("collate.other_keys", BATCHING, "keys other than input_ids and labels are ignored"),

    Rule("loss.shift", LOSS, "position t predicts token t + 1: drop the last logits and the first label"),
    Rule("loss.ignore_index", LOSS, "-100 positions leave both the sum and the count"),
    Rule("loss.float32", LOSS, "the cross-entropy is computed in float32 (bf16 logits upcast before the softmax)"),
    Rule("loss.float32_result", LOSS, "the result is a 0-dim float32 tensor whatever the logits' dtype"),
    Rule("loss.reductions", LOSS, "'mean' divides by the counted tokens, 'sum' does not divide"),
    Rule("loss.no_tokens", LOSS, "with no counted token, 'mean' is NaN (0/0) and 'sum' is 0"),

    Rule("groups.ndim", GROUPS, "parameters with ndim >= 2 get weight_decay, the others 0"),
    Rule("groups.frozen", GROUPS, "frozen parameters are left out of the groups"),
    Rule("groups.once", GROUPS, "every trainable parameter appears exactly once, a shared (tied) one included"),

    Rule("lr.warmup", SCHEDULE, "step < warmup_steps: max_lr * step / warmup_steps, 0 at step 0"),
    Rule("lr.cosine", SCHEDULE, "warmup_steps <= step < total_steps: the cosine from max_lr down to min_lr"),
    Rule("lr.floor", SCHEDULE, "step >= total_steps: min_lr, also when warmup_steps == total_steps"),
    Rule("lr.per_optimizer_step", SCHEDULE, "the schedule advances once per optimizer step, never per micro-batch"),
    Rule("lr.first_step", SCHEDULE, "the first optimizer step runs at lr_at(0)"),

    Rule("zero.once_per_step", ZEROING, "gradients are zeroed once per optimizer step, after optimizer.step()"),
    Rule("zero.set_to_none", ZEROING, "zero_grad(set_to_none=True): no parameter holds a gradient between steps "
                                      "nor once train returns"),

    Rule("accum.micro_batches", ACCUMULATION, "grad_accum_steps micro-batches, their gradients added, then one step"),
    Rule("accum.token_weighting", ACCUMULATION, "each micro-batch backwards its summed loss / tokens_in_step, "
                                                "counted before the first backward"),

    Rule("clip.global", CLIPPING, "the norm is that of the whole gradient, all parameters as one vector"),
    Rule("clip.bound", CLIPPING, "a norm above clip_norm scales every gradient by one factor"),
    Rule("clip.before_step", CLIPPING, "clipping comes after the last backward and before optimizer.step()"),
    Rule("clip.log_pre_clip", CLIPPING, "the logged grad_norm is the norm before clipping"),

    Rule("opt.adamw", OPTIMIZER, "AdamW with eps=1e-8 and the configured betas"),
    Rule("opt.next_lr", OPTIMIZER, "with s steps done, the next step's learning rate is lr_at(s)"),

    Rule("amp.autocast", PRECISION, "amp='bf16': every training forward under torch.autocast(bfloat16); amp=None: "
                                    "none"),
    Rule("amp.fp32_master", PRECISION, "weights and AdamW's moments stay float32 under autocast"),

    Rule("eval.no_grad", EVALUATION, "evaluate builds no graph: torch.no_grad()"),
    Rule("eval.eval_mode", EVALUATION, "evaluate's forward passes run in eval mode"),
    Rule("eval.restore", EVALUATION, "evaluate leaves the model in the mode it found it in"),
    Rule("eval.token_mean", EVALUATION, "the eval loss is the mean over all counted tokens, not of per-batch means"),
    Rule("eval.float", EVALUATION, "evaluate returns a Python float"),

    Rule("resume.model", RESUMING, "a resume restores the model's parameters"),
    Rule("resume.optimizer", RESUMING, "a resume restores the optimizer's state (AdamW's moments)"),
    Rule("resume.step", RESUMING, "a resume restores the step, so the schedule continues"),
    Rule("resume.data", RESUMING, "a resume restores the position in the data: no batch twice, none skipped"),
    Rule("resume.rng", RESUMING, "a resume restores torch's generator state, from which dropout draws"),
    Rule("resume.log_file", RESUMING, "after a resume log.jsonl holds one entry per step: entries after the "
                                      "checkpoint dropped"),
    Rule("resume.returned", RESUMING, "the resumed train returns the whole run's log and eval"),
    Rule("resume.missing", RESUMING, "resume=True without a checkpoint raises FileNotFoundError"),

    Rule("record.run_id", RECORD, "run_id is a string unique per run"),
    Rule("record.commit", RECORD, "commit is the full git HEAD of the repository holding train_loop.py, null "
                                  "outside git"),
    Rule("record.config", RECORD, "config is the full configuration, defaults included"),
    Rule("record.data_version", RECORD, "data_version maps train_path and eval_path to the sha256 of the files' bytes"),
    Rule("record.seed", RECORD, "seed is the run's seed"),
    Rule("record.environment", RECORD, "environment names the python, torch and transformers versions, the "
                                       "platform and the device"),
    Rule("record.metrics", RECORD, "metrics: final_eval_loss, steps, tokens of all steps, tokens_per_s"),
    Rule("record.log_fields", RECORD, "a log line: step, loss (the step's token mean), lr (the step's), grad_norm, "
                                      "tokens"),

    Rule("curves.two_subplots", CURVES, "the figure has two subplots"),
    Rule("curves.log_steps", CURVES, "both subplots share the step axis, on a log scale"),
    Rule("curves.order", CURVES, "the loss above, the learning rate below"),
    Rule("curves.png", CURVES, "the figure is saved as PNG"),

    Rule("det.seed_model", CONTRACT, "torch.manual_seed(seed) immediately before the model is built, either init"),
    Rule("det.init", CONTRACT, "scratch: from_config of model_dir's config; pretrained: from_pretrained(model_dir)"),
    Rule("det.float32", CONTRACT, "float32 weights, from a bf16 checkpoint too"),
    Rule("det.data_order", CONTRACT, "one DataLoader shuffled by a generator seeded with seed"),
    Rule("det.drop_last", CONTRACT, "an incomplete last training batch is dropped"),
    Rule("det.epochs", CONTRACT, "a new iterator per epoch, same loader and generator: each epoch its own order"),
    Rule("det.straddle", CONTRACT, "a step's micro-batches continue into the next epoch"),
    Rule("det.eval_batches", CONTRACT, "eval batches: every eval example, batch_size at a time, the last one "
                                       "possibly smaller"),
    Rule("det.step_tokens", CONTRACT, "a step's tokens are the labels other than -100 after the shift"),
    Rule("det.train_mode", CONTRACT, "training forward passes run in train mode"),
    Rule("det.log_every", CONTRACT, "log lines at steps log_every, 2 * log_every, ... (steps counted from 1)"),
    Rule("det.eval_every", CONTRACT, "an evaluation and a checkpoint at steps eval_every, 2 * eval_every, ..."),
    Rule("det.eval_entries", CONTRACT, "the returned eval lists the periodic evaluations only, each step once"),
    Rule("det.final_eval", CONTRACT, "final_eval_loss evaluates the model after the last step"),
    Rule("det.total_steps", CONTRACT, "the schedule's total_steps is max_steps"),
    Rule("det.resume_to_max", CONTRACT, "a resumed run continues to max_steps"),
    Rule("det.returns", CONTRACT, "train returns log, eval, final_eval_loss, checkpoint, record; the log is "
                                  "log.jsonl's"),

    Rule("config.defaults", CONFIGURATION, "a key left out of cfg takes the table's default"),
    Rule("config.out_dir", CONFIGURATION, "out_dir is created if missing"),
]
