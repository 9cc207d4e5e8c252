"""Hidden suite for exercise 04 (memory and compute accounting). PYTEST_DONT_REWRITE

Oracles, all computed in the test process: AutoModelForCausalLM.from_config on the meta device
(parameter counts, the shapes of the linear layers, the KV cache Hugging Face fills, the hidden
states each decoder block receives), peft's get_peft_model (LoRA counts), the saved-tensor
measurement of oracles.py (activations with and without gradient checkpointing; its docstring
states how bytes are counted on the CPU and on the meta device), the model zoo's manifest, and on
CUDA machines torch.cuda's own memory counters and a timed decode. Hand-written numbers are only
the source map's, as named constants with the rounding the map quotes.
"""
import math
from numbers import Real

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from grader.core.checks import GRADING, sibling_module
from grader.core.submission import StudentError

oracles = sibling_module(__file__, "oracles")

# Drawn configs are checked against a model built per config: a failing example is reported as
# found, since shrinking it would build a model for every candidate (and the learner never sees
# the drawn input anyway, only its features).
GRADING_CONFIGS = settings(GRADING, phases=(Phase.explicit, Phase.generate))

# Tolerances, each with the largest error a correct solution shows and the smallest error by which
# the nearest mutant is caught (margins.py prints the activation figures).
# Bytes are exact; only a float division (by n_gpus) may round: correct solutions differ by at
# most 1e-16, the nearest mutant (a QLoRA scale floored on a partial block) by 3.9e-5.
EXACT = 1e-9
# An estimate derived term by term, not a replay of every saved tensor: correct solutions (the
# reference, the independent solution, the alternatives) stay within 6.7% of every measurement;
# the nearest mutant the tolerance catches (k and v not repeated to every head) is 35% off, and
# on the seq_len^2 growth 0.003% against 30% (the fp32 softmax output forgotten).
ACTIVATION_TOLERANCE = 0.25
# Exact linearity in batch: correct solutions are exact (integers); the nearest mutant (RoPE
# tables counted once per forward) is off by 3.7e-3.
LINEAR = 1e-12
# On CUDA (estimated, not yet measured on a device): one step holds the 16 bytes/param plus the
# cuBLAS workspace and rotary buffers, about +2% for this ~100M model; the nearest mutants
# (fp32 grads, no master copy) are +12.5% and -25% off.
GPU_STATE_TOLERANCE = 0.10
# On CUDA: the peak also holds backward's transient buffers (not measured on a device yet; the
# nearest mutant it catches, the seq_len^2 probabilities left out, is 50% low at seq 512).
GPU_ACTIVATION_TOLERANCE = 0.25

# The source map's figures for Llama-3-8B (8.03 B parameters) on an H100 SXM, as it rounds them.
H100_PEAK_FLOPS, H100_BANDWIDTH = 989e12, 3.35e12    # bf16 dense FLOP/s, HBM3 bytes/s
MAP_BILLIONS_OF_PARAMS = 8.03                        # 2 decimals
MAP_FULL_FINE_TUNE_GB = 128.5                        # 16 bytes/param, 1 decimal
MAP_FSDP_8_GPUS_GB = 16.06                           # per GPU, 2 decimals
MAP_LORA_GB = 16.7                                   # r=16 on every linear layer, 1 decimal
MAP_QLORA_GB = 5                                     # "about 5 GB": the nearest integer
MAP_RESIDUAL_MIB_PER_LAYER = 32                      # seq 4096, batch 1, bf16: exact
MAP_RESIDUAL_GIB_PER_SEQUENCE = 1                    # 32 layers of it: exact
MAP_DECODE_MS = 4.8                                  # 1 decimal
MAP_TOKENS_PER_S = 208                               # whole tokens
MAP_PREFILL_MS = 67                                  # 4096 tokens, whole ms
MAP_RIDGE = 295                                      # whole FLOP/byte
LLAMA_8B = "llama-3-8b"
MiB, GiB = 2 ** 20, 2 ** 30


def zoo(name):
    return oracles.zoo_config(name)


def close(got, expected, rel=EXACT):
    return isinstance(got, Real) and math.isclose(got, expected, rel_tol=rel, abs_tol=1e-6)


def describe(config):
    """The features of a drawn config that decide its size, never the whole dict."""
    if config["model_type"] == "gpt2":
        return f"gpt2 config (tied={config.get('tie_word_embeddings', True)}, n_inner={config.get('n_inner')})"
    heads, kv = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    parts = [f"{heads} heads", f"{kv} KV heads"]
    if config.get("head_dim"):
        width = "differs from" if config["head_dim"] * heads != config["hidden_size"] else "equals"
        parts.append(f"explicit head_dim (heads x head_dim {width} hidden_size)")
    parts.append("tied embeddings" if config.get("tie_word_embeddings", config["model_type"] == "gemma")
                 else "untied embeddings")
    parts += [f"{key}: true" for key in ("attention_bias", "mlp_bias") if config.get(key)]
    if config["model_type"] == "mixtral":
        parts.append(f"{config['num_local_experts']} experts, top-{config['num_experts_per_tok']}")
    return f"{config['model_type']} config ({', '.join(parts)})"


def gb(n):
    return f"{n / 1e9:.4f} GB ({n:,.0f} bytes)"


def number(got):
    """A learner's result for a message: digits grouped when it is a number."""
    return f"{got:,}" if isinstance(got, Real) and not isinstance(got, bool) else repr(got)


def difference(got, expected):
    return f"{got - expected:+,}" if isinstance(got, Real) else "n/a"


def raised(function, *args, **kwargs):
    """The name of the exception a learner's function raised, or None when it returned."""
    try:
        function(*args, **kwargs)
    except StudentError as exc:
        if exc.not_implemented:
            raise
        return exc.info["type"]
    return None


# ---------------------------------------------------------------- drawn configs

@st.composite
def llama_like(draw, families=("llama", "mistral", "qwen2", "gemma", "mixtral")):
    """Llama-, Mistral-, Qwen2-, Gemma- and Mixtral-shaped configs as they appear in config.json."""
    family = draw(st.sampled_from(families), label="model_type")
    kv_heads = draw(st.integers(1, 4))
    heads = kv_heads * draw(st.integers(1, 4))
    head_dim = draw(st.sampled_from([8, 12, 16, 32]))
    explicit = family == "gemma" or draw(st.booleans())
    hidden = heads * (draw(st.sampled_from([8, 12, 16, 20])) if explicit else head_dim)   # llama checks divisibility
    config = {"model_type": family, "hidden_size": hidden, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "intermediate_size": draw(st.integers(8, 200)),
              "num_hidden_layers": draw(st.integers(1, 3)), "vocab_size": draw(st.integers(16, 400)),
              "tie_word_embeddings": draw(st.booleans())}
    if explicit:
        config["head_dim"] = head_dim
    # Every model type may carry the bias keys; only llama and gemma read attention_bias, only llama
    # mlp_bias, and the meta-device model says which.
    config["attention_bias"] = draw(st.booleans())
    config["mlp_bias"] = draw(st.booleans())
    if family == "mixtral":
        config["num_local_experts"] = draw(st.integers(2, 6))
        config["num_experts_per_tok"] = draw(st.integers(1, 2))
    return config


