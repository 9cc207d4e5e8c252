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
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRALinear wraps an nn.Linear, got {type(base).__name__}")
        if int(r) <= 0:
            raise ValueError(f"rank r must be positive, got {r}")
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.r = int(r)
        self.alpha = alpha
        self.scaling = alpha / r
        self.in_features = base.in_features
        self.out_features = base.out_features
        device, dtype = base.weight.device, base.weight.dtype
        self.lora_A = nn.Parameter(torch.empty(self.r, self.in_features, device=device, dtype=dtype))
        self.lora_B = nn.Parameter(torch.empty(self.out_features, self.r, device=device, dtype=dtype))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B)
        # as peft: no dropout module at all when p == 0 (nothing is drawn)
        self.lora_dropout = nn.Dropout(p=dropout) if dropout > 0 else nn.Identity()

    def forward(self, x):
        """base(x) + dropout(x) @ lora_A.T @ lora_B.T * scaling (dropout only in training mode)."""
        result = self.base(x)
        update = self.lora_dropout(x.to(self.lora_A.dtype)) @ self.lora_A.T @ self.lora_B.T
        return result + (update * self.scaling).to(result.dtype)

    def merged(self):
        """A new plain nn.Linear computing the same function: weight W + scaling * lora_B @ lora_A,
        the base's bias kept. This layer is left unchanged."""
        W = self.base.weight
        A, B = self.lora_A.detach(), self.lora_B.detach()
        with torch.no_grad():
            if W.device.type == "cpu" and W.dtype in (torch.float16, torch.bfloat16):
                delta = ((B.float() @ A.float()) * self.scaling).to(W.dtype)   # as peft on a CPU
            else:
                delta = ((B @ A) * self.scaling).to(W.dtype)
            weight = W.detach() + delta
        has_bias = self.base.bias is not None
        merged = torch.nn.utils.skip_init(nn.Linear, self.in_features, self.out_features, bias=has_bias,
                                          device=W.device, dtype=W.dtype)
        merged.weight = nn.Parameter(weight, requires_grad=W.requires_grad)
        if has_bias:
            merged.bias = nn.Parameter(self.base.bias.detach().clone(), requires_grad=self.base.bias.requires_grad)
        merged.train(self.training)
        return merged


def add_lora(model, r, alpha, target_modules="all-linear", dropout=0.0):
    """Replace the targeted nn.Linear modules of `model` in place with LoRALinear(module, r,
    alpha, dropout) and freeze every other parameter; return the model.

    target_modules: "all-linear" (every nn.Linear except the output head, as peft reads it) or
    a list of names, each selecting the linear modules whose name is that name or ends with
    "." + that name. A list that selects nothing raises ValueError.
    """
    all_linear = isinstance(target_modules, str) and target_modules.lower() == "all-linear"
    if all_linear:
        head = model.get_output_embeddings() if callable(getattr(model, "get_output_embeddings", None)) else None
        def selected(name, module):
            return module is not head
    else:
        if isinstance(target_modules, str):
            # a single name (not "all-linear"): treated as a one-name list
            target_modules = [target_modules]
        names = list(target_modules)
        def selected(name, module):
            return any(name == t or name.endswith("." + t) for t in names)

    # modules already inside a LoRALinear (its base) are never wrapped again
    inside = set()
    for module in model.modules():
        if isinstance(module, LoRALinear):
            inside.update(id(m) for m in module.modules())
    targets = [(name, module) for name, module in model.named_modules()
               if isinstance(module, nn.Linear) and id(module) not in inside and selected(name, module)]
    if not targets and not all_linear:
        raise ValueError(f"target_modules {target_modules!r} selects no nn.Linear module of the model")

    for p in model.parameters():
        p.requires_grad_(False)
    replaced = {}
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        if id(module) not in replaced:
            replaced[id(module)] = LoRALinear(module, r, alpha, dropout)
        setattr(parent, child, replaced[id(module)])
    for module in model.modules():
        if isinstance(module, LoRALinear):
            module.lora_A.requires_grad_(True)
            module.lora_B.requires_grad_(True)
    return model


def trainable_parameters(model):
    """(trainable, total) parameter counts, as peft's PeftModel.get_nb_trainable_parameters()
    reports them: every parameter once (tied weights once), trainable = requires_grad."""
    trainable = total = 0
    for _, p in model.named_parameters():       # yields a shared (tied) parameter once
        n = p.numel()
        total += n
        if p.requires_grad:
            trainable += n
    return trainable, total


