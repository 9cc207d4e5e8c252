"""Exercise 03: LoRA SFT by hand, then with peft + trl (reference solution).

The hand-made pieces (LoRALinear, add_lora, tokenize_conversation, pack) follow what peft and trl
do, so that the graded suite can hold them against the libraries; sft_with_peft_trl is the map's
six lines with the settings README.md fixes.
"""
import json
import math
from pathlib import Path

import torch
from torch import nn

IGNORE_INDEX = -100
END_OF_TURN = "<|end|>"


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
        self.base = base
        for parameter in self.base.parameters():
            parameter.requires_grad_(False)
        self.r, self.alpha = r, alpha
        self.scaling = alpha / r
        factory = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, **factory))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, **factory))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x):
        """base(x) + dropout(x) @ lora_A.T @ lora_B.T * scaling (dropout only in training mode)."""
        return self.base(x) + (self.dropout(x) @ self.lora_A.T @ self.lora_B.T) * self.scaling

    def merged(self):
        """A new plain nn.Linear computing the same function: weight W + scaling * lora_B @ lora_A,
        the base's bias kept. This layer is left unchanged."""
        base = self.base
        merged = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                           device=base.weight.device, dtype=base.weight.dtype)
        with torch.no_grad():
            merged.weight.copy_(base.weight + self.scaling * (self.lora_B @ self.lora_A))
            if base.bias is not None:
                merged.bias.copy_(base.bias)
        return merged


def _target_names(model, target_modules):
    """Names of the nn.Linear modules that `target_modules` selects, as peft selects them."""
    linears = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    if target_modules == "all-linear":
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        return [name for name in linears if model.get_submodule(name) is not head]
    names = [target_modules] if isinstance(target_modules, str) else list(target_modules)
    chosen = [name for name in linears if any(name == t or name.endswith("." + t) for t in names)]
    if not chosen:
        raise ValueError(f"target_modules {names} match no linear layer of the model")
    return chosen


def add_lora(model, r, alpha, target_modules="all-linear", dropout=0.0):
    """Replace the targeted nn.Linear modules of `model` in place with LoRALinear(module, r,
    alpha, dropout) and freeze every other parameter; return the model.

    target_modules: "all-linear" (every nn.Linear except the output head, as peft reads it) or
    a list of names, each selecting the linear modules whose name is that name or ends with
    "." + that name. A list that selects nothing raises ValueError.
    """
    targets = _target_names(model, target_modules)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    for name in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child, LoRALinear(getattr(parent, child), r, alpha, dropout))
    return model


def trainable_parameters(model):
    """(trainable, total) parameter counts, as peft's PeftModel.get_nb_trainable_parameters()
    reports them: every parameter once (tied weights once), trainable = requires_grad."""
    trainable = total = 0
    for parameter in model.parameters():
        total += parameter.numel()
        if parameter.requires_grad:
            trainable += parameter.numel()
    return trainable, total


def tokenize_conversation(tokenizer, messages, max_length=None):
    """Tokenize a conversation ([{"role", "content"}, ...]) with the tokenizer's chat template.

    Returns {"input_ids", "attention_mask", "labels"} as lists of ints: labels equal input_ids
    on exactly the tokens the template's {% generation %} blocks mark (each assistant reply and
    its closing end-of-turn token) and -100 everywhere else. With max_length, all three are cut
    to the first max_length tokens.
    """
    encoded = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True,
                                            return_assistant_tokens_mask=True)
    input_ids = list(encoded["input_ids"])
    labels = [token if marked else IGNORE_INDEX for token, marked in zip(input_ids, encoded["assistant_masks"])]
    if max_length is not None:
        input_ids, labels = input_ids[:max_length], labels[:max_length]
    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}


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
    pieces = []
    for example in examples:
        input_ids = list(example["input_ids"])
        labels = list(example.get("labels", input_ids))
        for start in range(0, len(input_ids), seq_len):
            pieces.append((input_ids[start:start + seq_len], labels[start:start + seq_len]))
    rows = []                                       # [free space, [piece indices]]
    for index in sorted(range(len(pieces)), key=lambda i: -len(pieces[i][0])):
        length = len(pieces[index][0])
        fitting = [row for row in rows if row[0] >= length]
        row = min(fitting, key=lambda row: row[0]) if fitting else None
        if row is None:
            row = [seq_len, []]
            rows.append(row)
        row[0] -= length
        row[1].append(index)
    packed = []
    for _, members in rows:
        row = {"input_ids": [], "labels": [], "position_ids": []}
        for index in members:
            input_ids, labels = pieces[index]
            row["input_ids"] += input_ids
            row["labels"] += [IGNORE_INDEX] + labels[1:]
            row["position_ids"] += list(range(len(input_ids)))
        packed.append(row)
    return packed


