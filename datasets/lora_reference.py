"""Reference LoRA SFT run on the tiny Llama: how well the base model does the SFT skill (greedy, exact
match, via sft/checker.py) and how well it does after a short LoRA fine-tune. The numbers go into the
manifest so the LoRA exercise can set its bar; no adapter is saved.

The loop is plain PyTorch + peft so every step is visible: loss only on assistant tokens (the chat
template's {% generation %} mask, the same mask trl's assistant_only_loss=True uses), AdamW, linear
warmup and cosine decay, fixed seed.
"""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import torch
from stopwatch import Stopwatch

LORA = dict(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear")
STEPS, BATCH_SIZE, LR, WARMUP, SEED = 400, 16, 3e-3, 20, 0
MAX_NEW_TOKENS = 8


def load_checker(path: Path):
    spec = importlib.util.spec_from_file_location("sft_checker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@torch.no_grad()
def generate_answers(model, tokenizer, examples: list[dict], checker) -> list[str]:
    """Greedy replies to each example's prompt, cut at <|end|> (or </s>), special tokens dropped."""
    model.eval()
    stop = [tokenizer.convert_tokens_to_ids("<|end|>"), tokenizer.eos_token_id]
    answers = []
    for example in examples:
        enc = tokenizer.apply_chat_template(checker.prompt_messages(example), add_generation_prompt=True,
                                            return_dict=True, return_tensors="pt")
        out = model.generate(**enc, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, eos_token_id=stop,
                             pad_token_id=tokenizer.pad_token_id)
        answers.append(tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True))
    return answers


def _batch(encoded: list[dict], pad_id: int) -> dict:
    width = max(len(e["input_ids"]) for e in encoded)
    ids = torch.full((len(encoded), width), pad_id)
    attention = torch.zeros(len(encoded), width, dtype=torch.long)
    labels = torch.full((len(encoded), width), -100)
    for i, e in enumerate(encoded):
        n = len(e["input_ids"])
        seq = torch.tensor(e["input_ids"])
        ids[i, :n], attention[i, :n] = seq, 1
        labels[i, :n] = seq.masked_fill(torch.tensor(e["assistant_masks"]) == 0, -100)
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


def train_lora(model, tokenizer, train_rows: list[dict], log=print):
    """Wrap model with LoRA adapters and fine-tune on assistant tokens only; return (model, stopwatch)."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(SEED)
    model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **LORA))
    encoded = [tokenizer.apply_chat_template(r["messages"], return_dict=True, return_assistant_tokens_mask=True)
               for r in train_rows]
    order = torch.randperm(len(encoded), generator=torch.Generator().manual_seed(SEED)).tolist()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR, weight_decay=0.0)
    watch = Stopwatch()
    for step in range(STEPS):
        with watch:
            picked = [encoded[order[(step * BATCH_SIZE + i) % len(order)]] for i in range(BATCH_SIZE)]
            lr = LR * min(1.0, (step + 1) / WARMUP) * 0.5 * (1 + math.cos(math.pi * step / STEPS))
            for group in opt.param_groups:
                group["lr"] = lr
            model.train()
            loss = model(**_batch(picked, tokenizer.pad_token_id)).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if (step + 1) % 50 == 0:
            log(f"lora step {step + 1}/{STEPS}  loss {loss.item():.4f}  {watch.wall:.0f}s")
    return model, watch


def measure(model_dir: Path, sft_dir: Path, log=print) -> dict:
    """Base accuracy, LoRA training, LoRA accuracy on sft/eval.jsonl; return facts for the manifest."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    checker = load_checker(sft_dir / "checker.py")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    eval_rows = checker.load_examples(sft_dir / "eval.jsonl")
    train_rows = checker.load_examples(sft_dir / "train.jsonl")

    base = checker.exact_match_accuracy(eval_rows, generate_answers(model, tokenizer, eval_rows, checker))
    log(f"base model accuracy {base:.3f}")
    model, watch = train_lora(model, tokenizer, train_rows, log=log)
    tuned = checker.exact_match_accuracy(eval_rows, generate_answers(model, tokenizer, eval_rows, checker))
    log(f"LoRA accuracy {tuned:.3f} after {watch.wall:.0f}s of training")
    return {
        "base_accuracy": base, "lora_accuracy": tuned, **watch.facts("lora_train_"),
        "lora": {**LORA, "steps": STEPS, "batch_size": BATCH_SIZE, "lr": LR, "warmup_steps": WARMUP, "seed": SEED,
                 "loss": "assistant tokens only", "decoding": f"greedy, max_new_tokens={MAX_NEW_TOKENS}"},
    }
