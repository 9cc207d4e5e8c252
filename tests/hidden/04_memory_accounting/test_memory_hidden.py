"""Hidden suite for exercise 04 (memory and compute accounting). PYTEST_DONT_REWRITE

Oracles, all computed in the test process: AutoModelForCausalLM.from_config on the meta device
(parameter counts, the shapes of the linear layers, the KV cache Hugging Face fills, the hidden
states each decoder block receives), peft's get_peft_model (LoRA counts), the saved-tensor
measurement of oracles.py (activations with and without gradient checkpointing; its docstring
states how bytes are counted on the CPU and on the meta device), the model zoo's manifest, and on
CUDA machines torch.cuda's own memory counters and a timed decode. Hand-written numbers are only
the source map's, as named constants with the rounding the map quotes.

Inputs come from the grading's seed (draws.py: the `rng` fixture, or draws a run's tests share),
so that each submission meets other configs, sizes, ranks, targets, GPU counts, memories,
bandwidths and FLOP rates, and a module that replays earlier feedback finds nothing to replay.
Only the tests named `test_map_*` keep fixed inputs: they check the source map's figures for
Llama-3-8B on an H100, public facts that every seed's twin test checks by its own draws too.
"""
import functools
import math
from numbers import Integral, Real

import pytest

from grader.course import COURSE
from grader.session.submission import StudentError
from grader.suite.checks import shown, sibling_module
from grader.worker.loading import load_module

oracles = sibling_module(__file__, "oracles")
draws = sibling_module(__file__, "draws")

# Tolerances, each with the largest error a correct solution shows and the smallest error by which
# the nearest mutant is caught (margins.py prints the activation figures).
# Bytes are exact; only a float division (by n_gpus) may round: correct solutions differ by at
# most 1e-16, the nearest mutant (a QLoRA scale floored on a partial block) by 8 / n_params of
# the weights, more than 1e-6 on every drawn model.
EXACT = 1e-9
# An estimate derived term by term, not a replay of every saved tensor: correct solutions (the
# reference, the independent solution, the alternatives) stay within 7.7% of every measurement of
# seeds 0-9 (margins.py prints them); the nearest mutants the tolerance catches (k and v not
# repeated to every head, the probabilities' cast counted in fp32) are 34% off at every one of
# them, and on the seq_len^2 growth 0.005% against 28% (the fp32 softmax output forgotten).
ACTIVATION_TOLERANCE = 0.25
# Exact linearity in batch: correct solutions are exact (integers); the nearest mutant (RoPE
# tables counted once per forward) is off by more than 5e-6 (Llama-3-8B at 8192 tokens, the
# longest drawn).
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
GEMMA_7B = "gemma-7b"
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

def dense_configs(rng, families=("llama", "mistral", "qwen2", "gemma")):
    """Dense configs of every family, tied and untied, with and without an explicit head_dim
    (Gemma always states it), sizes, KV grouping and bias keys drawn."""
    return [draws.llama_like(rng, family, tied=tied, explicit_head_dim=explicit)
            for family in families for tied in (False, True) for explicit in (False, True)
            if not (family == "gemma" and not explicit)]


def mixture_configs(rng):
    """Mixtral configs, tied and untied, with and without an explicit head_dim, experts drawn."""
    return [draws.llama_like(rng, "mixtral", tied=tied, explicit_head_dim=explicit)
            for tied in (False, True) for explicit in (False, True) for _ in range(2)]


def gpt2_variants(rng):
    """GPT-2 configs: the defaults (tied, n_inner left out), and untied with an n_inner of its own."""
    return [draws.gpt2(rng), draws.gpt2(rng, tied=False, n_inner="set")]


# Scaled-down configs for CPU measurements: every model type, GQA and MQA, an explicit head_dim
# wider than hidden_size, biases, a vocabulary large enough for the loss to dominate (as in Gemma
# 2B at short sequences), experts wide enough for the routed tokens' MLPs to dominate, many heads
# over few KV heads so that the repeated k and v dominate, and a deep narrow model whose block
# inputs dominate the checkpointed peak. Each term of the README's table is the largest part of
# some measurement, so leaving one out misses by more than the tolerance somewhere. A grading
# measures them resized from its seed (draws.resized: sizes moved by up to 20%, the heads, KV
# heads and layers that decide which term dominates kept).
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
    # Wide residual streams with narrow heads and MLPs: the RMSNorms (two per block, one outside)
    # dominate; and experts that every token visits, whose gathered inputs and outputs dominate.
    "norms": {"model_type": "llama", "hidden_size": 256, "intermediate_size": 8, "num_hidden_layers": 3,
              "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "vocab_size": 16,
              "tie_word_embeddings": False},
    "experts": {"model_type": "mixtral", "hidden_size": 256, "intermediate_size": 8, "num_hidden_layers": 2,
                "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 16,
                "num_local_experts": 4, "num_experts_per_tok": 4, "tie_word_embeddings": False},
}
# (batch, (shortest, longest) seq_len, bytes per value): short and long sequences, bf16 and fp32
# training. The deep model needs only one; the many-heads model only short sequences, where the
# attention probabilities do not hide the projections.
SMALL_SHAPES = [(1, (16, 32), 2), (3, (48, 80), 2), (2, (160, 240), 4)]
OWN_SHAPES = {"deep": [(2, (48, 80), 4)], "heads": [(1, (16, 32), 2), (2, (12, 20), 4)]}


@functools.cache
def measured_models(seed):
    """The scaled-down configs as one run measures them: resized from its seed, shared by every
    test of the run (the CPU measurements are cached per config)."""
    return {name: draws.resized(draws.run_generator(seed, f"small {name}"), config) for name, config in SMALL.items()}


@functools.cache
def small_shapes(seed, name):
    """(batch, seq_len, bytes per value) of the measurements of one scaled-down model in one run."""
    rng = draws.run_generator(seed, f"shapes {name}")
    return [(batch, draws.integer(rng, *lengths), size) for batch, lengths, size in OWN_SHAPES.get(name, SMALL_SHAPES)]


# Full-size zoo configs on the meta device (where sizes cost no time): (name, batch range, seq_len range).
FULL_SIZE = [(LLAMA_8B, (1, 2), (2048, 6144)), ("gemma-2b", (1, 3), (512, 2048))]


