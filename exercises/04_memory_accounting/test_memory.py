"""Visible tests for exercise 04. Run: pytest exercises/04_memory_accounting

They check the basics quickly, mostly on Llama 3 8B; the graded suite checks much more (every
model type, drawn configs, LoRA targets, FSDP, measured activations). A pass here is a start, not
a grade.
"""
import math
import os

import pytest
import torch

from grader.session.submission import StudentError
from grader.suite.checks import shown

# Seconds for a test of quick calls: its own work is milliseconds, but the first test of a task also
# waits for the worker that runs your module to start (4 s on a 2-core machine at load 2, several
# times that on a loaded one).
QUICK = 30

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# meta-llama/Meta-Llama-3-8B's config.json, the architecture fields.
LLAMA_3_8B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
              "tie_word_embeddings": False, "attention_bias": False, "rope_theta": 500000.0}
TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "tie_word_embeddings": False}
ACTIVATION_TOLERANCE = 0.25      # an estimate derived term by term, not a replay of every saved tensor


def hf_model(config, device="meta", dtype=torch.float32):
    from transformers import AutoConfig, AutoModelForCausalLM
    fields = {k: v for k, v in config.items() if k != "model_type"}
    hf_config = AutoConfig.for_model(config["model_type"], attn_implementation="eager", **fields)
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(hf_config, dtype=dtype).train()


def blocks(values, keys):
    """`values` at `keys` only, each number as plain Python (for a message)."""
    return {k: v.item() if hasattr(v, "item") else v for k, v in ((k, values.get(k)) for k in keys)}


UNSET = object()


def setup_change(before, after, prefix=""):
    """What differs between two oom_culprit setups, short: "optimizer 'sgd' -> 'adamw_8bit'"."""
    parts = []
    for key in list(before) + [k for k in after if k not in before]:
        old, new = before.get(key, UNSET), after.get(key, UNSET)
        if isinstance(old, dict) and isinstance(new, dict):
            parts += [setup_change(old, new, f"{prefix}{key}.")] if old != new else []
        elif old != new:
            parts.append(f"{prefix}{key} " + " -> ".join("not given (default)" if v is UNSET else shown(v) for v in (old, new)))
    return ", ".join(parts)


def culprit_call(before, after):
    """oom_culprit's two setups as the learner would describe them: model, method, what changed."""
    config = before["config"]
    model = {id(LLAMA_3_8B): "Llama 3 8B", id(TINY_LLAMA): "tiny llama"}.get(id(config), config.get("model_type"))
    return f"oom_culprit({model}, {shown(before.get('method'))}: {setup_change(before, after) or 'nothing changed'})"


def saved_bytes(model, batch, seq_len):
    """Bytes autograd saves for backward in one training forward: storages counted once, no parameters."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    ids = torch.randint(0, model.config.vocab_size, (batch, seq_len), generator=torch.Generator().manual_seed(0))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    return sum(saved.values())


def assert_value_error(call, what, why=""):
    """`call()` raises ValueError: the README's word for an input a function refuses."""
    with pytest.raises(StudentError) as raised:
        call()
    assert raised.value.info["type"] == "ValueError", f"{what}: expected ValueError, got {raised.value.info['type']}{why}"


