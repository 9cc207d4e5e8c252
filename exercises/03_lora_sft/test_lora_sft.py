"""Visible tests for exercise 03. Run: pytest exercises/03_lora_sft

They check the basics quickly. Objects (layers, models, tokenizers) never cross into your code
as arguments of a test: the probes in probes.py build them from data next to your code and
report what your code did. The graded suite holds every piece against peft and trl on many drawn
inputs and trains a real adapter; a pass here is a start, not a grade.
"""
import importlib
import json

import pytest
import torch

from grader.core.checks import assert_close, assert_equal, learner_file, sibling_module
from grader.tasks import DATASETS

probes = sibling_module(__file__, "probes")

TOKENIZER = str(DATASETS / "tiny_llama")
MICRO_LLAMA = dict(vocab_size=40, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, tie_word_embeddings=False)
# float32, per value against 1 + |expected|: correct layers (any order of the products, F.linear or @)
# stay within 3.2e-7 here; forgetting the scaling, or scaling by alpha / sqrt(r), is off by 0.5 and more.
FP32 = dict(rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- tests

@pytest.mark.points(1)
@pytest.mark.concept("LoRA by hand")
def test_a_fresh_layer_returns_the_base_output(submission):
    """shapes of A and B, scaling = alpha / r, only A and B trainable, and B = 0 makes a fresh layer equal its base"""
    generator = torch.Generator().manual_seed(0)
    weight, bias, x = torch.randn(6, 8, generator=generator), torch.randn(6, generator=generator), \
        torch.randn(3, 8, generator=generator)
    seen = submission.probe(probes.lora_layer, weight, bias, 4, 8.0, x)
    assert seen["A_shape"] == (4, 8) and seen["B_shape"] == (6, 4), \
        f"lora_A has shape {seen['A_shape']} and lora_B {seen['B_shape']}; expected (r, in) = (4, 8) and (out, r) = (6, 4)"
    assert seen["scaling"] == 2.0, f"scaling is {seen['scaling']}, expected alpha / r = 8 / 4 = 2"
    assert seen["trainable"] == ["lora_A", "lora_B"], f"trainable parameters {seen['trainable']}: only lora_A and lora_B"
    assert_equal(seen["out"], x @ weight.T + bias, what="a fresh LoRALinear's output", tensor=True)


@pytest.mark.points(1)
@pytest.mark.concept("LoRA by hand")
def test_forward_adds_the_scaled_low_rank_update(submission):
    """with A and B set, the output is base(x) + x A^T B^T * alpha / r"""
    generator = torch.Generator().manual_seed(1)
    weight, bias, x = torch.randn(5, 7, generator=generator), torch.randn(5, generator=generator), \
        torch.randn(2, 3, 7, generator=generator)
    A, B = torch.randn(2, 7, generator=generator), torch.randn(5, 2, generator=generator)
    seen = submission.probe(probes.lora_layer, weight, bias, 2, 6.0, x, A, B)
    assert_close(seen["out"], x @ weight.T + bias + x @ A.T @ B.T * 3.0, what="LoRALinear(x)", tensor=True, **FP32)


@pytest.mark.points(1)
@pytest.mark.concept("Merging")
def test_the_merged_layer_computes_the_same(submission):
    """merged() folds the adapter into one weight: same outputs as the LoRA layer"""
    generator = torch.Generator().manual_seed(2)
    weight, bias, x = torch.randn(4, 6, generator=generator), torch.randn(4, generator=generator), \
        torch.randn(5, 6, generator=generator)
    A, B = torch.randn(3, 6, generator=generator), torch.randn(4, 3, generator=generator)
    seen = submission.probe(probes.lora_layer, weight, bias, 3, 6.0, x, A, B)
    assert_close(seen["merged_out"], seen["out"], what="merged()(x) against the LoRA layer's output", tensor=True,
                 **FP32)


@pytest.mark.points(1)
@pytest.mark.concept("Adapters on a model")
def test_add_lora_adapts_every_linear_layer_but_the_head(submission):
    """all-linear on a micro Llama: the seven projections of each block, not lm_head; only adapters trainable"""
    seen = submission.probe(probes.adapted_model, MICRO_LLAMA, 4, 8, "all-linear")
    names = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
             "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
    expected = sorted(f"model.layers.{i}.{name}" for i in range(2) for name in names)
    assert seen["adapted"] == expected, f"adapted modules {seen['adapted']}, expected {expected}"
    assert all(n.endswith((".lora_A", ".lora_B")) for n in seen["trainable"]) and len(seen["trainable"]) == 28, \
        f"trainable parameters should be the 28 lora_A / lora_B, got {seen['trainable'][:4]}..."


@pytest.mark.points(1)
@pytest.mark.concept("Adapters on a model")
def test_trainable_parameters_counts_the_adapters(submission):
    """(trainable, total): r (in + out) per adapted layer; the total includes the adapters"""
    seen = submission.probe(probes.adapted_model, MICRO_LLAMA, 4, 8, ["q_proj", "v_proj"])
    # q_proj 16 -> 16, v_proj 16 -> 8 (one key/value head of 8), two layers
    lora = 2 * 4 * ((16 + 16) + (16 + 8))
    base = 40 * 16 * 2 + 2 * (16 * 16 * 2 + 16 * 8 * 2 + 3 * 16 * 24 + 2 * 16) + 16
    assert seen["counts"] == (lora, base + lora), f"trainable_parameters = {seen['counts']}, expected {(lora, base + lora)}"


@pytest.mark.points(1)
@pytest.mark.concept("The chat template and the loss mask")
def test_labels_cover_the_reply_and_its_end_of_turn(submission):
    """one exchange: labels are the reply and its closing <|end|>, -100 everywhere else"""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    messages = [{"role": "user", "content": "the old cat sees anna."}, {"role": "assistant", "content": "cat"}]
    got = submission.probe(probes.tokenized, TOKENIZER, messages)
    ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    assert got["input_ids"] == list(ids), "input_ids must be the chat template's tokens"
    targets = [tokenizer.convert_ids_to_tokens(t) for t in got["labels"] if t != -100]
    assert targets == ["▁cat", "<|end|>"], f"the tokens with labels are {targets}, expected ['▁cat', '<|end|>']"
    assert got["attention_mask"] == [1] * len(ids), "attention_mask must be all ones"


def segments(row):
    """A packed row as its examples, cut where position_ids restart: [(input_ids, labels), ...], sorted."""
    starts = [i for i, p in enumerate(row["position_ids"]) if p == 0] + [len(row["position_ids"])]
    return sorted((tuple(row["input_ids"][a:b]), tuple(row["labels"][a:b])) for a, b in zip(starts, starts[1:]))


@pytest.mark.points(1)
@pytest.mark.concept("Packing")
def test_pack_fills_rows_without_padding(submission):
    """four examples into rows of 4: examples whole, positions restart, first labels -100, long ones split"""
    examples = [{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}, {"input_ids": [6]}, {"input_ids": [7, 8, 9, 10, 11]}]
    rows = submission.pack(examples, 4)
    for row in rows:
        assert len(row["input_ids"]) == len(row["labels"]) == len(row["position_ids"]) <= 4, \
            f"row {row}: three lists of at most 4 tokens"
        assert all(p == 0 or p == q + 1 for q, p in zip(row["position_ids"], row["position_ids"][1:])), \
            f"position_ids {row['position_ids']} must count up from 0 within each example"
    assert sorted(t for row in rows for t in row["input_ids"]) == list(range(1, 12)), "every token exactly once"
    got = sorted(segments(row) for row in rows)
    expected = sorted([[((7, 8, 9, 10), (-100, 8, 9, 10))],
                       [((1, 2, 3), (-100, 2, 3)), ((6,), (-100,))],
                       [((4, 5), (-100, 5)), ((11,), (-100,))]])
    assert got == expected, f"rows (as their examples) {got}; best-fit decreasing (or first fit) gives {expected}"


@pytest.mark.points(1)
@pytest.mark.concept("Read the source")
def test_where_in_source_names_installed_functions(submission):
    """every concept of the table resolves to a function of the installed trl, peft or transformers"""
    for concept in ["assistant_mask", "assistant_only_loss", "packing", "packed_boundaries", "all_linear",
                    "lora_init", "lora_scaling", "merge"]:
        path = submission.where_in_source(concept)
        assert isinstance(path, str) and path.split(".")[0] in {"trl", "peft", "transformers"}, \
            f"where_in_source({concept!r}) = {path!r}: a dotted path inside trl, peft or transformers"
        parts = path.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                target = importlib.import_module(".".join(parts[:cut]))
                break
            except ImportError:
                continue
        for name in parts[cut:]:
            target = getattr(target, name, None)
            assert target is not None, f"where_in_source({concept!r}) = {path!r} does not resolve at {name!r}"
        assert callable(target), f"where_in_source({concept!r}) = {path!r} is not a function or method"


@pytest.mark.points(1)
@pytest.mark.concept("Talking to the model")
def test_generate_reply_decodes_the_new_tokens(submission):
    """greedy reply of the base model after the generation prompt: the new tokens only, as text"""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    messages = [{"role": "user", "content": "the old cat sees anna."}]
    got = submission.probe(probes.reply, TOKENIZER, messages, 5)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(TOKENIZER), AutoTokenizer.from_pretrained(TOKENIZER)
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")
    out = model.generate(**prompt, max_new_tokens=5, do_sample=False, eos_token_id=[7, 2], pad_token_id=0)
    expected = tokenizer.decode(out[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True)
    assert got == expected, f"generate_reply returned {got!r}; greedy decoding of the new tokens gives {expected!r}"


@pytest.mark.points(1)
@pytest.mark.concept("The real thing: peft + trl")
@pytest.mark.timeout(300)
def test_a_short_sft_run_saves_an_adapter(submission, tmp_path):
    """two steps of SFTTrainer on eight conversations: the adapter files, one loss per step, 147,968 trainable"""
    rows = (DATASETS / "sft" / "train.jsonl").read_text().splitlines()[:8]
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n")
    result = submission.sft_with_peft_trl(TOKENIZER, str(tmp_path / "train.jsonl"), str(tmp_path / "adapter"),
                                          max_steps=2, learning_rate=1e-3, batch_size=4)
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        assert (tmp_path / "adapter" / name).exists(), f"no {name} in out_dir: save the peft model with save_pretrained"
    assert json.loads(learner_file(tmp_path / "adapter" / "adapter_config.json", tmp_path))["r"] == 16, \
        "the adapter's r should be 16"
    assert len(result["train_loss"]) == 2, f"train_loss has {len(result['train_loss'])} entries for 2 steps"
    assert result["trainable_parameters"] == 147_968, \
        f"trainable_parameters = {result['trainable_parameters']}; r=16 on all linear layers of the tiny Llama is 147,968"
