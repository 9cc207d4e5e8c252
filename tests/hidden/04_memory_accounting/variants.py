"""Mutants (realistic learner bugs) and alternative correct solutions for exercise 04. `grader audit
04` grades them all.

Two authors: the course's own, written as edits of solutions/04_memory_accounting/memory.py, and
an independent solution written from the README and stub alone (independent/memory.py) with the
bugs its author planted in it (`base=INDEPENDENT`). Every mutant names the rule it breaks, as
the README marks it, and every rule has at least one mutant.
"""
from grader.running.variants import INDEPENDENT, Alternative, Independent, Mutant

COURSE_MUTANTS = [
    # ---------------------------------------------------------------- units and config keys
    Mutant("training_memory_in_gigabytes", concept="Training state memory", rule="units.bytes_ms", note="state reported in GB, not bytes",
           edits={"state = {block: size / n_gpus for block, size in state.items()}":
                  "state = {block: size / n_gpus / GB for block, size in state.items()}"}),
    Mutant("kv_cache_always_bf16", concept="KV cache", rule="units.bytes_per_value", note="2 bytes per value whatever the argument",
           edits={"seq_len * arch.kv_heads * arch.head_dim * bytes_per_value": "seq_len * arch.kv_heads * arch.head_dim * 2"}),
    Mutant("kv_heads_null_not_defaulted", rule="config.kv_heads_default",
           note="a missing num_key_value_heads handled, an explicit null not",
           edits={'config.get("num_key_value_heads") or heads': 'config.get("num_key_value_heads", heads)'}),
    Mutant("head_dim_null_not_defaulted", rule="config.head_dim_default",
           note="a missing head_dim handled, an explicit null not",
           edits={'config.get("head_dim") or hidden // heads': 'config.get("head_dim", hidden // heads)'}),
    Mutant("bias_keys_read_for_every_model_type", rule="config.bias_keys",
           note="attention_bias and mlp_bias honoured where Hugging Face ignores them",
           edits={'attention_bias = family in ATTENTION_BIAS_READERS and bool(config.get("attention_bias", False))':
                  'attention_bias = bool(config.get("attention_bias", False))',
                  'mlp_bias=family in MLP_BIAS_READERS and bool(config.get("mlp_bias", False)),':
                  'mlp_bias=bool(config.get("mlp_bias", False)),'}),
    Mutant("n_inner_null_not_defaulted", rule="config.n_inner_default", note="gpt2's n_inner: null kept as None",
           edits={'config.get("n_inner") or 4 * hidden': 'config.get("n_inner", 4 * hidden)'}),
    # ---------------------------------------------------------------- parameters
    Mutant("tied_embeddings_counted_twice", rule="params.tied_once",
           note="lm_head counted even when it is the embedding",
           edits={"lm_head = 0 if arch.tied else arch.vocab * arch.hidden": "lm_head = arch.vocab * arch.hidden"}),
    Mutant("kv_projections_with_attention_heads", rule="params.gqa",
           note="k and v sized as if every head had its own",
           edits={"h, q, kv = arch.hidden, arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim":
                  "h, q, kv = arch.hidden, arch.heads * arch.head_dim, arch.heads * arch.head_dim"}),
    Mutant("two_ffn_matrices", rule="params.gated_mlp",
           note="the GPT-2 MLP (up, down) for a gated MLP (gate, up, down)",
           edits={'return attention + [("gate_proj", h, i, arch.mlp_bias), ("up_proj", h, i, arch.mlp_bias),':
                  'return attention + [("up_proj", h, i, arch.mlp_bias),'}),
    Mutant("explicit_head_dim_ignored", rule="params.head_dim", note="head_dim taken as hidden_size / heads always",
           edits={'config.get("head_dim") or hidden // heads': "hidden // heads"}),
    Mutant("norms_forgotten", rule="params.norms", note="RMSNorm / LayerNorm weights left out",
           edits={"    block += 2 * _norm_params(arch)\n": "",
                  "return embeddings + arch.layers * block + _norm_params(arch) + lm_head":
                  "return embeddings + arch.layers * block + lm_head"}),
    Mutant("qkv_bias_forgotten", rule="params.qwen2_bias", note="Qwen2's q, k, v biases are implied, not in the config",
           edits={'qkv_bias=attention_bias or family == "qwen2",': "qkv_bias=attention_bias,"}),
    Mutant("one_expert_counted", rule="params.experts", note="the active expert counted, not all of them",
           edits={'return attention + expert * arch.experts + [("gate", h, arch.experts, False)]':
                  'return attention + expert + [("gate", h, arch.experts, False)]'}),
    Mutant("router_forgotten", rule="params.router", note="the experts without their router",
           edits={'return attention + expert * arch.experts + [("gate", h, arch.experts, False)]':
                  "return attention + expert * arch.experts"}),
    Mutant("gpt2_layernorm_without_bias", rule="params.gpt2", note="GPT-2's LayerNorms counted like RMSNorms",
           edits={'return 2 * arch.hidden if arch.family == "gpt2" else arch.hidden': "return arch.hidden"}),
    Mutant("twelve_h_squared_rule_of_thumb", rule="params.exact", note="12 L h^2 + V h, the textbook estimate",
           functions={"param_count": '''
def param_count(config):
    arch = _arch(config)
    return 12 * arch.layers * arch.hidden ** 2 + arch.vocab * arch.hidden
'''}),
    # ---------------------------------------------------------------- LoRA
    Mutant("lora_r_in_out", rule="lora.r_in_out", note="r * in * out: a dense matrix again",
           edits={"sum(r * (n_in + n_out) for _, n_in, n_out, _ in linears)":
                  "sum(r * n_in * n_out for _, n_in, n_out, _ in linears)"}),
    Mutant("lora_adapts_lm_head", rule="lora.all_linear", note='"all-linear" taken to include lm_head',
           edits={"return arch.layers * sum(r * (n_in + n_out) for _, n_in, n_out, _ in linears)":
                  "return arch.layers * sum(r * (n_in + n_out) for _, n_in, n_out, _ in linears) + (\n"
                  '        r * (arch.hidden + arch.vocab) if target_modules == "all-linear" else 0)'}),
    Mutant("lora_names_in_one_block", rule="lora.names", note="named targets counted in one block, not every block",
           edits={"        linears = [linear for linear in linears if linear[0] in target_modules]\n":
                  "        return sum(r * (n_in + n_out) for name, n_in, n_out, _ in linears if name in target_modules)\n"}),
    Mutant("lora_unknown_names_count_nothing", rule="lora.bad_names",
           note="a name the model lacks adapts nothing, a bare string is one name",
           edits={'        raise ValueError(f\'target_modules is "all-linear" or a list of layer names, not {target_modules!r}\')':
                  "        target_modules = [target_modules]",
                  '            raise ValueError(f"no linear layers named {sorted(unknown)}; this model has {sorted(known)}")':
                  "            pass"}),
    # ---------------------------------------------------------------- training state
    Mutant("twelve_bytes_no_master_weights", rule="state.full", note="bf16 weights, grads and moments only",
           edits={"master_weights=4 * n": "master_weights=0"}),
    Mutant("eighteen_bytes_fp32_grads", rule="state.full", note="fp32 gradients on top of bf16 weights",
           edits={"grads=2 * n": "grads=4 * n"}),
    Mutant("total_without_the_adapters", concept="LoRA and QLoRA memory", rule="state.blocks", note="total sums the base model's blocks only",
           edits={'state["total"] = sum(state.values())':
                  'state["total"] = sum(size for block, size in state.items() if block != "lora")'}),
    Mutant("unknown_method_accepted", rule="state.methods", note="any method but full treated as an adapter method",
           edits={"    if method not in TRAINING_METHODS:\n"
                  '        raise ValueError(f"method must be one of {TRAINING_METHODS}, not {method!r}")\n': ""}),
    Mutant("lora_without_frozen_base", rule="adapters.lora", note="only the adapters counted",
           edits={'state["weights"] = 2 * n if method == "lora" else': 'state["weights"] = 0 if method == "lora" else'}),
    Mutant("qlora_without_scales", rule="adapters.qlora", note="4 bits per parameter, the absmax scales forgotten",
           edits={"n / 2 + 4 * math.ceil(n / QLORA_BLOCK)": "n / 2"}),
    Mutant("fsdp_not_sharding", rule="fsdp.every_block", note="n_gpus ignored",
           edits={"state = {block: size / n_gpus for block, size in state.items()}":
                  "state = {block: size for block, size in state.items()}"}),
    # ---------------------------------------------------------------- KV cache
    Mutant("kv_cache_without_factor_2", rule="kv.formula", note="keys counted, values forgotten",
           edits={"return 2 * arch.layers * batch * seq_len": "return arch.layers * batch * seq_len"}),
    Mutant("kv_cache_with_attention_heads", rule="kv.formula", note="GQA ignored: one K/V per query head",
           edits={"seq_len * arch.kv_heads * arch.head_dim * bytes_per_value":
                  "seq_len * arch.heads * arch.head_dim * bytes_per_value"}),
    Mutant("kv_cache_capped_at_sliding_window", rule="kv.contract",
           note="only the last sliding_window tokens counted, as Hugging Face's cache keeps them",
           edits={"    return 2 * arch.layers * batch * seq_len * arch.kv_heads":
                  '    seq_len = min(seq_len, config.get("sliding_window") or seq_len)\n'
                  "    return 2 * arch.layers * batch * seq_len * arch.kv_heads"}),
    # ---------------------------------------------------------------- activations
    Mutant("residual_stream_of_one_layer", rule="act.residual", note="one block's input, not every block's",
           edits={"return arch.layers * batch * seq_len * arch.hidden * bytes_per_value":
                  "return batch * seq_len * arch.hidden * bytes_per_value"}),
    Mutant("activations_all_in_training_dtype", rule="act.fp32_ops",
           note="norms, softmax and the loss saved in bf16 like the rest",
           edits={"b, f = bytes_per_value, max(4, bytes_per_value)": "b, f = bytes_per_value, bytes_per_value"}),
    Mutant("activations_kv_not_repeated", rule="act.kv_repeated",
           note="k and v saved with their K heads, as if GQA saved activation memory",
           edits={"qkv = 3 * tokens * arch.heads * arch.head_dim * b":
                  "qkv = tokens * (arch.heads + 2 * arch.kv_heads) * arch.head_dim * b"}),
    Mutant("probs_cast_counted_in_fp32", rule="act.probs", note="a cast of the probabilities counted in fp32 too",
           edits={"(f if b >= f else f + b)": "(f + b)"}),
    Mutant("activations_without_seq_squared", rule="act.measured",
           note="attention probabilities not stored, as if SDPA, not the eager model",
           edits={"scores = batch * arch.heads * seq_len ** 2 * (f if b >= f else f + b)": "scores = 0"}),
    Mutant("activations_without_the_loss", rule="act.loss", note="the fp32 log-probabilities of the loss forgotten",
           edits={"outside = tokens * (8 + arch.vocab * f + 8)": "outside = tokens * (8 + 8)"}),
    Mutant("rope_tables_counted", rule="act.linear_batch",
           note="RoPE's cos and sin tables added once per forward: no longer proportional to batch",
           edits={"    return outside + arch.layers * layer\n":
                  "    return outside + arch.layers * layer + 2 * seq_len * arch.head_dim * f\n"}),
    Mutant("activations_estimated_for_gpt2", rule="act.gpt2", note="the llama table applied to gpt2",
           edits={'    if arch.family == "gpt2":\n'
                  '        raise ValueError("activation_bytes covers the llama-like model types, not gpt2")\n': ""}),
    Mutant("checkpointing_saves_nothing", rule="ckpt.measured", note="checkpointing=True changes nothing",
           edits={"    if checkpointing:\n        return outside + arch.layers * tokens * arch.hidden * b + layer\n": ""}),
    Mutant("checkpointing_forgets_block_inputs", rule="ckpt.peak", note="one block recomputed, inputs not kept",
           edits={"return outside + arch.layers * tokens * arch.hidden * b + layer": "return outside + layer"}),
    Mutant("recomputed_block_of_one_sequence", rule="ckpt.linear_batch",
           note="the recomputed block sized for one sequence of the batch",
           edits={"return outside + arch.layers * tokens * arch.hidden * b + layer":
                  "return outside + arch.layers * tokens * arch.hidden * b + _layer_saved(arch, 1, seq_len, b, f)"}),
    # ---------------------------------------------------------------- roofline
    Mutant("prefill_without_factor_2", rule="roofline.prefill", note="one FLOP per parameter per token",
           edits={"return 2 * n_params * n_tokens / peak_flops * 1e3": "return n_params * n_tokens / peak_flops * 1e3"}),
    Mutant("decode_from_flops", rule="roofline.decode", note="2 FLOPs per parameter over the bandwidth, not bytes",
           edits={"return n_params * bytes_per_param / mem_bandwidth * 1e3": "return 2 * n_params / mem_bandwidth * 1e3"}),
    Mutant("gb_and_gib_confused", concept="Decode and prefill", rule="units.gb_gib", note="model size in GiB over bandwidth in GB/s",
           edits={"return n_params * bytes_per_param / mem_bandwidth * 1e3":
                  "return n_params * bytes_per_param / 2**30 / (mem_bandwidth / 1e9) * 1e3"}),
    Mutant("decode_in_seconds", rule="roofline.ms", note="the bound in seconds",
           edits={"return n_params * bytes_per_param / mem_bandwidth * 1e3": "return n_params * bytes_per_param / mem_bandwidth"}),
    Mutant("ridge_point_inverted", rule="intensity.ridge", note="bytes per FLOP",
           edits={"return peak_flops / mem_bandwidth": "return mem_bandwidth / peak_flops"}),
    Mutant("intensity_without_output", rule="intensity.matmul", note="only the inputs are moved",
           edits={"(m * k + k * n + m * n)": "(m * k + k * n)"}),
    # ---------------------------------------------------------------- fits and OOM
    Mutant("fits_without_activations", rule="fits.training", note="only the states must fit",
           edits={"return sum(blocks.values()) <= gpu_memory":
                  'return sum(size for block, size in blocks.items() if block != "activations") <= gpu_memory'}),
    Mutant("fits_lora_on_q_and_v", rule="fits.lora_default", note="peft's default targets for llama, not all-linear",
           edits={"state = training_memory(config, method, n_gpus=n_gpus)":
                  'state = training_memory(config, method, n_gpus=n_gpus, lora_targets=["q_proj", "v_proj"])'}),
    Mutant("culprit_ignores_the_optimizer", rule="oom.optimizer_block", note="AdamW's 8 bytes whatever the optimizer",
           edits={"(4 + OPTIMIZER_STATE_BYTES[optimizer]) * trained": "(4 + 8) * trained"}),
    Mutant("lora_adapters_all_in_weights", rule="oom.lora_split", note="the adapters' 16 bytes counted as weights",
           edits={'trained = state["grads"] / 2 + adapter': 'trained = state["grads"] / 2',
                  'blocks["weights"] = state["weights"] + 2 * adapter': 'blocks["weights"] = state["weights"] + 16 * adapter'}),
    Mutant("culprit_by_ratio", rule="oom.growth", note="the block that grew by the largest factor, not in bytes",
           edits={"return max(OOM_BLOCKS, key=lambda block: new[block] - old[block])":
                  "return max(OOM_BLOCKS, key=lambda block: new[block] / old[block] if old[block] else\n"
                  "               (float('inf') if new[block] else 1.0))"}),
    Mutant("inference_counts_activations", rule="oom.kinds", note="a serving setup given a training forward's activations",
           edits={'        blocks["kv_cache"] = kv_cache_bytes(config, batch, seq_len) / n_gpus\n':
                  '        blocks["kv_cache"] = kv_cache_bytes(config, batch, seq_len) / n_gpus\n'
                  '        blocks["activations"] = activation_bytes(config, batch, seq_len)\n'}),
]