def tokenize_conversation(tokenizer, messages, max_length=None):
    """Tokenize a conversation ([{"role", "content"}, ...]) with the tokenizer's chat template.

    Returns {"input_ids", "attention_mask", "labels"} as lists of ints: labels equal input_ids
    on exactly the tokens the template's {% generation %} blocks mark (each assistant reply and
    its closing end-of-turn token) and -100 everywhere else. With max_length, all three are cut
    to the first max_length tokens.
    """
    out = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=False, return_dict=True,
                                        return_assistant_tokens_mask=True)
    input_ids = [int(t) for t in out["input_ids"]]
    mask = [int(m) for m in out["assistant_masks"]]
    labels = [t if m else -100 for t, m in zip(input_ids, mask)]
    attention_mask = [1] * len(input_ids)
    if max_length is not None:
        input_ids, attention_mask, labels = input_ids[:max_length], attention_mask[:max_length], labels[:max_length]
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def pack(examples, seq_len):
    """Pack tokenized examples ({"input_ids", "labels" (optional, defaults to input_ids)}) into
    rows of at most seq_len tokens, without padding.

    Best-fit decreasing: longest first, each into the open row it fills best, a new row only
    when it fits nowhere. An example longer than seq_len is first cut into pieces of seq_len
    tokens (the last one shorter), each packed as an example of its own; empty examples are
    skipped. Each row is {"input_ids", "labels", "position_ids"}: position ids restart at 0
    at every example, and every example's first label is -100 (nothing predicts across a
    boundary), as trl's padding-free collator makes them.
    """
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    pieces = []
    for ex in examples:
        ids = [int(t) for t in ex["input_ids"]]
        labels = ex.get("labels")
        labels = ids if labels is None else [int(t) for t in labels]
        if not ids:
            continue
        for start in range(0, len(ids), seq_len):
            pieces.append((ids[start:start + seq_len], labels[start:start + seq_len]))

    # best-fit decreasing: longest first (stable), into the open row with the least room that still fits;
    # among rows with equal room, the one that reached that room first (as trl's queue per room does)
    order = sorted(range(len(pieces)), key=lambda i: -len(pieces[i][0]))
    rows = []                                   # [used, stamp, [piece indices]]
    for stamp, i in enumerate(order):
        n = len(pieces[i][0])
        fitting = [row for row in rows if seq_len - row[0] >= n]
        if fitting:
            best = min(fitting, key=lambda row: (seq_len - row[0], row[1]))
        else:
            best = [0, stamp, []]
            rows.append(best)
        best[0] += n
        best[1] = stamp
        best[2].append(i)

    out = []
    for _, _, members in rows:
        row = {"input_ids": [], "labels": [], "position_ids": []}
        for i in members:
            ids, labels = pieces[i]
            row["input_ids"] += ids
            row["labels"] += [-100] + labels[1:]
            row["position_ids"] += list(range(len(ids)))
        out.append(row)
    return out


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
    out_dir.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda else torch.float32

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)

    torch.manual_seed(seed)          # the adapters are drawn here, before the trainer seeds itself
    model = get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout,
                                             target_modules="all-linear", task_type="CAUSAL_LM"))
    trainable = int(model.get_nb_trainable_parameters()[0])

    with open(train_path, encoding="utf-8") as f:
        rows = [{"messages": json.loads(line)["messages"]} for line in f if line.strip()]
    dataset = Dataset.from_list(rows)

    hardware = dict(bf16=True) if cuda else dict(bf16=False, use_cpu=True)
    args = SFTConfig(
        output_dir=str(out_dir / "trainer_output"),
        max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
        activation_checkpointing=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        assistant_only_loss=True,
        **hardware,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()

    model.save_pretrained(str(out_dir))
    losses = [float(entry["loss"]) for entry in trainer.state.log_history if "loss" in entry]
    return {"adapter_dir": str(out_dir), "train_loss": losses, "trainable_parameters": trainable}


def generate_reply(model, tokenizer, messages, max_new_tokens=8):
    """The model's greedy reply to `messages`: the chat template with the generation prompt,
    at most max_new_tokens new tokens, stopping at the end-of-turn token (or eos), decoded
    without special tokens. The model's training/eval mode is restored."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                               return_dict=True, return_tensors="pt")
        device = next(model.parameters()).device
        prompt = {k: v.to(device) for k, v in prompt.items() if k in ("input_ids", "attention_mask")}
        stops = [tokenizer.eos_token_id]
        end_id = tokenizer.convert_tokens_to_ids("<|end|>")
        if end_id is not None and end_id != tokenizer.unk_token_id:
            stops = [end_id] + [s for s in stops if s is not None and s != end_id]
        stops = [s for s in stops if s is not None]
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
        with torch.no_grad():
            out = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                 eos_token_id=stops, pad_token_id=pad_id)
        new_tokens = out[0, prompt["input_ids"].shape[1]:]
        return tokenizer.decode(new_tokens, skip_special_tokens=True)
    finally:
        for m, training in modes:
            m.training = training


def where_in_source(concept):
    """The dotted path (package.module.Class.method or package.module.function) of the function
    in the installed trl, peft or transformers whose own source implements `concept`, one of
    the keys of the table in README.md."""
    paths = {
        "assistant_mask": "transformers.tokenization_utils_base.PreTrainedTokenizerBase.apply_chat_template",
        "assistant_only_loss": "trl.trainer.sft_trainer.SFTTrainer._prepare_dataset",
        "packing": "trl.data_utils._pack_bfd",
        "packed_boundaries": "trl.trainer.sft_trainer.DataCollatorForLanguageModeling.torch_call",
        "all_linear": "peft.tuners.tuners_utils._maybe_include_all_linear_layers",
        "lora_init": "peft.tuners.lora.layer.LoraLayer.reset_lora_parameters",
        "lora_scaling": "peft.tuners.lora.layer.Linear.forward",
        "merge": "peft.tuners.lora.layer.Linear.get_delta_weight",
    }
    if concept not in paths:
        raise KeyError(f"unknown concept {concept!r}; one of {sorted(paths)}")
    return paths[concept]
