"""Exercise 04: memory and compute accounting from a config.json (reference solution).

Everything is arithmetic on a Hugging Face `config.json` (as a dict): bytes in, bytes out,
times in milliseconds. README.md derives every formula; the section named in each stub's
NotImplementedError is the one that explains the function.
"""
import math
from dataclasses import dataclass

GB = 1e9          # memory sizes and bandwidths are quoted in decimal units: 80 GB, 3.35 TB/s
GiB = 2 ** 30     # ... while tensor sizes come out in binary units: 32 MiB, 1 GiB

# Accelerator specs (dense bf16 tensor-core FLOP/s, HBM bandwidth in bytes/s, memory in bytes).
H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB}
H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB}
A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB}

# Optimizer state per trained parameter, beyond the fp32 master copy (for `oom_culprit`).
OPTIMIZER_STATE_BYTES = {"adamw": 8, "adamw_8bit": 2, "sgd_momentum": 4, "sgd": 0}

LLAMA_LIKE = ("llama", "mistral", "qwen2", "gemma", "mixtral")
ATTENTION_BIAS_READERS = ("llama", "gemma")   # the model types whose code reads `attention_bias`
MLP_BIAS_READERS = ("llama",)                 # ... and `mlp_bias`
TRAINING_METHODS = ("full", "lora", "qlora")
QLORA_BLOCK = 64                   # parameters per 4-bit block, each with one fp32 absmax
OOM_BLOCKS = ("weights", "grads", "optimizer", "activations", "kv_cache")


@dataclass(frozen=True)
class _Arch:
    """The numbers of a config.json that decide sizes, with Hugging Face's defaults filled in."""
    family: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    experts: int = 0               # 0: a dense MLP
    top_k: int = 0
    positions: int = 0             # gpt2's learned position embeddings


def _arch(config):
    family = config["model_type"]
    if family == "gpt2":
        hidden, heads = config["n_embd"], config["n_head"]
        return _Arch("gpt2", hidden, config["n_layer"], heads, heads, hidden // heads,
                     config.get("n_inner") or 4 * hidden, config["vocab_size"],
                     tied=config.get("tie_word_embeddings", True), qkv_bias=True, o_bias=True, mlp_bias=True,
                     positions=config["n_positions"])
    if family not in LLAMA_LIKE:
        raise ValueError(f"model_type {family!r} is not one of {LLAMA_LIKE + ('gpt2',)}")
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    # Only the model types whose Hugging Face code reads a bias key have that bias; Qwen2 always
    # has q, k, v biases and no o bias, Mistral and Mixtral never have any.
    attention_bias = family in ATTENTION_BIAS_READERS and bool(config.get("attention_bias", False))
    return _Arch(family, hidden, config["num_hidden_layers"], heads,
                 config.get("num_key_value_heads") or heads,
                 config.get("head_dim") or hidden // heads,
                 config["intermediate_size"], config["vocab_size"],
                 config.get("tie_word_embeddings", family == "gemma"),
                 qkv_bias=attention_bias or family == "qwen2",
                 o_bias=attention_bias,
                 mlp_bias=family in MLP_BIAS_READERS and bool(config.get("mlp_bias", False)),
                 experts=config["num_local_experts"] if family == "mixtral" else 0,
                 top_k=config["num_experts_per_tok"] if family == "mixtral" else 0)


def _block_linears(arch):
    """(name, in_features, out_features, has_bias) of every linear map in one decoder block."""
    h, q, kv = arch.hidden, arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    if arch.family == "gpt2":        # Conv1D layers, every one with a bias
        return [("c_attn", h, 3 * h, True), ("c_proj", h, h, True),
                ("c_fc", h, arch.intermediate, True), ("c_proj", arch.intermediate, h, True)]
    attention = [("q_proj", h, q, arch.qkv_bias), ("k_proj", h, kv, arch.qkv_bias),
                 ("v_proj", h, kv, arch.qkv_bias), ("o_proj", q, h, arch.o_bias)]
    i = arch.intermediate
    if arch.experts:                 # each expert is a gated MLP (w1 gate, w3 up, w2 down) + a router
        expert = [("w1", h, i, False), ("w3", h, i, False), ("w2", i, h, False)]
        return attention + expert * arch.experts + [("gate", h, arch.experts, False)]
    return attention + [("gate_proj", h, i, arch.mlp_bias), ("up_proj", h, i, arch.mlp_bias),
                        ("down_proj", i, h, arch.mlp_bias)]


