"""Architecture-only configs of real models, for the memory-accounting exercise, and their exact
parameter counts.

The dicts below are the published config.json files of each model (architecture fields as released,
including the legacy spellings such as rope_theta / rope_scaling / torch_dtype that transformers still
reads). No weights are involved. The build counts parameters by instantiating each architecture on the
meta device (shapes only, no memory), so the counts in the manifest are computed, never typed in; a few
well-known published totals are only used by the tests as cross-checks.
"""
from __future__ import annotations

from pathlib import Path

from jsonl import write_json

ZOO: dict[str, dict] = {
    # meta-llama/Meta-Llama-3-8B
    "llama-3-8b": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu",
        "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 8192, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": 128256,
    },
    # meta-llama/Meta-Llama-3-70B
    "llama-3-70b": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu",
        "hidden_size": 8192, "initializer_range": 0.02, "intermediate_size": 28672,
        "max_position_embeddings": 8192, "num_attention_heads": 64, "num_hidden_layers": 80,
        "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": 128256,
    },
    # meta-llama/Llama-3.2-1B: tied input/output embeddings, explicit head_dim, llama3 rope scaling
    "llama-3.2-1b": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64,
        "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
        "max_position_embeddings": 131072, "mlp_bias": False, "num_attention_heads": 32,
        "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": 128256,
    },
    # mistralai/Mistral-7B-v0.1: sliding-window attention
    "mistral-7b": {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32000,
    },
    # Qwen/Qwen2.5-7B: biases on the q, k and v projections (implied by the qwen2 architecture)
    "qwen2.5-7b": {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584,
        "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 131072,
        "max_window_layers": 28, "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "use_mrope": False, "use_sliding_window": False,
        "vocab_size": 152064,
    },
    # google/gemma-2b: multi-query attention (1 kv head), explicit head_dim, tied embeddings, 256k vocab
    "gemma-2b": {
        "architectures": ["GemmaForCausalLM"], "model_type": "gemma", "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu",
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2048, "initializer_range": 0.02,
        "intermediate_size": 16384, "max_position_embeddings": 8192, "num_attention_heads": 8,
        "num_hidden_layers": 18, "num_key_value_heads": 1, "pad_token_id": 0, "rms_norm_eps": 1e-06,
        "rope_scaling": None, "rope_theta": 10000.0, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": 256000,
    },
    # google/gemma-7b: head_dim 256 with 16 heads, so attention width 4096 differs from hidden_size 3072
    "gemma-7b": {
        "architectures": ["GemmaForCausalLM"], "model_type": "gemma", "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu",
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3072, "initializer_range": 0.02,
        "intermediate_size": 24576, "max_position_embeddings": 8192, "num_attention_heads": 16,
        "num_hidden_layers": 28, "num_key_value_heads": 16, "pad_token_id": 0, "rms_norm_eps": 1e-06,
        "rope_scaling": None, "rope_theta": 10000.0, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": 256000,
    },
    # mistralai/Mixtral-8x7B-v0.1: sparse mixture of experts, 8 experts, 2 active per token
    "mixtral-8x7b": {
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
        "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "num_local_experts": 8, "output_router_logits": False, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.02, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32000,
    },
    # openai-community/gpt2 (GPT-2 small): learned positions, LayerNorm, tied embeddings, biases everywhere
    "gpt2": {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
        "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "n_ctx": 1024, "n_embd": 768, "n_head": 12,
        "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
        "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
        "summary_use_proj": True, "vocab_size": 50257,
    },
}


def meta_param_count(cfg: dict) -> int:
    """Parameters of the architecture, counted on the meta device: shapes exist, memory does not.
    `model.parameters()` yields a tied weight once, so tied embeddings are counted once, as published."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def build_model_zoo(out_dir: Path) -> dict[str, int]:
    """Write configs/<name>.json for every zoo model; return {name: parameter count}."""
    counts = {}
    for name, cfg in ZOO.items():
        write_json(out_dir / f"{name}.json", cfg)
        counts[name] = meta_param_count(cfg)
    return counts
