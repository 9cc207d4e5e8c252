"""Mutants (the ways a LoRA SFT goes almost right) and alternative correct solutions for exercise
03, as edits of solutions/03_lora_sft/lora_sft.py. Each mutant names the rule it breaks, as
its README marks it; `grader audit 03` grades them."""
from grader.running.variants import INDEPENDENT, Alternative, Independent, Mutant

FREEZE_BASE = """        for parameter in self.base.parameters():
            parameter.requires_grad_(False)
"""
INIT_A = "        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))\n"
FORWARD = "        return self.base(x) + (self.dropout(x) @ self.lora_A.T @ self.lora_B.T) * self.scaling\n"
MERGE = "            merged.weight.copy_(base.weight + self.scaling * (self.lora_B @ self.lora_A))\n"
LABELS = ('    labels = [token if marked else IGNORE_INDEX for token, marked in zip(input_ids, '
          'encoded["assistant_masks"])]\n')
PIECES = "            pieces.append((input_ids[start:start + seq_len], labels[start:start + seq_len]))\n"
ROW_LABELS = '            row["labels"] += [IGNORE_INDEX] + labels[1:]\n'
ROW_POSITIONS = '            row["position_ids"] += list(range(len(input_ids)))\n'
CPU_SETTINGS = "        bf16=cuda, use_cpu=not cuda,                # trl's default bf16=True refuses a CPU, or crawls on one\n"
NO_CHECKPOINTING = "        activation_checkpointing=False,             # trl turns it on by default: recomputation we do not need\n"
LOGGING = '        logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True)\n'
SAVE = "    model.save_pretrained(out_dir)\n"
GENERATE = """        output = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop,
                                pad_token_id=tokenizer.pad_token_id)
"""
PROMPT = """    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True,
                                           return_tensors="pt").to(model.device)
"""
DECODE = "    return tokenizer.decode(output[0, prompt[\"input_ids\"].shape[1]:], skip_special_tokens=True)\n"

