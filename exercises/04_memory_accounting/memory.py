"""Exercise 04: memory and compute accounting from a config.json.

Fill in every function below; README.md derives each formula. `config` is always the dict of a
Hugging Face config.json (json.load of the file). Sizes are bytes, times are milliseconds,
1 GB = 1e9 bytes and 1 GiB = 2**30 bytes.
Run the visible tests with:  pytest exercises/04_memory_accounting
"""

GB = 1e9          # memory sizes and bandwidths are quoted in decimal units: 80 GB, 3.35 TB/s
GiB = 2 ** 30     # ... while tensor sizes come out in binary units: 32 MiB, 1 GiB

# Accelerator specs (dense bf16 tensor-core FLOP/s, HBM bandwidth in bytes/s, memory in bytes).
H100_SXM = {"name": "H100 SXM", "peak_flops": 989e12, "mem_bandwidth": 3.35e12, "memory": 80 * GB}
H200 = {"name": "H200", "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "memory": 141 * GB}
A100_80GB = {"name": "A100 80GB", "peak_flops": 312e12, "mem_bandwidth": 2.039e12, "memory": 80 * GB}

# Optimizer state per trained parameter, beyond the fp32 master copy (for `oom_culprit`).
OPTIMIZER_STATE_BYTES = {"adamw": 8, "adamw_8bit": 2, "sgd_momentum": 4, "sgd": 0}


def param_count(config):
    """Number of parameters of the model a Hugging Face `config.json` (as a dict) describes.

    Model types llama, mistral, qwen2, gemma, mixtral and gpt2, counted as
    AutoModelForCausalLM.from_config builds them: embeddings (and gpt2's position embeddings),
    every decoder block (attention with grouped KV heads, explicit head_dim and biases; the MLP,
    or every expert plus the router for mixtral; the norms), the final norm, and lm_head unless
    tie_word_embeddings shares it with the input embedding.
    """
    raise NotImplementedError('see README.md, section "Parameters from a config"')


def lora_param_count(config, r, target_modules="all-linear"):
    """Trainable parameters of rank-r LoRA adapters: r * (in_features + out_features) per adapted linear.

    "all-linear" adapts every linear layer inside the decoder blocks, not lm_head (peft's
    convention); a list of names (e.g. ["q_proj", "v_proj"]) adapts the layers of those names
    in every block. README.md lists the names per model type (mixtral: every expert's w1, w2,
    w3 and the router gate). A name the model type does not have, or a string other than
    "all-linear", raises ValueError.
    """
    raise NotImplementedError('see README.md, section "LoRA parameters"')


def training_memory(config, method="full", *, lora_r=16, lora_targets="all-linear", n_gpus=1):
    """Bytes of training state per GPU: a dict with weights, grads, master_weights, optimizer, lora, total.

    full: bf16 weights 2 + bf16 grads 2 + fp32 master weights 4 + two fp32 AdamW moments 8
    = 16 bytes/param. lora: frozen bf16 base (2 bytes/param) and the adapters' complete state
    (16 bytes per LoRA parameter) under "lora". qlora: 4-bit base (0.5 byte/param plus one
    fp32 absmax per block of 64 parameters) and the same adapters. n_gpus > 1 shards every
    block evenly (FSDP). Activations are not included. Any other method raises ValueError.
    """
    raise NotImplementedError('see README.md, section "Training state memory"')


def kv_cache_bytes(config, batch, seq_len, bytes_per_value=2):
    """Bytes of the KV cache: a key and a value vector per KV head, layer and cached token."""
    raise NotImplementedError('see README.md, section "KV cache"')


def residual_stream_bytes(config, batch, seq_len, bytes_per_value=2):
    """Bytes of one copy of the residual stream (batch, seq_len, hidden) per layer, times layers."""
    raise NotImplementedError('see README.md, section "Activations"')


def activation_bytes(config, batch, seq_len, *, checkpointing=False, bytes_per_value=2):
    """Bytes of activations kept for backward by one training forward (with the loss) of the
    Hugging Face model with eager attention, for the llama-like model types (gpt2 raises
    ValueError).

    Without checkpointing: every tensor autograd saves, counted once. With checkpointing=True:
    the peak under gradient checkpointing, i.e. what is saved outside the decoder blocks, each
    block's input, and one block's saved tensors while it is recomputed. Exactly proportional
    to batch; README.md derives every term.
    """
    raise NotImplementedError('see README.md, section "Activations"')


def decode_ms_per_token(n_params, bytes_per_param, mem_bandwidth):
    """Lower bound on the time per generated token at batch 1, in ms: every weight is read once."""
    raise NotImplementedError('see README.md, section "Decode and prefill"')


def prefill_ms(n_params, n_tokens, peak_flops):
    """Lower bound on the time to prefill n_tokens, in ms: 2 FLOPs per parameter per token."""
    raise NotImplementedError('see README.md, section "Decode and prefill"')


def ridge_point(peak_flops, mem_bandwidth):
    """FLOPs per byte at which a kernel stops being memory-bound and becomes compute-bound."""
    raise NotImplementedError('see README.md, section "Arithmetic intensity"')


def matmul_intensity(m, n, k, bytes_per_value=2):
    """FLOPs per byte of an (m, k) @ (k, n) matmul: 2mnk FLOPs over reading both inputs and writing the output."""
    raise NotImplementedError('see README.md, section "Arithmetic intensity"')


def bound(intensity, peak_flops, mem_bandwidth):
    """Which roof limits a kernel of this arithmetic intensity: "compute" at or above the ridge point, else "memory"."""
    raise NotImplementedError('see README.md, section "Arithmetic intensity"')


def fits(config, method, gpu_memory, *, n_gpus=1, batch=1, seq_len=2048, checkpointing=False):
    """Whether one GPU of gpu_memory bytes holds the setup.

    Training methods (full, lora, qlora): per-GPU training state (AdamW, sharded over n_gpus)
    plus the activations of a per-GPU batch of `batch` sequences. "inference": bf16 weights
    plus the KV cache of `batch` sequences of seq_len tokens, both sharded over n_gpus.
    """
    raise NotImplementedError('see README.md, section "Does it fit?"')


def oom_culprit(before, after):
    """Which memory block grew most, in bytes, from setup `before` to setup `after`.

    Each setup is a dict with the arguments of `fits` (config, method, n_gpus, batch, seq_len,
    checkpointing; same defaults) and optionally optimizer (a key of OPTIMIZER_STATE_BYTES,
    default "adamw"). Returns "weights", "grads", "optimizer" (fp32 master weights and
    optimizer moments), "activations" or "kv_cache"; the first in that order on a tie.
    """
    raise NotImplementedError('see README.md, section "Which block did the OOM land in?"')
