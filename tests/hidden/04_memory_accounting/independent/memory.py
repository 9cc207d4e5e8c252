"""Exercise 04: memory and compute accounting from a config.json.

Fill in every function below; README.md derives each formula. `config` is always the dict of a
Hugging Face config.json (json.load of the file). Sizes are bytes, times are milliseconds,
1 GB = 1e9 bytes and 1 GiB = 2**30 bytes.
Run the visible tests with:  pytest exercises/04_memory_accounting
"""
import math

GB = 1e9          # memory sizes and bandwidths are quoted in decimal units: 80 GB, 3.35 TB/s
GiB = 2 ** 30     # ... while tensor sizes come out in binary units: 32 MiB, 1 GiB

# Accelerator specs (dense bf16 tensor-core FLOP/s, HBM bandwidth in bytes/s, memory in bytes).
H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB}
H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB}
A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB}

# Optimizer state per trained parameter, beyond the fp32 master copy (for `oom_culprit`).
OPTIMIZER_STATE_BYTES = {"adamw": 8, "adamw_8bit": 2, "sgd_momentum": 4, "sgd": 0}


# ----------------------------------------------------------------------------------------------
# Reading a config (private helpers)
# ----------------------------------------------------------------------------------------------
_LLAMA_LIKE = ("llama", "mistral", "qwen2", "gemma", "mixtral")
_TIED_BY_DEFAULT = ("gemma", "gpt2")


def _get(config, key, default):
    """config[key], or default when the key is missing or null."""
    value = config.get(key)
    return default if value is None else value