COURSE_MUTANTS = [
    # ---------------------------------------------------------------- LoRA by hand
    Mutant("b_random", rule="lora.init_b", note="B drawn like A: a fresh layer already changes the model",
           edits={INIT_A: INIT_A + "        nn.init.kaiming_uniform_(self.lora_B, a=math.sqrt(5))\n"}),
    Mutant("a_and_b_zero", rule="lora.init_a", note="both zero: no gradient ever reaches either",
           edits={INIT_A: "        nn.init.zeros_(self.lora_A)\n"}),
    Mutant("a_gaussian", rule="lora.init_a", note="peft's other init (normal, std 1/r), not the default",
           edits={INIT_A: "        nn.init.normal_(self.lora_A, std=1 / r)\n"}),
    Mutant("a_kaiming_default_gain", rule="lora.init_a", note="kaiming_uniform_ with a=0: sqrt(6) times wider",
           edits={INIT_A: "        nn.init.kaiming_uniform_(self.lora_A)\n"}),
    Mutant("scaling_alpha", rule="lora.scaling", note="alpha instead of alpha / r",
           edits={"        self.scaling = alpha / r\n": "        self.scaling = alpha\n"}),
    Mutant("scaling_rslora", rule="lora.scaling", note="rsLoRA's alpha / sqrt(r)",
           edits={"        self.scaling = alpha / r\n": "        self.scaling = alpha / math.sqrt(r)\n"}),
    Mutant("no_scaling_in_forward", rule="lora.forward", note="scaling stored, never applied",
           edits={FORWARD: "        return self.base(x) + self.dropout(x) @ self.lora_A.T @ self.lora_B.T\n"}),
    Mutant("two_dimensional_only", rule="lora.forward", note="torch.mm: a batch of sequences fails",
           edits={FORWARD: "        return self.base(x) + torch.mm(torch.mm(self.dropout(x), self.lora_A.T), "
                           "self.lora_B.T) * self.scaling\n"}),
    Mutant("base_trainable", rule="lora.base_frozen", note="the base is never frozen",
           edits={FREEZE_BASE: ""}),
    Mutant("float32_adapters", rule="lora.dtype", note="adapters in the default dtype, not the base's",
           edits={'        factory = {"device": base.weight.device, "dtype": base.weight.dtype}\n':
                  '        factory = {"device": base.weight.device}\n'}),
    Mutant("dropout_on_output", rule="lora.dropout_input", note="the whole output, base path included, dropped",
           edits={FORWARD: "        return self.dropout(self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling)\n"}),
    Mutant("dropout_on_adapter_output", rule="lora.dropout_input", note="dropout after A and B, not before",
           edits={FORWARD: "        return self.base(x) + self.dropout(x @ self.lora_A.T @ self.lora_B.T) * self.scaling\n"}),
    Mutant("dropout_before_both_paths", rule="lora.dropout_input", note="x dropped once, for the base path too",
           edits={FORWARD: "        x = self.dropout(x)\n"
                           "        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling\n"}),
    Mutant("dropout_ignored", rule="lora.dropout_input", note="the dropout argument is never used",
           edits={"        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()\n":
                  "        self.dropout = nn.Identity()\n"}),
    Mutant("dropout_in_eval_mode", rule="lora.dropout_eval", note="F.dropout without training=self.training",
           edits={"        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()\n":
                  "        self.p = dropout\n",
                  FORWARD: "        x_a = torch.nn.functional.dropout(x, self.p)\n"
                           "        return self.base(x) + (x_a @ self.lora_A.T @ self.lora_B.T) * self.scaling\n"}),
    # ---------------------------------------------------------------- Merging
    Mutant("merge_without_scaling", rule="merge.weight", note="W + B A",
           edits={MERGE: "            merged.weight.copy_(base.weight + self.lora_B @ self.lora_A)\n"}),
    Mutant("merge_a_times_b", rule="merge.weight", note="A @ B: computes only when the shapes happen to allow it",
           edits={MERGE: "            merged.weight.copy_(base.weight + self.scaling * (self.lora_A @ self.lora_B))\n"}),
    Mutant("merge_drops_bias", rule="merge.weight", note="the merged layer has no bias",
           edits={"        merged = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,\n":
                  "        merged = nn.Linear(base.in_features, base.out_features, bias=False,\n",
                  "            if base.bias is not None:\n                merged.bias.copy_(base.bias)\n": ""}),
    Mutant("merge_in_place", rule="merge.leaves_layer", note="folds into the base and returns it",
           edits={"        base = self.base\n        merged = nn.Linear(": "        base = self.base\n"
                  "        with torch.no_grad():\n"
                  "            base.weight += self.scaling * (self.lora_B @ self.lora_A)\n"
                  "        return base\n        merged = nn.Linear("}),
    # ---------------------------------------------------------------- Adapters on a model
    Mutant("all_linear_includes_head", rule="add_lora.all_linear", note="lm_head adapted too",
           edits={"        return [name for name in linears if model.get_submodule(name) is not head]\n":
                  "        return linears\n"}),
    Mutant("all_linear_attention_only", rule="add_lora.all_linear", note="the MLP left out",
           edits={"        return [name for name in linears if model.get_submodule(name) is not head]\n":
                  "        return [name for name in linears if model.get_submodule(name) is not head and \"attn\" in name]\n"}),
    Mutant("names_by_substring", rule="add_lora.names", note="'up_proj' in 'mlp.gate_up_proj'",
           edits={'    chosen = [name for name in linears if any(name == t or name.endswith("." + t) for t in names)]\n':
                  '    chosen = [name for name in linears if any(t in name for t in names)]\n'}),
    Mutant("names_endswith_without_dot", rule="add_lora.names", note="endswith without the dot",
           edits={'    chosen = [name for name in linears if any(name == t or name.endswith("." + t) for t in names)]\n':
                  '    chosen = [name for name in linears if any(name.endswith(t) for t in names)]\n'}),
    Mutant("names_never_the_head", rule="add_lora.names_head",
           note="the head left out of name lists too, as if all-linear's exclusion applied everywhere",
           edits={'    chosen = [name for name in linears if any(name == t or name.endswith("." + t) for t in names)]\n':
                  '    head = model.get_output_embeddings()\n'
                  '    chosen = [name for name in linears if any(name == t or name.endswith("." + t) for t in names)\n'
                  '              and model.get_submodule(name) is not head]\n'}),
    Mutant("no_match_is_silent", rule="add_lora.no_match", note="a list that selects nothing adapts nothing",
           edits={"    if not chosen:\n        raise ValueError(": "    if False:\n        raise ValueError("}),
    Mutant("no_match_counts_any_module", rule="add_lora.no_match",
           note="the names checked against every module: a list naming only an embedding and norms adapts nothing",
           edits={"    if not chosen:\n        raise ValueError(":
                  "    if not [n for n, _ in model.named_modules() if any(n == t or n.endswith(\".\" + t) for t in names)]:\n"
                  "        raise ValueError("}),
    Mutant("nothing_else_frozen", rule="add_lora.freeze", note="embeddings, norms and the head stay trainable",
           edits={"    for parameter in model.parameters():\n        parameter.requires_grad_(False)\n    for name in targets:":
                  "    for name in targets:"}),
    Mutant("returns_nothing", rule="add_lora.in_place", note="forgets to return the model",
           edits={"        setattr(parent, child, LoRALinear(getattr(parent, child), r, alpha, dropout))\n    return model\n":
                  "        setattr(parent, child, LoRALinear(getattr(parent, child), r, alpha, dropout))\n"}),
    Mutant("dropout_not_handed_on", rule="add_lora.in_place", note="LoRALinear(layer, r, alpha): dropout lost",
           edits={"        setattr(parent, child, LoRALinear(getattr(parent, child), r, alpha, dropout))\n    return model\n":
                  "        setattr(parent, child, LoRALinear(getattr(parent, child), r, alpha))\n    return model\n"}),
    Mutant("tied_weights_twice", rule="count.peft", note="named_parameters(remove_duplicate=False)",
           edits={"    for parameter in model.parameters():\n        total += parameter.numel()\n":
                  "    for _, parameter in model.named_parameters(remove_duplicate=False):\n        total += parameter.numel()\n"}),
    # ---------------------------------------------------------------- The chat template and the loss mask
    Mutant("labels_on_the_prompt_too", rule="tok.mask", note="labels = input_ids",
           edits={LABELS: "    labels = list(input_ids)\n"}),
    Mutant("hard_coded_reply_spans", rule="tok.mask",
           note="replies found between <|assistant|> and <|end|> instead of the template's marks",
           edits={LABELS: """    start, end = tokenizer.convert_tokens_to_ids("<|assistant|>"), tokenizer.convert_tokens_to_ids("<|end|>")
    labels, inside = [], False
    for token in input_ids:
        labels.append(token if inside else IGNORE_INDEX)
        if token == start:
            inside = True
        elif token == end:
            inside = False
"""}),
    Mutant("labels_without_end_of_turn", rule="tok.end_of_turn", note="the model never learns to stop",
           edits={LABELS: LABELS + '    end = tokenizer.convert_tokens_to_ids("<|end|>")\n'
                                   '    labels = [IGNORE_INDEX if token == end else label for token, label in zip(input_ids, labels)]\n'}),
    Mutant("labels_shifted", rule="tok.unshifted", note="shifted here and again in the loss",
           edits={LABELS: LABELS + "    labels = labels[1:] + [IGNORE_INDEX]\n"}),
    Mutant("pad_masked_by_id", rule="tok.pad_token", note="pad = <|end|> removes every end-of-turn target",
           edits={LABELS: LABELS + "    labels = [IGNORE_INDEX if token == tokenizer.pad_token_id else label "
                                   "for token, label in zip(input_ids, labels)]\n"}),
    Mutant("truncate_from_the_left", rule="tok.truncation", note="keeps the last max_length tokens",
           edits={"        input_ids, labels = input_ids[:max_length], labels[:max_length]\n":
                  "        input_ids, labels = input_ids[-max_length:], labels[-max_length:]\n"}),
    Mutant("max_length_defaults_to_trls_1024", rule="tok.truncation",
           note="max_length=None read as SFTConfig's default, 1024",
           edits={"    if max_length is not None:\n        input_ids, labels = input_ids[:max_length], labels[:max_length]\n":
                  "    max_length = 1024 if max_length is None else max_length\n"
                  "    input_ids, labels = input_ids[:max_length], labels[:max_length]\n"}),
    Mutant("attention_mask_not_truncated", rule="tok.truncation", note="the template's mask, uncut",
           edits={'    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}\n':
                  '    return {"input_ids": input_ids, "attention_mask": list(encoded["attention_mask"]), "labels": labels}\n'}),
    Mutant("returns_tensors", rule="tok.lists", note="torch tensors instead of lists",
           edits={'    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}\n':
                  '    return {"input_ids": torch.tensor(input_ids), "attention_mask": torch.ones(len(input_ids), dtype=torch.long),\n'
                  '            "labels": torch.tensor(labels)}\n'}),
    Mutant("drops_a_row_without_targets", rule="tok.cut_before_reply",
           note="trl's dropping of target-less rows copied: empty lists for a conversation cut before its reply",
           edits={'    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}\n':
                  '    if all(label == IGNORE_INDEX for label in labels):\n'
                  '        input_ids, labels = [], []\n'
                  '    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}\n'}),
    # ---------------------------------------------------------------- Packing
    Mutant("positions_never_restart", rule="pack.positions", note="one position count per row",
           edits={ROW_POSITIONS: '            row["position_ids"] = list(range(len(row["input_ids"])))\n'}),
    Mutant("predicts_across_boundaries", rule="pack.boundary", note="no -100 at an example's first token",
           edits={ROW_LABELS: '            row["labels"] += labels\n'}),
    Mutant("first_example_of_a_row_unmasked", rule="pack.boundary",
           note="-100 only where an example follows another",
           edits={ROW_LABELS: '            row["labels"] += ([IGNORE_INDEX] + labels[1:]) if row["labels"] else labels\n'}),
    Mutant("drops_the_tail", rule="pack.split", note="trl's 'bfd': the rest of a long example silently dropped",
           edits={"        for start in range(0, len(input_ids), seq_len):\n" + PIECES:
                  "        if input_ids:\n"
                  "            pieces.append((input_ids[:seq_len], labels[:seq_len]))\n"}),
    Mutant("splits_from_the_end", rule="pack.split", note="the short piece first",
           edits={"        for start in range(0, len(input_ids), seq_len):\n" + PIECES:
                  "        for end in range(len(input_ids), 0, -seq_len):\n"
                  "            pieces.append((input_ids[max(0, end - seq_len):end], labels[max(0, end - seq_len):end]))\n"}),
    Mutant("wrapped", rule="pack.whole", note="trl's 'wrapped': all tokens in one stream cut every seq_len",
           functions={"pack": '''
def pack(examples, seq_len):
    stream = [(t, l, p) for e in examples for p, (t, l) in enumerate(zip(e["input_ids"], e.get("labels", e["input_ids"])))]
    rows = []
    for start in range(0, len(stream), seq_len):
        chunk = stream[start:start + seq_len]
        rows.append({"input_ids": [t for t, _, _ in chunk],
                     "labels": [IGNORE_INDEX if p == 0 else l for _, l, p in chunk],
                     "position_ids": [p for _, _, p in chunk]})
    return rows
'''}),
    Mutant("next_fit", rule="pack.dense", note="fills one row, closes it, never looks back",
           edits={"        fitting = [row for row in rows if row[0] >= length]\n":
                  "        fitting = [row for row in rows[-1:] if row[0] >= length]\n"}),
    Mutant("one_example_per_row", rule="pack.dense", note="no packing at all",
           edits={"        fitting = [row for row in rows if row[0] >= length]\n": "        fitting = []\n"}),
    Mutant("empty_example_kept", rule="pack.empty", note="an empty example leaves a label without a token",
           edits={"        for start in range(0, len(input_ids), seq_len):\n":
                  "        for start in range(0, max(len(input_ids), 1), seq_len):\n"}),
    Mutant("an_open_row_from_the_start", rule="pack.empty", note="one empty row returned when there is nothing to pack",
           edits={"    rows = []                                       # [free space, [piece indices]]\n":
                  "    rows = [[seq_len, []]]                          # [free space, [piece indices]]\n"}),
    Mutant("labels_required", rule="pack.default_labels", note="KeyError on an example without labels",
           edits={'        labels = list(example.get("labels", input_ids))\n': '        labels = list(example["labels"])\n'}),
    Mutant("padded_rows", rule="pack.rows", note="rows padded to seq_len, as if for a batch",
           edits={"        packed.append(row)\n": '        pad = seq_len - len(row["input_ids"])\n'
                  '        row = {"input_ids": row["input_ids"] + [0] * pad, "labels": row["labels"] + [IGNORE_INDEX] * pad,\n'
                  '               "position_ids": row["position_ids"] + [0] * pad}\n'
                  "        packed.append(row)\n"}),
    # ---------------------------------------------------------------- The real thing: peft + trl
    Mutant("trainer_without_assistant_only_loss", rule="sft.assistant_only",
           note="the loss on every token: system and user turns included",
           edits={"        learning_rate=learning_rate, seed=seed, assistant_only_loss=True,\n":
                  "        learning_rate=learning_rate, seed=seed,\n"}),
    Mutant("trl_default_learning_rate", rule="sft.settings", note="learning_rate never passed: trl's 2e-5",
           edits={"        learning_rate=learning_rate, seed=seed, assistant_only_loss=True,\n":
                  "        seed=seed, assistant_only_loss=True,\n"}),
    Mutant("bf16_autocast_on_cpu", rule="sft.settings", note="use_cpu=True but trl's default bf16=True",
           edits={CPU_SETTINGS: "        use_cpu=not cuda,\n"}),
    Mutant("gradient_checkpointing_left_on", rule="sft.settings", note="trl's default checkpointing",
           edits={NO_CHECKPOINTING: ""}),
    Mutant("seed_left_to_the_trainer_default", rule="sft.settings",
           note="torch seeded by hand, SFTConfig's seed left at 42: another data order and other dropout draws",
           edits={"        learning_rate=learning_rate, seed=seed, assistant_only_loss=True,\n":
                  "        learning_rate=learning_rate, assistant_only_loss=True,\n"}),
    Mutant("gradient_accumulation_from_a_tutorial", rule="sft.settings",
           note="gradient_accumulation_steps=2: each step sees twice the batch the call asked for",
           edits={NO_CHECKPOINTING: NO_CHECKPOINTING + "        gradient_accumulation_steps=2,\n"}),
    Mutant("bf16_weights_on_cpu", rule="sft.load", note="the model loaded in bf16 on a CPU",
           edits={"dtype=torch.bfloat16 if cuda else torch.float32)": "dtype=torch.bfloat16)"}),
    Mutant("peft_default_targets", rule="sft.lora_config", note="no target_modules: peft's q_proj, v_proj for Llama",
           edits={'                                             target_modules="all-linear", task_type="CAUSAL_LM"))\n':
                  '                                             task_type="CAUSAL_LM"))\n'}),
    Mutant("lora_alpha_and_dropout_ignored", rule="sft.lora_config", note="LoraConfig's defaults for alpha and dropout",
           edits={"    model = get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout,\n":
                  "    model = get_peft_model(model, LoraConfig(r=r,\n"}),
    Mutant("base_unfrozen", rule="sft.frozen_base", note="every parameter made trainable again",
           edits={"    args = SFTConfig(\n": "    for parameter in model.parameters():\n"
                  "        parameter.requires_grad_(True)\n    args = SFTConfig(\n"}),
    Mutant("saves_the_merged_model", rule="sft.saved", note="a full model instead of the adapter",
           edits={SAVE: "    model.merge_and_unload().save_pretrained(out_dir)\n"}),
    Mutant("relative_output_dir", rule="sft.writes", note="the trainer writes into the working directory",
           edits={'        output_dir=str(out_dir / "trainer"),': '        output_dir="trainer_output",'}),
    Mutant("load_dataset_cache", rule="sft.writes", note="load_dataset writes its Arrow cache outside out_dir",
           edits={"    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(_read_conversations(train_path)),\n":
                  "    from datasets import load_dataset\n"
                  "    trainer = SFTTrainer(model=model, args=args, train_dataset=load_dataset(\"json\", data_files=str(train_path), split=\"train\"),\n"}),
    Mutant("loss_every_ten_steps", rule="sft.returns", note="trl's logging_steps: fewer losses than steps",
           edits={LOGGING: '        save_strategy="no", report_to="none", disable_tqdm=True)\n'}),
    Mutant("returns_the_total_count", rule="sft.returns", note="get_nb_trainable_parameters()[1]",
           edits={'            "trainable_parameters": model.get_nb_trainable_parameters()[0]}':
                  '            "trainable_parameters": model.get_nb_trainable_parameters()[1]}'}),
    # ---------------------------------------------------------------- Talking to the model
    Mutant("no_generation_prompt", rule="gen.prompt", note="the prompt does not end with <|assistant|>",
           edits={PROMPT: PROMPT.replace("add_generation_prompt=True", "add_generation_prompt=False")}),
    Mutant("sampling", rule="gen.greedy", note="do_sample=True",
           edits={GENERATE: GENERATE.replace("do_sample=False", "do_sample=True")}),
    Mutant("stops_at_eos_only", rule="gen.stop", note="eos_token_id=tokenizer.eos_token_id: never <|end|>",
           edits={GENERATE: GENERATE.replace("eos_token_id=stop", "eos_token_id=tokenizer.eos_token_id")}),
    Mutant("stops_at_end_of_turn_only", rule="gen.stop", note="eos_token_id=[<|end|>]: </s> no longer stops",
           edits={'    stop = [tokenizer.convert_tokens_to_ids(END_OF_TURN), tokenizer.eos_token_id]\n':
                  '    stop = [tokenizer.convert_tokens_to_ids(END_OF_TURN)]\n'}),
    Mutant("prompt_text_tokenized_again", rule="gen.prompt",
           note="the template rendered as text, then tokenized with the tokenizer's own <s> in front",
           edits={PROMPT: """    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prompt = tokenizer(text, return_tensors="pt").to(model.device)
"""}),
    Mutant("fixed_max_new_tokens", rule="gen.stop", note="max_new_tokens ignored",
           edits={GENERATE: GENERATE.replace("max_new_tokens=max_new_tokens", "max_new_tokens=8")}),
    Mutant("special_tokens_kept", rule="gen.decode", note="<|end|> left in the reply",
           edits={DECODE: DECODE.replace("skip_special_tokens=True", "skip_special_tokens=False")}),
    Mutant("decodes_the_prompt_too", rule="gen.decode", note="the whole sequence decoded",
           edits={DECODE: "    return tokenizer.decode(output[0], skip_special_tokens=True)\n"}),
    Mutant("generates_in_training_mode", rule="gen.eval_mode", note="no model.eval(): dropout on",
           edits={"    was_training = model.training\n    model.eval()\n": "    was_training = model.training\n"}),
    Mutant("mode_not_restored", rule="gen.eval_mode", note="the model is left in eval mode",
           edits={"    model.train(was_training)\n": ""}),
    # ---------------------------------------------------------------- Does it learn?
    Mutant("sft_a_and_b_zero", rule="learn.exact_match",
           note="A zeroed after get_peft_model: no adapter ever moves, every check of the short run still passes",
           edits={"    args = SFTConfig(\n": "    for name, parameter in model.named_parameters():\n"
                  "        if \"lora_A\" in name:\n            parameter.data.zero_()\n    args = SFTConfig(\n"}),
    # ---------------------------------------------------------------- Read the source
    Mutant("source_old_blog_post", rule="src.resolves", note="a collator trl removed",
           edits={'    "assistant_only_loss": "trl.trainer.sft_trainer.SFTTrainer._prepare_dataset",':
                  '    "assistant_only_loss": "trl.trainer.utils.DataCollatorForCompletionOnlyLM.torch_call",'}),
    Mutant("source_constant_length_dataset", rule="src.resolves", note="trl's packing before bfd, since removed",
           edits={'    "packing": "trl.data_utils._pack_bfd",': '    "packing": "trl.trainer.utils.ConstantLengthDataset.__iter__",'}),
    Mutant("source_the_caller_merge", rule="src.own_code", note="merge_and_unload delegates the fold",
           edits={'    "merge": "peft.tuners.lora.layer.Linear.get_delta_weight",':
                  '    "merge": "peft.tuners.lora.model.LoraModel.merge_and_unload",'}),
    Mutant("source_the_caller_packing", rule="src.own_code", note="pack_dataset maps a kernel over the dataset",
           edits={'    "packing": "trl.data_utils._pack_bfd",': '    "packing": "trl.data_utils.pack_dataset",'}),
]