GPT2_VARIANTS = [
    {"model_type": "gpt2", "n_embd": 48, "n_layer": 2, "n_head": 4, "n_positions": 64, "vocab_size": 100},
    {"model_type": "gpt2", "n_embd": 64, "n_layer": 3, "n_head": 2, "n_positions": 32, "vocab_size": 77,
     "n_inner": 100, "tie_word_embeddings": False},
]

# Scaled-down configs for CPU measurements: every model type, GQA and MQA, an explicit head_dim
# wider than hidden_size, biases, a vocabulary large enough for the loss to dominate (as in Gemma
# 2B at short sequences), experts wide enough for the routed tokens' MLPs to dominate, many heads
# over few KV heads so that the repeated k and v dominate, and a deep narrow model whose block
# inputs dominate the checkpointed peak. Each term of the README's table is the largest part of
# some measurement, so leaving one out misses by more than the tolerance somewhere.
# (One corner is kept out on purpose: with a single KV head at batch 1, PyTorch's matmul reads the
# repeated k and v as a stride-0 view and saves no copy, so an attention-dominated MQA model at
# batch 1 saves less than the README's table says.)
SMALL = {
    "llama": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 3000, "tie_word_embeddings": False},
    "qwen2": {"model_type": "qwen2", "hidden_size": 96, "intermediate_size": 200, "num_hidden_layers": 2,
              "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 200, "tie_word_embeddings": True},
    "gemma": {"model_type": "gemma", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 250},
    "mixtral": {"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 512, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "num_local_experts": 4,
                "num_experts_per_tok": 2, "tie_word_embeddings": False},
    "heads": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 128,
              "tie_word_embeddings": False},
    "deep": {"model_type": "mistral", "hidden_size": 128, "intermediate_size": 128, "num_hidden_layers": 16,
             "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 128, "tie_word_embeddings": False},
}
# (batch, seq_len, bytes per value): short and long sequences, bf16 and fp32 training. The deep
# model needs only one; the many-heads model only short sequences, where the attention
# probabilities do not hide the projections.
SMALL_SHAPES = [(1, 24, 2), (3, 64, 2), (2, 200, 4)]
OWN_SHAPES = {"deep": [(2, 64, 4)], "heads": [(1, 24, 2), (2, 16, 4)]}


def small_shapes(name):
    return OWN_SHAPES.get(name, SMALL_SHAPES)


# Full-size zoo configs on the meta device: (name, batch, seq_len).
FULL_SIZE = [(LLAMA_8B, 1, 4096), ("gemma-2b", 2, 1024)]
FULL_SIZE_CHECKPOINTED = [(LLAMA_8B, 1, 4096), ("gemma-2b", 2, 1024)]


# ---------------------------------------------------------------- roofline: decode and prefill

@pytest.mark.points(1)
@pytest.mark.concept("Decode and prefill")
def test_map_decode_bound(submission):
    """Llama-3-8B in bf16 on an H100 SXM: at least 4.8 ms per token, at most ~208 tokens/s"""
    ms = submission.decode_ms_per_token(oracles.param_count(zoo(LLAMA_8B)), 2, H100_BANDWIDTH)
    assert isinstance(ms, Real) and round(ms, 1) == MAP_DECODE_MS and int(1000 / ms) == MAP_TOKENS_PER_S, \
        (f"decode_ms_per_token(Llama-3-8B, 2 bytes/param, 3.35 TB/s) = {ms!r} ms; the map says 16.06 GB / "
         f"3.35 TB/s = {MAP_DECODE_MS} ms, about {MAP_TOKENS_PER_S} tokens/s (1 GB = 1e9 bytes, 1 TB/s = 1e12 B/s)")


@pytest.mark.points(1)
@pytest.mark.concept("Decode and prefill")
def test_decode_reads_every_weight_once(submission):
    """decode time = weight bytes / bandwidth, for 4-bit, 8-bit, bf16 and fp32 weights"""
    for n_params, bytes_per_param, bandwidth in [(7e9, 0.5, 3.35e12), (70e9, 1, 4.8e12),
                                                 (1.2e9, 2, 2.039e12), (125e6, 4, 1e12)]:
        expected = n_params * bytes_per_param / bandwidth * 1e3
        got = submission.decode_ms_per_token(n_params, bytes_per_param, bandwidth)
        assert close(got, expected), (f"decode_ms_per_token({n_params:g} params, {bytes_per_param} bytes/param, "
                                      f"{bandwidth:g} B/s): expected {expected:.6g} ms, got {got!r}")


@pytest.mark.points(1)
@pytest.mark.concept("Decode and prefill")
def test_map_prefill_time(submission):
    """prefill of 4096 tokens through Llama-3-8B at 989 TFLOP/s takes about 67 ms"""
    ms = submission.prefill_ms(oracles.param_count(zoo(LLAMA_8B)), 4096, H100_PEAK_FLOPS)
    assert isinstance(ms, Real) and round(ms) == MAP_PREFILL_MS, \
        f"prefill_ms(Llama-3-8B, 4096 tokens, 989e12 FLOP/s) = {ms!r} ms; the map says 2 x 8.03e9 x 4096 / 989e12 = 67 ms"


@pytest.mark.points(1)
@pytest.mark.concept("Decode and prefill")
def test_prefill_is_two_flops_per_param_per_token(submission):
    """prefill time = 2 x params x tokens / peak FLOP/s, exactly"""
    for n_params, n_tokens, flops in [(1.2e9, 1, 312e12), (70e9, 32768, 989e12), (125e6, 1000, 1e14)]:
        expected = 2 * n_params * n_tokens / flops * 1e3
        got = submission.prefill_ms(n_params, n_tokens, flops)
        assert close(got, expected), (f"prefill_ms({n_params:g} params, {n_tokens} tokens, {flops:g} FLOP/s): "
                                      f"expected {expected:.6g} ms, got {got!r}")


# ---------------------------------------------------------------- arithmetic intensity