def _dims(config):
    """The sizes the architecture uses, with Hugging Face's defaults for the optional keys."""
    model_type = config.get("model_type")
    if model_type == "gpt2":
        h = config["n_embd"]
        heads = config["n_head"]
        return {
            "model_type": model_type, "h": h, "H": heads, "K": heads, "d": h // heads,
            "I": _get(config, "n_inner", 4 * h), "V": config["vocab_size"], "L": config["n_layer"],
            "P": config["n_positions"], "tie": bool(_get(config, "tie_word_embeddings", True)),
        }
    if model_type not in _LLAMA_LIKE:
        raise ValueError(f"unsupported model_type {model_type!r}")
    h = config["hidden_size"]
    heads = config["num_attention_heads"]
    dims = {
        "model_type": model_type, "h": h, "H": heads,
        "K": _get(config, "num_key_value_heads", heads),
        "d": _get(config, "head_dim", h // heads),
        "I": config["intermediate_size"], "V": config["vocab_size"], "L": config["num_hidden_layers"],
        "tie": bool(_get(config, "tie_word_embeddings", model_type in _TIED_BY_DEFAULT)),
    }
    if model_type == "mixtral":
        dims["E"] = config["num_local_experts"]
        dims["k"] = config["num_experts_per_tok"]
    return dims


def _block_linears(config):
    """(name, in_features, out_features, how many per block) for every linear layer of a block."""
    c = _dims(config)
    h, heads, kv, d, inter = c["h"], c["H"], c["K"], c["d"], c["I"]
    if c["model_type"] == "gpt2":
        return [("c_attn", h, 3 * h, 1), ("c_proj", h, h, 1), ("c_fc", h, inter, 1), ("c_proj", inter, h, 1)]
    attention = [("q_proj", h, heads * d, 1), ("k_proj", h, kv * d, 1), ("v_proj", h, kv * d, 1),
                 ("o_proj", heads * d, h, 1)]
    if c["model_type"] == "mixtral":
        experts = c["E"]
        return attention + [("w1", h, inter, experts), ("w3", h, inter, experts), ("w2", inter, h, experts),
                            ("gate", h, experts, 1)]
    return attention + [("gate_proj", h, inter, 1), ("up_proj", h, inter, 1), ("down_proj", inter, h, 1)]


def param_count(config):
    """Number of parameters of the model a Hugging Face `config.json` (as a dict) describes.

    Model types llama, mistral, qwen2, gemma, mixtral and gpt2, counted as
    AutoModelForCausalLM.from_config builds them: embeddings (and gpt2's position embeddings),
    every decoder block (attention with grouped KV heads, explicit head_dim and biases; the MLP,
    or every expert plus the router for mixtral; the norms), the final norm, and lm_head unless
    tie_word_embeddings shares it with the input embedding.
    """
    c = _dims(config)
    h, heads, kv, d, inter, vocab, layers = c["h"], c["H"], c["K"], c["d"], c["I"], c["V"], c["L"]
    lm_head = 0 if c["tie"] else vocab * h
    if c["model_type"] == "gpt2":
        block = (2 * h                      # ln_1 (weight and bias)
                 + h * 3 * h + 3 * h        # c_attn
                 + h * h + h                # attention c_proj
                 + 2 * h                    # ln_2
                 + h * inter + inter        # c_fc
                 + inter * h + h)           # MLP c_proj
        return vocab * h + c["P"] * h + layers * block + 2 * h + lm_head

    attention = h * heads * d + 2 * h * kv * d + heads * d * h
    if c["model_type"] == "qwen2":                       # q, k, v biases always, no o bias
        attention += heads * d + 2 * kv * d
    elif c["model_type"] in ("llama", "gemma") and config.get("attention_bias"):
        attention += heads * d + 2 * kv * d + h
    mlp = 3 * h * inter
    if c["model_type"] == "llama" and config.get("mlp_bias"):
        mlp += 2 * inter + h
    if c["model_type"] == "mixtral":
        mlp = c["E"] * 3 * h * inter + h * c["E"]        # every expert, plus the bias-free router
    block = attention + mlp + 2 * h
    return vocab * h + layers * block + h + lm_head


def lora_param_count(config, r, target_modules="all-linear"):
    """Trainable parameters of rank-r LoRA adapters: r * (in_features + out_features) per adapted linear.

    "all-linear" adapts every linear layer inside the decoder blocks, not lm_head (peft's
    convention); a list of names (e.g. ["q_proj", "v_proj"]) adapts the layers of those names
    in every block. README.md lists the names per model type (mixtral: every expert's w1, w2,
    w3 and the router gate).
    """
    if isinstance(target_modules, str) and target_modules != "all-linear":
        raise ValueError(f'target_modules is "all-linear" or a list of names, not {target_modules!r}')
    if target_modules != "all-linear":
        unknown = set(target_modules) - {name for name, *_ in _block_linears(config)}
        if unknown:
            raise ValueError(f"no linear layers named {sorted(unknown)} in a {config['model_type']} block")
    layers = _dims(config)["L"]
    per_block = sum(r * (n_in + n_out) * count
                    for name, n_in, n_out, count in _block_linears(config)
                    if target_modules == "all-linear" or name in target_modules)
    return layers * per_block


def training_memory(config, method="full", *, lora_r=16, lora_targets="all-linear", n_gpus=1):
    """Bytes of training state per GPU: a dict with weights, grads, master_weights, optimizer, lora, total.

    full: bf16 weights 2 + bf16 grads 2 + fp32 master weights 4 + two fp32 AdamW moments 8
    = 16 bytes/param. lora: frozen bf16 base (2 bytes/param) and the adapters' complete state
    (16 bytes per LoRA parameter) under "lora". qlora: 4-bit base (0.5 byte/param plus one
    fp32 absmax per block of 64 parameters) and the same adapters. n_gpus > 1 shards every
    block evenly (FSDP). Activations are not included.
    """
    if n_gpus < 1:
        raise ValueError("n_gpus must be at least 1")
    n_params = param_count(config)
    blocks = {"weights": 0, "grads": 0, "master_weights": 0, "optimizer": 0, "lora": 0}
    if method == "full":
        blocks.update(weights=2 * n_params, grads=2 * n_params, master_weights=4 * n_params,
                      optimizer=8 * n_params)
    elif method in ("lora", "qlora"):
        if method == "lora":
            blocks["weights"] = 2 * n_params
        else:
            blocks["weights"] = 0.5 * n_params + 4 * math.ceil(n_params / 64)
        blocks["lora"] = 16 * lora_param_count(config, lora_r, lora_targets)
    else:
        raise ValueError(f"unknown method {method!r}: full, lora or qlora")
    blocks = {name: value / n_gpus for name, value in blocks.items()}
    blocks["total"] = sum(blocks.values())
    return blocks


def kv_cache_bytes(config, batch, seq_len, bytes_per_value=2):
    """Bytes of the KV cache: a key and a value vector per KV head, layer and cached token."""
    c = _dims(config)
    return 2 * c["L"] * batch * seq_len * c["K"] * c["d"] * bytes_per_value


def residual_stream_bytes(config, batch, seq_len, bytes_per_value=2):
    """Bytes of one copy of the residual stream (batch, seq_len, hidden) per layer, times layers."""
    c = _dims(config)
    return c["L"] * batch * seq_len * c["h"] * bytes_per_value


def activation_bytes(config, batch, seq_len, *, checkpointing=False, bytes_per_value=2):
    """Bytes of activations kept for backward by one training forward (with the loss) of the
    Hugging Face model with eager attention, for the llama-like model types (not gpt2).

    Without checkpointing: every tensor autograd saves, counted once. With checkpointing=True:
    the peak under gradient checkpointing, i.e. what is saved outside the decoder blocks, each
    block's input, and one block's saved tensors while it is recomputed. Exactly proportional
    to batch; README.md derives every term.
    """
    c = _dims(config)
    b = bytes_per_value
    f = max(4, b)                                    # RMSNorm, softmax and the loss run in fp32
    tokens = batch * seq_len
    h, heads, d, inter, vocab, layers = c["h"], c["H"], c["d"], c["I"], c["V"], c["L"]
    if c["model_type"] == "gpt2":
        raise ValueError("activation_bytes covers the llama-like model types, not gpt2")

    if c["model_type"] == "gemma":                   # Gemma keeps the normalized value in fp32
        norm = tokens * (h * (2 * f + b) + f)
    else:
        norm = tokens * (h * (f + 2 * b) + f)
    probs = batch * heads * seq_len ** 2 * (f if b == f else f + b)
    attention = 3 * tokens * heads * d * b + probs + tokens * heads * d * b
    if c["model_type"] == "mixtral":
        k = c["k"]
        router = tokens * c["E"] * f + 8 * tokens * k + f * tokens * k
        mlp = router + k * tokens * ((2 * h + 4 * inter) * b + f + 3 * 8)
    else:
        mlp = 4 * tokens * inter * b
    block = 2 * norm + attention + mlp
    outside = 8 * tokens + norm + tokens * vocab * f + 8 * tokens
    if checkpointing:                                # block inputs, and one block recomputed
        return outside + residual_stream_bytes(config, batch, seq_len, b) + block
    return outside + layers * block


def decode_ms_per_token(n_params, bytes_per_param, mem_bandwidth):
    """Lower bound on the time per generated token at batch 1, in ms: every weight is read once."""
    return n_params * bytes_per_param / mem_bandwidth * 1e3


def prefill_ms(n_params, n_tokens, peak_flops):
    """Lower bound on the time to prefill n_tokens, in ms: 2 FLOPs per parameter per token."""
    return 2 * n_params * n_tokens / peak_flops * 1e3


def ridge_point(peak_flops, mem_bandwidth):
    """FLOPs per byte at which a kernel stops being memory-bound and becomes compute-bound."""
    return peak_flops / mem_bandwidth


def matmul_intensity(m, n, k, bytes_per_value=2):
    """FLOPs per byte of an (m, k) @ (k, n) matmul: 2mnk FLOPs over reading both inputs and writing the output."""
    return 2 * m * n * k / (bytes_per_value * (m * k + k * n + m * n))


def bound(intensity, peak_flops, mem_bandwidth):
    """Which roof limits a kernel of this arithmetic intensity: "compute" at or above the ridge point, else "memory"."""
    return "compute" if intensity >= ridge_point(peak_flops, mem_bandwidth) else "memory"


def fits(config, method, gpu_memory, *, n_gpus=1, batch=1, seq_len=2048, checkpointing=False):
    """Whether one GPU of gpu_memory bytes holds the setup.

    Training methods (full, lora, qlora): per-GPU training state (AdamW, sharded over n_gpus)
    plus the activations of a per-GPU batch of `batch` sequences. "inference": bf16 weights
    plus the KV cache of `batch` sequences of seq_len tokens, both sharded over n_gpus.
    """
    return _per_gpu_total(config, method, n_gpus, batch, seq_len, checkpointing) <= gpu_memory


def oom_culprit(before, after):
    """Which memory block grew most from setup `before` to setup `after`.

    Each setup is a dict with the arguments of `fits` (config, method, n_gpus, batch, seq_len,
    checkpointing; same defaults) and optionally optimizer (a key of OPTIMIZER_STATE_BYTES,
    default "adamw"). Returns "weights", "grads", "optimizer" (fp32 master weights and
    optimizer moments), "activations" or "kv_cache"; the first in that order on a tie.
    """
    grown = {}
    before_blocks, after_blocks = _oom_blocks(before), _oom_blocks(after)
    for name in _OOM_BLOCKS:
        grown[name] = after_blocks[name] - before_blocks[name]
    return max(_OOM_BLOCKS, key=lambda name: (grown[name], -_OOM_BLOCKS.index(name)))


# ----------------------------------------------------------------------------------------------
# Does it fit / which block (private helpers)
# ----------------------------------------------------------------------------------------------
_OOM_BLOCKS = ("weights", "grads", "optimizer", "activations", "kv_cache")


def _per_gpu_total(config, method, n_gpus, batch, seq_len, checkpointing):
    if method == "inference":
        return (2 * param_count(config) + kv_cache_bytes(config, batch, seq_len)) / n_gpus
    state = training_memory(config, method, lora_r=16, lora_targets="all-linear", n_gpus=n_gpus)
    return state["total"] + activation_bytes(config, batch, seq_len, checkpointing=checkpointing)


def _oom_blocks(setup):
    """Per-GPU bytes of the five blocks of one setup (a dict of `fits`' arguments, plus optimizer)."""
    config = setup["config"]
    method = setup.get("method", "full")
    n_gpus = setup.get("n_gpus", 1)
    batch = setup.get("batch", 1)
    seq_len = setup.get("seq_len", 2048)
    checkpointing = setup.get("checkpointing", False)
    moments = OPTIMIZER_STATE_BYTES[setup.get("optimizer", "adamw")]
    blocks = dict.fromkeys(_OOM_BLOCKS, 0)
    n_params = param_count(config)
    if method == "inference":
        blocks["weights"] = 2 * n_params / n_gpus
        blocks["kv_cache"] = kv_cache_bytes(config, batch, seq_len) / n_gpus
        return blocks
    if method == "full":
        trained, base = n_params, 0
    elif method in ("lora", "qlora"):
        trained = lora_param_count(config, 16, "all-linear")
        base = 2 * n_params if method == "lora" else 0.5 * n_params + 4 * math.ceil(n_params / 64)
    else:
        raise ValueError(f"unknown method {method!r}: full, lora, qlora or inference")
    blocks["weights"] = (base + 2 * trained) / n_gpus
    blocks["grads"] = 2 * trained / n_gpus
    blocks["optimizer"] = (4 + moments) * trained / n_gpus
    blocks["activations"] = activation_bytes(config, batch, seq_len, checkpointing=checkpointing)
    return blocks