# Bugs the independent author planted in their own solution, each a single edit of it.
INDEPENDENT_MUTANTS = [
    Mutant('init_a_default_kaiming', rule='lora.init_a', base=INDEPENDENT,
           note='calls kaiming_uniform_ without a=sqrt(5) (bound sqrt(6/in) instead of 1/sqrt(in))',
           edits={'nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))': 'nn.init.kaiming_uniform_(self.lora_A)'}),
    Mutant('indep_scaling_rslora', rule='lora.scaling', base=INDEPENDENT,
           note="uses rsLoRA's alpha / sqrt(r)",
           edits={'self.scaling = alpha / r': 'self.scaling = alpha / math.sqrt(r)'}),
    Mutant('adapters_always_fp32', rule='lora.dtype', base=INDEPENDENT,
           note="creates A and B in float32 whatever the base's dtype",
           edits={'device, dtype = base.weight.device, base.weight.dtype': 'device, dtype = base.weight.device, torch.float32'}),
    Mutant('indep_dropout_on_adapter_output', rule='lora.dropout_input', base=INDEPENDENT,
           note="drops the low-rank update instead of the adapter's input",
           edits={'update = self.lora_dropout(x.to(self.lora_A.dtype)) @ self.lora_A.T @ self.lora_B.T': 'update = self.lora_dropout(x.to(self.lora_A.dtype) @ self.lora_A.T @ self.lora_B.T)'}),
    Mutant('functional_dropout_in_eval', rule='lora.dropout_eval', base=INDEPENDENT,
           note='F.dropout(x, p) without training=self.training keeps dropping in eval mode',
           edits={'update = self.lora_dropout(x.to(self.lora_A.dtype)) @': 'update = nn.functional.dropout(x.to(self.lora_A.dtype), getattr(self.lora_dropout, "p", 0.0)) @'}),
    Mutant('merge_forgets_scaling', rule='merge.weight', base=INDEPENDENT,
           note='folds B A into W without the alpha / r factor',
           edits={'delta = ((B @ A) * self.scaling).to(W.dtype)': 'delta = (B @ A).to(W.dtype)'}),
    Mutant('indep_merge_in_place', rule='merge.leaves_layer', base=INDEPENDENT,
           note="adds the update into the base weight's storage (detach shares memory)",
           edits={'weight = W.detach() + delta': 'weight = W.detach().add_(delta)'}),
    Mutant('indep_all_linear_includes_head', rule='add_lora.all_linear', base=INDEPENDENT,
           note='wraps every nn.Linear, lm_head included',
           edits={'return module is not head': 'return True'}),
    Mutant('names_suffix_without_dot', rule='add_lora.names', base=INDEPENDENT,
           note='matches by plain suffix: "up_proj" also selects Phi-3\'s gate_up_proj',
           edits={'name.endswith("." + t)': 'name.endswith(t)'}),
    Mutant('no_match_only_printed', rule='add_lora.no_match', base=INDEPENDENT,
           note='prints a message instead of raising when nothing matched',
           edits={'        raise ValueError(f"target_modules': '        print(f"target_modules'}),
    Mutant('count_tied_twice', rule='count.peft', base=INDEPENDENT,
           note='counts a tied embedding/head weight twice',
           edits={'for _, p in model.named_parameters():': 'for _, p in model.named_parameters(remove_duplicate=False):'}),
    Mutant('labels_masked_by_pad_id', rule='tok.pad_token', base=INDEPENDENT,
           note='also masks every label equal to the pad token id',
           edits={'labels = [t if m else -100 for t, m in zip(input_ids, mask)]': 'labels = [t if m and t != tokenizer.pad_token_id else -100 for t, m in zip(input_ids, mask)]'}),
    Mutant('labels_shifted_left', rule='tok.unshifted', base=INDEPENDENT,
           note='shifts labels by one as if computing the loss here',
           edits={'labels = [t if m else -100 for t, m in zip(input_ids, mask)]': 'labels = [t if m else -100 for t, m in zip(input_ids[1:], mask[1:])] + [-100]'}),
    Mutant('truncate_keep_end', rule='tok.truncation', base=INDEPENDENT,
           note='keeps the last max_length tokens',
           edits={'input_ids[:max_length], attention_mask[:max_length], labels[:max_length]': 'input_ids[-max_length:], attention_mask[-max_length:], labels[-max_length:]'}),
    Mutant('pack_labels_from_input_ids', rule='pack.boundary', base=INDEPENDENT,
           note="rebuilds labels from input_ids, losing the example's own -100 mask",
           edits={'row["labels"] += [-100] + labels[1:]': 'row["labels"] += [-100] + ids[1:]'}),
    Mutant('pack_next_fit', rule='pack.dense', base=INDEPENDENT,
           note='next-fit: only the last row is tried',
           edits={'fitting = [row for row in rows if': 'fitting = [row for row in rows[-1:] if'}),
    Mutant('pack_exact_fit_refused', rule='pack.dense', base=INDEPENDENT,
           note='off by one: a row may not be filled up to exactly seq_len',
           edits={'seq_len - row[0] >= n': 'seq_len - row[0] > n'}),
    Mutant('sft_default_learning_rate', rule='sft.settings', base=INDEPENDENT,
           note="forgets learning_rate: trl's 2e-5 default",
           edits={'        learning_rate=learning_rate,\n': ''}),
    Mutant('sft_loss_on_whole_sequence', rule='sft.assistant_only', base=INDEPENDENT,
           note='omits assistant_only_loss, so the loss covers system/user tokens too',
           edits={'        assistant_only_loss=True,\n': ''}),
    Mutant('sft_unseeded_adapters', rule='sft.seeded', base=INDEPENDENT,
           note="relies on the trainer's seed, so lora_A is drawn from whatever RNG state",
           edits={'    torch.manual_seed(seed)          # the adapters are drawn here, before the trainer seeds itself\n': ''}),
    Mutant('gen_stops_at_eos_only', rule='gen.stop', base=INDEPENDENT,
           note='passes eos_token_id=tokenizer.eos_token_id (</s>) only',
           edits={'eos_token_id=stops,': 'eos_token_id=tokenizer.eos_token_id,'}),
    Mutant('gen_keeps_special_tokens', rule='gen.decode', base=INDEPENDENT,
           note='decodes with special tokens, so the reply ends in <|end|>',
           edits={'skip_special_tokens=True)': 'skip_special_tokens=False)'}),
    Mutant('gen_leaves_eval_mode', rule='gen.eval_mode', base=INDEPENDENT,
           note='calls model.eval() and never restores training mode',
           edits={'            m.training = training\n': '            pass\n'}),
    Mutant('src_all_linear_names_caller', rule='src.own_code', base=INDEPENDENT,
           note='names get_peft_model, which only delegates the all-linear expansion',
           edits={'"peft.tuners.tuners_utils._maybe_include_all_linear_layers"': '"peft.mapping_func.get_peft_model"'}),
]