@pytest.mark.points(1)
@pytest.mark.concept("Arithmetic intensity")
def test_map_ridge_point(submission):
    """the H100's ridge point is 989e12 / 3.35e12, about 295 FLOP/byte; the A100's 312e12 / 2.039e12"""
    for flops, bandwidth in [(H100_PEAK_FLOPS, H100_BANDWIDTH), (312e12, 2.039e12)]:
        got = submission.ridge_point(flops, bandwidth)
        assert close(got, flops / bandwidth), \
            f"ridge_point({flops:g}, {bandwidth:g}): expected {flops / bandwidth:.6g} FLOP/byte, got {got!r}"
    ridge = submission.ridge_point(H100_PEAK_FLOPS, H100_BANDWIDTH)
    assert round(ridge) == MAP_RIDGE, f"ridge_point(H100) = {ridge!r}; the map says about {MAP_RIDGE} FLOP/byte"


@pytest.mark.points(2)
@pytest.mark.concept("Arithmetic intensity")
@GRADING
@given(m=st.integers(1, 8192), n=st.integers(1, 8192), k=st.integers(1, 8192), size=st.sampled_from([1, 2, 4]))
def test_matmul_intensity(submission, m, n, k, size):
    """2mnk FLOPs over the bytes of A (m x k), B (k x n) and C (m x n)"""
    expected = 2 * m * n * k / (size * (m * k + k * n + m * n))
    got = submission.matmul_intensity(m, n, k, size)
    assert close(got, expected), f"matmul_intensity({m}, {n}, {k}, {size}): expected {expected:.6g}, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.concept("Arithmetic intensity")
def test_bound_on_both_sides_of_the_ridge(submission):
    """a batch-1 GEMV is memory-bound, a 4096-cube GEMM compute-bound, the ridge splits them and
    an intensity exactly on it is compute-bound"""
    ridge = H100_PEAK_FLOPS / H100_BANDWIDTH
    # The last two: a ridge of exactly 300 FLOP/byte (600e12 / 2e12, both exact in binary
    # floating point), so that every way of comparing puts 300.0 on the ridge itself.
    for intensity, flops, bandwidth, expected in [
            (1.0, H100_PEAK_FLOPS, H100_BANDWIDTH, "memory"), (ridge * 0.99, H100_PEAK_FLOPS, H100_BANDWIDTH, "memory"),
            (ridge * 1.01, H100_PEAK_FLOPS, H100_BANDWIDTH, "compute"), (1365.0, H100_PEAK_FLOPS, H100_BANDWIDTH, "compute"),
            (300.0, 600e12, 2e12, "compute"), (299.9, 600e12, 2e12, "memory")]:
        got = submission.bound(intensity, flops, bandwidth)
        assert got == expected, (f"bound({intensity:.1f} FLOP/byte, {flops:g} FLOP/s, {bandwidth:g} B/s) "
                                 f"(ridge {flops / bandwidth:.1f}): expected {expected!r}, got {got!r}")


# ---------------------------------------------------------------- keys a config may leave out

def without(config, *keys):
    return {key: value for key, value in config.items() if key not in keys}


# (what, config): keys left out or set to null, as real config.json files do.
def sparse_configs():
    return [("a Llama config without num_key_value_heads", without(SMALL["llama"], "num_key_value_heads")),
            ("a Llama config with num_key_value_heads: null", {**SMALL["llama"], "num_key_value_heads": None}),
            ("a Mistral config with head_dim: null", {**SMALL["deep"], "head_dim": None}),
            ("a Mixtral config with head_dim: null", {**SMALL["mixtral"], "head_dim": None}),
            ("a Gemma config without tie_word_embeddings", without(SMALL["gemma"], "tie_word_embeddings")),
            ("a GPT-2 config with n_inner: null", {**GPT2_VARIANTS[0], "n_inner": None})]


@pytest.mark.points(1)
@pytest.mark.concept("Units and conventions")
def test_keys_left_out_or_null(submission):
    """a missing or null key means what it means to Hugging Face: parameters and KV cache of the meta model"""
    for what, config in sparse_configs():
        expected, got = oracles.param_count(config), submission.param_count(config)
        assert got == expected, f"param_count({what}): expected {expected:,}, got {number(got)} ({difference(got, expected)})"
        expected, got = oracles.kv_cache_bytes(config, 2, 5), submission.kv_cache_bytes(config, 2, 5)
        assert got == expected, f"kv_cache_bytes({what}, batch=2, seq_len=5): expected {expected:,}, got {number(got)}"


# (what, config): bias keys on every model type; only llama's and gemma's code reads attention_bias,
# only llama's mlp_bias.
def bias_key_configs():
    return [("a Mistral config with attention_bias and mlp_bias: true", {**SMALL["deep"], "attention_bias": True,
                                                                        "mlp_bias": True}),
            ("a Mixtral config with attention_bias and mlp_bias: true", {**SMALL["mixtral"], "attention_bias": True,
                                                                        "mlp_bias": True}),
            ("a Qwen2 config with attention_bias: false and mlp_bias: true", {**SMALL["qwen2"], "attention_bias": False,
                                                                             "mlp_bias": True}),
            ("a Gemma config with attention_bias and mlp_bias: true", {**SMALL["gemma"], "attention_bias": True,
                                                                      "mlp_bias": True}),
            ("a Llama config with attention_bias and mlp_bias: true", {**SMALL["llama"], "attention_bias": True,
                                                                      "mlp_bias": True})]


@pytest.mark.points(1)
@pytest.mark.concept("Units and conventions")
def test_bias_keys_count_where_the_model_type_reads_them(submission):
    """attention_bias and mlp_bias add biases only in the model types whose code reads them"""
    for what, config in bias_key_configs():
        expected, got = oracles.param_count(config), submission.param_count(config)
        assert got == expected, f"param_count({what}): expected {expected:,}, got {number(got)} ({difference(got, expected)})"


# ---------------------------------------------------------------- parameters

ZOO_NAMES = sorted(oracles.zoo_param_counts()) or ["model zoo not built"]


@pytest.mark.points(0.5)
@pytest.mark.concept("Parameters from a config")
@pytest.mark.parametrize("name", ZOO_NAMES)
def test_zoo_parameter_counts(submission, name):
    """param_count of a model-zoo config equals the manifest's count and the meta-device model's"""
    counts = oracles.zoo_param_counts()
    assert name in counts, "datasets/MANIFEST.json has no facts.param_counts: the course data is not built"
    config = zoo(name)
    expected = oracles.param_count(config)
    assert counts[name] == expected, (f"course data problem, not yours: the manifest says {counts[name]:,} "
                                      f"parameters for {name}, from_config builds {expected:,}")
    got = submission.param_count(config)
    assert got == expected, f"param_count({name}.json): expected {expected:,}, got {number(got)} (difference {difference(got, expected)})"


