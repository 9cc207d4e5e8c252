"""The tiny pretrained Llama: its config, a plain-PyTorch pretraining loop on the corpus, and the eval
loss measured the same way the loss floor is defined (each eval document on its own, mean cross-entropy
over every predicted token, </s> included).

Training is defined by a step count, never by wall time, so a rebuild does the same arithmetic; only
the seconds it takes depend on the machine.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from stopwatch import Stopwatch

# Small enough to train on 2 CPU cores in under 3 minutes, but a real Llama: RMSNorm, RoPE, SwiGLU and
# grouped-query attention (4 query heads share 2 key/value heads). Untied embeddings, as in Llama 2/3 8B.
MODEL_SHAPE = dict(
    hidden_size=128, intermediate_size=344, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=0.02,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
)

# The build's training run and the short from-scratch reference run. Steps, not seconds, define them.
TRAINING = dict(steps=800, batch_size=16, seq_len=128, lr=3e-3, warmup=30, seed=0)
SCRATCH_30S = dict(steps=150, batch_size=16, seq_len=128, lr=3e-3, warmup=30, seed=1)
# A retrained model must land within this of the recorded eval loss (different CPUs and thread counts
# change the arithmetic's rounding, and so the weights, but not where training ends up).
EVAL_LOSS_TOLERANCE = 0.02


@torch.no_grad()
def eval_loss(model, rows: list[dict], batch_size: int = 64) -> float:
    """Mean cross-entropy (nats) over all predicted tokens of the rows, each row scored on its own."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(rows), batch_size):
        batch = [r["input_ids"] for r in rows[start:start + batch_size]]
        width = max(len(ids) for ids in batch)
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        mask = torch.zeros(len(batch), width, dtype=torch.long)
        for i, seq in enumerate(batch):
            ids[i, :len(seq)] = torch.tensor(seq)
            mask[i, :len(seq)] = 1
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        labels = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
        total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1),
                                 ignore_index=-100, reduction="sum").item()
        count += int((labels != -100).sum())
    return total / count


def make_config(tokenizer):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, **MODEL_SHAPE,
    )


def write_model_configs(folder: Path, tokenizer) -> None:
    """config.json and generation_config.json, written the same way with or without trained weights,
    so --data-only reproduces them byte for byte. Generation stops at </s> (end of a document) or at
    <|end|> (end of a chat turn)."""
    from transformers import GenerationConfig

    config = make_config(tokenizer)
    config.architectures = ["LlamaForCausalLM"]
    config.dtype = torch.float32
    config.save_pretrained(folder)
    GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=[tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|end|>")],
    ).save_pretrained(folder)


def packed_rows(rows: list[dict], seq_len: int) -> torch.Tensor:
    """All train documents end to end (each already <s> ... </s>), cut into seq_len-token rows. Packing
    wastes no compute on padding; the model learns that <s> starts a fresh document."""
    stream = torch.tensor([t for r in rows for t in r["input_ids"]], dtype=torch.long)
    n = len(stream) // seq_len
    return stream[: n * seq_len].view(n, seq_len)


def train(config, train_rows: list[dict], eval_rows: list[dict], *, steps: int, batch_size: int = 32,
          seq_len: int = 128, lr: float = 3e-3, warmup: int = 30, seed: int = 0, eval_every: int = 0,
          log=print):
    """Train a fresh LlamaForCausalLM; return (model, stopwatch, curve) where curve lists eval points."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    data = packed_rows(train_rows, seq_len)
    order_gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(data), generator=order_gen)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)

    def lr_at(step):  # linear warmup, cosine decay to 10%
        if step < warmup:
            return lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    curve, cursor, watch = [], 0, Stopwatch()
    for step in range(steps):
        with watch:  # evaluation below is not training time
            if cursor + batch_size > len(order):  # next epoch, new order
                order, cursor = torch.randperm(len(data), generator=order_gen), 0
            batch = data[order[cursor:cursor + batch_size]]
            cursor += batch_size
            model.train()
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            loss = model(input_ids=batch, labels=batch).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        if eval_every and ((step + 1) % eval_every == 0 or step + 1 == steps):
            ev = eval_loss(model, eval_rows)
            curve.append({"step": step + 1, "train_seconds": round(watch.wall, 1), "eval_loss": round(ev, 4)})
            log(f"step {step + 1}/{steps}  train loss {loss.item():.4f}  eval loss {ev:.4f}  {watch.wall:.0f}s")
    return model, watch, curve
