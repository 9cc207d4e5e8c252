"""Mutants (realistic learner bugs) and alternative correct solutions for exercise 04, as edits
of solutions/04_memory_accounting/memory.py. `grader audit 04` grades them all."""
from grader.running.variants import Alternative, Mutant

PARAMS = "Parameters from a config"
LORA = "LoRA parameters"
STATE = "Training state memory"
ADAPTERS = "LoRA and QLoRA memory"
FSDP = "Sharding with FSDP"
KV = "KV cache"
ACTIVATIONS = "Activations"
CHECKPOINTING = "Gradient checkpointing"
ROOFLINE = "Decode and prefill"
INTENSITY = "Arithmetic intensity"
FITS = "Does it fit?"
OOM = "Which block did the OOM land in?"

MUTANTS = [
    # ---------------------------------------------------------------- parameters
    Mutant("tied_embeddings_counted_twice", PARAMS, note="lm_head counted even when it is the embedding",
           edits={"lm_head = 0 if arch.tied else arch.vocab * arch.hidden": "lm_head = arch.vocab * arch.hidden"}),
    Mutant("kv_projections_with_attention_heads", PARAMS, note="k and v sized as if every head had its own",
           edits={"h, q, kv = arch.hidden, arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim":
                  "h, q, kv = arch.hidden, arch.heads * arch.head_dim, arch.heads * arch.head_dim"}),
    Mutant("two_ffn_matrices", PARAMS, note="the GPT-2 MLP (up, down) for a gated MLP (gate, up, down)",
           edits={'return attention + [("gate_proj", h, i, arch.mlp_bias), ("up_proj", h, i, arch.mlp_bias),':
                  'return attention + [("up_proj", h, i, arch.mlp_bias),'}),
    Mutant("explicit_head_dim_ignored", PARAMS, note="head_dim taken as hidden_size / heads always",
           edits={'config.get("head_dim") or hidden // heads': "hidden // heads"}),
    Mutant("norms_forgotten", PARAMS, note="RMSNorm / LayerNorm weights left out",
           edits={"    block += 2 * _norm_params(arch)\n": "",
                  "return embeddings + arch.layers * block + _norm_params(arch) + lm_head":
                  "return embeddings + arch.layers * block + lm_head"}),
    Mutant("qkv_bias_forgotten", PARAMS, note="Qwen2's q, k, v biases are implied, not in the config",
           edits={'attention_bias = family == "qwen2" or config.get("attention_bias", False)':
                  'attention_bias = config.get("attention_bias", False)'}),
    Mutant("one_expert_counted", PARAMS, note="the active expert counted, not all of them",
           edits={'return attention + expert * arch.experts + [("gate", h, arch.experts, False)]':
                  'return attention + expert + [("gate", h, arch.experts, False)]'}),
    Mutant("router_forgotten", PARAMS, note="the experts without their router",
           edits={'return attention + expert * arch.experts + [("gate", h, arch.experts, False)]':
                  "return attention + expert * arch.experts"}),
    # ---------------------------------------------------------------- LoRA
    Mutant("lora_r_in_out", LORA, note="r * in * out: a dense matrix again",
           edits={"sum(r * (n_in + n_out) for _, n_in, n_out, _ in linears)":
                  "sum(r * n_in * n_out for _, n_in, n_out, _ in linears)"}),
    # ---------------------------------------------------------------- training state
    Mutant("twelve_bytes_no_master_weights", STATE, note="bf16 weights, grads and moments only",
           edits={"master_weights=4 * n": "master_weights=0"}),
    Mutant("eighteen_bytes_fp32_grads", STATE, note="fp32 gradients on top of bf16 weights",
           edits={"grads=2 * n": "grads=4 * n"}),
    Mutant("lora_without_frozen_base", ADAPTERS, note="only the adapters counted",
           edits={'state["weights"] = 2 * n if method == "lora" else': 'state["weights"] = 0 if method == "lora" else'}),
    Mutant("fsdp_not_sharding", FSDP, note="n_gpus ignored",
           edits={"state = {block: size / n_gpus for block, size in state.items()}":
                  "state = {block: size for block, size in state.items()}"}),
    # ---------------------------------------------------------------- KV cache
    Mutant("kv_cache_without_factor_2", KV, note="keys counted, values forgotten",
           edits={"return 2 * arch.layers * batch * seq_len": "return arch.layers * batch * seq_len"}),
    Mutant("kv_cache_with_attention_heads", KV, note="GQA ignored: one K/V per query head",
           edits={"seq_len * arch.kv_heads * arch.head_dim * bytes_per_value":
                  "seq_len * arch.heads * arch.head_dim * bytes_per_value"}),
    # ---------------------------------------------------------------- activations
    Mutant("activations_without_seq_squared", ACTIVATIONS, note="attention probabilities not stored (as if flash)",
           edits={"scores = batch * arch.heads * seq_len ** 2 * (f if b >= f else f + b)": "scores = 0"}),
    Mutant("activations_without_the_loss", ACTIVATIONS, note="the fp32 log-probabilities of the loss forgotten",
           edits={"outside = tokens * (8 + arch.vocab * f + 8)": "outside = tokens * (8 + 8)"}),
    Mutant("checkpointing_saves_nothing", CHECKPOINTING, note="checkpointing=True changes nothing",
           edits={"    if checkpointing:\n        return outside + arch.layers * tokens * arch.hidden * b + layer\n": ""}),
    Mutant("checkpointing_forgets_block_inputs", CHECKPOINTING, note="one block recomputed, inputs not kept",
           edits={"return outside + arch.layers * tokens * arch.hidden * b + layer": "return outside + layer"}),
    # ---------------------------------------------------------------- roofline
    Mutant("prefill_without_factor_2", ROOFLINE, note="one FLOP per parameter per token",
           edits={"return 2 * n_params * n_tokens / peak_flops * 1e3": "return n_params * n_tokens / peak_flops * 1e3"}),
    Mutant("decode_from_flops", ROOFLINE, note="2 FLOPs per parameter over the bandwidth, not bytes",
           edits={"return n_params * bytes_per_param / mem_bandwidth * 1e3": "return 2 * n_params / mem_bandwidth * 1e3"}),
    Mutant("gb_and_gib_confused", ROOFLINE, note="model size in GiB over bandwidth in GB/s",
           edits={"return n_params * bytes_per_param / mem_bandwidth * 1e3":
                  "return n_params * bytes_per_param / 2**30 / (mem_bandwidth / 1e9) * 1e3"}),
    Mutant("intensity_without_output", INTENSITY, note="only the inputs are moved",
           edits={"(m * k + k * n + m * n)": "(m * k + k * n)"}),
    # ---------------------------------------------------------------- fits and OOM
    Mutant("fits_without_activations", FITS, note="only the states must fit",
           edits={"return sum(blocks.values()) <= gpu_memory":
                  'return sum(size for block, size in blocks.items() if block != "activations") <= gpu_memory'}),
    Mutant("culprit_ignores_the_optimizer", OOM, note="AdamW's 8 bytes whatever the optimizer",
           edits={"(4 + OPTIMIZER_STATE_BYTES[optimizer]) * trained": "(4 + 8) * trained"}),
]