@pytest.mark.points(3)
@pytest.mark.concept("Parameters from a config")
@GRADING_CONFIGS
@given(config=llama_like(("llama", "mistral", "qwen2", "gemma")))
def test_parameter_counts_of_drawn_dense_configs(submission, config):
    """param_count matches from_config on the meta device: GQA, explicit head_dim, biases, tying"""
    got = submission.param_count(config)
    expected = oracles.param_count(config)
    assert got == expected, f"param_count({describe(config)}): expected {expected:,}, got {number(got)} ({difference(got, expected)})"


@pytest.mark.points(2)
@pytest.mark.concept("Parameters from a config")
@GRADING_CONFIGS
@given(config=llama_like(("mixtral",)))
def test_parameter_counts_of_drawn_mixture_of_experts(submission, config):
    """param_count of Mixtral-shaped configs counts every expert and the router"""
    got = submission.param_count(config)
    expected = oracles.param_count(config)
    assert got == expected, f"param_count({describe(config)}): expected {expected:,}, got {number(got)} ({difference(got, expected)})"


@pytest.mark.points(1)
@pytest.mark.concept("Parameters from a config")
def test_parameter_counts_of_gpt2_variants(submission):
    """gpt2: learned positions, LayerNorm weights and biases, Conv1D biases, n_inner, tying"""
    for config in GPT2_VARIANTS:
        expected = oracles.param_count(config)
        got = submission.param_count(config)
        assert got == expected, f"param_count({describe(config)}): expected {expected:,}, got {number(got)} ({difference(got, expected)})"


@pytest.mark.points(1)
@pytest.mark.concept("Parameters from a config")
def test_map_llama_3_8b_has_8_03_billion_parameters(submission):
    """Llama-3-8B has 8.03 B parameters (untied 128256-token embeddings, 8 KV heads)"""
    got = submission.param_count(zoo(LLAMA_8B))
    assert isinstance(got, Real) and round(got / 1e9, 2) == MAP_BILLIONS_OF_PARAMS, \
        f"param_count(Llama-3-8B) = {number(got)}; the map says {MAP_BILLIONS_OF_PARAMS} B"


# ---------------------------------------------------------------- LoRA parameters

@pytest.mark.points(2)
@pytest.mark.concept("LoRA parameters")
@GRADING_CONFIGS
@given(config=llama_like(), r=st.sampled_from([1, 4, 8, 16, 64]))
def test_lora_all_linear_matches_the_linear_layers(submission, config, r):
    """LoRA on "all-linear": r x (in + out) for every linear map in the decoder blocks of the meta model"""
    got = submission.lora_param_count(config, r)
    expected = oracles.lora_count(config, r)
    assert got == expected, f"lora_param_count({describe(config)}, r={r}): expected {expected:,}, got {number(got)}"


LORA_TARGETS = [("llama", ["q_proj", "v_proj"]), ("qwen2", ["o_proj"]), ("gemma", ["gate_proj", "up_proj", "down_proj"]),
                ("deep", ["k_proj", "down_proj"]), ("mixtral", ["q_proj", "k_proj", "v_proj", "o_proj"]),
                ("mixtral", ["w2", "gate"])]


@pytest.mark.points(1)
@pytest.mark.concept("LoRA parameters")
def test_lora_named_targets(submission):
    """a list of module names adapts exactly the linear layers of those names in every block; gpt2's Conv1D layers"""
    for name, targets in LORA_TARGETS:
        config = SMALL[name]
        expected = oracles.lora_count(config, 8, targets)
        got = submission.lora_param_count(config, 8, targets)
        assert got == expected, f"lora_param_count({describe(config)}, r=8, {targets}): expected {expected:,}, got {number(got)}"
    for targets in ("all-linear", ["c_attn"], ["c_proj"], ["c_fc", "c_proj"]):   # gpt2's two c_proj share a name
        expected = oracles.lora_count(GPT2_VARIANTS[0], 4, targets)
        got = submission.lora_param_count(GPT2_VARIANTS[0], 4, targets)
        assert got == expected, f"lora_param_count(gpt2 config, r=4, {targets!r}): expected {expected:,}, got {number(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("LoRA parameters")
def test_lora_counts_match_peft(submission):
    """the counts of peft.get_peft_model on the meta model, and Llama-3-8B's r=16 all-linear adapters"""
    for config, r, targets in [(SMALL["llama"], 16, "all-linear"), (SMALL["qwen2"], 4, ["q_proj", "v_proj"])]:
        expected = oracles.peft_lora_count(config, r, targets)
        got = submission.lora_param_count(config, r, targets)
        assert got == expected, f"lora_param_count({describe(config)}, r={r}, {targets!r}): peft trains {expected:,}, got {number(got)}"
    expected = oracles.lora_count(zoo(LLAMA_8B), 16)
    got = submission.lora_param_count(zoo(LLAMA_8B), 16)
    assert got == expected, f"lora_param_count(Llama-3-8B, r=16): expected {expected:,}, got {number(got)}"


# (model, targets): names the model type's blocks do not have, and a bare string.
BAD_TARGETS = [("llama", ["q_proj", "lm_head"]), ("mixtral", ["gate_proj"]), ("qwen2", ["w1", "w2"]),
               ("gemma", ["c_attn"]), ("llama", "q_proj")]


@pytest.mark.points(1)
@pytest.mark.concept("LoRA parameters")
def test_lora_names_a_model_lacks_raise(submission):
    """a target name the model type's blocks do not have, or a string other than "all-linear", raises ValueError"""
    for name, targets in BAD_TARGETS:
        got = raised(submission.lora_param_count, SMALL[name], 8, targets)
        assert got == "ValueError", (f"lora_param_count({name} config, r=8, {targets!r}): expected ValueError, "
                                     + ("got a count" if got is None else f"got {got}"))


# ---------------------------------------------------------------- training state

STATE_KEYS = {"weights", "grads", "master_weights", "optimizer", "lora", "total"}


def state_of(submission, config, **kwargs):
    state = submission.training_memory(config, **kwargs)
    assert isinstance(state, dict) and set(state) == STATE_KEYS, \
        f"training_memory must return a dict with keys {sorted(STATE_KEYS)}, got {state!r:.200}"
    return state


def check_state(state, expected, what):
    expected = {**expected, "total": sum(expected.values())}
    for key in sorted(STATE_KEYS):
        assert close(state[key], expected.get(key, 0)), \
            f"{what}[{key!r}]: expected {gb(expected.get(key, 0))}, got {state[key]!r}"