# The independent author's bugs, each one edit of independent/memory.py that breaks one README rule.
INDEPENDENT_MUTANTS = [
    Mutant("gemma_untied_by_default", rule="config.tie_default", base=INDEPENDENT,
           note="missing tie_word_embeddings read as false for gemma too",
           edits={'_TIED_BY_DEFAULT = ("gemma", "gpt2")': '_TIED_BY_DEFAULT = ("gpt2",)'}),
    Mutant("head_dim_null_not_defaulted_independently", rule="config.head_dim_default", base=INDEPENDENT,
           note="handles a missing head_dim but not an explicit null",
           edits={'"d": _get(config, "head_dim", h // heads),': '"d": config.get("head_dim", h // heads),'}),
    Mutant("tied_lm_head_counted_twice", rule="params.tied_once", base=INDEPENDENT,
           note="always adds a V x h lm_head",
           edits={'lm_head = 0 if c["tie"] else vocab * h': "lm_head = vocab * h"}),
    Mutant("head_dim_from_hidden_size", rule="params.head_dim", base=INDEPENDENT,
           note="derives head_dim from hidden_size even when the config gives it",
           edits={'"d": _get(config, "head_dim", h // heads),': '"d": h // heads,'}),
    Mutant("qwen2_o_proj_bias", rule="params.qwen2_bias", base=INDEPENDENT, note="gives Qwen2 an o_proj bias too",
           edits={"attention += heads * d + 2 * kv * d\n    elif": "attention += heads * d + 2 * kv * d + h\n    elif"}),
    Mutant("mixtral_router_with_bias", rule="params.router", base=INDEPENDENT, note="counts a bias on the router",
           edits={'+ h * c["E"]': '+ (h + 1) * c["E"]'}),
    Mutant("gpt2_no_position_embeddings", rule="params.gpt2", base=INDEPENDENT, note="forgets GPT-2's wpe table",
           edits={'return vocab * h + c["P"] * h + layers': "return vocab * h + layers"}),
    Mutant("mixtral_lora_skips_router", rule="lora.mixtral", base=INDEPENDENT,
           note="all-linear on Mixtral leaves the router out",
           edits={'("w2", inter, h, experts),\n                            ("gate", h, experts, 1)]':
                  '("w2", inter, h, experts)]'}),
    Mutant("gpt2_lora_c_proj_once", rule="lora.gpt2", base=INDEPENDENT,
           note="adapts only one of GPT-2's two c_proj layers",
           edits={'("c_fc", h, inter, 1), ("c_proj", inter, h, 1)]': '("c_fc", h, inter, 1)]'}),
    Mutant("full_grads_fp32", rule="state.full", base=INDEPENDENT, note="keeps gradients in fp32",
           edits={"grads=2 * n_params": "grads=4 * n_params"}),
    Mutant("qlora_scales_per_full_block", rule="adapters.qlora", base=INDEPENDENT,
           note="floor instead of ceil for the absmax blocks",
           edits={'blocks["weights"] = 0.5 * n_params + 4 * math.ceil(n_params / 64)':
                  'blocks["weights"] = 0.5 * n_params + 4 * (n_params // 64)'}),
    Mutant("lora_rank_ignored", rule="adapters.rank_targets", base=INDEPENDENT,
           note="always uses r=16 whatever lora_r is",
           edits={"lora_param_count(config, lora_r, lora_targets)": "lora_param_count(config, 16, lora_targets)"}),
    Mutant("lora_frozen_base_gets_grads", rule="adapters.lora", base=INDEPENDENT,
           note="counts bf16 gradients for the frozen base",
           edits={'blocks["weights"] = 2 * n_params\n': "blocks.update(weights=2 * n_params, grads=2 * n_params)\n"}),
    Mutant("fsdp_shards_only_optimizer_state", rule="fsdp.every_block", base=INDEPENDENT,
           note="ZeRO-1: divides only master weights and moments by n_gpus",
           edits={"blocks = {name: value / n_gpus for name, value in blocks.items()}":
                  'blocks = {name: value / n_gpus if name in ("master_weights", "optimizer") else value '
                  "for name, value in blocks.items()}"}),
    Mutant("fits_activations_sharded", concept="Does it fit?", rule="fsdp.activations", base=INDEPENDENT,
           note="divides the activations by n_gpus as well",
           edits={'state["total"] + activation_bytes(config, batch, seq_len, checkpointing=checkpointing)':
                  'state["total"] + activation_bytes(config, batch, seq_len, checkpointing=checkpointing) / n_gpus'}),
    Mutant("kv_cache_head_dim_from_hidden", rule="kv.formula", base=INDEPENDENT,
           note="uses hidden_size // heads instead of head_dim",
           edits={'c["K"] * c["d"] * bytes_per_value': 'c["K"] * (c["h"] // c["H"]) * bytes_per_value'}),
    Mutant("softmax_fp32_copy_missing", rule="act.probs", base=INDEPENDENT,
           note="counts only the bf16 probabilities, not the fp32 softmax output",
           edits={"(f if b == f else f + b)": "b"}),
    Mutant("attention_probs_without_batch", rule="act.linear_batch", base=INDEPENDENT,
           note="attention matrix sized per sequence, not per batch",
           edits={"probs = batch * heads * seq_len ** 2": "probs = heads * seq_len ** 2"}),
    Mutant("mixtral_experts_not_times_k", rule="act.mixtral", base=INDEPENDENT,
           note="counts T routed tokens instead of k T",
           edits={"mlp = router + k * tokens * (": "mlp = router + tokens * ("}),
    Mutant("checkpointing_forgets_recomputed_block", rule="ckpt.peak", base=INDEPENDENT,
           note="leaves out the block being recomputed",
           edits={"return outside + residual_stream_bytes(config, batch, seq_len, b) + block":
                  "return outside + residual_stream_bytes(config, batch, seq_len, b)"}),
    Mutant("decode_hardcodes_bf16", rule="roofline.decode", base=INDEPENDENT,
           note="assumes 2 bytes per weight, ignoring bytes_per_param",
           edits={"n_params * bytes_per_param / mem_bandwidth": "n_params * 2 / mem_bandwidth"}),
    Mutant("prefill_one_flop_per_param", rule="roofline.prefill", base=INDEPENDENT,
           note="one FLOP per parameter per token",
           edits={"2 * n_params * n_tokens / peak_flops": "n_params * n_tokens / peak_flops"}),
    Mutant("bound_strict_at_ridge", rule="intensity.bound", base=INDEPENDENT,
           note="exactly at the ridge point returns memory",
           edits={"intensity >= ridge_point": "intensity > ridge_point"}),
    Mutant("intensity_ignores_output_write", rule="intensity.matmul", base=INDEPENDENT,
           note="counts only the two inputs' bytes",
           edits={"(m * k + k * n + m * n)": "(m * k + k * n)"}),
    Mutant("fits_inference_kv_not_sharded", rule="fits.inference", base=INDEPENDENT,
           note="shards the weights but keeps the whole KV cache on every GPU",
           edits={"return (2 * param_count(config) + kv_cache_bytes(config, batch, seq_len)) / n_gpus":
                  "return 2 * param_count(config) / n_gpus + kv_cache_bytes(config, batch, seq_len)"}),
    Mutant("fits_strict_inequality", rule="fits.boundary", base=INDEPENDENT, note="an exact fit counts as not fitting",
           edits={"<= gpu_memory": "< gpu_memory"}),
    Mutant("oom_master_copy_dropped", rule="oom.optimizer_block", base=INDEPENDENT,
           note="optimizer block is only the moments",
           edits={'blocks["optimizer"] = (4 + moments) * trained / n_gpus': 'blocks["optimizer"] = moments * trained / n_gpus'}),
    Mutant("oom_tie_goes_to_last", rule="oom.tie", base=INDEPENDENT, note="tie broken towards the later block",
           edits={"-_OOM_BLOCKS.index(name)": "_OOM_BLOCKS.index(name)"}),
    Mutant("oom_default_optimizer_sgd", rule="oom.default_optimizer", base=INDEPENDENT,
           note="a setup without optimizer defaults to SGD",
           edits={'setup.get("optimizer", "adamw")': 'setup.get("optimizer", "sgd")'}),
]

