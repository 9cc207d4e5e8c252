"""The determinism contract of exercise 02, replayed from library pieces: the model's own loss
(`labels=` with `num_items_in_batch`), transformers' cosine-with-min-lr schedule as a LambdaLR,
torch's AdamW and clip_grad_norm_. Trusted code of the test process: it never runs learner code,
and shares no code with the reference solution."""
import json

import torch
from torch.utils.data import DataLoader
from transformers import AutoConfig, AutoModelForCausalLM, get_cosine_with_min_lr_schedule_with_warmup

# The defaults README.md documents for train(cfg).
DEFAULTS = {"init": "scratch", "seed": 0, "batch_size": 8, "grad_accum_steps": 1, "max_steps": 100,
            "max_lr": 1e-3, "min_lr": 0.0, "warmup_steps": 10, "weight_decay": 0.1, "betas": (0.9, 0.95),
            "clip_norm": 1.0, "amp": None, "device": "cpu", "log_every": 1, "eval_every": 50, "resume": False}


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def pad_batch(examples, pad_id):
    width = max(len(e["input_ids"]) for e in examples)
    batch = {"input_ids": [], "labels": [], "attention_mask": []}
    for e in examples:
        gap = width - len(e["input_ids"])
        batch["input_ids"].append(e["input_ids"] + [pad_id] * gap)
        batch["labels"].append(e.get("labels", e["input_ids"]) + [-100] * gap)
        batch["attention_mask"].append([1] * len(e["input_ids"]) + [0] * gap)
    return {key: torch.tensor(rows, dtype=torch.long) for key, rows in batch.items()}


def build_model(cfg):
    torch.manual_seed(cfg["seed"])
    if cfg["init"] == "pretrained":
        return AutoModelForCausalLM.from_pretrained(cfg["model_dir"], dtype=torch.float32)
    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg["model_dir"]), dtype=torch.float32)


def flat_parameters(model):
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


def counted_tokens(batch):
    return int((batch["labels"][:, 1:] != -100).sum())


def eval_loss(model, batches):
    """The mean token loss over `batches`, in eval mode without a graph (the model's own loss,
    summed through num_items_in_batch=1); the model is left in train mode."""
    model.eval()
    with torch.no_grad():
        total = sum(model(**batch, num_items_in_batch=torch.tensor(1)).loss.item() for batch in batches)
    model.train()
    return total / sum(counted_tokens(batch) for batch in batches)


def replay(cfg):
    """Per optimizer step: its micro-batches (input_ids and attention_mask), tokens (and the count
    a loop that forgot the shift would make), mean token loss (and the primer's mean of per-batch
    means), the gradient norm before clipping and as applied, the lr used and the parameters after
    the step; the eval loss after every multiple of eval_every and after
    the last step; the initial parameters and the model at the end."""
    cfg = {**DEFAULTS, **cfg}
    model = build_model(cfg)
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    eval_documents = read_jsonl(cfg["eval_path"])
    eval_batches = [pad_batch(eval_documents[i:i + cfg["batch_size"]], pad_id)
                    for i in range(0, len(eval_documents), cfg["batch_size"])]
    generator = torch.Generator().manual_seed(cfg["seed"])
    loader = DataLoader(read_jsonl(cfg["train_path"]), batch_size=cfg["batch_size"], shuffle=True, drop_last=True,
                        generator=generator, collate_fn=lambda examples: pad_batch(examples, pad_id))
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": [p for _, p in named if p.ndim >= 2], "weight_decay": cfg["weight_decay"]},
         {"params": [p for _, p in named if p.ndim < 2], "weight_decay": 0.0}],
        lr=cfg["max_lr"], betas=tuple(cfg["betas"]), eps=1e-8)
    schedule = get_cosine_with_min_lr_schedule_with_warmup(optimizer, cfg["warmup_steps"], cfg["max_steps"],
                                                           min_lr=cfg["min_lr"])

    def forever():
        while True:
            yield from loader

    batches = forever()
    initial_params = flat_parameters(model)
    rng_at_first_forward = torch.get_rng_state()      # nothing between the build and the first forward draws from it
    steps, evals = [], {}
    model.train()
    for step in range(1, cfg["max_steps"] + 1):
        micro = [next(batches) for _ in range(cfg["grad_accum_steps"])]
        tokens = sum(counted_tokens(b) for b in micro)
        loss_sum, primer_loss = 0.0, 0.0
        for batch in micro:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg["amp"] == "bf16"):
                out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                            labels=batch["labels"], num_items_in_batch=torch.tensor(tokens))
            out.loss.backward()
            loss_sum += out.loss.item() * tokens
            primer_loss += out.loss.item() * tokens / counted_tokens(batch) / len(micro)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip_norm"]).item()
        applied_grad_norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()
                                                                        if p.grad is not None])))
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        steps.append({"step": step, "tokens": tokens, "loss": loss_sum / tokens, "grad_norm": grad_norm,
                      "lr": lr, "params": flat_parameters(model),
                      "unshifted_tokens": sum(int((b["labels"] != -100).sum()) for b in micro),
                      "primer_loss": primer_loss, "applied_grad_norm": applied_grad_norm,
                      "batches": [{"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]} for b in micro]})
        if step % cfg["eval_every"] == 0 or step == cfg["max_steps"]:
            evals[step] = eval_loss(model, eval_batches)
    return {"initial_params": initial_params, "rng_at_first_forward": rng_at_first_forward, "steps": steps,
            "evals": evals, "amp": cfg["amp"], "model": model}