FULL_BYTES = {"weights": 2, "grads": 2, "master_weights": 4, "optimizer": 8}   # per parameter


@pytest.mark.points(2)
@pytest.mark.concept("Training state memory")
@pytest.mark.parametrize("name", [LLAMA_8B, "gemma-2b", "mixtral-8x7b", "gpt2"])
def test_full_fine_tuning_is_16_bytes_per_parameter(submission, name):
    """full: bf16 weights 2 + bf16 grads 2 + fp32 master 4 + AdamW moments 8 bytes per parameter"""
    n = oracles.param_count(zoo(name))
    check_state(state_of(submission, zoo(name)), {key: b * n for key, b in FULL_BYTES.items()},
                f"training_memory({name}, 'full')")


@pytest.mark.points(1)
@pytest.mark.concept("Training state memory")
def test_map_full_fine_tune_is_128_5_gb(submission):
    """full fine-tuning of Llama-3-8B needs 128.5 GB of state"""
    total = state_of(submission, zoo(LLAMA_8B))["total"]
    assert round(total / 1e9, 1) == MAP_FULL_FINE_TUNE_GB, \
        f"training_memory(Llama-3-8B)['total'] = {gb(total)}; the map says {MAP_FULL_FINE_TUNE_GB} GB (1 GB = 1e9 bytes)"


@pytest.mark.points(1)
@pytest.mark.concept("Training state memory")
def test_training_memory_refuses_an_unknown_method(submission):
    """training_memory knows full, lora and qlora; any other method raises ValueError"""
    for method in ("inference", "ddp", "LoRA"):
        got = raised(submission.training_memory, SMALL["llama"], method)
        assert got == "ValueError", (f"training_memory(llama config, {method!r}): expected ValueError, "
                                     + ("got a result" if got is None else f"got {got}"))


# ---------------------------------------------------------------- LoRA and QLoRA memory

@pytest.mark.points(2)
@pytest.mark.concept("LoRA and QLoRA memory")
@pytest.mark.parametrize("name,r,targets", [(LLAMA_8B, 16, "all-linear"), ("qwen2.5-7b", 8, ["q_proj", "v_proj"]),
                                             ("mixtral-8x7b", 4, "all-linear")])
def test_lora_state(submission, name, r, targets):
    """lora: a frozen bf16 base (2 bytes/param) plus 16 bytes per LoRA parameter, nothing else"""
    config, n = zoo(name), oracles.param_count(zoo(name))
    state = state_of(submission, config, method="lora", lora_r=r, lora_targets=targets)
    check_state(state, {"weights": 2 * n, "lora": 16 * oracles.lora_count(config, r, targets)},
                f"training_memory({name}, 'lora', lora_r={r}, lora_targets={targets!r})")


@pytest.mark.points(2)
@pytest.mark.concept("LoRA and QLoRA memory")
@pytest.mark.parametrize("name", [LLAMA_8B, "gemma-7b", "gpt2"])
def test_qlora_state(submission, name):
    """qlora: 0.5 byte/param plus one fp32 absmax per 64-parameter block, plus the adapters"""
    config, n = zoo(name), oracles.param_count(zoo(name))
    state = state_of(submission, config, method="qlora")
    check_state(state, {"weights": n / 2 + 4 * math.ceil(n / 64), "lora": 16 * oracles.lora_count(config, 16)},
                f"training_memory({name}, 'qlora')")


@pytest.mark.points(1)
@pytest.mark.concept("LoRA and QLoRA memory")
def test_qlora_scales_a_partial_block(submission):
    """qlora on models whose size is not a multiple of 64: the last, partial block has a scale too"""
    for config in (SMALL["qwen2"], GPT2_VARIANTS[1]):
        n = oracles.param_count(config)
        assert n % 64, "course problem, not yours: this check needs a model whose size is not a multiple of 64"
        state = state_of(submission, config, method="qlora", lora_r=4)
        check_state(state, {"weights": n / 2 + 4 * math.ceil(n / 64), "lora": 16 * oracles.lora_count(config, 4)},
                    f"training_memory({describe(config)} ({n:,} parameters), 'qlora', lora_r=4)")


@pytest.mark.points(1)
@pytest.mark.concept("LoRA and QLoRA memory")
def test_map_lora_16_7_gb_and_qlora_about_5_gb(submission):
    """Llama-3-8B: LoRA (r=16, all linear layers) 16.7 GB, QLoRA about 5 GB"""
    lora = state_of(submission, zoo(LLAMA_8B), method="lora")["total"]
    qlora = state_of(submission, zoo(LLAMA_8B), method="qlora")["total"]
    assert round(lora / 1e9, 1) == MAP_LORA_GB, f"LoRA total {gb(lora)}; the map says {MAP_LORA_GB} GB"
    assert round(qlora / 1e9) == MAP_QLORA_GB, f"QLoRA total {gb(qlora)}; the map says about {MAP_QLORA_GB} GB"


# ---------------------------------------------------------------- FSDP

@pytest.mark.points(2)
@pytest.mark.concept("Sharding with FSDP")
@pytest.mark.parametrize("method,n_gpus", [("full", 8), ("full", 3), ("lora", 2), ("qlora", 4)])
def test_fsdp_shards_every_block(submission, method, n_gpus):
    """with n_gpus > 1 each GPU holds 1 / n_gpus of every block"""
    config = zoo("llama-3.2-1b")
    n, adapters = oracles.param_count(config), oracles.lora_count(config, 16)
    whole = {"full": {key: b * n for key, b in FULL_BYTES.items()},
             "lora": {"weights": 2 * n, "lora": 16 * adapters},
             "qlora": {"weights": n / 2 + 4 * math.ceil(n / 64), "lora": 16 * adapters}}[method]
    state = state_of(submission, config, method=method, n_gpus=n_gpus)
    check_state(state, {key: size / n_gpus for key, size in whole.items()},
                f"training_memory(Llama-3.2-1B, {method!r}, n_gpus={n_gpus})")


@pytest.mark.points(1)
@pytest.mark.concept("Sharding with FSDP")
def test_map_fsdp_over_8_gpus_is_16_06_gb(submission):
    """full fine-tuning of Llama-3-8B with FSDP over 8 GPUs: 16.06 GB of state per GPU"""
    total = state_of(submission, zoo(LLAMA_8B), n_gpus=8)["total"]
    assert round(total / 1e9, 2) == MAP_FSDP_8_GPUS_GB, f"per-GPU total {gb(total)}; the map says {MAP_FSDP_8_GPUS_GB} GB"


