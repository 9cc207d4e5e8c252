"""Visible tests for exercise 04. Run: pytest exercises/04_memory_accounting

They check the basics quickly, mostly on Llama 3 8B; the graded suite checks much more (every
model type, drawn configs, LoRA targets, FSDP, measured activations). A pass here is a start, not
a grade.
"""
import math
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# meta-llama/Meta-Llama-3-8B's config.json, the architecture fields.
LLAMA_3_8B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
              "tie_word_embeddings": False, "attention_bias": False, "rope_theta": 500000.0}
TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "tie_word_embeddings": False}
ACTIVATION_TOLERANCE = 0.25      # an estimate derived term by term, not a replay of every saved tensor


def hf_model(config, device="meta"):
    from transformers import AutoConfig, AutoModelForCausalLM
    fields = {k: v for k, v in config.items() if k != "model_type"}
    hf_config = AutoConfig.for_model(config["model_type"], attn_implementation="eager", **fields)
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32).train()


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


@pytest.mark.points(1)
@pytest.mark.concept("Parameters from a config")
def test_param_count_of_a_tiny_llama(submission):
    """param_count equals the parameters of the model from_config builds on the meta device"""
    expected = sum(p.numel() for p in hf_model(TINY_LLAMA).parameters())
    got = submission.param_count(TINY_LLAMA)
    assert got == expected, f"param_count(tiny llama): expected {expected:,}, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.concept("Parameters from a config")
def test_llama_3_8b_has_8_03_billion_parameters(submission):
    """Llama 3 8B has 8,030,261,248 parameters"""
    got = submission.param_count(LLAMA_3_8B)
    assert got == 8_030_261_248, f"param_count(Llama 3 8B): expected 8,030,261,248, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.concept("LoRA parameters")
def test_lora_on_every_linear_layer_of_llama_3_8b(submission):
    """r=16 on every linear layer of the blocks: 1,310,720 per block, 41,943,040 in all"""
    got = submission.lora_param_count(LLAMA_3_8B, 16)
    assert got == 41_943_040, f"lora_param_count(Llama 3 8B, 16): expected 41,943,040, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.concept("Training state memory")
def test_full_fine_tuning_of_llama_3_8b(submission):
    """full fine-tuning: 16 bytes per parameter, 128.5 GB"""
    state = submission.training_memory(LLAMA_3_8B)
    n = 8_030_261_248
    assert math.isclose(state["total"], 16 * n) and math.isclose(state["optimizer"], 8 * n), \
        f"training_memory(Llama 3 8B): expected total {16 * n:,} and optimizer {8 * n:,}, got {state!r}"


@pytest.mark.points(1)
@pytest.mark.concept("KV cache")
def test_kv_cache_of_llama_3_8b(submission):
    """Llama 3 8B caches 128 KiB per token: 2 x 32 layers x 8 KV heads x 128 x 2 bytes"""
    got = submission.kv_cache_bytes(LLAMA_3_8B, 1, 1)
    assert got == 131_072, f"kv_cache_bytes(Llama 3 8B, 1, 1): expected 131,072, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_residual_stream_of_llama_3_8b(submission):
    """at 4096 tokens the residual stream is 32 MiB per layer, 1 GiB in all"""
    got = submission.residual_stream_bytes(LLAMA_3_8B, 1, 4096)
    assert got == 2 ** 30, f"residual_stream_bytes(Llama 3 8B, 1, 4096): expected 2**30, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.concept("Activations")
def test_activations_of_a_tiny_llama_against_saved_tensors(submission):
    """activation_bytes (fp32) is within 25% of what autograd saves in a CPU forward"""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)            # tiny matmuls: extra threads only wait
    try:
        measured = saved_bytes(hf_model(TINY_LLAMA, "cpu"), 2, 48)
    finally:
        torch.set_num_threads(threads)
    got = submission.activation_bytes(TINY_LLAMA, 2, 48, bytes_per_value=4)
    assert abs(got / measured - 1) <= ACTIVATION_TOLERANCE, \
        f"activation_bytes(tiny llama, 2, 48, bytes_per_value=4): measured {measured:,} bytes, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.concept("Decode and prefill")
def test_decode_and_prefill_on_an_h100(submission):
    """Llama 3 8B on an H100 SXM: >= 4.8 ms per token (~208 tokens/s), ~67 ms to prefill 4096 tokens"""
    decode = submission.decode_ms_per_token(8_030_261_248, 2, 3.35e12)
    prefill = submission.prefill_ms(8_030_261_248, 4096, 989e12)
    assert round(decode, 1) == 4.8 and round(prefill) == 67, f"decode {decode!r} ms, prefill {prefill!r} ms"


@pytest.mark.points(1)
@pytest.mark.concept("Arithmetic intensity")
def test_ridge_point_and_decode_gemv(submission):
    """the H100's ridge point is ~295 FLOP/byte; a batch-1 matmul is memory-bound"""
    ridge = submission.ridge_point(989e12, 3.35e12)
    assert round(ridge) == 295, f"ridge_point(989e12, 3.35e12): expected ~295, got {ridge!r}"
    intensity = submission.matmul_intensity(1, 4096, 4096)
    assert submission.bound(intensity, 989e12, 3.35e12) == "memory", \
        f"a (1, 4096) @ (4096, 4096) matmul has intensity {intensity!r}: it should be memory-bound"


@pytest.mark.points(1)
@pytest.mark.concept("Which block did the OOM land in?")
def test_longer_sequences_grow_the_activations(submission):
    """same model, same batch, 4x the sequence length: the OOM lands in the activations"""
    before = {"config": LLAMA_3_8B, "method": "lora", "seq_len": 2048}
    after = {"config": LLAMA_3_8B, "method": "lora", "seq_len": 8192}
    got = submission.oom_culprit(before, after)
    assert got == "activations", f"oom_culprit(seq_len 2048 -> 8192): expected 'activations', got {got!r}"
