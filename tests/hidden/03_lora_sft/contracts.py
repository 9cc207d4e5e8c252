"""The rules exercises/03_lora_sft/README.md states, one per `<!-- rule: ... -->` marker (the same
markers stand in README.zh-CN.md). `grader audit 03` requires a killed mutant in variants.py for
each of them."""
from grader.running.contracts import Rule

LORA, MERGING, ADAPTERS = "LoRA by hand", "Merging", "Adapters on a model"
TEMPLATE, PACKING, TRL = "The chat template and the loss mask", "Packing", "The real thing: peft + trl"
GENERATION, LEARNING, SOURCE = "Talking to the model", "Does it learn?", "Read the source"

RULES = [
    Rule("lora.base_frozen", LORA, "the base is kept as `base` and frozen; only lora_A and lora_B get gradients"),
    Rule("lora.init_a", LORA, "lora_A is an (r, in) Parameter drawn with kaiming_uniform_(a=sqrt(5))"),
    Rule("lora.init_b", LORA, "lora_B is an (out, r) Parameter of zeros: a fresh layer returns exactly base(x)"),
    Rule("lora.dtype", LORA, "lora_A and lora_B take the base's device and dtype"),
    Rule("lora.scaling", LORA, "scaling is alpha / r"),
    Rule("lora.forward", LORA, "forward = base(x) + dropout(x) @ A.T @ B.T * scaling, for any leading dims"),
    Rule("lora.dropout_input", LORA, "dropout drops (and rescales) features of the adapter's input only"),
    Rule("lora.dropout_eval", LORA, "in eval mode nothing is dropped"),
    Rule("merge.weight", MERGING, "merged() is a new plain nn.Linear: W + scaling * B @ A, the base's bias"),
    Rule("merge.leaves_layer", MERGING, "merged() leaves the LoRA layer and its base weight unchanged"),
    Rule("add_lora.in_place", ADAPTERS, "add_lora replaces modules in place and returns the same model"),
    Rule("add_lora.all_linear", ADAPTERS, "all-linear targets every nn.Linear except the output head"),
    Rule("add_lora.names", ADAPTERS, "a name selects modules named so or ending with '.' + name"),
    Rule("add_lora.no_match", ADAPTERS, "a list that selects no linear layer raises ValueError"),
    Rule("add_lora.freeze", ADAPTERS, "every parameter outside the adapters is frozen"),
    Rule("count.peft", ADAPTERS, "trainable_parameters counts as peft: every parameter once, tied weights once"),
    Rule("tok.lists", TEMPLATE, "tokenize_conversation returns three lists of ints of one length"),
    Rule("tok.mask", TEMPLATE, "labels are the tokens the template's generation blocks mark, -100 elsewhere"),
    Rule("tok.end_of_turn", TEMPLATE, "each reply's closing <|end|> is a target"),
    Rule("tok.unshifted", TEMPLATE, "labels are aligned with input_ids, not shifted"),
    Rule("tok.pad_token", TEMPLATE, "no label is masked by token id (pad token = <|end|> changes nothing)"),
    Rule("tok.truncation", TEMPLATE, "max_length keeps the first tokens of all three lists; attention_mask all ones"),
    Rule("pack.rows", PACKING, "rows of input_ids, labels, position_ids of equal length <= seq_len, no padding"),
    Rule("pack.default_labels", PACKING, "labels default to input_ids"),
    Rule("pack.whole", PACKING, "every example whole and contiguous in exactly one row; nothing lost or duplicated"),
    Rule("pack.split", PACKING, "an example longer than seq_len is cut from its start into seq_len pieces"),
    Rule("pack.empty", PACKING, "an example with no tokens is skipped"),
    Rule("pack.positions", PACKING, "position_ids restart at 0 at every example"),
    Rule("pack.boundary", PACKING, "every example's first label is -100, the others its own"),
    Rule("pack.dense", PACKING, "no two rows fit together in seq_len"),
    Rule("sft.load", TRL, "the model loads in float32 on a CPU"),
    Rule("sft.lora_config", TRL, "get_peft_model with LoraConfig(r, alpha, dropout, all-linear, CAUSAL_LM)"),
    Rule("sft.assistant_only", TRL, "assistant_only_loss=True: the trainer's labels are the assistant tokens only"),
    Rule("sft.settings", TRL, "max_steps, batch size, learning rate, fp32, no checkpointing, defaults otherwise"),
    Rule("sft.frozen_base", TRL, "only the adapters train: base weights bit-identical"),
    Rule("sft.saved", TRL, "the adapter (config + LoRA weights only) is saved to out_dir"),
    Rule("sft.writes", TRL, "nothing is written outside out_dir"),
    Rule("sft.returns", TRL, "adapter_dir, one train loss per step, the trainable count peft reports"),
    Rule("gen.prompt", GENERATION, "the prompt is the chat template with add_generation_prompt=True"),
    Rule("gen.greedy", GENERATION, "decoding is greedy"),
    Rule("gen.stop", GENERATION, "at most max_new_tokens, stopping at <|end|> or </s>"),
    Rule("gen.decode", GENERATION, "the reply is the new tokens only, special tokens skipped"),
    Rule("gen.eval_mode", GENERATION, "generation runs in eval mode and the model's mode is restored"),
    Rule("learn.exact_match", LEARNING, "the graded run reaches the exact-match bar"),
    Rule("src.resolves", SOURCE, "the dotted path resolves in the installed libraries"),
    Rule("src.own_code", SOURCE, "the path names the function whose own code does the thing"),
]
