"""The rules exercise 04's README states, in README order; each carries a `<!-- rule: id -->`
marker in README.md and README.zh-CN.md, and `variants.py` breaks each one with a mutant that
the hidden suite must kill (`grader audit 04`)."""
from grader.running.contracts import Rule

UNITS = "Units and conventions"
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

RULES = [
    Rule("units.bytes_ms", UNITS, "sizes are returned in bytes, times in milliseconds"),
    Rule("units.gb_gib", UNITS, "GB = 1e9 bytes (capacities, bandwidths), GiB = 2^30 bytes (tensor sizes): never mixed"),
    Rule("units.bytes_per_value", UNITS, "a value takes bytes_per_value bytes (bf16 2 by default, fp32 4, 4-bit 0.5)"),
    Rule("config.kv_heads_default", UNITS, "num_key_value_heads missing or null (llama configs) means num_attention_heads"),
    Rule("config.head_dim_default", UNITS, "head_dim missing or null means hidden_size // num_attention_heads"),
    Rule("config.bias_keys", UNITS, "attention_bias is read by llama and gemma only, mlp_bias by llama only; "
                                    "mistral and mixtral have no biases whatever the config says"),
    Rule("config.tie_default", UNITS, "tie_word_embeddings missing means false, except gemma and gpt2: true"),
    Rule("config.n_inner_default", UNITS, "gpt2's n_inner missing or null means 4 x n_embd"),
    Rule("params.qwen2_bias", PARAMS, "Qwen2 always has q, k, v biases and no o bias"),
    Rule("params.gated_mlp", PARAMS, "the gated MLP has three matrices: 3 h I"),
    Rule("params.norms", PARAMS, "two RMSNorm weights per block and a final norm"),
    Rule("params.gqa", PARAMS, "k and v projections have K heads, not H"),
    Rule("params.head_dim", PARAMS, "an explicit head_dim sizes the attention: H d need not equal h"),
    Rule("params.tied_once", PARAMS, "tied embeddings are one tensor, counted once"),
    Rule("params.router", PARAMS, "Mixtral's router is a linear h -> E without bias"),
    Rule("params.experts", PARAMS, "every expert is a parameter, not only the top-k that run"),
    Rule("params.gpt2", PARAMS, "gpt2: learned position embeddings, LayerNorm weight and bias, a bias on every projection"),
    Rule("params.exact", PARAMS, "param_count is the exact count of the meta-device model, not an estimate"),
    Rule("lora.r_in_out", LORA, "a LoRA adapter on in -> out has r (in + out) parameters"),
    Rule("lora.all_linear", LORA, "all-linear adapts every linear layer of the blocks and leaves lm_head alone"),
    Rule("lora.names", LORA, "a list of names adapts the layers of those names in every block"),
    Rule("lora.gpt2", LORA, "gpt2's c_proj is one name for two layers, both adapted"),
    Rule("lora.mixtral", LORA, "mixtral: one adapter per expert's w1, w2, w3, and one on the router gate"),
    Rule("lora.bad_names", LORA, "a name the model type lacks, or a string other than all-linear, raises ValueError"),
    Rule("state.blocks", STATE, "training_memory returns weights, grads, master_weights, optimizer, lora and their sum, "
                                "activations excluded"),
    Rule("state.full", STATE, "full fine-tuning: 2, 2, 4, 8 bytes per parameter, lora 0"),
    Rule("state.methods", STATE, "a method other than full, lora, qlora raises ValueError"),
    Rule("adapters.lora", ADAPTERS, "lora: frozen bf16 base 2 bytes/param, 16 bytes per LoRA parameter, nothing else"),
    Rule("adapters.rank_targets", ADAPTERS, "the LoRA parameters are those of rank lora_r on lora_targets"),
    Rule("adapters.qlora", ADAPTERS, "qlora: 0.5 byte/param + 4 bytes per started block of 64 parameters"),
    Rule("fsdp.activations", FSDP, "activations are not sharded over n_gpus"),
    Rule("fsdp.every_block", FSDP, "n_gpus divides every block of the training state"),
    Rule("kv.formula", KV, "the cache is 2 x layers x batch x seq_len x K x d x bytes_per_value"),
    Rule("kv.contract", KV, "every prefilled token is counted, a sliding window notwithstanding"),
    Rule("act.fp32_ops", ACTIVATIONS, "norms, softmax and the loss save fp32 tensors whatever the training dtype"),
    Rule("act.kv_repeated", ACTIVATIONS, "k and v are saved repeated to all H heads"),
    Rule("act.probs", ACTIVATIONS, "attention probabilities: batch H seq_len^2 (f + b), just f when b = f"),
    Rule("act.loss", ACTIVATIONS, "the loss saves fp32 log-probabilities, T V f"),
    Rule("act.mixtral", ACTIVATIONS, "a Mixtral block saves an MLP's tensors for each of the k T routed tokens"),
    Rule("act.residual", ACTIVATIONS, "residual stream: layers x batch x seq_len x hidden x bytes_per_value"),
    Rule("act.measured", ACTIVATIONS, "activation_bytes is within 25% of what autograd saves in the eager model"),
    Rule("act.linear_batch", ACTIVATIONS, "activation_bytes is exactly proportional to batch"),
    Rule("act.gpt2", ACTIVATIONS, "activation_bytes (and fits, oom_culprit for training) raises ValueError for gpt2"),
    Rule("ckpt.peak", CHECKPOINTING, "checkpointed peak: outside the blocks + every block's input + one block"),
    Rule("ckpt.measured", CHECKPOINTING, "checkpointing=True is within 25% of the measured checkpointed peak"),
    Rule("ckpt.linear_batch", CHECKPOINTING, "the checkpointed peak is exactly proportional to batch"),
    Rule("roofline.decode", ROOFLINE, "decode bound: n_params x bytes_per_param / bandwidth"),
    Rule("roofline.prefill", ROOFLINE, "prefill bound: 2 x n_params x n_tokens / peak FLOP/s"),
    Rule("roofline.ms", ROOFLINE, "decode and prefill bounds are in milliseconds"),
    Rule("intensity.ridge", INTENSITY, "the ridge point is peak_flops / mem_bandwidth"),
    Rule("intensity.matmul", INTENSITY, "matmul intensity: 2mnk / (b (mk + kn + mn))"),
    Rule("intensity.bound", INTENSITY, "compute-bound at or above the ridge point (exactly on it included), else memory"),
    Rule("fits.training", FITS, "training fits when state total + activations (unsharded) <= gpu_memory"),
    Rule("fits.lora_default", FITS, "fits' LoRA is r = 16 on all linear layers"),
    Rule("fits.inference", FITS, "inference: (2 bytes/param + KV cache) / n_gpus <= gpu_memory, both sharded"),
    Rule("fits.boundary", FITS, "a setup needing exactly gpu_memory fits"),
    Rule("oom.lora_split", OOM, "LoRA adapters split 16 bytes: 2 weights, 2 grads, 12 optimizer"),
    Rule("oom.optimizer_block", OOM, "the optimizer block holds the fp32 master copy plus the optimizer's moments"),
    Rule("oom.default_optimizer", OOM, "a setup without optimizer uses AdamW"),
    Rule("oom.growth", OOM, "the culprit is the block with the largest after - before in bytes"),
    Rule("oom.tie", OOM, "on a tie the first block in README order wins: identical setups give weights"),
    Rule("oom.kinds", OOM, "training setups have no KV cache; inference setups no grads, optimizer or activations"),
]
