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
    if cfg["init"] == "pretrained":
        return AutoModelForCausalLM.from_pretrained(cfg["model_dir"], dtype=torch.float32)
    config = AutoConfig.from_pretrained(cfg["model_dir"])
    torch.manual_seed(cfg["seed"])
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def flat_parameters(model):
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


def counted_tokens(batch):
    return int((batch["labels"][:, 1:] != -100).sum())


def replay(cfg):
    """Per optimizer step: tokens, mean token loss, pre-clip gradient norm, the lr used and
    the parameters after the step; plus the initial parameters and the model at the end."""
    cfg = {**DEFAULTS, **cfg}
    model = build_model(cfg)
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
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
    steps = []
    model.train()
    for step in range(1, cfg["max_steps"] + 1):
        micro = [next(batches) for _ in range(cfg["grad_accum_steps"])]
        tokens = sum(counted_tokens(b) for b in micro)
        loss_sum = 0.0
        for batch in micro:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg["amp"] == "bf16"):
                out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                            labels=batch["labels"], num_items_in_batch=torch.tensor(tokens))
            out.loss.backward()
            loss_sum += out.loss.item() * tokens
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip_norm"]).item()
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        steps.append({"step": step, "tokens": tokens, "loss": loss_sum / tokens, "grad_norm": grad_norm,
                      "lr": lr, "params": flat_parameters(model)})
    return {"initial_params": initial_params, "steps": steps, "model": model}