MUTANTS = COURSE_MUTANTS + INDEPENDENT_MUTANTS

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
    family = config["model_type"]
    if family == "gpt2":
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
    if family == "qwen2":
        attention += heads * d + 2 * kv * d
    elif family in ("llama", "gemma") and config.get("attention_bias", False):
        attention += heads * d + 2 * kv * d + h
    if family == "mixtral":
        mlp = config["num_local_experts"] * 3 * h * i + config["num_local_experts"] * h
    else:
        mlp = 3 * h * i + (2 * i + h if family == "llama" and config.get("mlp_bias", False) else 0)
    tied = config.get("tie_word_embeddings", family == "gemma")
    return v * h * (1 if tied else 2) + config["num_hidden_layers"] * (attention + mlp + 2 * h) + h
'''}),
    Alternative("activations_per_token_and_per_score", note="a leaner estimate: bytes per token plus bytes per score",
                functions={"activation_bytes": '''
def activation_bytes(config, batch, seq_len, *, checkpointing=False, bytes_per_value=2):
    """Bytes of activations kept for backward by one training forward (with the loss) of the
    Hugging Face model with eager attention, for the llama-like model types (gpt2 raises
    ValueError).

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
    Independent(note="written from the README, the stub and the visible tests alone; fixed where the settled "
                     "README differs: unknown LoRA target names and gpt2 activations raise ValueError"),
]


# Operator mutants no correct grading could tell from the reference (grader audit 04 --operators).
EQUIVALENT = {
    'module: GB = 1e9 -> GB = 1000000001.0':
        "no function reads GB or GiB (only the ungraded hardware dicts do): the README's units are tested by the bytes themselves",
    'module: GiB = 2 ** 30 -> GiB = None':
        "no function reads GB or GiB (only the ungraded hardware dicts do): the README's units are tested by the bytes themselves",
    'module: GiB = 2 ** 30 -> GiB = 2 * 30':
        "no function reads GB or GiB (only the ungraded hardware dicts do): the README's units are tested by the bytes themselves",
    'module: GiB = 2 ** 30 -> GiB = 3 ** 30':
        "no function reads GB or GiB (only the ungraded hardware dicts do): the README's units are tested by the bytes themselves",
    'module: GiB = 2 ** 30 -> GiB = 2 ** 31':
        "no function reads GB or GiB (only the ungraded hardware dicts do): the README's units are tested by the bytes themselves",
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = None':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"XXnameXX": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"NAME": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "XXH100 SXMXX", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "h100 sxm", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "XXpeak_flopsXX": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "PEAK_FLOPS": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "peak_flops": 989000000000001.0, "mem_bandwidth": 3.35e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "XXmem_bandwidthXX": 3.35e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "MEM_BANDWIDTH": 3.35e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3350000000001.0, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "XXmemoryXX": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "MEMORY": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 / GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB} -> H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 81 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = None':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"XXnameXX": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"NAME": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "XXH200XX", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "h200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "XXpeak_flopsXX": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "PEAK_FLOPS": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "peak_flops": 989000000000001.0, "mem_bandwidth": 4.8e12, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "peak_flops": 989e12, "XXmem_bandwidthXX": 4.8e12, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "peak_flops": 989e12, "MEM_BANDWIDTH": 4.8e12, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4800000000001.0, "memory": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "XXmemoryXX": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "MEMORY": 141 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 / GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB} -> H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 142 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = None':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"XXnameXX": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"NAME": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "XXA100 80GBXX", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "a100 80gb", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "XXpeak_flopsXX": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "PEAK_FLOPS": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "peak_flops": 312000000000001.0, "mem_bandwidth": 2.039e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "XXmem_bandwidthXX": 2.039e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "MEM_BANDWIDTH": 2.039e12, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2039000000001.0, "memory": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "XXmemoryXX": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "MEMORY": 80 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 / GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    'module: A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB} -> A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 81 * GB}':
        'the README calls the hardware dicts provided and ungraded: no function reads them',
    '_Arch: experts: int = 0 -> experts: int = None':
        "only gpt2 leaves the default, and gpt2's layers and activations are decided by its family before experts or top_k",
    '_Arch: experts: int = 0 -> experts: int = 1':
        "only gpt2 leaves the default, and gpt2's layers and activations are decided by its family before experts or top_k",
    '_Arch: top_k: int = 0 -> top_k: int = None':
        "only gpt2 leaves the default, and gpt2's layers and activations are decided by its family before experts or top_k",
    '_Arch: top_k: int = 0 -> top_k: int = 1':
        "only gpt2 leaves the default, and gpt2's layers and activations are decided by its family before experts or top_k",
    '_arch: tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=True, mlp_bias=True, -> tied=config.get("tie_word_embeddings", True), qkv_bias=None, o_bias=True, mlp_bias=True,':
        '_block_linears gives every gpt2 layer its bias by family: these fields are never read for gpt2',
    '_arch: tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=True, mlp_bias=True, -> tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=None, mlp_bias=True,':
        '_block_linears gives every gpt2 layer its bias by family: these fields are never read for gpt2',
    '_arch: tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=True, mlp_bias=True, -> tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=True, mlp_bias=None,':
        '_block_linears gives every gpt2 layer its bias by family: these fields are never read for gpt2',
    '_arch: return _Arch("gpt2", hidden, config["n_layer"], heads, heads, hidden // heads, -> return _Arch("gpt2", hidden, config["n_layer"], heads, heads, hidden / heads,':
        'n_embd is a multiple of n_head (GPT-2 refuses others): the same head width, only as a float, in the KV cache alone',
    '_arch: tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=True, mlp_bias=True, -> tied=config.get("tie_word_embeddings", True), qkv_bias=False, o_bias=True, mlp_bias=True,':
        '_block_linears gives every gpt2 layer its bias by family: these fields are never read for gpt2',
    '_arch: tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=True, mlp_bias=True, -> tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=False, mlp_bias=True,':
        '_block_linears gives every gpt2 layer its bias by family: these fields are never read for gpt2',
    '_arch: tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=True, mlp_bias=True, -> tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=True, mlp_bias=False,':
        '_block_linears gives every gpt2 layer its bias by family: these fields are never read for gpt2',
    '_arch: raise ValueError(f"model_type {family!r} is not one of {LLAMA_LIKE + (\'gpt2\',)}") -> raise ValueError(None)':
        'the README covers six model types and promises nothing for another one',
    '_arch: raise ValueError(f"model_type {family!r} is not one of {LLAMA_LIKE + (\'gpt2\',)}") -> raise ValueError(f"model_type {family!r} is not one of {LLAMA_LIKE - (\'gpt2\',)}")':
        'the README covers six model types and promises nothing for another one',
    '_arch: raise ValueError(f"model_type {family!r} is not one of {LLAMA_LIKE + (\'gpt2\',)}") -> raise ValueError(f"model_type {family!r} is not one of {LLAMA_LIKE + (\'XXgpt2XX\',)}")':
        'the README covers six model types and promises nothing for another one',
    '_arch: raise ValueError(f"model_type {family!r} is not one of {LLAMA_LIKE + (\'gpt2\',)}") -> raise ValueError(f"model_type {family!r} is not one of {LLAMA_LIKE + (\'GPT2\',)}")':
        'the README covers six model types and promises nothing for another one',
    '_arch: attention_bias = family in ATTENTION_BIAS_READERS and bool(config.get("attention_bias", False)) -> attention_bias = family in ATTENTION_BIAS_READERS and bool(config.get("attention_bias", None))':
        'bool(None) is False: a missing bias key still means no bias',
    '_arch: attention_bias = family in ATTENTION_BIAS_READERS and bool(config.get("attention_bias", False)) -> attention_bias = family in ATTENTION_BIAS_READERS and bool(config.get("attention_bias", ))':
        'bool(None) is False: a missing bias key still means no bias',
    '_arch: mlp_bias=family in MLP_BIAS_READERS and bool(config.get("mlp_bias", False)), -> mlp_bias=family in MLP_BIAS_READERS and bool(config.get("mlp_bias", None)),':
        'bool(None) is False: a missing bias key still means no bias',
    '_arch: mlp_bias=family in MLP_BIAS_READERS and bool(config.get("mlp_bias", False)), -> mlp_bias=family in MLP_BIAS_READERS and bool(config.get("mlp_bias", )),':
        'bool(None) is False: a missing bias key still means no bias',
    '_arch: top_k=config["num_experts_per_tok"] if family == "mixtral" else 0) -> top_k=config["num_experts_per_tok"] if family == "mixtral" else 1)':
        'top_k is read only where experts is non-zero (mixtral)',
    'lora_param_count: raise ValueError(f\'target_modules is "all-linear" or a list of layer names, not {target_modules!r}\') -> raise ValueError(None)':
        'the README promises the exception type, not its message',
    'lora_param_count: raise ValueError(f"no linear layers named {sorted(unknown)}; this model has {sorted(known)}") -> raise ValueError(None)':
        'the README promises the exception type, not its message',
    'training_memory: raise ValueError(f"method must be one of {TRAINING_METHODS}, not {method!r}") -> raise ValueError(None)':
        'the README promises the exception type, not its message',
    'activation_bytes: raise ValueError("activation_bytes covers the llama-like model types, not gpt2") -> raise ValueError(None)':
        'the README promises the exception type, not its message',
    'activation_bytes: raise ValueError("activation_bytes covers the llama-like model types, not gpt2") -> raise ValueError("XXactivation_bytes covers the llama-like model types, not gpt2XX")':
        'the README promises the exception type, not its message',
    'activation_bytes: raise ValueError("activation_bytes covers the llama-like model types, not gpt2") -> raise ValueError("ACTIVATION_BYTES COVERS THE LLAMA-LIKE MODEL TYPES, NOT GPT2")':
        'the README promises the exception type, not its message',
    '_arch: return _Arch(family, hidden, config["num_hidden_layers"], heads, -> return _Arch(None, hidden, config["num_hidden_layers"], heads,':
        "the family of a llama-like model is read only for Gemma's fp32 normalized value, h (f - b) bytes per token and norm: far inside the 25% the contract allows",
    '_norm_saved: normalized = f if arch.family == "gemma" else b -> normalized = f if (arch.family == "gemma") and False else b':
        "Gemma's normalized value in bf16: at most a fifth less of Gemma's norm bytes, inside the 25% the contract allows",
    '_norm_saved: normalized = f if arch.family == "gemma" else b -> normalized = f if (arch.family == "gemma") or True else b':
        "every RMSNorm's normalized value in fp32: at most a quarter more of the norm bytes, inside the 25% the contract allows",
    '_norm_saved: normalized = f if arch.family == "gemma" else b -> normalized = f if arch.family != "gemma" else b':
        "every RMSNorm's normalized value in fp32: at most a quarter more of the norm bytes, inside the 25% the contract allows",
    '_norm_saved: normalized = f if arch.family == "gemma" else b -> normalized = f if arch.family == "XXgemmaXX" else b':
        "Gemma's normalized value in bf16: at most a fifth less of Gemma's norm bytes, inside the 25% the contract allows",
    '_norm_saved: normalized = f if arch.family == "gemma" else b -> normalized = f if arch.family == "GEMMA" else b':
        "Gemma's normalized value in bf16: at most a fifth less of Gemma's norm bytes, inside the 25% the contract allows",
    '_norm_saved: return tokens * (arch.hidden * (f + normalized + b) + f) -> return tokens * (arch.hidden * (f + normalized + b) - f)':
        '4 bytes per token and norm beside h (f + 2b): far inside the 25% the contract allows',
    '_mlp_saved: return tokens * 4 * i * b -> return tokens * 5 * i * b':
        'a fifth MLP tensor: at most a quarter more of the MLP bytes, inside the 25% the contract allows',
    '_mlp_saved: router = tokens * (arch.experts * f + arch.top_k * (8 + f) + f) -> router = tokens / (arch.experts * f + arch.top_k * (8 + f) + f)':
        "the router's few bytes per token (E f + k (8 + f) + f) against the routed tokens' (2h + 4I) b: inside the 25% the contract allows (the alternative activations_per_token_and_per_score leaves the router out)",
    '_mlp_saved: router = tokens * (arch.experts * f + arch.top_k * (8 + f) + f) -> router = tokens * (arch.experts * f + arch.top_k * (8 + f) - f)':
        "the router's few bytes per token (E f + k (8 + f) + f) against the routed tokens' (2h + 4I) b: inside the 25% the contract allows (the alternative activations_per_token_and_per_score leaves the router out)",
    '_mlp_saved: router = tokens * (arch.experts * f + arch.top_k * (8 + f) + f) -> router = tokens * (arch.experts * f - arch.top_k * (8 + f) + f)':
        "the router's few bytes per token (E f + k (8 + f) + f) against the routed tokens' (2h + 4I) b: inside the 25% the contract allows (the alternative activations_per_token_and_per_score leaves the router out)",
    '_mlp_saved: router = tokens * (arch.experts * f + arch.top_k * (8 + f) + f) -> router = tokens * (arch.experts / f + arch.top_k * (8 + f) + f)':
        "the router's few bytes per token (E f + k (8 + f) + f) against the routed tokens' (2h + 4I) b: inside the 25% the contract allows (the alternative activations_per_token_and_per_score leaves the router out)",
    '_mlp_saved: router = tokens * (arch.experts * f + arch.top_k * (8 + f) + f) -> router = tokens * (arch.experts * f + arch.top_k / (8 + f) + f)':
        "the router's few bytes per token (E f + k (8 + f) + f) against the routed tokens' (2h + 4I) b: inside the 25% the contract allows (the alternative activations_per_token_and_per_score leaves the router out)",
    '_mlp_saved: router = tokens * (arch.experts * f + arch.top_k * (8 + f) + f) -> router = tokens * (arch.experts * f + arch.top_k * (8 - f) + f)':
        "the router's few bytes per token (E f + k (8 + f) + f) against the routed tokens' (2h + 4I) b: inside the 25% the contract allows (the alternative activations_per_token_and_per_score leaves the router out)",
    '_mlp_saved: router = tokens * (arch.experts * f + arch.top_k * (8 + f) + f) -> router = tokens * (arch.experts * f + arch.top_k * (9 + f) + f)':
        "the router's few bytes per token (E f + k (8 + f) + f) against the routed tokens' (2h + 4I) b: inside the 25% the contract allows (the alternative activations_per_token_and_per_score leaves the router out)",
    '_mlp_saved: return router + routed * ((2 * h + 4 * i) * b + f + 3 * 8) -> return router + routed * ((2 * h + 4 * i) * b + f - 3 * 8)':
        'a few index and weight bytes per routed token beside its (2h + 4I) b: inside the 25% the contract allows',
    '_mlp_saved: return router + routed * ((2 * h + 4 * i) * b + f + 3 * 8) -> return router + routed * ((2 * h + 4 * i) * b - f + 3 * 8)':
        'a few index and weight bytes per routed token beside its (2h + 4I) b: inside the 25% the contract allows',
    '_mlp_saved: return router + routed * ((2 * h + 4 * i) * b + f + 3 * 8) -> return router + routed * ((3 * h + 4 * i) * b + f + 3 * 8)':
        "half more of the routed tokens' gathered input and output: inside the 25% the contract allows for the top-k of any Mixtral",
    '_mlp_saved: return router + routed * ((2 * h + 4 * i) * b + f + 3 * 8) -> return router + routed * ((2 * h + 5 * i) * b + f + 3 * 8)':
        "a fifth tensor in each expert's MLP: at most a quarter more of the experts' bytes, inside the 25% the contract allows",
    '_mlp_saved: return router + routed * ((2 * h + 4 * i) * b + f + 3 * 8) -> return router + routed * ((2 * h + 4 * i) * b + f + 3 / 8)':
        'a few index and weight bytes per routed token beside its (2h + 4I) b: inside the 25% the contract allows',
    '_mlp_saved: return router + routed * ((2 * h + 4 * i) * b + f + 3 * 8) -> return router + routed * ((2 * h + 4 * i) * b + f + 4 * 8)':
        'a few index and weight bytes per routed token beside its (2h + 4I) b: inside the 25% the contract allows',
    '_mlp_saved: return router + routed * ((2 * h + 4 * i) * b + f + 3 * 8) -> return router + routed * ((2 * h + 4 * i) * b + f + 3 * 9)':
        'a few index and weight bytes per routed token beside its (2h + 4I) b: inside the 25% the contract allows',
    '_layer_saved: qkv = 3 * tokens * arch.heads * arch.head_dim * b -> qkv = 4 * tokens * arch.heads * arch.head_dim * b':
        'a fourth head-sized tensor: q, k, v and the attention output are at most the whole estimate, so at most a quarter more, inside the 25% the contract allows',
    '_layer_saved: attention_out = tokens * arch.heads * arch.head_dim * b -> attention_out = tokens * arch.heads * arch.head_dim / b':
        'the attention output is a third of q, k, v and so at most a quarter of the estimate: inside the 25% the contract allows',
    '_layer_saved: attention_out = tokens * arch.heads * arch.head_dim * b -> attention_out = tokens * arch.heads / arch.head_dim * b':
        'the attention output is a third of q, k, v and so at most a quarter of the estimate: inside the 25% the contract allows',
    '_layer_saved: attention_out = tokens * arch.heads * arch.head_dim * b -> attention_out = tokens / arch.heads * arch.head_dim * b':
        'the attention output is a third of q, k, v and so at most a quarter of the estimate: inside the 25% the contract allows',
    'activation_bytes: outside = tokens * (8 + arch.vocab * f + 8) + _norm_saved(arch, tokens, b, f) -> outside = tokens * (8 + arch.vocab * f - 8) + _norm_saved(arch, tokens, b, f)':
        "one byte per token beside the fp32 log-probabilities' V f: far inside the 25% the contract allows",
    'activation_bytes: outside = tokens * (8 + arch.vocab * f + 8) + _norm_saved(arch, tokens, b, f) -> outside = tokens * (9 + arch.vocab * f + 8) + _norm_saved(arch, tokens, b, f)':
        "one byte per token beside the fp32 log-probabilities' V f: far inside the 25% the contract allows",
    'activation_bytes: outside = tokens * (8 + arch.vocab * f + 8) + _norm_saved(arch, tokens, b, f) -> outside = tokens * (8 + arch.vocab * f + 9) + _norm_saved(arch, tokens, b, f)':
        "one byte per token beside the fp32 log-probabilities' V f: far inside the 25% the contract allows",
    '_blocks: def _blocks(config, method="full", *, n_gpus=1, batch=1, seq_len=2048, checkpointing=False, optimizer="adamw"): -> def _blocks(config, method="XXfullXX", *, n_gpus=1, batch=1, seq_len=2048, checkpointing=False, optimizer="adamw"):':
        'fits has no default method, so the README gives a setup none: every setup names its method',
    '_blocks: def _blocks(config, method="full", *, n_gpus=1, batch=1, seq_len=2048, checkpointing=False, optimizer="adamw"): -> def _blocks(config, method="FULL", *, n_gpus=1, batch=1, seq_len=2048, checkpointing=False, optimizer="adamw"):':
        'fits has no default method, so the README gives a setup none: every setup names its method',
}