def measured_activations(config, batch, seq_len, dtype=torch.float32):
    """What autograd saves in one training forward of `config`'s model on the CPU, on one thread
    (tiny matmuls: extra threads only wait)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return saved_bytes(hf_model(config, "cpu", dtype), batch, seq_len)
    finally:
        torch.set_num_threads(threads)


def assert_activations(submission, config, label, batch, seq_len, dtype=torch.float32, why=""):
    """activation_bytes within ACTIVATION_TOLERANCE of what autograd saves: in fp32 (bytes_per_value=4)
    or in bf16 (the default, left out of the call)."""
    precision = {"bytes_per_value": 4} if dtype == torch.float32 else {}
    got = submission.activation_bytes(config, batch, seq_len, **precision)      # first: a stub fails at once
    measured = measured_activations(config, batch, seq_len, dtype)
    called = ", ".join([label, str(batch), str(seq_len), *(f"{k}={v}" for k, v in precision.items())])
    assert abs(got / measured - 1) <= ACTIVATION_TOLERANCE, \
        f"activation_bytes({called}): expected within 25% of the measured {shown(measured)} bytes, got {shown(got)}{why}"


@pytest.mark.points(1)
@pytest.mark.concept("Parameters from a config")
@pytest.mark.timeout(60)
def test_param_count_of_a_tiny_llama(submission):
    """param_count equals the parameters of the model from_config builds on the meta device"""
    got = submission.param_count(TINY_LLAMA)          # first: a stub fails before any model is built
    expected = sum(p.numel() for p in hf_model(TINY_LLAMA).parameters())
    assert got == expected, f"param_count(tiny llama): expected {shown(expected)}, got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("Parameters from a config")
@pytest.mark.timeout(QUICK)
def test_llama_3_8b_has_8_03_billion_parameters(submission):
    """Llama 3 8B has 8,030,261,248 parameters"""
    got = submission.param_count(LLAMA_3_8B)
    assert got == 8_030_261_248, f"param_count(Llama 3 8B): expected {shown(8_030_261_248)}, got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("LoRA parameters")
@pytest.mark.timeout(QUICK)
def test_lora_on_every_linear_layer_of_llama_3_8b(submission):
    """r=16 on every linear layer of the blocks: 1,310,720 per block, 41,943,040 in all"""
    got = submission.lora_param_count(LLAMA_3_8B, 16)
    assert got == 41_943_040, \
        f"lora_param_count(Llama 3 8B, 16): expected {shown(41_943_040)} (1310720 a block), got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("Training state memory")
@pytest.mark.timeout(QUICK)
def test_full_fine_tuning_of_llama_3_8b(submission):
    """full fine-tuning: 16 bytes per parameter, 128.5 GB"""
    state = submission.training_memory(LLAMA_3_8B)
    n = 8_030_261_248
    assert math.isclose(state["total"], 16 * n), \
        f"training_memory(Llama 3 8B)['total']: expected {shown(16 * n)} bytes (16 a parameter), got {shown(state['total'])}"
    assert math.isclose(state["optimizer"], 8 * n), \
        f"training_memory(Llama 3 8B)['optimizer']: expected {shown(8 * n)} bytes (8 a parameter), " \
        f"got {shown(state['optimizer'])}"


@pytest.mark.points(1)
@pytest.mark.concept("KV cache")
@pytest.mark.timeout(QUICK)
def test_kv_cache_of_llama_3_8b(submission):
    """Llama 3 8B caches 128 KiB per token: 2 x 32 layers x 8 KV heads x 128 x 2 bytes"""
    got = submission.kv_cache_bytes(LLAMA_3_8B, 1, 1)
    assert got == 131_072, f"kv_cache_bytes(Llama 3 8B, 1, 1): expected {shown(131_072)} (128 KiB), got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
@pytest.mark.timeout(QUICK)
def test_residual_stream_of_llama_3_8b(submission):
    """at 4096 tokens the residual stream is 32 MiB per layer, 1 GiB in all"""
    got = submission.residual_stream_bytes(LLAMA_3_8B, 1, 4096)
    assert got == 2 ** 30, \
        f"residual_stream_bytes(Llama 3 8B, 1, 4096): expected {shown(2 ** 30)} (1 GiB), got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
@pytest.mark.timeout(60)
def test_activations_of_a_tiny_llama_against_saved_tensors(submission):
    """activation_bytes (fp32) is within 25% of what autograd saves in a CPU forward"""
    assert_activations(submission, TINY_LLAMA, "tiny llama", 2, 48)


@pytest.mark.points(1)
@pytest.mark.concept("Decode and prefill")
@pytest.mark.timeout(QUICK)
def test_decode_and_prefill_on_an_h100(submission):
    """Llama 3 8B on an H100 SXM: >= 4.8 ms per token (~208 tokens/s), ~67 ms to prefill 4096 tokens"""
    decode = submission.decode_ms_per_token(8_030_261_248, 2, 3.35e12)
    assert round(decode, 1) == 4.8, \
        f"decode_ms_per_token(Llama 3 8B, bf16, H100): expected 4.8 ms once rounded to 0.1, got {shown(decode)}"
    # called after decode's check, so that a wrong decode points at decode's line, not prefill's
    prefill = submission.prefill_ms(8_030_261_248, 4096, 989e12)
    assert round(prefill) == 67, \
        f"prefill_ms(Llama 3 8B, 4096 tokens, H100): expected 67 ms once rounded, got {shown(prefill)}"


@pytest.mark.points(1)
@pytest.mark.concept("Arithmetic intensity")
@pytest.mark.timeout(QUICK)
def test_ridge_point_and_decode_gemv(submission):
    """the H100's ridge point is ~295 FLOP/byte; a batch-1 matmul is memory-bound"""
    ridge = submission.ridge_point(989e12, 3.35e12)
    assert round(ridge) == 295, f"ridge_point(989e12, 3.35e12): expected 295 once rounded, got {shown(ridge)}"
    intensity = submission.matmul_intensity(1, 4096, 4096)
    got = submission.bound(intensity, 989e12, 3.35e12)
    assert got == "memory", f"bound(intensity {shown(intensity)} of a (1, 4096) @ (4096, 4096) matmul, 989e12, " \
                            f"3.35e12): expected 'memory', got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("Which block did the OOM land in?")