def _norm_params(arch):
    return 2 * arch.hidden if arch.family == "gpt2" else arch.hidden    # LayerNorm has a bias too


def param_count(config):
    """Number of parameters of the model a Hugging Face `config.json` (as a dict) describes.

    Model types llama, mistral, qwen2, gemma, mixtral and gpt2, counted as
    AutoModelForCausalLM.from_config builds them: embeddings (and gpt2's position embeddings),
    every decoder block (attention with grouped KV heads, explicit head_dim and biases; the MLP,
    or every expert plus the router for mixtral; the norms), the final norm, and lm_head unless
    tie_word_embeddings shares it with the input embedding.
    """
    arch = _arch(config)
    block = sum(n_in * n_out + (n_out if bias else 0) for _, n_in, n_out, bias in _block_linears(arch))
    block += 2 * _norm_params(arch)
    embeddings = (arch.vocab + arch.positions) * arch.hidden
    lm_head = 0 if arch.tied else arch.vocab * arch.hidden
    return embeddings + arch.layers * block + _norm_params(arch) + lm_head


def lora_param_count(config, r, target_modules="all-linear"):
    """Trainable parameters of rank-r LoRA adapters: r * (in_features + out_features) per adapted linear.

    "all-linear" adapts every linear layer inside the decoder blocks, not lm_head (peft's
    convention); a list of names (e.g. ["q_proj", "v_proj"]) adapts the layers of those names
    in every block. README.md lists the names per model type (mixtral: every expert's w1, w2,
    w3 and the router gate). A name the model type does not have, or a string other than
    "all-linear", raises ValueError.
    """
    arch = _arch(config)
    linears = _block_linears(arch)
    if isinstance(target_modules, str) and target_modules != "all-linear":
        raise ValueError(f'target_modules is "all-linear" or a list of layer names, not {target_modules!r}')
    if target_modules != "all-linear":
        known = {name for name, *_ in linears}
        unknown = set(target_modules) - known
        if unknown:
            raise ValueError(f"no linear layers named {sorted(unknown)}; this model has {sorted(known)}")
        linears = [linear for linear in linears if linear[0] in target_modules]
    return arch.layers * sum(r * (n_in + n_out) for _, n_in, n_out, _ in linears)


def training_memory(config, method="full", *, lora_r=16, lora_targets="all-linear", n_gpus=1):
    """Bytes of training state per GPU: a dict with weights, grads, master_weights, optimizer, lora, total.

    full: bf16 weights 2 + bf16 grads 2 + fp32 master weights 4 + two fp32 AdamW moments 8
    = 16 bytes/param. lora: frozen bf16 base (2 bytes/param) and the adapters' complete state
    (16 bytes per LoRA parameter) under "lora". qlora: 4-bit base (0.5 byte/param plus one
    fp32 absmax per block of 64 parameters) and the same adapters. n_gpus > 1 shards every
    block evenly (FSDP). Activations are not included. Any other method raises ValueError.
    """
    if method not in TRAINING_METHODS:
        raise ValueError(f"method must be one of {TRAINING_METHODS}, not {method!r}")
    n = param_count(config)
    state = dict.fromkeys(("weights", "grads", "master_weights", "optimizer", "lora"), 0)
    if method == "full":
        state.update(weights=2 * n, grads=2 * n, master_weights=4 * n, optimizer=8 * n)
    else:
        state["weights"] = 2 * n if method == "lora" else n / 2 + 4 * math.ceil(n / QLORA_BLOCK)
        state["lora"] = 16 * lora_param_count(config, lora_r, lora_targets)
    state = {block: size / n_gpus for block, size in state.items()}
    state["total"] = sum(state.values())
    return state


def kv_cache_bytes(config, batch, seq_len, bytes_per_value=2):
    """Bytes of the KV cache: a key and a value vector per KV head, layer and cached token."""
    arch = _arch(config)
    return 2 * arch.layers * batch * seq_len * arch.kv_heads * arch.head_dim * bytes_per_value


def residual_stream_bytes(config, batch, seq_len, bytes_per_value=2):
    """Bytes of one copy of the residual stream (batch, seq_len, hidden) per layer, times layers."""
    arch = _arch(config)
    return arch.layers * batch * seq_len * arch.hidden * bytes_per_value