MUTANTS = COURSE_MUTANTS + INDEPENDENT_MUTANTS

ALTERNATIVES = [
    Independent(),
    Alternative("functional_linear", note="F.linear for both adapters, the scale folded into B",
                edits={FORWARD: "        F = torch.nn.functional\n"
                                "        return self.base(x) + F.linear(F.linear(self.dropout(x), self.lora_A), "
                                "self.lora_B * self.scaling)\n"}),
    Alternative("merge_scaled_b_first", note="(scaling * B) @ A: the same weight, rounded differently",
                edits={MERGE: "            merged.weight.copy_(base.weight + (self.scaling * self.lora_B) @ self.lora_A)\n"}),
    Alternative("dropout_module_always", note="nn.Dropout(dropout) even at 0 (README: both accepted)",
                edits={"        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()\n":
                       "        self.dropout = nn.Dropout(dropout)\n"}),
    Alternative("merge_shares_bias", note="the merged layer holds the base's own bias tensor (README: both accepted)",
                edits={"                merged.bias.copy_(base.bias)\n": "                merged.bias = base.bias\n"}),
    Alternative("head_excluded_by_name", note="all-linear leaves out a module named lm_head",
                edits={"        return [name for name in linears if model.get_submodule(name) is not head]\n":
                       '        return [name for name in linears if name.rsplit(".", 1)[-1] != "lm_head"]\n'}),
    Alternative("template_text_and_offsets", note="render the template, tokenize the text with offsets, mark the "
                "tokens that overlap the template's generation spans",
                functions={"tokenize_conversation": '''
def tokenize_conversation(tokenizer, messages, max_length=None):
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, spans = render_jinja_template(conversations=[messages], chat_template=tokenizer.chat_template,
                                            return_assistant_tokens_mask=True, **tokenizer.special_tokens_map)
    encoded = tokenizer(rendered[0], add_special_tokens=False, return_offsets_mapping=True)
    labels = []
    for token, (start, end) in zip(encoded["input_ids"], encoded["offset_mapping"]):
        inside = any(start < span_end and end > span_start for span_start, span_end in spans[0])
        labels.append(token if inside else IGNORE_INDEX)
    input_ids = list(encoded["input_ids"])
    if max_length is not None:
        input_ids, labels = input_ids[:max_length], labels[:max_length]
    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}
'''}),
    Alternative("first_fit_in_order", note="first fit, examples in their given order (README allows it)",
                edits={"    for index in sorted(range(len(pieces)), key=lambda i: -len(pieces[i][0])):\n":
                       "    for index in range(len(pieces)):\n",
                       "        row = min(fitting, key=lambda row: row[0]) if fitting else None\n":
                       "        row = fitting[0] if fitting else None\n"}),
    Alternative("trainer_saves_the_adapter", note="trainer.save_model(out_dir): the adapter, plus the tokenizer and "
                "the training arguments, all inside out_dir",
                edits={SAVE: "    trainer.save_model(str(out_dir))\n"}),
    Alternative("trainer_output_dir_is_out_dir", note="the trainer's output_dir is out_dir itself (nothing is saved there)",
                edits={'        output_dir=str(out_dir / "trainer"),': '        output_dir=str(out_dir),'}),
    Alternative("greedy_loop_by_hand", note="argmax token by token, no generate()",
                edits={GENERATE: """        ids = prompt["input_ids"]
        for _ in range(max_new_tokens):
            token = model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, token], dim=1)
            if token.item() in stop:
                break
        output = ids
"""}),
]


