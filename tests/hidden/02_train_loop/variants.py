"""Mutants (the dozen ways a loop can be almost right) and alternative correct solutions for
exercise 02, as edits of solutions/02_train_loop/train_loop.py. `grader audit 02` grades them."""
from grader.running.variants import Alternative, Mutant

BACKWARD = "            (loss / tokens).backward()          # every token of the step weighs the same\n"
CLIP = '        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip_norm"]).item()\n'
NEXT_LR = '''        state["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"])
'''

MUTANTS = [
    Mutant("no_zero_grad", "Zeroing gradients", note="gradients of every step pile up",
           edits={"        optimizer.zero_grad(set_to_none=True)\n": ""}),
    Mutant("zero_grad_per_micro_batch", "Gradient accumulation", note="only the last micro-batch survives",
           edits={BACKWARD: "            optimizer.zero_grad(set_to_none=True)\n" + BACKWARD}),
    Mutant("no_normalisation", "Gradient accumulation", note="summed token losses, never divided",
           edits={BACKWARD: "            loss.backward()\n"}),
    Mutant("divide_by_accum_steps", "Gradient accumulation", note="the primer's loss / accumulation_steps",
           edits={BACKWARD: '            (causal_lm_loss(logits, batch["labels"]) / cfg["grad_accum_steps"]).backward()\n'}),
    Mutant("clip_after_step", "Clipping", note="clips gradients that were already applied",
           edits={CLIP: "", "        optimizer.step()\n": "        optimizer.step()\n" + CLIP}),
    Mutant("clip_each_parameter", "Clipping", note="per-parameter clipping changes the direction",
           edits={CLIP: '''        grad_norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()
        for parameter in model.parameters():
            torch.nn.utils.clip_grad_norm_(parameter, cfg["clip_norm"])
'''}),
    Mutant("no_clipping", "Clipping", note="the norm is logged, never enforced",
           edits={CLIP: '        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")).item()\n'}),
    Mutant("schedule_per_micro_batch", "Warmup and cosine", note="the schedule advances per micro-batch",
           edits={NEXT_LR: '''        state["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"] * cfg["grad_accum_steps"])
'''}),
    Mutant("schedule_off_by_one", "Warmup and cosine", note="each step runs with the next step's rate",
           edits={NEXT_LR: '''        state["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = schedule(state["step"] + 1)
'''}),
    Mutant("warmup_from_max_lr", "Warmup and cosine", note="no warmup at all",
           edits={"        return max_lr * step / warmup_steps\n": "        return max_lr\n"}),
    Mutant("decay_everything", "Weight decay groups", note="biases and norm gains decay too",
           edits={'''    return [{"params": [p for p in trainable if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in trainable if p.ndim < 2], "weight_decay": 0.0}]''':
                  '''    return [{"params": trainable, "weight_decay": weight_decay}]'''}),
    Mutant("labels_not_shifted", "The loss: shift, ignore_index, float32", note="the model learns to copy its input",
           edits={"    logits = logits[:, :-1, :].float()\n    targets = labels[:, 1:]\n":
                  "    logits = logits.float()\n    targets = labels\n"}),
    Mutant("labels_shifted_twice", "The loss: shift, ignore_index, float32",
           note="shifted in the loop and again in the loss: predicts two tokens ahead",
           edits={'            loss = causal_lm_loss(logits, batch["labels"], reduction="sum")\n':
                  '''            shifted = torch.cat([batch["labels"][:, 1:], torch.full_like(batch["labels"][:, :1], IGNORE_INDEX)], 1)
            loss = causal_lm_loss(logits, shifted, reduction="sum")
'''}),
    Mutant("pad_labels_kept", "Batching and padding", note="padding is trained on and counted",
           edits={"    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)\n":
                  "    labels = torch.full((len(examples), width), pad_id, dtype=torch.long)\n"}),
    Mutant("loss_in_bf16", "The loss: shift, ignore_index, float32", note="no .float() before the cross-entropy",
           edits={"    logits = logits[:, :-1, :].float()\n": "    logits = logits[:, :-1, :]\n"}),
    Mutant("evaluate_with_grad", "Evaluation mode", note="builds a graph for nothing",
           edits={"    with torch.no_grad():\n        for batch in batches:": "    with torch.enable_grad():\n        for batch in batches:"}),
    Mutant("evaluate_leaves_eval_mode", "Evaluation mode", note="training goes on in eval mode",
           edits={"    model.train(was_training)\n": ""}),
    Mutant("resume_forgets_optimizer", "Resuming", note="AdamW's moments start from zero again",
           edits={'    optimizer.load_state_dict(checkpoint["optimizer"])\n': ""}),
    Mutant("resume_restarts_data", "Resuming", note="the data order starts over from the seed",
           edits={'        state = _restore(out_dir / "checkpoint.pt", model, optimizer, generator)\n':
                  '''        state = _restore(out_dir / "checkpoint.pt", model, optimizer, generator)
        state["epoch_generator_state"] = torch.Generator().manual_seed(cfg["seed"]).get_state()
        state["batches_into_epoch"] = 0
'''}),
    Mutant("bf16_weights", "Mixed precision", note="model.to(bfloat16) instead of autocast",
           edits={"    model = _build_model(cfg).to(device)\n":
                  '    model = _build_model(cfg).to(device)\n    if cfg["amp"] == "bf16":\n        model = model.to(torch.bfloat16)\n'}),
    Mutant("unseeded_init", "The determinism contract", note="the model's initialisation is not seeded",
           edits={'    torch.manual_seed(cfg["seed"])\n': ""}),
    Mutant("data_version_by_name", "The run record", note="a file name is not a data version",
           edits={'"data_version": {"train_path": _sha256(cfg["train_path"]), "eval_path": _sha256(cfg["eval_path"])},':
                  '"data_version": {"train_path": cfg["train_path"], "eval_path": cfg["eval_path"]},'}),
    Mutant("linear_step_axis", "Curves", note="the first steps vanish into a few pixels",
           edits={'    loss_axes.set_xscale("log")\n': ""}),
]

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
]