@pytest.mark.timeout(QUICK)
def test_longer_sequences_grow_the_activations(submission):
    """same model, same batch, 4x the sequence length: the OOM lands in the activations"""
    before = {"config": LLAMA_3_8B, "method": "lora", "seq_len": 2048}
    after = {"config": LLAMA_3_8B, "method": "lora", "seq_len": 8192}
    got = submission.oom_culprit(before, after)
    assert got == "activations", f"{culprit_call(before, after)}: expected 'activations', got {shown(got)}"


# ---------------------------------------------------------------- more of each section

def meta_count(config):
    return sum(p.numel() for p in hf_model(config).parameters())


def lora_count_of(config, r, names):
    """r (in + out) over the nn.Linear modules of the meta model whose name ends with one of `names`."""
    model = hf_model(config)
    return sum(r * (m.in_features + m.out_features) for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and name.split(".")[-1] in names)


SMALL_QWEN2 = {"model_type": "qwen2", "hidden_size": 48, "intermediate_size": 80, "num_hidden_layers": 3,
               "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 123, "tie_word_embeddings": True}
SMALL_GEMMA = {"model_type": "gemma", "hidden_size": 40, "intermediate_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 97}
SMALL_GPT2 = {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 40, "vocab_size": 90}
SMALL_MIXTRAL = {"model_type": "mixtral", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 71, "num_local_experts": 3,
                 "num_experts_per_tok": 2, "tie_word_embeddings": False}


@pytest.mark.points(1)
@pytest.mark.concept("Parameters from a config")
@pytest.mark.timeout(60)
def test_param_count_of_tied_biased_and_wide_heads(submission):
    """a Qwen2 with tied embeddings (q, k, v biases), a Gemma whose heads x head_dim is wider than hidden_size, a
    Mixtral of 3 experts (every expert and the router count)"""
    for name, config in (("SMALL_QWEN2, tied embeddings and q, k, v biases", SMALL_QWEN2),
                         ("SMALL_GEMMA, 4 heads x head_dim 16 wider than hidden_size 40", SMALL_GEMMA),
                         ("SMALL_MIXTRAL, 3 experts and a router", SMALL_MIXTRAL)):
        got, expected = submission.param_count(config), meta_count(config)
        assert got == expected, f"param_count({name}): expected {shown(expected)}, got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("Units and conventions")
@pytest.mark.timeout(60)
def test_keys_left_out_mean_what_hugging_face_makes_of_them(submission):
    """a llama without num_key_value_heads and with head_dim null, a gpt2 without n_inner, a mistral whose
    attention_bias is ignored: counted as the meta-device model"""
    old_llama = {k: v for k, v in TINY_LLAMA.items() if k not in ("num_key_value_heads", "tie_word_embeddings")}
    gpt2 = {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 40, "vocab_size": 90}
    mistral = {**TINY_LLAMA, "model_type": "mistral", "attention_bias": True}
    for name, config in (("tiny llama without num_key_value_heads and with head_dim None", {**old_llama, "head_dim": None}),
                         ("tiny llama with num_key_value_heads None", {**TINY_LLAMA, "num_key_value_heads": None}),
                         ("gpt2 without n_inner", gpt2), ("gpt2 with n_inner None", {**gpt2, "n_inner": None}),
                         ("mistral with attention_bias True, which mistral ignores", mistral)):
        got, expected = submission.param_count(config), meta_count(config)
        assert got == expected, f"param_count({name}): expected {shown(expected)}, got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("LoRA parameters")
@pytest.mark.timeout(60)
def test_lora_on_named_layers_and_a_name_the_model_lacks(submission):
    """["k_proj", "down_proj"] at r=4 on a Qwen2: r (in + out) per adapted layer; GPT-2's "c_proj" names two layers
    a block; a Mixtral's every expert and its router; a name the model lacks raises ValueError"""
    got = submission.lora_param_count(SMALL_QWEN2, 4, ["k_proj", "down_proj"])
    expected = lora_count_of(SMALL_QWEN2, 4, ("k_proj", "down_proj"))
    assert got == expected, \
        f"lora_param_count(qwen2, 4, ['k_proj', 'down_proj']): expected {shown(expected)}, got {shown(got)}"
    # per block: the attention's c_proj 32 -> 32, 4 (32 + 32) = 256, and the MLP's c_proj 128 -> 32, 4 (128 + 32) = 640
    got = submission.lora_param_count(SMALL_GPT2, 4, ["c_proj"])
    assert got == 2 * (256 + 640), \
        f"lora_param_count(gpt2, 4, ['c_proj']): expected {shown(2 * (256 + 640))}, got {shown(got)} " \
        f"(two c_proj layers a block: one name, two layers)"
    # per block: q, k, v, o 2 (64 + 48 + 48 + 64) = 448; per expert w1, w3, w2 3 x 2 (32 + 48) = 480; the router 2 (32 + 3)
    got = submission.lora_param_count(SMALL_MIXTRAL, 2)
    assert got == 2 * (448 + 3 * 480 + 70), \
        f"lora_param_count(mixtral of 3 experts, 2): expected {shown(2 * (448 + 3 * 480 + 70))}, got {shown(got)} " \
        f"(every expert's w1, w2, w3 and the router)"
    assert_value_error(lambda: submission.lora_param_count(SMALL_QWEN2, 4, ["qkv_proj"]),
                       "lora_param_count(qwen2, 4, ['qkv_proj']), a name the model lacks", " (a typo adapts nothing)")


@pytest.mark.points(1)
@pytest.mark.concept("LoRA and QLoRA memory")
@pytest.mark.timeout(60)
def test_lora_and_qlora_state_of_a_small_model(submission):
    """r=8 on q_proj and v_proj of a Qwen2 whose size is not a multiple of 64: 2 bytes per base parameter (LoRA) or
    half a byte plus a 4-byte scale per started block of 64 (QLoRA), 16 per adapter parameter, nothing else"""
    for method in ("lora", "qlora"):
        got = submission.training_memory(SMALL_QWEN2, method, lora_r=8, lora_targets=["q_proj", "v_proj"])
        n, adapters = meta_count(SMALL_QWEN2), lora_count_of(SMALL_QWEN2, 8, ("q_proj", "v_proj"))
        assert n % 64, "course problem: the model's size should not be a multiple of 64"
        weights, why = {"lora": (2 * n, "2 bytes a base parameter"),
                        "qlora": (n / 2 + 4 * math.ceil(n / 64), "half a byte a base parameter and 4 bytes a started "
                                                                 "block of 64")}[method]
        expected = {"weights": weights, "grads": 0, "master_weights": 0, "optimizer": 0, "lora": 16 * adapters,
                    "total": weights + 16 * adapters}
        wrong = [k for k, v in expected.items() if not math.isclose(got.get(k, math.nan), v, abs_tol=1e-6)]
        assert not wrong, f"training_memory(qwen2, {shown(method)}, r=8, q_proj+v_proj): expected " \
                          f"{shown(blocks(expected, wrong))}, got {shown(blocks(got, wrong))} ({why}, 16 an adapter one)"


@pytest.mark.points(1)
@pytest.mark.concept("Sharding with FSDP")
@pytest.mark.timeout(60)
def test_fsdp_divides_every_block(submission):
    """full, LoRA and QLoRA over 4 GPUs: every block a quarter of one GPU's, QLoRA's scales included"""
    for method in ("full", "lora", "qlora"):
        one = submission.training_memory(SMALL_QWEN2, method)
        four = submission.training_memory(SMALL_QWEN2, method, n_gpus=4)
        wrong = [k for k, v in one.items() if not math.isclose(four.get(k, math.nan), v / 4)]
        assert not wrong, f"training_memory(qwen2, {shown(method)}, n_gpus=4): expected a quarter of n_gpus=1's " \
                          f"{shown({k: v / 4 for k, v in blocks(one, wrong).items()})}, got {shown(blocks(four, wrong))}"


@pytest.mark.points(1)
@pytest.mark.concept("Gradient checkpointing")
@pytest.mark.timeout(QUICK)
def test_checkpointing_keeps_block_inputs_and_one_block(submission):
    """one more layer adds one block input (T h b) to the checkpointed peak and a whole block without checkpointing;
    the peak is linear in batch and below the plain activations"""
    deeper = {**TINY_LLAMA, "num_hidden_layers": 3}
    peak = [submission.activation_bytes(c, 2, 64, checkpointing=True) for c in (TINY_LLAMA, deeper)]
    plain = [submission.activation_bytes(c, 2, 64) for c in (TINY_LLAMA, deeper)]
    block_input = 2 * 64 * TINY_LLAMA["hidden_size"] * 2
    assert abs((peak[1] - peak[0]) / block_input - 1) <= ACTIVATION_TOLERANCE, (
        f"activation_bytes(tiny llama, 2, 64, checkpointing=True), 3 layers minus 2: expected within 25% of one "
        f"block input, {shown(block_input)} bytes, got {shown(peak[1] - peak[0])} (the recomputed block is still only one)")
    assert plain[1] - plain[0] > 4 * block_input, (
        f"activation_bytes(tiny llama, 2, 64), 3 layers minus 2: expected more than {shown(4 * block_input)} bytes, "
        f"got {shown(plain[1] - plain[0])} (a whole block's saved tensors)")
    assert peak[0] < plain[0], (f"activation_bytes(tiny llama, 2, 64, checkpointing=True): expected less than the "
                                f"{shown(plain[0])} bytes without it, got {shown(peak[0])}")
    block = plain[1] - plain[0]
    assert peak[0] - 2 * block_input > block / 2, (
        f"checkpointed peak beyond the two block inputs: expected more than half of one block, {shown(block / 2)} "
        f"bytes, got {shown(peak[0] - 2 * block_input)} (the block being recomputed in backward saves its tensors too)")
    triple = submission.activation_bytes(TINY_LLAMA, 6, 64, checkpointing=True)
    assert math.isclose(triple, 3 * peak[0]), (f"activation_bytes(tiny llama, 6, 64, checkpointing=True): expected 3 x "
                                               f"batch 2's, {shown(3 * peak[0])}, got {shown(triple)}")


@pytest.mark.points(1)
@pytest.mark.concept("Does it fit?")
@pytest.mark.timeout(QUICK)
def test_fits_on_llama_3_8b_at_2048_tokens(submission):
    """at 2048 tokens (README: 40.8 GB of activations, 2.9 GB checkpointed): LoRA fits 80 GB, not 40; QLoRA
    checkpointed fits 12 GB, not 6; an inference setup that needs exactly the memory fits, one byte less does not"""
    cases = [("lora", 80e9, {}, True, "40.8 GB of activations"), ("lora", 40e9, {}, False, "40.8 GB of activations"),
             ("qlora", 12e9, {"checkpointing": True}, True, "2.9 GB of activations"),
             ("qlora", 6e9, {"checkpointing": True}, False, "2.9 GB of activations"),
             ("full", 24e9, {"n_gpus": 8, "checkpointing": True}, True, "state sharded over 8 GPUs"),
             ("full", 40e9, {"n_gpus": 8}, False, "activations are not sharded"),
             ("lora", 16.5e9, {"checkpointing": True}, False, "16.73 GB of r=16 all-linear state")]
    for method, memory, extra, expected, why in cases:
        seq_len = 16 if memory == 16.5e9 else 2048
        got = submission.fits(LLAMA_3_8B, method, memory, seq_len=seq_len, **extra)
        arguments = "".join(f", {k}={shown(v)}" for k, v in extra.items())
        assert got is expected, f"fits(Llama 3 8B, {shown(method)}, {memory / 1e9:g}e9, seq_len={seq_len}{arguments}): " \
                                f"expected {shown(expected)}, got {shown(got)} ({why})"
    need = (2 * 8_030_261_248 + 4 * 1024 * 131_072) / 2        # weights and 4 x 1024 tokens of cache, over 2 GPUs
    for memory, expected in ((need, True), (need - 1, False)):
        got = submission.fits(LLAMA_3_8B, "inference", memory, n_gpus=2, batch=4, seq_len=1024)
        assert got is expected, f"fits(Llama 3 8B, 'inference', {shown(memory)}, n_gpus=2, batch=4, seq_len=1024): " \
                                f"expected {shown(expected)}, got {shown(got)} (it needs {shown(need)} bytes a GPU)"


@pytest.mark.points(1)
@pytest.mark.concept("Which block did the OOM land in?")
@pytest.mark.timeout(QUICK)
def test_the_optimizer_and_the_cache_grow(submission):
    """plain SGD replaced by 8-bit AdamW (full or LoRA) or by the default AdamW: the optimizer block; SGD on 1 GPU
    instead of 8: the fp32 master copy in the optimizer block; serving 4 sequences instead of 1: the KV cache;
    identical setups: weights, the first block"""
    cases = [({"config": TINY_LLAMA, "method": "full", "optimizer": "sgd"},
              {"config": TINY_LLAMA, "method": "full", "optimizer": "adamw_8bit"}, "optimizer"),
             ({"config": LLAMA_3_8B, "method": "inference", "seq_len": 1024},
              {"config": LLAMA_3_8B, "method": "inference", "seq_len": 1024, "batch": 4}, "kv_cache"),
             ({"config": LLAMA_3_8B, "method": "qlora"}, {"config": LLAMA_3_8B, "method": "qlora"}, "weights"),
             ({"config": TINY_LLAMA, "method": "full", "optimizer": "sgd"}, {"config": TINY_LLAMA, "method": "full"},
              "optimizer"),                                          # no optimizer given: AdamW
             ({"config": TINY_LLAMA, "method": "lora", "optimizer": "sgd"},
              {"config": TINY_LLAMA, "method": "lora", "optimizer": "adamw_8bit"}, "optimizer"),
             ({"config": LLAMA_3_8B, "method": "full", "optimizer": "sgd", "n_gpus": 8, "checkpointing": True},
              {"config": LLAMA_3_8B, "method": "full", "optimizer": "sgd", "checkpointing": True}, "optimizer")]
    for before, after, expected in cases:
        got = submission.oom_culprit(before, after)
        assert got == expected, f"{culprit_call(before, after)}: expected {shown(expected)}, got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("KV cache")
@pytest.mark.timeout(QUICK)
def test_kv_cache_of_a_multi_head_gpt2_in_fp32(submission):
    """GPT-2 caches all n_head heads of n_embd / n_head, fp32 doubles bf16; a Gemma's stated head_dim counts; a
    sliding window does not shorten the count"""
    gpt2 = {"model_type": "gpt2", "n_embd": 64, "n_layer": 3, "n_head": 4, "n_positions": 128, "vocab_size": 90}
    got = submission.kv_cache_bytes(gpt2, 2, 10, bytes_per_value=4)
    expected = 2 * 3 * 2 * 10 * 4 * 16 * 4
    assert got == expected, f"kv_cache_bytes(gpt2, 2, 10, bytes_per_value=4): expected {shown(expected)}, got {shown(got)}"
    gemma = submission.kv_cache_bytes(SMALL_GEMMA, 1, 5)
    assert gemma == 2 * 2 * 5 * 1 * 16 * 2, \
        f"kv_cache_bytes(gemma with head_dim 16 stated, 1, 5): expected {shown(2 * 2 * 5 * 1 * 16 * 2)}, got {shown(gemma)}"
    windowed = {**TINY_LLAMA, "model_type": "mistral", "sliding_window": 8}
    got = submission.kv_cache_bytes(windowed, 1, 20)
    assert got == 2 * 2 * 20 * 2 * 16 * 2, \
        f"kv_cache_bytes(mistral with sliding_window 8, 1, 20): expected {shown(2 * 2 * 20 * 2 * 16 * 2)}, " \
        f"got {shown(got)} (a window shorter than the sequence: every token still counts)"


@pytest.mark.points(1)
@pytest.mark.concept("Arithmetic intensity")
@pytest.mark.timeout(QUICK)
def test_intensity_on_the_ridge_is_compute_bound(submission):
    """a 64-row matmul's intensity; an intensity exactly at the ridge point is compute-bound, just below memory-bound"""
    got = submission.matmul_intensity(64, 1024, 512)
    expected = 2 * 64 * 1024 * 512 / (2 * (64 * 512 + 512 * 1024 + 64 * 1024))
    assert math.isclose(got, expected), f"matmul_intensity(64, 1024, 512): expected {shown(expected)}, got {shown(got)}"
    for intensity, want in ((100.0, "compute"), (99.9, "memory")):       # the ridge of 200e12 / 2e12 is 100
        got = submission.bound(intensity, 200e12, 2e12)
        assert got == want, \
            f"bound({shown(intensity)}, 200e12, 2e12), at a ridge of 100: expected {shown(want)}, got {shown(got)}"


@pytest.mark.points(1)
@pytest.mark.concept("Training state memory")
@pytest.mark.timeout(60)
def test_full_state_block_by_block_and_an_unknown_method(submission):
    """full fine-tuning of a small Qwen2: 2, 2, 4 and 8 bytes per parameter, no LoRA block; an unknown method raises
    ValueError"""
    got = submission.training_memory(SMALL_QWEN2, "full")
    n = meta_count(SMALL_QWEN2)
    expected = {"weights": 2 * n, "grads": 2 * n, "master_weights": 4 * n, "optimizer": 8 * n, "lora": 0, "total": 16 * n}
    wrong = [k for k, v in expected.items() if not math.isclose(got.get(k, math.nan), v, abs_tol=1e-6)]
    assert not wrong, f"training_memory(qwen2 of {shown(n)} parameters, 'full'): expected {shown(blocks(expected, wrong))}, " \
                      f"got {shown(blocks(got, wrong))} (bytes: 2, 2, 4 and 8 a parameter)"
    assert_value_error(lambda: submission.training_memory(SMALL_QWEN2, "adapter"), "training_memory(qwen2, 'adapter')",
                       " (an unknown method must not pass)")


@pytest.mark.points(0.5)
@pytest.mark.concept("Activations")
@pytest.mark.timeout(60)
def test_activations_of_a_small_mixtral_against_saved_tensors(submission):
    """a Mixtral of 3 experts, 2 per token (fp32): within 25% of what autograd saves (counted as a dense MLP: a third short)"""
    assert_activations(submission, SMALL_MIXTRAL, "mixtral of 3 experts, 2 per token", 2, 24,
                       why=" (each routed token saves a whole MLP's tensors: k per token)")


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
@pytest.mark.timeout(60)
def test_bf16_activations_where_scores_or_the_loss_dominate(submission):
    """bf16 training forwards on the CPU, within 25% of what autograd saves: long sequences (the seq^2 probabilities
    with repeated k and v) and a large vocabulary (the fp32 log-probabilities); GPT-2 raises ValueError"""
    for config, batch, seq_len in (({**TINY_LLAMA, "num_key_value_heads": 1}, 1, 160),
                                   ({**TINY_LLAMA, "vocab_size": 3000}, 3, 12)):
        label = f"bf16, vocab {config['vocab_size']}, {config['num_key_value_heads']} kv heads"
        assert_activations(submission, config, label, batch, seq_len, torch.bfloat16)
    gpt2 = {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 40, "vocab_size": 90}
    assert_value_error(lambda: submission.activation_bytes(gpt2, 1, 16), "activation_bytes of a gpt2 config")


@pytest.mark.points(1)
@pytest.mark.concept("Decode and prefill")
@pytest.mark.timeout(QUICK)
def test_decode_reads_the_weights_at_their_own_width(submission):
    """4-bit weights (0.5 byte each) of 3e9 parameters at 2e12 bytes/s: 0.75 ms per token; 512 tokens of a 1e9
    model at 400e12 FLOP/s: 2.56 ms"""
    decode = submission.decode_ms_per_token(3e9, 0.5, 2e12)
    prefill = submission.prefill_ms(1e9, 512, 400e12)
    assert math.isclose(decode, 0.75), f"decode_ms_per_token(3e9, 0.5, 2e12): expected 0.75 ms, got {shown(decode)}"
    assert math.isclose(prefill, 2.56), f"prefill_ms(1e9, 512, 400e12): expected 2.56 ms, got {shown(prefill)}"