# ---------------------------------------------------------------- KV cache

# Caches that differ in kind: MQA with head_dim 256 (gemma-2b), GQA (llama, qwen2, mixtral), MHA with
# heads x head_dim != hidden_size (the small gemma), plain MHA (mistral), gpt2's n_head; bf16 and fp32.
# (Mixtral stays in bf16: its fused experts' grouped matmul runs in bf16 only.)
def cache_cases():
    return ([(zoo("gemma-2b"), 3, 40, 2), (SMALL["mixtral"], 2, 9, 2), (GPT2_VARIANTS[0], 3, 11, 2)]
            + [(SMALL[name], 2, 9, 4) for name in ("llama", "gemma", "qwen2", "deep")] + [(GPT2_VARIANTS[1], 1, 5, 4)])


@pytest.mark.points(2)
@pytest.mark.concept("KV cache")
def test_kv_cache_matches_the_cache_hugging_face_fills(submission):
    """kv_cache_bytes equals the keys and values a prefill leaves in Hugging Face's cache"""
    for config, batch, seq_len, size in cache_cases():
        expected = oracles.kv_cache_bytes(config, batch, seq_len, size)
        got = submission.kv_cache_bytes(config, batch, seq_len, size)
        assert got == expected, (f"kv_cache_bytes({describe(config)}, batch={batch}, seq_len={seq_len}, "
                                 f"bytes_per_value={size}): expected {expected:,}, got {number(got)}")


@pytest.mark.points(1)
@pytest.mark.concept("KV cache")
def test_kv_cache_of_a_long_context(submission):
    """Llama-3-8B keeps 128 KiB per token: 64 sequences of 8192 tokens need 68.7 GB; Mistral-7B's 4096-token
    sliding window does not cap the count"""
    for name, batch, seq_len in [(LLAMA_8B, 64, 8192), ("mistral-7b", 2, 8192)]:
        assert seq_len > (zoo(name).get("sliding_window") or 0)
        expected = batch * seq_len * oracles.kv_cache_bytes(zoo(name), 1, 1)   # every token caches the same bytes
        got = submission.kv_cache_bytes(zoo(name), batch, seq_len)
        assert got == expected, (f"kv_cache_bytes({name}, batch={batch}, seq_len={seq_len}): expected {gb(expected)}, "
                                 f"got {number(got)}")


# ---------------------------------------------------------------- fits and OOM diagnosis

def setup(name=LLAMA_8B, method="full", seq_len=4096, **kwargs):
    return {"config": zoo(name), "method": method, "seq_len": seq_len, **kwargs}


# (setup, gpu memory in bytes, expected): Llama-3-8B at seq 4096. Each verdict holds with a margin
# wider than the activation tolerance (checked against the measurement, so no estimate within the
# tolerance can flip it).
def fits_cases():
    return [
        (setup(checkpointing=True), 80e9, False),                       # 128.5 GB of state
        (setup(n_gpus=8, checkpointing=True), 80e9, True),              # FSDP: 16 GB + 7.4 GB
        (setup(n_gpus=8), 80e9, False),                                 # + 133 GB without checkpointing
        (setup(method="lora", checkpointing=True), 40e9, True),         # 16.7 GB + 7.4 GB
        (setup(method="lora"), 80e9, False),
        (setup(method="qlora", checkpointing=True), 24e9, True),        # a consumer card
        (setup(method="qlora"), 80e9, False),
        (setup(method="inference", batch=1, seq_len=8192), 24e9, True),                # 16 GB + 1 GB of cache
        (setup(method="inference", batch=64, seq_len=8192), 80e9, False),              # 16 GB + 68.7 GB
        (setup(method="inference", n_gpus=2, batch=64, seq_len=8192), 80e9, True),     # half of it per GPU
        (setup(method="inference", n_gpus=4, batch=64, seq_len=8192), 24e9, True),     # a quarter: the cache too
        (setup(method="lora", seq_len=128, checkpointing=True), 16.6e9, False),  # 16.73 GB of r=16 all-linear state
    ]


def measured_total(case):
    """The case's per-GPU bytes from the oracles: states by convention, activations measured."""
    config, method = case["config"], case["method"]
    n, n_gpus = oracles.param_count(config), case.get("n_gpus", 1)
    batch, seq_len = case.get("batch", 1), case["seq_len"]
    if method == "inference":     # the cache holds the same bytes for every token: measure one
        return (2 * n + batch * seq_len * oracles.kv_cache_bytes(config, 1, 1)) / n_gpus, 0
    states = {"full": 16 * n, "lora": 2 * n + 16 * oracles.lora_count(config, 16),
              "qlora": n / 2 + 4 * math.ceil(n / 64) + 16 * oracles.lora_count(config, 16)}[method] / n_gpus
    activations = oracles.saved_bytes(config, batch, seq_len, device="meta",
                                      checkpointing=case.get("checkpointing", False))
    return states + activations, activations


@pytest.mark.points(2)
@pytest.mark.concept("Does it fit?")
def test_fits(submission):
    """full, LoRA, QLoRA, FSDP and inference setups that fit or do not, by a clear margin"""
    for case, memory, expected in fits_cases():
        total, activations = measured_total(case)
        margin = ACTIVATION_TOLERANCE * activations
        assert (total + margin <= memory) if expected else (total - margin > memory), \
            "course problem, not yours: a fits case lies within the activation tolerance of the limit"
        args = {k: v for k, v in case.items() if k not in ("config", "method")}
        got = submission.fits(case["config"], case["method"], memory, **args)
        what = ", ".join(f"{k}={v}" for k, v in args.items())
        assert got is expected, (f"fits({case['config']['model_type']} {oracles.param_count(case['config']) / 1e9:.1f}B, "
                                 f"{case['method']!r}, {memory / 1e9:g} GB, {what}): the setup needs about "
                                 f"{total / 1e9:.1f} GB per GPU, so expected {expected}, got {got!r}")


@pytest.mark.points(1)
@pytest.mark.concept("Does it fit?")
def test_fits_at_the_limit(submission):
    """an inference setup that needs exactly gpu_memory fits, one byte less does not"""
    config, batch, seq_len = zoo(LLAMA_8B), 8, 4096
    for n_gpus in (1, 4):
        need = (2 * oracles.param_count(config) + batch * seq_len * oracles.kv_cache_bytes(config, 1, 1)) / n_gpus
        assert need == int(need), "course problem, not yours: the limit must be a whole number of bytes"
        for memory, expected in [(need, True), (need - 1, False)]:
            got = submission.fits(config, "inference", memory, n_gpus=n_gpus, batch=batch, seq_len=seq_len)
            assert got is expected, (f"fits(Llama-3-8B, 'inference', {memory:,.0f} bytes, n_gpus={n_gpus}, batch={batch}, "
                                     f"seq_len={seq_len}): the setup needs {need:,.0f} bytes per GPU, so expected "
                                     f"{expected}, got {got!r}")