# Operator mutants that no correct grading can tell from the reference (grader audit 03 --operators).
EQUIVALENT = {
    'LoRALinear: self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity() -> self.dropout = nn.Dropout(dropout) if (dropout > 0) or True else nn.Identity()':
        'nn.Dropout(0) and no dropout module compute the same; the README accepts both',
    'LoRALinear: self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity() -> self.dropout = nn.Dropout(dropout) if dropout >= 0 else nn.Identity()':
        'nn.Dropout(0) and no dropout module compute the same; the README accepts both',
    '_target_names: head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None -> head = model.get_output_embeddings() if (hasattr(model, "get_output_embeddings")) or True else None':
        'every model the contract hands add_lora is a transformers model with get_output_embeddings',
    '_target_names: names = [target_modules] if isinstance(target_modules, str) else list(target_modules) -> names = [target_modules] if (isinstance(target_modules, str)) and False else list(target_modules)':
        'a single name string other than all-linear is outside the contract (README)',
    '_target_names: raise ValueError(f"target_modules {names} match no linear layer of the model") -> raise ValueError(None)':
        'the README promises a ValueError, not its message',
    'tokenize_conversation: encoded = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, -> encoded = tokenizer.apply_chat_template(messages, return_dict=True,':
        'apply_chat_template tokenizes by default (tokenize=True)',
    'tokenize_conversation: encoded = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True) -> encoded = tokenizer.apply_chat_template(messages, tokenize=True, return_assistant_tokens_mask=True)':
        'apply_chat_template returns a dict by default when it tokenizes (return_dict=True)',
    'generate_reply: prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt").to(model.device) -> prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to(model.device)':
        'apply_chat_template returns a dict by default when it tokenizes (return_dict=True)',
    'pack: for index in sorted(range(len(pieces)), key=lambda i: -len(pieces[i][0])): -> for index in sorted(range(len(pieces)), key=None):':
        'the order examples are placed in is free: any fit that opens a row only when nothing fits keeps rows dense',
    'pack: for index in sorted(range(len(pieces)), key=lambda i: -len(pieces[i][0])): -> for index in sorted(range(len(pieces)), ):':
        'the order examples are placed in is free: any fit that opens a row only when nothing fits keeps rows dense',
    'pack: row = min(fitting, key=lambda row: row[0]) if fitting else None -> row = min(fitting, key=None) if fitting else None':
        'the row an example joins among those it fits is free (README); rows stay dense',
    'pack: row = min(fitting, key=lambda row: row[0]) if fitting else None -> row = min(fitting, ) if fitting else None':
        'the row an example joins among those it fits is free (README); rows stay dense',
    'pack: row = min(fitting, key=lambda row: row[0]) if fitting else None -> row = min(fitting, key=lambda row: row[1]) if fitting else None':
        'the row an example joins among those it fits is free (README); rows stay dense',
    '_read_conversations: with open(path, encoding="utf-8") as f: -> with open(path, encoding=None) as f:':
        "the conversations are ASCII and Python reads files as UTF-8 in the grading's locale",
    '_read_conversations: with open(path, encoding="utf-8") as f: -> with open(path, ) as f:':
        "the conversations are ASCII and Python reads files as UTF-8 in the grading's locale",
    '_read_conversations: with open(path, encoding="utf-8") as f: -> with open(path, encoding="UTF-8") as f:':
        'UTF-8 and utf-8 name the same codec',
    'sft_with_peft_trl: tokenizer = AutoTokenizer.from_pretrained(model_dir) -> tokenizer = None':
        "given no processing_class, trl loads the same tokenizer from the model's directory",
    'sft_with_peft_trl: processing_class=tokenizer) -> processing_class=None)':
        "given no processing_class, trl loads the same tokenizer from the model's directory",
    'sft_with_peft_trl: processing_class=tokenizer) -> )':
        "given no processing_class, trl loads the same tokenizer from the model's directory",
    'sft_with_peft_trl: model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16 if cuda else torch.float32) -> model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16 if (cuda) and False else torch.float32)':
        "differs only where CUDA is available (bf16 base there), which the CPU grading cannot see; the short run's dtype check catches it on CUDA",
    'sft_with_peft_trl: bf16=cuda, use_cpu=not cuda, -> bf16=cuda, use_cpu=cuda,':
        "differs only where CUDA is available (use_cpu=True there), which the CPU grading cannot see; the bf16 CUDA run's peak memory catches it there",
    'generate_reply: return_tensors="pt").to(model.device) -> return_tensors="pt").to(None)':
        'moving the prompt to model.device matters only for a model on an accelerator; on the CPU both stay put',
    'sft_with_peft_trl: target_modules="all-linear", task_type="CAUSAL_LM")) -> target_modules="ALL-LINEAR", task_type="CAUSAL_LM"))':
        'peft reads all-linear in any case',
    'sft_with_peft_trl: bf16=cuda, use_cpu=not cuda, -> bf16=cuda, use_cpu=None,':
        'use_cpu defaults to False, and with no accelerator the trainer runs on the CPU either way; on CUDA the reference passes False too',
    'sft_with_peft_trl: bf16=cuda, use_cpu=not cuda, activation_checkpointing=False, -> bf16=cuda, activation_checkpointing=False,':
        'use_cpu defaults to False, and with no accelerator the trainer runs on the CPU either way; on CUDA the reference passes False too',
    'sft_with_peft_trl: logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True) -> logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=None)':
        'disable_tqdm only shows or hides progress bars',
    'sft_with_peft_trl: logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True) -> logging_steps=1, save_strategy="no", report_to="none", )':
        'disable_tqdm only shows or hides progress bars',
    'sft_with_peft_trl: logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True) -> logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=False)':
        'disable_tqdm only shows or hides progress bars',
    'sft_with_peft_trl: logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True) -> logging_steps=1, save_strategy="no", disable_tqdm=True)':
        'report_to defaults to none in transformers 5',
    'sft_with_peft_trl: output_dir=str(out_dir / "trainer"), max_steps=max_steps, per_device_train_batch_size=batch_size, -> output_dir=str(out_dir / "XXtrainerXX"), max_steps=max_steps, per_device_train_batch_size=batch_size,':
        "the trainer's output_dir may be any folder inside out_dir (README)",
    'sft_with_peft_trl: output_dir=str(out_dir / "trainer"), max_steps=max_steps, per_device_train_batch_size=batch_size, -> output_dir=str(out_dir / "TRAINER"), max_steps=max_steps, per_device_train_batch_size=batch_size,':
        "the trainer's output_dir may be any folder inside out_dir (README)",
    'generate_reply: output = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop, -> output = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=None, eos_token_id=stop,':
        'generate takes do_sample=None as False: greedy either way',
    'generate_reply: pad_token_id=tokenizer.pad_token_id) -> pad_token_id=None)':
        "one prompt, never padded: pad_token_id is only used to pad a batch, and falls back to the config's",
    'generate_reply: pad_token_id=tokenizer.pad_token_id) -> )':
        "one prompt, never padded: pad_token_id is only used to pad a batch, and falls back to the config's",
    'sft_with_peft_trl: model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16 if cuda else torch.float32) -> model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=None)':
        "from_pretrained takes dtype=None as float32 (torch's default, not the config's), the CPU contract's dtype; only CUDA, where bf16 is asked, could tell",
}