def _read_conversations(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sft_with_peft_trl(model_dir, train_path, out_dir, *, r=16, alpha=32, dropout=0.05, max_steps, learning_rate,
                      batch_size, seed=0):
    """The map's six lines: LoRA (peft) on every linear layer of the model in `model_dir`,
    trained by trl's SFTTrainer on the conversations of `train_path` (JSONL of {"messages"}),
    with the loss on assistant tokens only and the settings README.md fixes; the adapter is saved
    to `out_dir` (adapter_config.json, adapter_model.safetensors).

    Returns {"adapter_dir": str, "train_loss": [one float per optimizer step],
    "trainable_parameters": int}.
    """
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    out_dir = Path(out_dir)
    cuda = torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16 if cuda else torch.float32)
    torch.manual_seed(seed)
    model = get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout,
                                             target_modules="all-linear", task_type="CAUSAL_LM"))
    args = SFTConfig(
        output_dir=str(out_dir / "trainer"), max_steps=max_steps, per_device_train_batch_size=batch_size,
        learning_rate=learning_rate, seed=seed, assistant_only_loss=True,
        bf16=cuda, use_cpu=not cuda,                # trl's default bf16=True refuses a CPU, or crawls on one
        activation_checkpointing=False,             # trl turns it on by default: recomputation we do not need
        logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(_read_conversations(train_path)),
                         processing_class=tokenizer)
    trainer.train()
    model.save_pretrained(out_dir)
    return {"adapter_dir": str(out_dir),
            "train_loss": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
            "trainable_parameters": model.get_nb_trainable_parameters()[0]}


def generate_reply(model, tokenizer, messages, max_new_tokens=8):
    """The model's greedy reply to `messages`: the chat template with the generation prompt,
    at most max_new_tokens new tokens, stopping at the end-of-turn token (or eos), decoded
    without special tokens. The model's training/eval mode is restored."""
    was_training = model.training
    model.eval()
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True,
                                           return_tensors="pt").to(model.device)
    stop = [tokenizer.convert_tokens_to_ids(END_OF_TURN), tokenizer.eos_token_id]
    with torch.no_grad():
        output = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop,
                                pad_token_id=tokenizer.pad_token_id)
    model.train(was_training)
    return tokenizer.decode(output[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True)


SOURCE = {
    "assistant_mask": "transformers.tokenization_utils_base.PreTrainedTokenizerBase.apply_chat_template",
    "assistant_only_loss": "trl.trainer.sft_trainer.SFTTrainer._prepare_dataset",
    "packing": "trl.data_utils._pack_bfd",
    "packed_boundaries": "trl.trainer.sft_trainer.DataCollatorForLanguageModeling.torch_call",
    "all_linear": "peft.tuners.tuners_utils._maybe_include_all_linear_layers",
    "lora_init": "peft.tuners.lora.layer.LoraLayer.reset_lora_parameters",
    "lora_scaling": "peft.tuners.lora.layer.Linear.forward",
    "merge": "peft.tuners.lora.layer.Linear.get_delta_weight",
}


def where_in_source(concept):
    """The dotted path (package.module.Class.method or package.module.function) of the function
    in the installed trl, peft or transformers whose own source implements `concept`, one of
    the keys of the table in README.md."""
    return SOURCE[concept]