@functools.cache
def full_size_shapes(seed):
    """(name, batch, seq_len) of the full-size measurements of one run."""
    rng = draws.run_generator(seed, "full size")
    return [(name, draws.integer(rng, *batches), draws.integer(rng, *lengths)) for name, batches, lengths in FULL_SIZE]


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
def test_decode_reads_every_weight_once(submission, rng):
    """decode time = weight bytes / bandwidth, for 4-bit, 8-bit, bf16 and fp32 weights"""
    for bytes_per_param in (0.5, 1, 2, 4):
        n_params, bandwidth = float(draws.integer(rng, 10 ** 8, 10 ** 11)), draws.log_uniform(rng, 0.5e12, 8e12)
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
def test_prefill_is_two_flops_per_param_per_token(submission, rng):
    """prefill time = 2 x params x tokens / peak FLOP/s, exactly"""
    for _ in range(3):
        n_params, n_tokens = float(draws.integer(rng, 10 ** 8, 10 ** 11)), draws.integer(rng, 1, 65536)
        flops = draws.log_uniform(rng, 50e12, 2500e12)
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
def test_matmul_intensity(submission, rng):
    """2mnk FLOPs over the bytes of A (m x k), B (k x n) and C (m x n)"""
    for size in (1, 2, 4) * 8:
        m, n, k = (int(draws.log_uniform(rng, 1, 8192)) for _ in range(3))
        expected = 2 * m * n * k / (size * (m * k + k * n + m * n))
        got = submission.matmul_intensity(m, n, k, size)
        assert close(got, expected), f"matmul_intensity({m}, {n}, {k}, {size}): expected {expected:.6g}, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.concept("Arithmetic intensity")