def _norm_saved(arch, tokens, b, f):
    """An RMSNorm upcasts to fp32: its fp32 input, fp32 1/rms per token, the normalized and scaled
    outputs. Gemma keeps the normalized value in fp32 too."""
    normalized = f if arch.family == "gemma" else b
    return tokens * (arch.hidden * (f + normalized + b) + f)


def _mlp_saved(arch, tokens, b, f):
    i, h = arch.intermediate, arch.hidden
    if not arch.experts:             # gate and up outputs, act(gate), act(gate) * up
        return tokens * 4 * i * b
    routed = arch.top_k * tokens     # each token visits top_k experts
    router = tokens * (arch.experts * f + arch.top_k * (8 + f) + f)   # fp32 softmax, top-k ids and weights
    return router + routed * ((2 * h + 4 * i) * b + f + 3 * 8)        # + gathered input and output, ids


def _layer_saved(arch, batch, seq_len, b, f):
    tokens = batch * seq_len
    qkv = 3 * tokens * arch.heads * arch.head_dim * b        # k, v repeated to every query head
    scores = batch * arch.heads * seq_len ** 2 * (f if b >= f else f + b)   # fp32 softmax (+ its cast)
    attention_out = tokens * arch.heads * arch.head_dim * b
    return 2 * _norm_saved(arch, tokens, b, f) + qkv + scores + attention_out + _mlp_saved(arch, tokens, b, f)


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
    b, f = bytes_per_value, max(4, bytes_per_value)    # softmax, norms and the loss run in fp32
    tokens = batch * seq_len
    outside = tokens * (8 + arch.vocab * f + 8) + _norm_saved(arch, tokens, b, f)   # ids, log-probs, labels
    layer = _layer_saved(arch, batch, seq_len, b, f)
    if checkpointing:
        return outside + arch.layers * tokens * arch.hidden * b + layer
    return outside + arch.layers * layer


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


def _blocks(config, method="full", *, n_gpus=1, batch=1, seq_len=2048, checkpointing=False, optimizer="adamw"):
    """Per-GPU bytes of the five blocks an OOM can land in, for one setup."""
    blocks = dict.fromkeys(OOM_BLOCKS, 0)
    if method == "inference":
        blocks["weights"] = 2 * param_count(config) / n_gpus
        blocks["kv_cache"] = kv_cache_bytes(config, batch, seq_len) / n_gpus
        return blocks
    state = training_memory(config, method, n_gpus=n_gpus)
    adapter = state["lora"] / 16                       # LoRA parameters held per GPU
    trained = state["grads"] / 2 + adapter             # parameters the optimizer updates
    blocks["weights"] = state["weights"] + 2 * adapter
    blocks["grads"] = 2 * trained
    blocks["optimizer"] = (4 + OPTIMIZER_STATE_BYTES[optimizer]) * trained   # fp32 master + moments
    blocks["activations"] = activation_bytes(config, batch, seq_len, checkpointing=checkpointing)
    return blocks


def fits(config, method, gpu_memory, *, n_gpus=1, batch=1, seq_len=2048, checkpointing=False):
    """Whether one GPU of gpu_memory bytes holds the setup.

    Training methods (full, lora, qlora): per-GPU training state (AdamW, sharded over n_gpus)
    plus the activations of a per-GPU batch of `batch` sequences. "inference": bf16 weights
    plus the KV cache of `batch` sequences of seq_len tokens, both sharded over n_gpus.
    """
    blocks = _blocks(config, method, n_gpus=n_gpus, batch=batch, seq_len=seq_len, checkpointing=checkpointing)
    return sum(blocks.values()) <= gpu_memory


def oom_culprit(before, after):
    """Which memory block grew most, in bytes, from setup `before` to setup `after`.

    Each setup is a dict with the arguments of `fits` (config, method, n_gpus, batch, seq_len,
    checkpointing; same defaults) and optionally optimizer (a key of OPTIMIZER_STATE_BYTES,
    default "adamw"). Returns "weights", "grads", "optimizer" (fp32 master weights and
    optimizer moments), "activations" or "kv_cache"; the first in that order on a tie.
    """
    old, new = _blocks(**before), _blocks(**after)
    return max(OOM_BLOCKS, key=lambda block: new[block] - old[block])