ALTERNATIVES = [
    Alternative("parameters_from_a_state_dict_listing", note="count the shapes of a state dict, like a module walk",
                functions={"param_count": '''
def param_count(config):
    """Number of parameters of the model a Hugging Face `config.json` (as a dict) describes.

    Model types llama, mistral, qwen2, gemma, mixtral and gpt2, counted as
    AutoModelForCausalLM.from_config builds them: embeddings (and gpt2's position embeddings),
    every decoder block (attention with grouped KV heads, explicit head_dim and biases; the MLP,
    or every expert plus the router for mixtral; the norms), the final norm, and lm_head unless
    tie_word_embeddings shares it with the input embedding.
    """
    arch = _arch(config)
    shapes = {"embed_tokens.weight": (arch.vocab, arch.hidden)}
    if arch.positions:
        shapes["wpe.weight"] = (arch.positions, arch.hidden)
    norm = [(arch.hidden,), (arch.hidden,)] if arch.family == "gpt2" else [(arch.hidden,)]
    for layer in range(arch.layers):
        for index, (name, n_in, n_out, bias) in enumerate(_block_linears(arch)):
            shapes[f"layers.{layer}.{index}.{name}.weight"] = (n_out, n_in)
            if bias:
                shapes[f"layers.{layer}.{index}.{name}.bias"] = (n_out,)
        for which in ("input_layernorm", "post_attention_layernorm"):
            for j, shape in enumerate(norm):
                shapes[f"layers.{layer}.{which}.{j}"] = shape
    for j, shape in enumerate(norm):
        shapes[f"norm.{j}"] = shape
    if not arch.tied:
        shapes["lm_head.weight"] = (arch.vocab, arch.hidden)
    return sum(math.prod(shape) for shape in shapes.values())
'''}),
    Alternative("closed_form_counts", note="one formula per family, no layer list",
                functions={"param_count": '''
def param_count(config):
    """Number of parameters of the model a Hugging Face `config.json` (as a dict) describes.

    Model types llama, mistral, qwen2, gemma, mixtral and gpt2, counted as
    AutoModelForCausalLM.from_config builds them: embeddings (and gpt2's position embeddings),
    every decoder block (attention with grouped KV heads, explicit head_dim and biases; the MLP,
    or every expert plus the router for mixtral; the norms), the final norm, and lm_head unless
    tie_word_embeddings shares it with the input embedding.
    """
    if config["model_type"] == "gpt2":
        h, v, p = config["n_embd"], config["vocab_size"], config["n_positions"]
        i = config.get("n_inner") or 4 * h
        block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h)
        head = 0 if config.get("tie_word_embeddings", True) else v * h
        return (v + p) * h + config["n_layer"] * block + 2 * h + head
    h, v = config["hidden_size"], config["vocab_size"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    d = config.get("head_dim") or h // heads
    i = config["intermediate_size"]
    attention = 2 * h * heads * d + 2 * h * kv * d
    if config["model_type"] == "qwen2":
        attention += heads * d + 2 * kv * d
    elif config.get("attention_bias", False):
        attention += heads * d + 2 * kv * d + h
    if config["model_type"] == "mixtral":
        mlp = config["num_local_experts"] * 3 * h * i + config["num_local_experts"] * h
    else:
        mlp = 3 * h * i + (2 * i + h if config.get("mlp_bias", False) else 0)
    tied = config.get("tie_word_embeddings", config["model_type"] == "gemma")
    return v * h * (1 if tied else 2) + config["num_hidden_layers"] * (attention + mlp + 2 * h) + h
'''}),
    Alternative("activations_per_token_and_per_score", note="a leaner estimate: bytes per token plus bytes per score",
                functions={"activation_bytes": '''
def activation_bytes(config, batch, seq_len, *, checkpointing=False, bytes_per_value=2):
    """Bytes of activations kept for backward by one training forward (with the loss) of the
    Hugging Face model with eager attention, for the llama-like model types (not gpt2).

    Without checkpointing: every tensor autograd saves, counted once. With checkpointing=True:
    the peak under gradient checkpointing, i.e. what is saved outside the decoder blocks, each
    block's input, and one block's saved tensors while it is recomputed. Exactly proportional
    to batch; README.md derives every term.
    """
    arch = _arch(config)
    if arch.family == "gpt2":
        raise ValueError("activation_bytes covers the llama-like model types, not gpt2")
    b = bytes_per_value
    fp32 = max(4, b)
    h, width, tokens = arch.hidden, arch.heads * arch.head_dim, batch * seq_len
    mlp = 4 * arch.intermediate * b * max(1, arch.top_k) + (2 * h * b * arch.top_k if arch.experts else 0)
    per_token = 2 * h * (fp32 + 2 * b) + 4 * width * b + mlp          # norms, q k v o inputs, MLP
    per_score = fp32 + (b if b < fp32 else 0)                         # softmax out (+ its cast)
    block = tokens * per_token + batch * arch.heads * seq_len * seq_len * per_score
    outside = tokens * (arch.vocab * fp32 + h * (fp32 + 2 * b))       # log-probs, final norm
    if checkpointing:
        return outside + arch.layers * tokens * h * b + block
    return outside + arch.layers * block
'''}),
]