def test_bound_on_both_sides_of_the_ridge(submission, rng):
    """a batch-1 GEMV is memory-bound, a 4096-cube GEMM compute-bound, the ridge splits them and
    an intensity exactly on it is compute-bound"""
    for _ in range(3):
        # A ridge of a whole number of FLOP/byte over a whole number of GB/s: both roofs and their
        # quotient are exact in binary floating point, so that every way of comparing puts the
        # ridge itself on the ridge.
        bandwidth = draws.integer(rng, 500, 8000) * 1e9
        ridge = draws.integer(rng, 20, 1000)
        flops = ridge * bandwidth
        got = submission.ridge_point(flops, bandwidth)
        assert close(got, ridge), f"ridge_point({flops:g}, {bandwidth:g}): expected {ridge} FLOP/byte, got {got!r}"
        for intensity, expected in [(1.0, "memory"), (ridge * 0.99, "memory"), (ridge * 1.01, "compute"),
                                    (1365.0 * max(1, ridge // 300), "compute"), (float(ridge), "compute"),
                                    (ridge - 0.1, "memory")]:
            got = submission.bound(intensity, flops, bandwidth)
            assert got == expected, (f"bound({intensity:.1f} FLOP/byte, {flops:g} FLOP/s, {bandwidth:g} B/s) "
                                     f"(ridge {flops / bandwidth:.1f}): expected {expected!r}, got {got!r}")


# ---------------------------------------------------------------- keys a config may leave out

def without(config, *keys):
    return {key: value for key, value in config.items() if key not in keys}


# (what, config): keys left out or set to null, as real config.json files do.
def sparse_configs(rng):
    llama, mistral = draws.llama_like(rng, "llama", grouped=True), draws.llama_like(rng, "mistral", explicit_head_dim=False)
    return [("a Llama config without num_key_value_heads", without(llama, "num_key_value_heads")),
            ("a Llama config with num_key_value_heads: null", {**llama, "num_key_value_heads": None}),
            ("a Mistral config with head_dim: null", {**mistral, "head_dim": None}),
            ("a Mixtral config with head_dim: null",
             {**draws.llama_like(rng, "mixtral", explicit_head_dim=False), "head_dim": None}),
            ("a Gemma config without tie_word_embeddings", without(draws.llama_like(rng, "gemma"), "tie_word_embeddings")),
            ("a GPT-2 config with n_inner: null", draws.gpt2(rng, n_inner="null"))]


@pytest.mark.points(1)
@pytest.mark.concept("Units and conventions")
def test_keys_left_out_or_null(submission, rng):
    """a missing or null key means what it means to Hugging Face: parameters and KV cache of the meta model"""
    for what, config in sparse_configs(rng):
        expected, got = oracles.param_count(config), submission.param_count(config)
        assert got == expected, f"param_count({what}): expected {expected:,}, got {number(got)} ({difference(got, expected)})"
        batch, seq_len = draws.integer(rng, 1, 4), draws.integer(rng, 1, 12)
        expected, got = oracles.kv_cache_bytes(config, batch, seq_len), submission.kv_cache_bytes(config, batch, seq_len)
        assert got == expected, (f"kv_cache_bytes({what}, batch={batch}, seq_len={seq_len}): expected {expected:,}, "
                                 f"got {number(got)}")


# (what, config): bias keys on every model type; only llama's and gemma's code reads attention_bias,
# only llama's mlp_bias.
def bias_key_configs(rng):
    return [(f"a {name} config with attention_bias: {str(attention).lower()} and mlp_bias: true",
             draws.llama_like(rng, family, attention_bias=attention, mlp_bias=True))
            for name, family, attention in [("Mistral", "mistral", True), ("Mixtral", "mixtral", True),
                                            ("Qwen2", "qwen2", False), ("Gemma", "gemma", True),
                                            ("Llama", "llama", True)]]


@pytest.mark.points(1)
@pytest.mark.concept("Units and conventions")
def test_bias_keys_count_where_the_model_type_reads_them(submission, rng):
    """attention_bias and mlp_bias add biases only in the model types whose code reads them"""
    for what, config in bias_key_configs(rng):
        expected, got = oracles.param_count(config), submission.param_count(config)
        assert got == expected, f"param_count({what}): expected {expected:,}, got {number(got)} ({difference(got, expected)})"


# ---------------------------------------------------------------- parameters

ZOO_NAMES = sorted(oracles.zoo_param_counts()) or ["model zoo not built"]


@pytest.mark.points(0.5)
@pytest.mark.concept("Parameters from a config")
@pytest.mark.parametrize("name", ZOO_NAMES)
def test_zoo_parameter_counts(submission, rng, name):
    """param_count of a model-zoo config equals the manifest's count and the meta-device model's, and so
    does that of a config derived from it (its structure kept, its sizes drawn)"""
    counts = oracles.zoo_param_counts()
    assert name in counts, "datasets/MANIFEST.json has no facts.param_counts: the course data is not built"
    config = zoo(name)
    expected = oracles.param_count(config)
    assert counts[name] == expected, (f"course data problem, not yours: the manifest says {counts[name]:,} "
                                      f"parameters for {name}, from_config builds {expected:,}")
    got = submission.param_count(config)
    assert got == expected, \
        f"param_count({name}.json): expected {expected:,}, got {number(got)} (difference {difference(got, expected)})"
    config = draws.derived(rng, name)
    expected, got = oracles.param_count(config), submission.param_count(config)
    assert got == expected, (f"param_count({describe(config)}, derived from {name}.json): expected {expected:,}, "
                             f"got {number(got)} (difference {difference(got, expected)})")


def assert_param_counts(submission, configs):
    """param_count of each config against from_config on the meta device: the same integer (an exact
    count is an int, not a float that happens to hold one: hidden_size / heads is not a head_dim)."""
    for config in configs:
        got = submission.param_count(config)
        expected = oracles.param_count(config)
        assert got == expected, \
            f"param_count({describe(config)}): expected {expected:,}, got {number(got)} ({difference(got, expected)})"
        assert isinstance(got, Integral), \
            f"param_count({describe(config)}): expected the integer {expected:,}, got {got!r} ({type(got).__name__})"


@pytest.mark.points(3)
@pytest.mark.concept("Parameters from a config")
def test_parameter_counts_of_drawn_dense_configs(submission, rng):
    """param_count matches from_config on the meta device: GQA, explicit head_dim, biases, tying"""
    assert_param_counts(submission, dense_configs(rng))


@pytest.mark.points(2)
@pytest.mark.concept("Parameters from a config")
def test_parameter_counts_of_drawn_mixture_of_experts(submission, rng):
    """param_count of Mixtral-shaped configs counts every expert and the router"""
    assert_param_counts(submission, mixture_configs(rng))


@pytest.mark.points(1)
@pytest.mark.concept("Parameters from a config")
def test_parameter_counts_of_gpt2_variants(submission, rng):
    """gpt2: learned positions, LayerNorm weights and biases, Conv1D biases, n_inner, tying"""
    assert_param_counts(submission, gpt2_variants(rng))


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
def test_lora_all_linear_matches_the_linear_layers(submission, rng):
    """LoRA on "all-linear": r x (in + out) for every linear map in the decoder blocks of the meta model"""
    for family in draws.LLAMA_LIKE * 2:
        config, r = draws.llama_like(rng, family), draws.choice(rng, draws.RANKS)
        got = submission.lora_param_count(config, r)
        expected = oracles.lora_count(config, r)
        assert got == expected, f"lora_param_count({describe(config)}, r={r}): expected {expected:,}, got {number(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("LoRA parameters")
def test_lora_named_targets(submission, rng):
    """a list of module names adapts exactly the linear layers of those names in every block; gpt2's Conv1D layers"""
    for family in draws.LLAMA_LIKE + ("mixtral",):
        config = draws.llama_like(rng, family, layers=(2, 4))           # names count in every block, not one
        targets, r = draws.some_names(rng, config), draws.choice(rng, draws.RANKS)
        expected = oracles.lora_count(config, r, targets)
        got = submission.lora_param_count(config, r, targets)
        assert got == expected, \
            f"lora_param_count({describe(config)}, r={r}, {targets}): expected {expected:,}, got {number(got)}"
    for family in ("llama", "mixtral"):            # every name of the model type's row, alone
        config, r = draws.llama_like(rng, family, layers=(2, 4)), draws.choice(rng, draws.RANKS)
        for targets in ([name] for name in draws.names_of(config)):
            expected = oracles.lora_count(config, r, targets)
            got = submission.lora_param_count(config, r, targets)
            assert got == expected, \
                f"lora_param_count({describe(config)}, r={r}, {targets}): expected {expected:,}, got {number(got)}"
    config, r = draws.gpt2(rng, layers=(2, 4)), draws.choice(rng, draws.RANKS)
    for targets in ("all-linear", ["c_attn"], ["c_proj"], ["c_fc", "c_proj"]):   # gpt2's two c_proj share a name
        expected = oracles.lora_count(config, r, targets)
        got = submission.lora_param_count(config, r, targets)
        assert got == expected, \
            f"lora_param_count({describe(config)}, r={r}, {targets!r}): expected {expected:,}, got {number(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("LoRA parameters")
def test_lora_counts_match_peft(submission, rng):
    """the counts of peft.get_peft_model on the meta model, and Llama-3-8B's all-linear adapters"""
    for family, targets in [("llama", "all-linear"), ("qwen2", None)]:
        config, r = draws.llama_like(rng, family), draws.choice(rng, draws.RANKS)
        targets = targets or draws.some_names(rng, config)
        expected = oracles.peft_lora_count(config, r, targets)
        got = submission.lora_param_count(config, r, targets)
        assert got == expected, \
            f"lora_param_count({describe(config)}, r={r}, {targets!r}): peft trains {expected:,}, got {number(got)}"
    r = draws.choice(rng, draws.RANKS)
    expected = oracles.lora_count(zoo(LLAMA_8B), r)
    got = submission.lora_param_count(zoo(LLAMA_8B), r)
    assert got == expected, f"lora_param_count(Llama-3-8B, r={r}): expected {expected:,}, got {number(got)}"


# (model type, targets): names the model type's blocks do not have, and a bare string.
BAD_TARGETS = [("llama", ["q_proj", "lm_head"]), ("mixtral", ["gate_proj"]), ("qwen2", ["w1", "w2"]),
               ("gemma", ["c_attn"]), ("llama", "q_proj")]


@pytest.mark.points(1)
@pytest.mark.concept("LoRA parameters")
def test_lora_names_a_model_lacks_raise(submission, rng):
    """a target name the model type's blocks do not have, or a string other than "all-linear", raises ValueError"""
    for family, targets in BAD_TARGETS:
        config, r = draws.llama_like(rng, family), draws.choice(rng, draws.RANKS)
        got = raised(submission.lora_param_count, config, r, targets)
        assert got == "ValueError", (f"lora_param_count({family} config, r={r}, {targets!r}): expected ValueError, "
                                     + ("got a count" if got is None else f"got {got}"))


# ---------------------------------------------------------------- training state

STATE_KEYS = {"weights", "grads", "master_weights", "optimizer", "lora", "total"}


def state_of(submission, config, **kwargs):
    state = submission.training_memory(config, **kwargs)
    assert isinstance(state, dict) and set(state) == STATE_KEYS, \
        f"training_memory must return a dict with keys {sorted(STATE_KEYS)}, got {shown(state, 200)}"
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
def test_full_fine_tuning_is_16_bytes_per_parameter(submission, rng, name):
    """full: bf16 weights 2 + bf16 grads 2 + fp32 master 4 + AdamW moments 8 bytes per parameter"""
    config = draws.derived(rng, name)
    n = oracles.param_count(config)
    check_state(state_of(submission, config), {key: b * n for key, b in FULL_BYTES.items()},
                f"training_memory({describe(config)} derived from {name}, 'full')")


@pytest.mark.points(1)
@pytest.mark.concept("Training state memory")
def test_map_full_fine_tune_is_128_5_gb(submission):
    """full fine-tuning of Llama-3-8B needs 128.5 GB of state"""
    total = state_of(submission, zoo(LLAMA_8B))["total"]
    assert round(total / 1e9, 1) == MAP_FULL_FINE_TUNE_GB, \
        f"training_memory(Llama-3-8B)['total'] = {gb(total)}; the map says {MAP_FULL_FINE_TUNE_GB} GB (1 GB = 1e9 bytes)"


@pytest.mark.points(1)
@pytest.mark.concept("Training state memory")
def test_training_memory_refuses_an_unknown_method(submission, rng):
    """training_memory knows full, lora and qlora; any other method raises ValueError"""
    for method in ("inference", "ddp", "LoRA"):
        got = raised(submission.training_memory, draws.llama_like(rng, "llama"), method)
        assert got == "ValueError", (f"training_memory(llama config, {method!r}): expected ValueError, "
                                     + ("got a result" if got is None else f"got {got}"))


# ---------------------------------------------------------------- LoRA and QLoRA memory

@pytest.mark.points(2)
@pytest.mark.concept("LoRA and QLoRA memory")
@pytest.mark.parametrize("name,targets", [(LLAMA_8B, "all-linear"), ("qwen2.5-7b", "named"),
                                          ("mixtral-8x7b", "all-linear")])
def test_lora_state(submission, rng, name, targets):
    """lora: a frozen bf16 base (2 bytes/param) plus 16 bytes per LoRA parameter, nothing else"""
    config, r = draws.derived(rng, name), draws.choice(rng, draws.RANKS)
    targets = draws.some_names(rng, config) if targets == "named" else targets
    n = oracles.param_count(config)
    state = state_of(submission, config, method="lora", lora_r=r, lora_targets=targets)
    check_state(state, {"weights": 2 * n, "lora": 16 * oracles.lora_count(config, r, targets)},
                f"training_memory({describe(config)} derived from {name}, 'lora', lora_r={r}, lora_targets={targets!r})")


@pytest.mark.points(2)
@pytest.mark.concept("LoRA and QLoRA memory")
@pytest.mark.parametrize("name", [LLAMA_8B, "gemma-7b", "gpt2"])
def test_qlora_state(submission, rng, name):
    """qlora: 0.5 byte/param plus one fp32 absmax per 64-parameter block, plus the adapters"""
    config = draws.derived(rng, name)
    n = oracles.param_count(config)
    state = state_of(submission, config, method="qlora")
    check_state(state, {"weights": n / 2 + 4 * math.ceil(n / 64), "lora": 16 * oracles.lora_count(config, 16)},
                f"training_memory({describe(config)} derived from {name}, 'qlora')")


@pytest.mark.points(1)
@pytest.mark.concept("LoRA and QLoRA memory")
def test_qlora_scales_a_partial_block(submission, rng):
    """qlora on models whose size is not a multiple of 64: the last, partial block has a scale too"""
    for draw in (lambda: draws.llama_like(rng, "qwen2"), lambda: draws.gpt2(rng, tied=False, n_inner="set")):
        config = next(c for c in (draw() for _ in range(100)) if oracles.param_count(c) % 64)
        n, r = oracles.param_count(config), draws.choice(rng, draws.RANKS)
        state = state_of(submission, config, method="qlora", lora_r=r)
        check_state(state, {"weights": n / 2 + 4 * math.ceil(n / 64), "lora": 16 * oracles.lora_count(config, r)},
                    f"training_memory({describe(config)} ({n:,} parameters), 'qlora', lora_r={r})")


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
@pytest.mark.parametrize("method,gpus", [("full", "a power of two"), ("full", "any count"), ("lora", "any count"),
                                         ("qlora", "any count")])
def test_fsdp_shards_every_block(submission, rng, method, gpus):
    """with n_gpus > 1 each GPU holds 1 / n_gpus of every block"""
    config = draws.derived(rng, "llama-3.2-1b")
    n_gpus = draws.choice(rng, (2, 4, 8, 16)) if gpus == "a power of two" else draws.integer(rng, 2, 24)
    n, adapters = oracles.param_count(config), oracles.lora_count(config, 16)
    whole = {"full": {key: b * n for key, b in FULL_BYTES.items()},
             "lora": {"weights": 2 * n, "lora": 16 * adapters},
             "qlora": {"weights": n / 2 + 4 * math.ceil(n / 64), "lora": 16 * adapters}}[method]
    state = state_of(submission, config, method=method, n_gpus=n_gpus)
    check_state(state, {key: size / n_gpus for key, size in whole.items()},
                f"training_memory({describe(config)} derived from Llama-3.2-1B, {method!r}, n_gpus={n_gpus})")


@pytest.mark.points(1)
@pytest.mark.concept("Sharding with FSDP")
def test_map_fsdp_over_8_gpus_is_16_06_gb(submission):
    """full fine-tuning of Llama-3-8B with FSDP over 8 GPUs: 16.06 GB of state per GPU"""
    total = state_of(submission, zoo(LLAMA_8B), n_gpus=8)["total"]
    assert round(total / 1e9, 2) == MAP_FSDP_8_GPUS_GB, f"per-GPU total {gb(total)}; the map says {MAP_FSDP_8_GPUS_GB} GB"


# ---------------------------------------------------------------- KV cache

# Caches that differ in kind: MQA with a wide head_dim (as gemma-2b's 256), GQA (llama, qwen2,
# mixtral), MHA with heads x head_dim != hidden_size (gemma), plain MHA (mistral), gpt2's n_head;
# bf16 and fp32. (Mixtral stays in bf16: its fused experts' grouped matmul runs in bf16 only.)
def cache_cases(rng):
    def shape():
        return draws.integer(rng, 1, 4), draws.integer(rng, 1, 48)

    mqa = {**draws.derived(rng, "gemma-2b"), "num_attention_heads": draws.integer(rng, 2, 8), "num_key_value_heads": 1,
           "head_dim": draws.choice(rng, (64, 128, 256))}
    configs = [(mqa, 2), (draws.llama_like(rng, "mixtral", grouped=True), 2), (draws.gpt2(rng), 2),
               (draws.llama_like(rng, "llama", grouped=True), 4), (draws.llama_like(rng, "gemma"), 4),
               (draws.llama_like(rng, "qwen2", grouped=True), 4), (draws.llama_like(rng, "mistral", grouped=False), 4),
               (draws.gpt2(rng, tied=False, n_inner="set"), 4)]
    return [(config, *shape(), size) for config, size in configs]


@pytest.mark.points(2)
@pytest.mark.concept("KV cache")
def test_kv_cache_matches_the_cache_hugging_face_fills(submission, rng):
    """kv_cache_bytes equals the keys and values a prefill leaves in Hugging Face's cache"""
    for config, batch, seq_len, size in cache_cases(rng):
        expected = oracles.kv_cache_bytes(config, batch, seq_len, size)
        got = submission.kv_cache_bytes(config, batch, seq_len, size)
        assert got == expected, (f"kv_cache_bytes({describe(config)}, batch={batch}, seq_len={seq_len}, "
                                 f"bytes_per_value={size}): expected {expected:,}, got {number(got)}")


@pytest.mark.points(1)
@pytest.mark.concept("KV cache")
def test_kv_cache_of_a_long_context(submission, rng):
    """Llama-3-8B keeps 128 KiB per token (64 sequences of 8192 tokens need 68.7 GB), whatever the batch and
    length; Mistral-7B's 4096-token sliding window does not cap the count"""
    for name, batches in [(LLAMA_8B, (1, 128)), ("mistral-7b", (1, 8))]:
        window = zoo(name).get("sliding_window") or 0
        batch, seq_len = draws.integer(rng, *batches), draws.integer(rng, window + 1, 32768)
        expected = batch * seq_len * oracles.kv_cache_bytes(zoo(name), 1, 1)   # every token caches the same bytes
        got = submission.kv_cache_bytes(zoo(name), batch, seq_len)
        assert got == expected, (f"kv_cache_bytes({name}, batch={batch}, seq_len={seq_len}): expected {gb(expected)}, "
                                 f"got {number(got)}")


# ---------------------------------------------------------------- fits and OOM diagnosis

FITS_SEQ_LEN = 2048          # fits' and oom_culprit's default seq_len (the README's signature)


def setup(name=LLAMA_8B, method="full", seq_len=4096, **kwargs):
    return {"config": zoo(name), "method": method, "seq_len": seq_len, **kwargs}


# (setup, gpu memory in bytes, expected): Llama-3-8B at seq 4096, the README's table. Each verdict
# holds with a margin wider than the activation tolerance (checked against the measurement, so no
# estimate within the tolerance can flip it); a grading asks about a memory drawn between the
# case's own and that limit (drawn_memory).
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


def drawn_memory(rng, memory, limit):
    """A GPU memory drawn between a case's own and its limit (its need plus or minus the activation
    tolerance), whole bytes: an answer that the case's own memory proves wrong stays wrong
    anywhere between, and a correct one stays right."""
    return round(memory + rng.uniform(0, 0.9) * (limit - memory))


@pytest.mark.points(2)
@pytest.mark.concept("Does it fit?")
def test_fits(submission, rng):
    """full, LoRA, QLoRA, FSDP and inference setups that fit or do not, by a clear margin"""
    for case, own_memory, expected in fits_cases():
        total, activations = measured_total(case)
        margin = ACTIVATION_TOLERANCE * activations
        limit = total + margin if expected else total - margin
        assert (limit <= own_memory) if expected else (limit > own_memory), \
            "course problem, not yours: a fits case lies within the activation tolerance of the limit"
        memory = drawn_memory(rng, own_memory, limit)
        args = {k: v for k, v in case.items() if k not in ("config", "method")}
        got = submission.fits(case["config"], case["method"], memory, **args)
        what = ", ".join(f"{k}={v}" for k, v in args.items())
        assert got is expected, (f"fits({case['config']['model_type']} {oracles.param_count(case['config']) / 1e9:.1f}B, "
                                 f"{case['method']!r}, {memory / 1e9:.3f} GB, {what}): the setup needs about "
                                 f"{total / 1e9:.1f} GB per GPU, so expected {expected}, got {got!r}")


@pytest.mark.points(1)
@pytest.mark.concept("Does it fit?")
def test_fits_at_the_limit(submission, rng):
    """a setup that needs exactly gpu_memory fits, one byte less does not: inference setups (fits'
    defaults too: one GPU, batch 1, 2048 tokens), and training setups whose activations are your
    own activation_bytes, as the contract adds them"""
    config, batch, seq_len = zoo(LLAMA_8B), draws.integer(rng, 1, 64), draws.integer(rng, 1, 8192)
    per_token = oracles.kv_cache_bytes(config, 1, 1)
    for n_gpus in (1, draws.choice(rng, (2, 4, 8))):
        need = (2 * oracles.param_count(config) + batch * seq_len * per_token) / n_gpus
        assert need == int(need), "course problem, not yours: the limit must be a whole number of bytes"
        for memory, expected in [(need, True), (need - 1, False)]:
            got = submission.fits(config, "inference", memory, n_gpus=n_gpus, batch=batch, seq_len=seq_len)
            assert got is expected, (f"fits(Llama-3-8B, 'inference', {memory:,.0f} bytes, n_gpus={n_gpus}, batch={batch}, "
                                     f"seq_len={seq_len}): the setup needs {need:,.0f} bytes per GPU, so expected "
                                     f"{expected}, got {got!r}")
    need = 2 * oracles.param_count(config) + FITS_SEQ_LEN * per_token
    for memory, expected in [(need, True), (need - 1, False)]:
        got = submission.fits(config, "inference", memory)
        assert got is expected, (f"fits(Llama-3-8B, 'inference', {memory:,.0f} bytes) with fits' defaults (n_gpus=1, "
                                 f"batch=1, seq_len={FITS_SEQ_LEN}) needs {need:,.0f} bytes, so expected {expected}, "
                                 f"got {got!r}")
    n, adapters = oracles.param_count(config), oracles.lora_count(config, 16)
    states = {"full": 16 * n, "lora": 2 * n + 16 * adapters, "qlora": n / 2 + 4 * math.ceil(n / 64) + 16 * adapters}
    for method, state in states.items():
        batch, seq_len, checkpointing = draws.integer(rng, 1, 2), draws.integer(rng, 128, 4096), bool(rng.random() < 0.5)
        activations = submission.activation_bytes(config, batch, seq_len, checkpointing=checkpointing)
        assert isinstance(activations, Real), f"activation_bytes(Llama-3-8B, {batch}, {seq_len}) returned {activations!r}"
        need = state + activations
        for memory, expected in [(need, True), (need - 1, False)]:
            got = submission.fits(config, method, memory, batch=batch, seq_len=seq_len, checkpointing=checkpointing)
            assert got is expected, (f"fits(Llama-3-8B, {method!r}, {memory:,.0f} bytes, batch={batch}, seq_len={seq_len}, "
                                     f"checkpointing={checkpointing}): {state:,.0f} bytes of state + your "
                                     f"activation_bytes {activations:,} = {need:,.0f} bytes, so expected {expected}, "
                                     f"got {got!r}")


# (before, after, the block that grew most, story): the map's diagnoses, their lengths, batches and
# GPU counts drawn in ranges where the story holds (oom_story_holds checks it).
def oom_cases(rng):
    def lengths(low, high, longest):
        first = draws.integer(rng, low, high)
        return first, draws.integer(rng, 2 * first, longest)

    s1, s2 = lengths(512, 2048, 8192)
    i1, i2 = lengths(1024, 8192, 65536)
    b1, b2 = lengths(1, 4, 128)
    c1, c2 = lengths(512, 2048, 4096)            # checkpointed: the 8B model's peak stays under 10 GB
    g1 = draws.choice(rng, (4, 8, 16))
    g2 = draws.choice(rng, [g for g in (1, 2, 4, 8) if g < g1])
    seq, short = draws.integer(rng, 512, 8192), draws.integer(rng, 256, 1024)
    return [
        (setup(seq_len=s1), setup(seq_len=s2), "activations", "same model and batch, longer sequences"),
        (setup(method="inference", seq_len=i1), setup(method="inference", seq_len=i2), "kv_cache",
         "serving longer contexts"),
        (setup(method="inference", batch=b1), setup(method="inference", batch=b2), "kv_cache", "serving a bigger batch"),
        (setup(optimizer="sgd", seq_len=seq), setup(optimizer="adamw", seq_len=seq), "optimizer", "SGD replaced by AdamW"),
        (setup(method="lora", optimizer="adamw_8bit", seq_len=seq), setup(method="lora", seq_len=seq), "optimizer",
         "8-bit AdamW replaced by AdamW"),
        (setup(seq_len=c1, checkpointing=True), setup(method="lora", seq_len=c2, checkpointing=True), "activations",
         "LoRA added and still OOM: the activations"),
        (setup(method="lora", seq_len=seq, checkpointing=True), setup(seq_len=seq, checkpointing=True), "optimizer",
         "LoRA replaced by full fine-tuning"),
        (setup(method="qlora", seq_len=seq, checkpointing=True), setup(method="lora", seq_len=seq, checkpointing=True),
         "weights", "4-bit base replaced by bf16"),
        (setup(n_gpus=g1, seq_len=seq, checkpointing=True), setup(n_gpus=g2, seq_len=seq, checkpointing=True),
         "optimizer", "fewer GPUs to shard over"),
        (setup(batch=b1, seq_len=short, checkpointing=True), setup(batch=b2, seq_len=short), "activations",
         "bigger batch, checkpointing off"),
        (setup("llama-3.2-1b", seq_len=c2, checkpointing=True), setup(seq_len=c2, checkpointing=True), "optimizer",
         "1B model replaced by 8B"),
        (setup("llama-3.2-1b", optimizer="sgd", seq_len=c2, checkpointing=True),
         setup(optimizer="sgd", seq_len=c2, checkpointing=True), "optimizer",
         "1B model replaced by 8B, plain SGD: the fp32 master copy grows most"),
        (setup(n_gpus=g2, seq_len=seq, checkpointing=True), setup(n_gpus=g1, seq_len=seq, checkpointing=True),
         "activations", "more GPUs: the sharded blocks shrank, the activations and the (empty) cache did not"),
        (setup(method="lora", seq_len=seq), setup(method="lora", seq_len=seq), "weights", "nothing changed"),
        ({"config": zoo(LLAMA_8B), "method": "lora", "n_gpus": 1, "batch": 1, "seq_len": FITS_SEQ_LEN},
         {"config": zoo(LLAMA_8B), "method": "lora", "checkpointing": False}, "weights",
         "nothing changed: fits' defaults written out, then left out"),
        (setup(method="inference", n_gpus=2, batch=b1, seq_len=s1), setup(method="inference", batch=b1, seq_len=s1),
         "weights", "serving on one GPU instead of two: the weights' half grows more than the cache's"),
        # Fewer GPUs and another optimizer, Gemma 7B (a parameter count that 3 and 8 divide, so that every
        # per-GPU block is a whole number of bytes): each moment byte of the table decides the answer.
        (setup(GEMMA_7B, n_gpus=4, seq_len=seq, checkpointing=True),
         setup(GEMMA_7B, optimizer="sgd", seq_len=seq, checkpointing=True), "weights",
         "AdamW over 4 GPUs replaced by SGD on one: the weights grow more than the master copy alone"),
        (setup(GEMMA_7B, optimizer="sgd_momentum", n_gpus=4, seq_len=seq, checkpointing=True),
         setup(GEMMA_7B, optimizer="adamw_8bit", n_gpus=3, seq_len=seq, checkpointing=True), "weights",
         "SGD with momentum over 4 GPUs replaced by 8-bit AdamW over 3: the same optimizer bytes per GPU"),
        (setup(GEMMA_7B, n_gpus=3, seq_len=seq, checkpointing=True),
         setup(GEMMA_7B, optimizer="sgd_momentum", n_gpus=2, seq_len=seq, checkpointing=True), "weights",
         "AdamW over 3 GPUs replaced by SGD with momentum over 2: the same optimizer bytes per GPU"),
        (setup(GEMMA_7B, n_gpus=8, seq_len=seq, checkpointing=True),
         setup(GEMMA_7B, optimizer="adamw_8bit", n_gpus=3, seq_len=seq, checkpointing=True), "optimizer",
         "AdamW over 8 GPUs replaced by 8-bit AdamW over 3: the optimizer block still grows most"),
    ]


OOM_ORDER = ("weights", "grads", "optimizer", "activations", "kv_cache")
# The README's optimizer-state bytes, read where the course declares them (the stub learners
# start from), never restated here.
MOMENT_BYTES = load_module(COURSE.exercises / "04_memory_accounting" / "memory.py").OPTIMIZER_STATE_BYTES


def trusted_blocks(case):
    """The per-GPU bytes of a setup's blocks but the activations, from the oracles and the README's
    conventions (LoRA r = 16 on all linear layers, its adapters' 16 bytes split 2 + 2 + 12)."""
    config, method, n_gpus = case["config"], case["method"], case.get("n_gpus", 1)
    n = oracles.param_count(config)
    if method == "inference":
        kv = case.get("batch", 1) * case.get("seq_len", FITS_SEQ_LEN) * oracles.kv_cache_bytes(config, 1, 1)
        return {"weights": 2 * n / n_gpus, "grads": 0, "optimizer": 0, "kv_cache": kv / n_gpus}
    adapters = 0 if method == "full" else oracles.lora_count(config, 16)
    base = {"full": 2 * n, "lora": 2 * n, "qlora": n / 2 + 4 * math.ceil(n / 64)}[method]
    trained = n if method == "full" else adapters
    return {"weights": (base + 2 * adapters) / n_gpus, "grads": 2 * trained / n_gpus,
            "optimizer": (4 + MOMENT_BYTES[case.get("optimizer", "adamw")]) * trained / n_gpus, "kv_cache": 0}


def activation_args(case):
    if case["method"] == "inference":
        return None
    return case["config"], case.get("batch", 1), case.get("seq_len", FITS_SEQ_LEN), case.get("checkpointing", False)


def oom_story_holds(before, after, expected):
    """Whether every correct solution names `expected`: its growth beats every other block's for any
    activation estimate within the tolerance of the measurement (equal growths only where both are
    exact and `expected` comes first). The activations are measured only where another block
    changes too; where they alone differ the stories grow them past (1 + tol) / (1 - tol)."""
    old, new = trusted_blocks(before), trusted_blocks(after)
    growth = {block: (new[block] - old[block],) * 2 for block in old}
    if activation_args(before) == activation_args(after):
        growth["activations"] = (0.0, 0.0)
    elif any(new[block] != old[block] for block in old):
        a1, a2 = (0 if case["method"] == "inference" else
                  oracles.saved_bytes(case["config"], case.get("batch", 1), case.get("seq_len", FITS_SEQ_LEN), device="meta",
                                      checkpointing=case.get("checkpointing", False)) for case in (before, after))
        low, high = 1 - ACTIVATION_TOLERANCE, 1 + ACTIVATION_TOLERANCE
        growth["activations"] = (low * a2 - high * a1, high * a2 - low * a1)
    else:
        return expected == "activations"
    low = growth[expected][0]
    for block, (other_low, other_high) in growth.items():
        ties_to_expected = (OOM_ORDER.index(expected) < OOM_ORDER.index(block) and low == other_high
                            and growth[expected][0] == growth[expected][1] and other_low == other_high)
        if block != expected and not (low > other_high or ties_to_expected):
            return False
    return True


@pytest.mark.points(2)
@pytest.mark.concept("Which block did the OOM land in?")
def test_oom_culprit(submission, rng):
    """the block that grew most between two setups: the map's OOM diagnoses"""
    for before, after, expected, story in oom_cases(rng):
        assert oom_story_holds(before, after, expected), \
            f"course problem, not yours: the story '{story}' does not hold for every estimate within the tolerance"
        got = submission.oom_culprit(before, after)
        what = ", ".join(f"{k} {before.get(k)} -> {after.get(k)}" for k in ("seq_len", "batch", "n_gpus")
                         if before.get(k) is not None or after.get(k) is not None)
        assert got == expected, f"oom_culprit for '{story}' ({what}): expected {expected!r}, got {got!r}"


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
def test_residual_stream_is_one_block_input_per_layer(submission, rng):
    """residual_stream_bytes equals the hidden states every decoder block receives"""
    for config, batch, seq_len, size in cache_cases(rng):
        expected = oracles.residual_bytes(config, batch, seq_len, size)
        got = submission.residual_stream_bytes(config, batch, seq_len, size)
        assert got == expected, (f"residual_stream_bytes({describe(config)}, batch={batch}, seq_len={seq_len}, "
                                 f"bytes_per_value={size}): expected {expected:,}, got {number(got)}")


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_activations_are_linear_in_batch(submission, rng):
    """activation_bytes(batch=k) is exactly k x activation_bytes(batch=1)"""
    for config, lengths in [(zoo(LLAMA_8B), (1024, 8192)), (draws.llama_like(rng, "mixtral"), (16, 400)),
                            (zoo("gemma-2b"), (100, 2048))]:
        seq_len, k = draws.integer(rng, *lengths), draws.integer(rng, 2, 9)
        one, many = (submission.activation_bytes(config, batch, seq_len) for batch in (1, k))
        assert close(many, k * one, LINEAR), (f"activation_bytes({config['model_type']}, seq_len={seq_len}): batch 1 gives "
                                             f"{one!r}, batch {k} gives {many!r}, not {k} times as much")


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_gpt2_activations_are_refused(submission, rng):
    """activation_bytes, and fits and oom_culprit for training, raise ValueError for gpt2; inference is fine"""
    gpt2 = draws.derived(rng, "gpt2")
    short, long = draws.integer(rng, 16, 512), draws.integer(rng, 1024, 4096)
    memory = draws.integer(rng, 8, 80) * 1e9
    for what, function, args in [
            (f"activation_bytes(gpt2, 1, {short})", submission.activation_bytes, (gpt2, 1, short)),
            (f"fits(gpt2, 'full', {memory / 1e9:g} GB)", submission.fits, (gpt2, "full", memory)),
            (f"oom_culprit(gpt2 LoRA at seq {short} -> {long})", submission.oom_culprit,
             ({"config": gpt2, "method": "lora", "seq_len": short}, {"config": gpt2, "method": "lora", "seq_len": long}))]:
        got = raised(function, *args)
        assert got == "ValueError", f"{what}: expected ValueError, " + ("got a result" if got is None else f"got {got}")
    need = 2 * oracles.param_count(gpt2) + 2048 * oracles.kv_cache_bytes(gpt2, 1, 1)     # fits' default batch and seq_len
    assert need < memory, "course problem, not yours: the gpt2 inference setup must fit"
    got = submission.fits(gpt2, "inference", memory)
    assert got is True, (f"fits(gpt2, 'inference', {memory / 1e9:g} GB): {need / 1e9:.4f} GB of weights and cache "
                         f"fit, got {got!r}")


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
def test_activations_match_a_measurement(submission, seed, name):
    """activation_bytes within 25% of the bytes autograd saves in a CPU forward, bf16 and fp32"""
    config = measured_models(seed)[name]
    by_storage, by_base = oracles.saved_bytes_both_rules(config, 2, 16)
    assert by_storage == by_base, "course problem, not yours: the meta-device counting rule disagrees with storages"
    for batch, seq_len, size in small_shapes(seed, name):
        measured = oracles.saved_bytes(config, batch, seq_len, bytes_per_value=size)
        got = submission.activation_bytes(config, batch, seq_len, bytes_per_value=size)
        check_activations(got, measured, f"activation_bytes({describe(config)}, batch={batch}, seq_len={seq_len}, "
                                         f"bytes_per_value={size})")


@pytest.mark.points(2)
@pytest.mark.concept("Activations")
@pytest.mark.timeout(120)
def test_activations_of_full_size_models(submission, seed):
    """activation_bytes within 25% of the meta-device measurement of full-size zoo models"""
    for name, batch, seq_len in full_size_shapes(seed):
        measured = oracles.saved_bytes(zoo(name), batch, seq_len, device="meta")
        got = submission.activation_bytes(zoo(name), batch, seq_len)
        check_activations(got, measured, f"activation_bytes({name}, batch={batch}, seq_len={seq_len})")


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_activations_grow_with_the_square_of_the_sequence(submission, seed, rng):
    """Llama-3-8B activations grow faster than the sequence (x9.5 from 1024 to 4096 tokens): eager attention keeps seq^2 scores"""
    config = zoo(LLAMA_8B)
    _, batch, longer = full_size_shapes(seed)[0]            # measured once per run for the test above
    lengths = (draws.integer(rng, 512, longer // 4), longer)
    measured = [oracles.saved_bytes(config, batch, seq_len, device="meta") for seq_len in lengths]
    got = [submission.activation_bytes(config, batch, seq_len) for seq_len in lengths]
    growth, expected = got[1] / got[0], measured[1] / measured[0]
    assert abs(growth / expected - 1) <= ACTIVATION_TOLERANCE, (
        f"activation_bytes(Llama-3-8B, batch {batch}) grows x{growth:.2f} from seq_len {lengths[0]} to {lengths[1]}; "
        f"measured x{expected:.2f}")


# ---------------------------------------------------------------- gradient checkpointing

@pytest.mark.points(1)
@pytest.mark.concept("Gradient checkpointing")
def test_checkpointing_is_linear_in_batch(submission, rng):
    """the checkpointed peak of batch k is exactly k x that of batch 1"""
    for config, lengths in [(zoo(LLAMA_8B), (512, 8192)), (draws.llama_like(rng, "mistral", layers=(8, 16)), (16, 100))]:
        seq_len, k = draws.integer(rng, *lengths), draws.integer(rng, 2, 9)
        one, many = (submission.activation_bytes(config, batch, seq_len, checkpointing=True) for batch in (1, k))
        assert close(many, k * one, LINEAR), (f"activation_bytes({config['model_type']}, seq_len={seq_len}, "
                                             f"checkpointing=True): batch 1 gives {one!r}, batch {k} gives {many!r}")


@pytest.mark.points(2)
@pytest.mark.concept("Gradient checkpointing")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_checkpointing_matches_a_measurement(submission, seed, name):
    """checkpointed peak within 25%: saved block inputs, what lies outside the blocks, one block recomputed"""
    config = measured_models(seed)[name]
    for batch, seq_len, size in small_shapes(seed, name):
        measured = oracles.saved_bytes(config, batch, seq_len, bytes_per_value=size, checkpointing=True)
        got = submission.activation_bytes(config, batch, seq_len, checkpointing=True, bytes_per_value=size)
        check_activations(got, measured, f"activation_bytes({describe(config)}, batch={batch}, seq_len={seq_len}, "
                                         f"bytes_per_value={size}, checkpointing=True)", CHECKPOINTED_PEAK)


@pytest.mark.points(2)
@pytest.mark.concept("Gradient checkpointing")
@pytest.mark.timeout(120)
def test_checkpointing_of_full_size_models(submission, seed):
    """checkpointed peak of full-size zoo models within 25% of the meta-device measurement"""
    for name, batch, seq_len in full_size_shapes(seed):
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