# (before, after, the block that grew most): the map's diagnoses.
def oom_cases():
    return [
        (setup(seq_len=2048), setup(seq_len=8192), "activations", "same model and batch, longer sequences"),
        (setup(method="inference", seq_len=4096), setup(method="inference", seq_len=32768), "kv_cache",
         "serving longer contexts"),
        (setup(method="inference", batch=1), setup(method="inference", batch=64), "kv_cache", "serving a bigger batch"),
        (setup(optimizer="sgd"), setup(optimizer="adamw"), "optimizer", "SGD replaced by AdamW"),
        (setup(method="lora", optimizer="adamw_8bit"), setup(method="lora"), "optimizer", "8-bit AdamW replaced by AdamW"),
        (setup(seq_len=1024, checkpointing=True), setup(method="lora", seq_len=4096, checkpointing=True), "activations",
         "LoRA added and still OOM: the activations"),
        (setup(method="lora", checkpointing=True), setup(checkpointing=True), "optimizer", "LoRA replaced by full fine-tuning"),
        (setup(method="qlora", checkpointing=True), setup(method="lora", checkpointing=True), "weights",
         "4-bit base replaced by bf16"),
        (setup(n_gpus=8, checkpointing=True), setup(n_gpus=2, checkpointing=True), "optimizer", "fewer GPUs to shard over"),
        (setup(batch=1, seq_len=512, checkpointing=True), setup(batch=16, seq_len=512), "activations",
         "bigger batch, checkpointing off"),
        (setup("llama-3.2-1b", checkpointing=True), setup(checkpointing=True), "optimizer", "1B model replaced by 8B"),
        (setup("llama-3.2-1b", optimizer="sgd", checkpointing=True), setup(optimizer="sgd", checkpointing=True),
         "optimizer", "1B model replaced by 8B, plain SGD: the fp32 master copy grows most"),
        (setup(n_gpus=2, checkpointing=True), setup(n_gpus=8, checkpointing=True), "activations",
         "more GPUs: the sharded blocks shrank, the activations and the (empty) cache did not"),
        (setup(method="lora"), setup(method="lora"), "weights", "nothing changed"),
    ]


@pytest.mark.points(2)
@pytest.mark.concept("Which block did the OOM land in?")
def test_oom_culprit(submission):
    """the block that grew most between two setups: the map's OOM diagnoses"""
    for before, after, expected, story in oom_cases():
        got = submission.oom_culprit(before, after)
        assert got == expected, f"oom_culprit for '{story}': expected {expected!r}, got {got!r}"


# ---------------------------------------------------------------- activations

@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_map_residual_stream(submission):
    """Llama-3-8B at seq 4096: the residual stream is 32 MiB per layer and 1 GiB per sequence"""
    got = submission.residual_stream_bytes(zoo(LLAMA_8B), 1, 4096)
    assert got == MAP_RESIDUAL_GIB_PER_SEQUENCE * GiB and got / 32 == MAP_RESIDUAL_MIB_PER_LAYER * MiB, \
        f"residual_stream_bytes(Llama-3-8B, 1, 4096) = {got!r}; the map says 32 MiB x 32 layers = 1 GiB (2**30 bytes)"


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_residual_stream_is_one_block_input_per_layer(submission):
    """residual_stream_bytes equals the hidden states every decoder block receives"""
    for config, batch, seq_len, size in cache_cases():
        expected = oracles.residual_bytes(config, batch, seq_len, size)
        got = submission.residual_stream_bytes(config, batch, seq_len, size)
        assert got == expected, (f"residual_stream_bytes({describe(config)}, batch={batch}, seq_len={seq_len}, "
                                 f"bytes_per_value={size}): expected {expected:,}, got {number(got)}")


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_activations_are_linear_in_batch(submission):
    """activation_bytes(batch=5) is exactly 5 x activation_bytes(batch=1)"""
    for config, seq_len in [(zoo(LLAMA_8B), 4096), (SMALL["mixtral"], 100), (zoo("gemma-2b"), 333)]:
        one, five = (submission.activation_bytes(config, batch, seq_len) for batch in (1, 5))
        assert close(five, 5 * one, LINEAR), (f"activation_bytes({config['model_type']}, seq_len={seq_len}): batch 1 gives "
                                             f"{one!r}, batch 5 gives {five!r}, not 5 times as much")


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_gpt2_activations_are_refused(submission):
    """activation_bytes, and fits and oom_culprit for training, raise ValueError for gpt2; inference is fine"""
    gpt2 = zoo("gpt2")
    for what, function, args in [
            ("activation_bytes(gpt2, 1, 128)", submission.activation_bytes, (gpt2, 1, 128)),
            ("fits(gpt2, 'full', 80 GB)", submission.fits, (gpt2, "full", 80e9)),
            ("oom_culprit(gpt2 LoRA at seq 1024 -> 4096)", submission.oom_culprit,
             ({"config": gpt2, "method": "lora", "seq_len": 1024}, {"config": gpt2, "method": "lora", "seq_len": 4096}))]:
        got = raised(function, *args)
        assert got == "ValueError", f"{what}: expected ValueError, " + ("got a result" if got is None else f"got {got}")
    got = submission.fits(gpt2, "inference", 80e9)
    assert got is True, f"fits(gpt2, 'inference', 80 GB): 0.25 GB of weights and 0.08 GB of cache fit, got {got!r}"


def check_activations(got, measured, what, kept="saved for backward"):
    assert isinstance(got, Real) and got > 0, f"{what}: expected a number of bytes, got {got!r}"
    error = got / measured - 1
    assert abs(error) <= ACTIVATION_TOLERANCE, (
        f"{what}: measured {gb(measured)} {kept}, your estimate {gb(got)} "
        f"({error:+.0%}; the tolerance is {ACTIVATION_TOLERANCE:.0%})")


CHECKPOINTED_PEAK = "at the checkpointed peak (block inputs + outside the blocks + one block)"


