"""Exercise 03: LoRA SFT by hand, then with peft + trl.

Fill in the class and every function below; README.md explains each piece and the contract it
must meet. Run the visible tests with:
    pytest exercises/03_lora_sft

The model and the data are in datasets/tiny_llama/ and datasets/sft/. peft, trl and datasets are
slow to import: importing them inside the function that needs them keeps the other tests quick.
"""
import json
import math
from pathlib import Path

import torch
from torch import nn


class LoRALinear(nn.Module):
    """A frozen nn.Linear with a trainable low-rank update beside it:
    y = base(x) + dropout(x) @ lora_A.T @ lora_B.T * scaling, with scaling = alpha / r.

    lora_A (r, in_features) starts Kaiming-uniform (a=sqrt(5)) and lora_B (out_features, r) at
    zero, as peft initialises them, so a fresh layer computes exactly base(x).
    """

    def __init__(self, base, r, alpha, dropout=0.0):
        """Wrap `base` (an nn.Linear, frozen here) with rank-`r` adapters scaled by alpha / r;
        `dropout` is the probability of dropping an input feature of the adapter path."""
        super().__init__()
        raise NotImplementedError('see README.md, section "LoRA by hand"')

    def forward(self, x):
        """base(x) + dropout(x) @ lora_A.T @ lora_B.T * scaling (dropout only in training mode)."""
        raise NotImplementedError('see README.md, section "LoRA by hand"')

    def merged(self):
        """A new plain nn.Linear computing the same function: weight W + scaling * lora_B @ lora_A,
        the base's bias kept. This layer is left unchanged."""
        raise NotImplementedError('see README.md, section "Merging"')


def add_lora(model, r, alpha, target_modules="all-linear", dropout=0.0):
    """Replace the targeted nn.Linear modules of `model` in place with LoRALinear(module, r,
    alpha, dropout) and freeze every other parameter; return the model.

    target_modules: "all-linear" (every nn.Linear except the output head, as peft reads it) or
    a list of names, each selecting the linear modules whose name is that name or ends with
    "." + that name. A list that selects nothing raises ValueError.
    """
    raise NotImplementedError('see README.md, section "Adapters on a model"')


def trainable_parameters(model):
    """(trainable, total) parameter counts, as peft's PeftModel.get_nb_trainable_parameters()
    reports them: every parameter once (tied weights once), trainable = requires_grad."""
    raise NotImplementedError('see README.md, section "Adapters on a model"')


def tokenize_conversation(tokenizer, messages, max_length=None):
    """Tokenize a conversation ([{"role", "content"}, ...]) with the tokenizer's chat template.

    Returns {"input_ids", "attention_mask", "labels"} as lists of ints: labels equal input_ids
    on exactly the tokens the template's {% generation %} blocks mark (each assistant reply and
    its closing end-of-turn token) and -100 everywhere else. With max_length, all three are cut
    to the first max_length tokens.
    """
    raise NotImplementedError('see README.md, section "The chat template and the loss mask"')


def pack(examples, seq_len):
    """Pack tokenized examples ({"input_ids", "labels" (optional, defaults to input_ids)}) into
    rows of at most seq_len tokens, without padding.

    Rows are dense: a new row only for an example that fits in no open row (best-fit decreasing,
    longest first, each into the open row it fills best, is one such strategy; first fit is
    another; README.md says which qualify). An example longer than seq_len is first cut into pieces of seq_len
    tokens (the last one shorter), each packed as an example of its own; empty examples are
    skipped. Each row is {"input_ids", "labels", "position_ids"}: position ids restart at 0
    at every example, and every example's first label is -100 (nothing predicts across a
    boundary), as trl's padding-free collator makes them.
    """
    raise NotImplementedError('see README.md, section "Packing"')


def sft_with_peft_trl(model_dir, train_path, out_dir, *, r=16, alpha=32, dropout=0.05, max_steps, learning_rate,
                      batch_size, seed=0):
    """The map's six lines: LoRA (peft) on every linear layer of the model in `model_dir`,
    trained by trl's SFTTrainer on the conversations of `train_path` (JSONL of {"messages"}),
    with the loss on assistant tokens only and the settings README.md fixes; the adapter is saved
    to `out_dir` (adapter_config.json, adapter_model.safetensors).

    Returns {"adapter_dir": str, "train_loss": [one float per optimizer step],
    "trainable_parameters": int}.
    """
    raise NotImplementedError('see README.md, section "The real thing: peft + trl"')


def generate_reply(model, tokenizer, messages, max_new_tokens=8):
    """The model's greedy reply to `messages`: the chat template with the generation prompt,
    at most max_new_tokens new tokens, stopping at the end-of-turn token (or eos), decoded
    without special tokens. The model's training/eval mode is restored."""
    raise NotImplementedError('see README.md, section "Talking to the model"')


def where_in_source(concept):
    """The dotted path (package.module.Class.method or package.module.function) of the function
    in the installed trl, peft or transformers whose own source implements `concept`, one of
    the keys of the table in README.md."""
    raise NotImplementedError('see README.md, section "Read the source"')