@pytest.mark.points(3)
@pytest.mark.concept("Activations")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_activations_match_a_measurement(submission, name):
    """activation_bytes within 25% of the bytes autograd saves in a CPU forward, bf16 and fp32"""
    config = SMALL[name]
    by_storage, by_base = oracles.saved_bytes_both_rules(config, 2, 16)
    assert by_storage == by_base, "course problem, not yours: the meta-device counting rule disagrees with storages"
    for batch, seq_len, size in small_shapes(name):
        measured = oracles.saved_bytes(config, batch, seq_len, bytes_per_value=size)
        got = submission.activation_bytes(config, batch, seq_len, bytes_per_value=size)
        check_activations(got, measured, f"activation_bytes({describe(config)}, batch={batch}, seq_len={seq_len}, "
                                         f"bytes_per_value={size})")


@pytest.mark.points(2)
@pytest.mark.concept("Activations")
@pytest.mark.timeout(120)
def test_activations_of_full_size_models(submission):
    """activation_bytes within 25% of the meta-device measurement of full-size zoo models"""
    for name, batch, seq_len in FULL_SIZE:
        measured = oracles.saved_bytes(zoo(name), batch, seq_len, device="meta")
        got = submission.activation_bytes(zoo(name), batch, seq_len)
        check_activations(got, measured, f"activation_bytes({name}, batch={batch}, seq_len={seq_len})")


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_activations_grow_with_the_square_of_the_sequence(submission):
    """from 1024 to 4096 tokens Llama-3-8B's activations grow ~9.5x: eager attention keeps seq^2 scores"""
    config = zoo(LLAMA_8B)
    measured = [oracles.saved_bytes(config, 1, seq_len, device="meta") for seq_len in (1024, 4096)]
    got = [submission.activation_bytes(config, 1, seq_len) for seq_len in (1024, 4096)]
    growth, expected = got[1] / got[0], measured[1] / measured[0]
    assert abs(growth / expected - 1) <= ACTIVATION_TOLERANCE, (
        f"activation_bytes(Llama-3-8B) grows x{growth:.2f} from seq_len 1024 to 4096; measured x{expected:.2f}")


# ---------------------------------------------------------------- gradient checkpointing

@pytest.mark.points(1)
@pytest.mark.concept("Gradient checkpointing")
def test_checkpointing_is_linear_in_batch(submission):
    """the checkpointed peak of batch 3 is exactly 3 x that of batch 1"""
    for config, seq_len in [(zoo(LLAMA_8B), 2048), (SMALL["deep"], 50)]:
        one, three = (submission.activation_bytes(config, batch, seq_len, checkpointing=True) for batch in (1, 3))
        assert close(three, 3 * one, LINEAR), (f"activation_bytes({config['model_type']}, seq_len={seq_len}, "
                                              f"checkpointing=True): batch 1 gives {one!r}, batch 3 gives {three!r}")


@pytest.mark.points(2)
@pytest.mark.concept("Gradient checkpointing")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_checkpointing_matches_a_measurement(submission, name):
    """checkpointed peak within 25%: saved block inputs, what lies outside the blocks, one block recomputed"""
    config = SMALL[name]
    for batch, seq_len, size in small_shapes(name):
        measured = oracles.saved_bytes(config, batch, seq_len, bytes_per_value=size, checkpointing=True)
        got = submission.activation_bytes(config, batch, seq_len, checkpointing=True, bytes_per_value=size)
        check_activations(got, measured, f"activation_bytes({describe(config)}, batch={batch}, seq_len={seq_len}, "
                                         f"bytes_per_value={size}, checkpointing=True)", CHECKPOINTED_PEAK)


@pytest.mark.points(2)
@pytest.mark.concept("Gradient checkpointing")
@pytest.mark.timeout(120)
def test_checkpointing_of_full_size_models(submission):
    """checkpointed peak of full-size zoo models within 25% of the meta-device measurement"""
    for name, batch, seq_len in FULL_SIZE_CHECKPOINTED:
        measured = oracles.saved_bytes(zoo(name), batch, seq_len, device="meta", checkpointing=True)
        got = submission.activation_bytes(zoo(name), batch, seq_len, checkpointing=True)
        check_activations(got, measured, f"activation_bytes({name}, batch={batch}, seq_len={seq_len}, "
                                         "checkpointing=True)", CHECKPOINTED_PEAK)


# ---------------------------------------------------------------- on a GPU

GPU_LLAMA = {"model_type": "llama", "hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 14,
             "num_attention_heads": 12, "num_key_value_heads": 4, "vocab_size": 8192, "tie_word_embeddings": False}
GPU_BATCH, GPU_SEQ = 4, 512


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.concept("Training state memory")
@pytest.mark.timeout(300)
def test_gpu_training_state_after_one_adamw_step(submission):
    """on CUDA, the memory held after one mixed-precision AdamW step is within 10% of training_memory"""
    measured = oracles.cuda_training_step(GPU_LLAMA, GPU_BATCH, GPU_SEQ)
    expected = submission.training_memory(GPU_LLAMA)["total"]
    error = expected / measured["states"] - 1
    assert abs(error) <= GPU_STATE_TOLERANCE, (f"training_memory(~100M Llama)['total'] = {gb(expected)}; after one "
                                               f"step torch.cuda.memory_allocated() holds {gb(measured['states'])} "
                                               f"({error:+.0%})")


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.concept("Activations")
@pytest.mark.timeout(300)
def test_gpu_activation_peak_of_a_training_step(submission):
    """on CUDA, the peak of a training step minus its state is within 25% of activation_bytes"""
    measured = oracles.cuda_training_step(GPU_LLAMA, GPU_BATCH, GPU_SEQ)
    got = submission.activation_bytes(GPU_LLAMA, GPU_BATCH, GPU_SEQ)
    error = got / measured["activations"] - 1
    assert abs(error) <= GPU_ACTIVATION_TOLERANCE, (f"activation_bytes(~100M Llama, batch {GPU_BATCH}, seq {GPU_SEQ}) = "
                                                    f"{gb(got)}; the step's peak minus its state is "
                                                    f"{gb(measured['activations'])} ({error:+.0%})")


@pytest.mark.gpu
@pytest.mark.points(1)
@pytest.mark.concept("Decode and prefill")
@pytest.mark.timeout(300)
def test_gpu_decode_is_no_faster_than_the_bound(submission):
    """on CUDA, measured decode time per token at batch 1 is at least decode_ms_per_token's bound"""
    measured = oracles.cuda_decode_ms_per_token(GPU_LLAMA)
    bound = submission.decode_ms_per_token(oracles.param_count(GPU_LLAMA), 2, measured["mem_bandwidth"])
    assert measured["ms_per_token"] >= bound, (f"decode measured {measured['ms_per_token']:.3f} ms/token on "
                                               f"{measured['device']}, faster than your lower bound {bound!r} ms")
