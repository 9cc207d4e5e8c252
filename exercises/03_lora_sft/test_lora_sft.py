"""Visible tests for exercise 03. Run: pytest exercises/03_lora_sft

They check the basics quickly. Objects (layers, models, tokenizers) never cross into your code
as arguments of a test: the probes in probes.py build them from data next to your code and
report what your code did. The graded suite holds every piece against peft and trl on many drawn
inputs and trains a real adapter; a pass here is a start, not a grade.
"""
import importlib
import math
import tempfile
from pathlib import Path

import pytest
import torch

from grader.course import COURSE
from grader.session.submission import StudentError
from grader.suite.checks import assert_close, assert_equal, shown, sibling_module
from grader.suite.learner_files import learner_json, lora_adapter_copy

# Seconds for a test of quick calls: its own work is milliseconds, but the first test of a task also
# waits for the worker that runs your module to start (4 s on a 2-core machine at load 2, several
# times that on a loaded one).
QUICK = 30

probes = sibling_module(COURSE.exercises / "03_lora_sft" / "test_lora_sft.py", "probes")   # by path: a notebook has no __file__
# One thread, as graded: the tiny Llama's matmuls are too small to share, and on a busy machine a
# second thread waiting for a core makes a run many times slower.
torch.set_num_threads(1)

TOKENIZER = str(COURSE.datasets / "tiny_llama")
MICRO_LLAMA = dict(vocab_size=40, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, tie_word_embeddings=False)
# float32, per value against 1 + |expected|: correct layers (any order of the products, F.linear or @)
# stay within 3.2e-7 here; forgetting the scaling, or scaling by alpha / sqrt(r), is off by 0.5 and more.
FP32 = dict(rtol=1e-5, atol=1e-5)
# Logits of your trained model against its saved adapter reloaded here (and merged), within this
# share of 1 + the largest |logit|: reloading gives the same logits, merging moves them by ~4e-5 of
# that scale; an adapter saved before training, or not at all, is off by more than 0.5 of it.
RELOAD = 1e-3
END_OF_TURN, EOS = 7, 2          # the tiny Llama's <|end|> and </s>


# ---------------------------------------------------------------- tests

@pytest.mark.points(1)
@pytest.mark.concept("LoRA by hand")
@pytest.mark.timeout(QUICK)
def test_a_fresh_layer_returns_the_base_output(submission):
    """shapes of A and B, scaling = alpha / r, only A and B trainable, and B = 0 makes a fresh layer equal its base"""
    generator = torch.Generator().manual_seed(0)
    weight, bias, x = torch.randn(6, 8, generator=generator), torch.randn(6, generator=generator), \
        torch.randn(3, 8, generator=generator)
    seen = submission.probe(probes.lora_layer, weight, bias, 4, 8.0, x)
    layer = "LoRALinear(nn.Linear(8, 6), r=4, alpha=8.0)"
    assert seen["A_shape"] == (4, 8), f"{layer}.lora_A's shape: expected (r, in) = (4, 8), got {shown(seen['A_shape'])}"
    assert seen["B_shape"] == (6, 4), f"{layer}.lora_B's shape: expected (out, r) = (6, 4), got {shown(seen['B_shape'])}"
    assert seen["scaling"] == 2.0, f"{layer}.scaling: expected alpha / r = 8 / 4 = 2.0, got {shown(seen['scaling'])}"
    assert seen["trainable"] == ["lora_A", "lora_B"], \
        f"{layer}'s trainable parameters: expected ['lora_A', 'lora_B'] only, got {shown(seen['trainable'])}"
    assert_equal(seen["out"], x @ weight.T + bias, what="a fresh LoRALinear's output", tensor=True)


@pytest.mark.points(1)
@pytest.mark.concept("LoRA by hand")
@pytest.mark.timeout(QUICK)
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
@pytest.mark.timeout(QUICK)
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
@pytest.mark.timeout(60)
def test_add_lora_adapts_every_linear_layer_but_the_head(submission):
    """all-linear on a micro Llama: the seven projections of each block, not lm_head; only adapters trainable"""
    seen = submission.probe(probes.adapted_model, MICRO_LLAMA, 4, 8, "all-linear")
    names = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
             "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
    expected = sorted(f"model.layers.{i}.{name}" for i in range(2) for name in names)
    got = seen["adapted"]
    missing, extra = ([n.removeprefix("model.layers.") for n in sorted(a - b)] for a, b in ((set(expected), set(got)),
                                                                                              (set(got), set(expected))))
    assert got == expected, (
        f"add_lora(micro Llama, 4, 8, 'all-linear') adapted modules: expected the 14 projections (7 per block, no lm_head), "
        f"got {len(got)}; missing (in model.layers) {shown(missing)}, extra {shown(extra)}")
    others = [n for n in seen["trainable"] if not n.endswith((".lora_A", ".lora_B"))]
    assert all(n.endswith((".lora_A", ".lora_B")) for n in seen["trainable"]), \
        f"trainable parameters after add_lora: expected only lora_A / lora_B, got also {shown(others)}"
    assert len(seen["trainable"]) == 28, \
        f"trainable parameters after add_lora: expected 28 (a lora_A and a lora_B on 14 layers), got {len(seen['trainable'])}"


@pytest.mark.points(1)
@pytest.mark.concept("Adapters on a model")
@pytest.mark.timeout(60)
def test_trainable_parameters_counts_the_adapters(submission):
    """(trainable, total): r (in + out) per adapted layer; the total includes the adapters"""
    seen = submission.probe(probes.adapted_model, MICRO_LLAMA, 4, 8, ["q_proj", "v_proj"])
    # q_proj 16 -> 16, v_proj 16 -> 8 (one key/value head of 8), two layers
    lora = 2 * 4 * ((16 + 16) + (16 + 8))
    base = 40 * 16 * 2 + 2 * (16 * 16 * 2 + 16 * 8 * 2 + 3 * 16 * 24 + 2 * 16) + 16
    assert seen["counts"] == (lora, base + lora), (
        f"trainable_parameters(model) after add_lora(micro Llama, 4, 8, ['q_proj', 'v_proj']): expected "
        f"{shown((lora, base + lora))}, got {shown(seen['counts'])}; r (in + out) per adapted layer, total with the adapters")


@pytest.mark.points(1)
@pytest.mark.concept("The chat template and the loss mask")
@pytest.mark.timeout(QUICK)
def test_labels_cover_the_reply_and_its_end_of_turn(submission):
    """one exchange: labels are the reply and its closing <|end|>, -100 everywhere else"""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    messages = [{"role": "user", "content": "the old cat sees anna."}, {"role": "assistant", "content": "cat"}]
    got = submission.probe(probes.tokenized, TOKENIZER, messages)
    ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    assert got["input_ids"] == list(ids), \
        f"tokenize_conversation's input_ids: expected the chat template's {shown(list(ids))}, got {shown(got['input_ids'])}"
    targets = [tokenizer.convert_ids_to_tokens(t) for t in got["labels"] if t != -100]
    assert targets == ["▁cat", "<|end|>"], \
        f"tokenize_conversation's tokens with labels (not -100): expected ['▁cat', '<|end|>'], got {shown(targets)}"
    assert got["attention_mask"] == [1] * len(ids), \
        f"tokenize_conversation's attention_mask: expected {len(ids)} ones, got {shown(got['attention_mask'])}"


def segments(row):
    """A packed row as its examples, cut where position_ids restart: [(input_ids, labels), ...], sorted."""
    starts = [i for i, p in enumerate(row["position_ids"]) if p == 0] + [len(row["position_ids"])]
    return sorted((tuple(row["input_ids"][a:b]), tuple(row["labels"][a:b])) for a, b in zip(starts, starts[1:]))


@pytest.mark.points(1)
@pytest.mark.concept("Packing")
@pytest.mark.timeout(QUICK)
def test_pack_fills_rows_without_padding(submission):
    """four examples into rows of 4: examples whole, positions restart, first labels -100, long ones split"""
    examples = [{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}, {"input_ids": [6]}, {"input_ids": [7, 8, 9, 10, 11]}]
    rows = submission.pack(examples, 4)
    for row in rows:
        assert len(row["input_ids"]) == len(row["labels"]) == len(row["position_ids"]) <= 4, (
            f"a row of pack(examples, 4): expected input_ids, labels and position_ids of one length, at most 4, got "
            f"lengths {shown(tuple(len(row[key]) for key in ('input_ids', 'labels', 'position_ids')))} in {shown(row)}")
        assert all(p == 0 or p == q + 1 for q, p in zip(row["position_ids"], row["position_ids"][1:])), \
            f"a row's position_ids: expected to count up from 0 within each example, got {shown(row['position_ids'])}"
    tokens = sorted(t for row in rows for t in row["input_ids"])
    assert tokens == list(range(1, 12)), \
        f"the input_ids of all rows, sorted: expected every token exactly once, {shown(list(range(1, 12)))}, got {shown(tokens)}"
    got = sorted(segments(row) for row in rows)
    expected = sorted([[((7, 8, 9, 10), (-100, 8, 9, 10))],
                       [((1, 2, 3), (-100, 2, 3)), ((6,), (-100,))],
                       [((4, 5), (-100, 5)), ((11,), (-100,))]])
    got_ids, expected_ids = ([[ids for ids, _ in row] for row in packed] for packed in (got, expected))
    assert got_ids == expected_ids, (f"pack(examples, 4)'s rows, as their examples' input_ids: expected {shown(expected_ids)}, "
                                     f"got {shown(got_ids)}; best-fit decreasing (or first fit) gives the expected rows")
    assert got == expected, (f"pack(examples, 4)'s rows, as their examples' labels: expected "
                             f"{shown([[labels for _, labels in row] for row in expected])}, "
                             f"got {shown([[labels for _, labels in row] for row in got])}")


@pytest.mark.points(1)
@pytest.mark.concept("Read the source")
@pytest.mark.timeout(60)
def test_where_in_source_names_installed_functions(submission):
    """every concept of the table resolves to a function of the installed trl, peft or transformers"""
    for concept in ["assistant_mask", "assistant_only_loss", "packing", "packed_boundaries", "all_linear",
                    "lora_init", "lora_scaling", "merge"]:
        path = submission.where_in_source(concept)
        assert isinstance(path, str) and path.split(".")[0] in {"trl", "peft", "transformers"}, \
            f"where_in_source({shown(concept)}): expected a dotted path inside trl, peft or transformers, got {shown(path)}"
        parts = path.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                target = importlib.import_module(".".join(parts[:cut]))
                break
            except ImportError:
                continue
        for name in parts[cut:]:
            target = getattr(target, name, None)
            assert target is not None, \
                f"where_in_source({shown(concept)}) = {shown(path)}: expected every part to resolve, got nothing at {shown(name)}"
        assert callable(target), (f"where_in_source({shown(concept)}) = {shown(path)}: expected a function or method, "
                                  f"got a {type(target).__name__}")


@pytest.mark.points(1)
@pytest.mark.concept("Talking to the model")
@pytest.mark.timeout(60)
def test_generate_reply_decodes_the_new_tokens(submission):
    """greedy reply of the base model after the generation prompt: the new tokens only, as text"""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    messages = [{"role": "user", "content": "the old cat sees anna."}]
    got = submission.probe(probes.reply, TOKENIZER, messages, 5)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(TOKENIZER), AutoTokenizer.from_pretrained(TOKENIZER)
    asked = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")
    out = model.generate(**asked, max_new_tokens=5, do_sample=False, eos_token_id=[7, 2], pad_token_id=0)
    expected = tokenizer.decode(out[0, asked["input_ids"].shape[1]:], skip_special_tokens=True)
    assert got == expected, (f"generate_reply(tiny Llama, [user: 'the old cat sees anna.'], 5): expected {shown(expected)}, "
                             f"got {shown(got)}; greedy decoding of the new tokens only")


@pytest.mark.points(1)
@pytest.mark.concept("The real thing: peft + trl")
@pytest.mark.timeout(300)
def test_a_short_sft_run_saves_an_adapter(submission, tmp_path):
    """two steps of SFTTrainer on eight conversations: the adapter files, one loss per step, 147968 trainable"""
    rows = (COURSE.datasets / "sft" / "train.jsonl").read_text().splitlines()[:8]
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n")
    result = submission.sft_with_peft_trl(TOKENIZER, str(tmp_path / "train.jsonl"), str(tmp_path / "adapter"),
                                          max_steps=2, learning_rate=1e-3, batch_size=4)
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        assert (tmp_path / "adapter" / name).exists(), f"no {name} in out_dir: save the peft model with save_pretrained"
    r = learner_json(tmp_path / "adapter" / "adapter_config.json", tmp_path).get("r")
    assert r == 16, f"adapter_config.json's r: expected 16, got {shown(r)}"
    assert len(result["train_loss"]) == 2, (f"sft_with_peft_trl(max_steps=2)['train_loss']: expected 2 losses, one per step, "
                                            f"got {len(result['train_loss'])}: {shown(result['train_loss'])}")
    assert result["trainable_parameters"] == 147_968, (
        f"sft_with_peft_trl(...)['trainable_parameters']: expected 147968 (r=16 on all linear layers of the tiny Llama), "
        f"got {shown(result['trainable_parameters'])}")


# ---------------------------------------------------------------- more of each section

def _gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.mark.points(1)
@pytest.mark.concept("LoRA by hand")
@pytest.mark.timeout(QUICK)
def test_gradients_reach_only_the_adapters(submission):
    """the gradients of A and B are those of base(x) + x A^T B^T * alpha / r; the base gets none; a fresh A is
    Kaiming-uniform (within +-1/sqrt(in), spread as uniform); a bf16 base gets bf16 adapters"""
    g = _gen(11)
    weight, bias, x = torch.randn(9, 300, generator=g), torch.randn(9, generator=g), torch.randn(4, 300, generator=g)
    A, B, upstream = torch.randn(3, 300, generator=g), torch.randn(9, 3, generator=g), torch.randn(4, 9, generator=g)
    seen = submission.probe(probes.lora_details, weight, bias, 3, 6.0, x, A, B, upstream)
    a, b = A.clone().requires_grad_(True), B.clone().requires_grad_(True)
    (((x @ weight.T + bias + x @ a.T @ b.T * 2.0) * upstream).sum()).backward()
    for name, want in (("lora_A", a.grad), ("lora_B", b.grad)):
        assert seen["grads"].get(name) is not None, f"{name}.grad after backward: expected a gradient, got None"
        assert_close(seen["grads"][name], want, what=f"gradient of {name}", tensor=True, rtol=1e-4, atol=1e-4)
    leaked = sorted(name for name, grad in seen["grads"].items() if name.startswith("base") and grad is not None)
    assert not leaked, f"gradients after backward: expected none on the frozen base, got some on {shown(leaked)}"
    fresh, bound = seen["fresh_A"], 1 / math.sqrt(300)
    peak = float(fresh.abs().max())
    assert 0.5 * bound < peak <= bound * (1 + 1e-6), (
        f"a fresh lora_A (in=300)'s largest |value|: expected between {0.5 * bound:.4g} and {bound:.4g}, got {peak:.4g}; "
        f"kaiming_uniform_(a=sqrt(5)) draws within +-1/sqrt(in)")
    spread = float(fresh.std()) / (bound / math.sqrt(3))
    assert abs(spread - 1) < 0.15, (f"a fresh lora_A's std, as a multiple of a uniform one's in +-1/sqrt(in): "
                                    f"expected within 0.15 of 1.00, got {spread:.2f}")
    low = submission.probe(probes.lora_details, weight[:, :8].bfloat16(), None, 2, 4.0, x[:, :8].bfloat16(),
                           A[:2, :8].bfloat16(), B[:, :2].bfloat16(), upstream.bfloat16())
    assert low["dtypes"] == ["torch.bfloat16", "torch.bfloat16"], (
        f"the dtypes of lora_A and lora_B on a bf16 base: expected ['torch.bfloat16', 'torch.bfloat16'] (the base's), "
        f"got {shown(low['dtypes'])}")


@pytest.mark.points(1)
@pytest.mark.concept("LoRA by hand")
@pytest.mark.timeout(QUICK)
def test_dropout_acts_on_the_adapter_input_in_training_only(submission):
    """dropout 0.5 with A and B summing every feature into every output: in training each row's update is the same
    for all outputs (the input was dropped, not the output), some rows lose features, the base path is never
    dropped; in eval mode nothing is dropped"""
    g = _gen(12)
    weight, bias, x = torch.randn(4, 6, generator=g), torch.randn(4, generator=g), torch.rand(64, 6, generator=g) + 0.5
    A, B, upstream = torch.ones(1, 6), torch.ones(4, 1), torch.ones(64, 4)
    base = x @ weight.T + bias
    train = submission.probe(probes.lora_details, weight, bias, 1, 1.0, x, A, B, upstream, 0.5, True)
    update = train["out"] - base
    assert_close(update, update[:, :1].expand(-1, 4), tensor=True, rtol=1e-5, atol=1e-5,
                 what="the adapter's update in training, output by output (dropout on the output draws apart)")
    full = x.sum(1, keepdim=True)
    gap = float((update[:, :1] - full).abs().max())
    assert gap > 1e-3, (f"dropout 0.5 in training, largest |update - undropped update| over 64 rows: expected above 0.001 "
                        f"(some feature dropped), got {shown(gap)}: no input feature was ever dropped")
    still = submission.probe(probes.lora_details, weight, bias, 1, 1.0, x, A, torch.zeros(4, 1), upstream, 0.5, True)
    assert_close(still["out"], base, what="a layer with B = 0 in training (the base path is never dropped)",
                 tensor=True, **FP32)
    evaluation = submission.probe(probes.lora_details, weight, bias, 1, 1.0, x, A, B, upstream, 0.5, False)
    assert_close(evaluation["out"], base + full, what="the layer in eval mode (nothing dropped)", tensor=True, **FP32)


@pytest.mark.points(1)
@pytest.mark.concept("Merging")
@pytest.mark.timeout(QUICK)
def test_merged_is_a_plain_linear_and_leaves_the_layer_alone(submission):
    """a base without bias: merged() is an nn.Linear computing what the layer computes; the layer's base weight is
    unchanged"""
    g = _gen(13)
    weight, x = torch.randn(3, 5, generator=g), torch.randn(7, 5, generator=g)
    A, B = torch.randn(2, 5, generator=g), torch.randn(3, 2, generator=g)
    seen = submission.probe(probes.lora_details, weight, None, 2, 3.0, x, A, B, torch.ones(7, 3))
    assert seen["merged_type"] == "Linear", \
        f"type(merged()).__name__: expected 'Linear' (a plain nn.Linear), got {shown(seen['merged_type'])}"
    assert_close(seen["merged_out"], x @ (weight + 1.5 * B @ A).T, what="merged()(x)", tensor=True, **FP32)
    assert seen["base_weight_kept"], "merged() changed the LoRA layer's base weight: build a new layer instead"
    assert_close(seen["unmerged_out"], seen["merged_out"], what="the LoRA layer after merged()", tensor=True, **FP32)


@pytest.mark.points(1)
@pytest.mark.concept("Adapters on a model")
@pytest.mark.timeout(QUICK)
def test_add_lora_by_name_list(submission):
    """a list selects modules whose dotted name ends with '.' + a name (the head too, when listed); a name that ends
    no module's name raises ValueError; everything outside the adapters is frozen"""
    seen = submission.probe(probes.adapted_model, MICRO_LLAMA, 2, 4, ["up_proj", "lm_head"])
    assert seen["returned_the_model"], "add_lora must return the model it adapted in place"
    expected = ["lm_head", "model.layers.0.mlp.up_proj", "model.layers.1.mlp.up_proj"]
    assert seen["adapted"] == expected, (f"add_lora(micro Llama, 2, 4, ['up_proj', 'lm_head']) adapted modules: expected "
                                         f"{shown(expected)}, got {shown(seen['adapted'])}")
    others = [name for name in seen["trainable"] if not name.endswith((".lora_A", ".lora_B"))]
    assert all(name.endswith((".lora_A", ".lora_B")) for name in seen["trainable"]), \
        f"trainable parameters after add_lora: expected only lora_A / lora_B, got also {shown(others)}"
    with pytest.raises(StudentError) as raised:
        submission.probe(probes.adapted_model, MICRO_LLAMA, 2, 4, ["proj"])
    assert raised.value.info["type"] == "ValueError", (
        f"add_lora(micro Llama, 2, 4, ['proj']): expected a 'ValueError', got a {shown(raised.value.info['type'])}; every "
        f"projection ends with '_proj', none with '.proj': a name is matched by its last components, not as a substring")


@pytest.mark.points(1)
@pytest.mark.concept("Adapters on a model")
@pytest.mark.timeout(QUICK)
def test_trainable_parameters_counts_a_tied_weight_once(submission):
    """tied embeddings, adapters on q_proj: (trainable, total) as peft's get_nb_trainable_parameters counts them"""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, LlamaConfig
    config = {**MICRO_LLAMA, "tie_word_embeddings": True}
    seen = submission.probe(probes.adapted_model, config, 2, 4, ["q_proj"])
    model = AutoModelForCausalLM.from_config(LlamaConfig(**config))
    expected = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"])).get_nb_trainable_parameters()
    assert tuple(seen["counts"]) == tuple(expected), (
        f"trainable_parameters(model) with tied embeddings, adapters on q_proj: expected {shown(tuple(expected))} as peft "
        f"counts, got {shown(tuple(seen['counts']))} (a tied weight is one parameter)")


@pytest.mark.points(1)
@pytest.mark.concept("The chat template and the loss mask")
@pytest.mark.timeout(QUICK)
def test_labels_of_a_multi_turn_conversation(submission):
    """a system prompt and two exchanges, the pad token set to <|end|>: labels exactly where the template's mask is,
    every <|end|> that closes a reply kept, unshifted; max_length keeps the first tokens"""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    messages = [{"role": "system", "content": "answer with one word: the first noun."},
                {"role": "user", "content": "a quiet owl finds the lamp."}, {"role": "assistant", "content": "owl"},
                {"role": "user", "content": "the lamp sleeps."}, {"role": "assistant", "content": "lamp"}]
    template = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ids = list(template["input_ids"])
    expected = [t if keep else -100 for t, keep in zip(ids, template["assistant_masks"])]
    got = submission.probe(probes.chat_tokens, TOKENIZER, messages, None, "<|end|>")
    assert got["input_ids"] == ids, (
        f"tokenize_conversation's input_ids: expected the chat template's {len(ids)} tokens, got {len(got['input_ids'])}; "
        f"{_from_first_difference(got['input_ids'], ids)}")
    assert got["labels"] == expected, (
        f"tokenize_conversation's tokens with labels: expected {shown(_labelled(tokenizer, expected))} (the template's "
        f"mask), got {shown(_labelled(tokenizer, got['labels']))}; mask by position, never by token id\n"
        f"its labels {_from_first_difference(got['labels'], expected)}")
    cut = submission.probe(probes.chat_tokens, TOKENIZER, messages, 20)
    assert cut["input_ids"] == ids[:20], \
        f"tokenize_conversation(max_length=20)['input_ids']: expected {shown(ids[:20])}, got {shown(cut['input_ids'])}"
    assert cut["labels"] == expected[:20], \
        f"tokenize_conversation(max_length=20)['labels']: expected {shown(expected[:20])}, got {shown(cut['labels'])}"
    assert cut["attention_mask"] == [1] * 20, (f"tokenize_conversation(max_length=20)['attention_mask']: expected 20 ones, "
                                               f"got {shown(cut['attention_mask'])}")


def _from_first_difference(got, expected, width=6):
    """Two lists from the first index where they differ (the shorter one's length when one starts the other)."""
    at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    if at == len(got) == len(expected):
        return f"the same values, but expected a {type(expected).__name__}, got a {type(got).__name__}"
    return f"from index {at}: expected {shown(expected[at:at + width])}, got {shown(got[at:at + width])}"


def _differing(these, those):
    """The entries of the dict `these` that the dict `those` lacks or holds differently."""
    return {key: value for key, value in these.items() if those.get(key) != value}


def _labelled(tokenizer, labels):
    """The tokens that carry a label (not -100), as text."""
    return [tokenizer.convert_ids_to_tokens(t) for t in labels if t != -100]


def _rows_of(rows):
    return sorted(tuple(row["input_ids"]) for row in rows)


@pytest.mark.points(1)
@pytest.mark.concept("Packing")
@pytest.mark.timeout(QUICK)
def test_pack_keeps_labels_skips_empties_and_leaves_no_mergeable_rows(submission):
    """rows of 6: an example's own labels kept (its first one -100), empty examples skipped, no tokens at all gives no
    rows, and no two rows fit together"""
    examples = [{"input_ids": [11, 12, 13, 14], "labels": [-100, -100, 13, 14]}, {"input_ids": []},
                {"input_ids": [21, 22]}, {"input_ids": [31, 32, 33], "labels": [31, -100, 33], "id": 3},
                {"input_ids": [41]}, {"input_ids": [51, 52, 53, 54, 55]}]
    rows = submission.pack(examples, 6)
    lengths = sorted(len(row["input_ids"]) for row in rows)
    assert sum(lengths) == 15, \
        f"pack(examples, 6)'s rows: expected 15 tokens in all, got {shown(sum(lengths))} in rows of {shown(lengths)}"
    assert all(n <= 6 for n in lengths), \
        f"pack(examples, 6)'s row lengths: expected every one at most 6, got {shown(lengths)}"
    for i, a in enumerate(lengths):
        for b in lengths[i + 1:]:
            assert a + b > 6, (f"pack(examples, 6)'s row lengths: expected no two rows that fit in one row of 6, got "
                               f"{shown(lengths)} (rows of {a} and {b}): open a row only when none fits")
    pieces = {}
    for row in rows:
        starts = [i for i, p in enumerate(row["position_ids"]) if p == 0] + [len(row["position_ids"])]
        for a, b in zip(starts, starts[1:]):
            pieces[tuple(row["input_ids"][a:b])] = row["labels"][a:b]
    want = {(11, 12, 13, 14): [-100, -100, 13, 14], (21, 22): [-100, 22], (31, 32, 33): [-100, -100, 33],
            (41,): [-100], (51, 52, 53, 54, 55): [-100, 52, 53, 54, 55]}
    assert pieces == want, (
        f"pack(examples, 6)'s examples (cut where position_ids restart) and labels, where they differ: expected "
        f"{shown(_differing(want, pieces))}, got {shown(_differing(pieces, want))}")
    nothing = submission.pack([{"input_ids": []}], 4)
    assert nothing == [], f"pack([{{'input_ids': []}}], 4): expected [] (no tokens, no rows), got {shown(nothing)}"


@pytest.mark.points(1)
@pytest.mark.concept("Talking to the model")
@pytest.mark.timeout(60)
def test_the_reply_stops_at_the_end_of_turn(submission, tmp_path):
    """a model rigged to answer 'dog', then <|end|>, then 'owl' forever: the reply is 'dog' (stop at <|end|>, not only
    at </s>), and the model, handed over in train mode, is left in train mode"""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(TOKENIZER, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    dog, owl, assistant = tokenizer.convert_tokens_to_ids(["▁dog", "▁owl", "<|assistant|>"])
    with torch.no_grad():                   # blocks that add nothing: the logits read the last token's embedding
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed = model.get_input_embeddings().weight
        head = torch.zeros_like(model.lm_head.weight)
        for token, following in ((assistant, dog), (dog, END_OF_TURN), (END_OF_TURN, owl), (owl, owl)):
            head[following] = 50 * embed[token] / embed[token].norm()
        model.lm_head.weight.copy_(head)
    model.save_pretrained(tmp_path / "rigged")
    tokenizer.save_pretrained(tmp_path / "rigged")
    messages = [{"role": "user", "content": "the old dog sees anna."}]
    seen = submission.probe(probes.reply_and_mode, str(tmp_path / "rigged"), messages, 6, True)
    assert seen["reply"] == "dog", (f"generate_reply(rigged model, 6 new tokens): expected 'dog', got {shown(seen['reply'])}; "
                                    "it says 'dog' then <|end|>: stop at <|end|> as well as </s>, decode only the new tokens")
    assert seen["training_after"], "the model came in train mode and left in eval mode: restore the mode it was in"


@pytest.mark.points(1)
@pytest.mark.concept("The real thing: peft + trl")
@pytest.mark.timeout(300)
def test_the_sft_run_trains_adapters_only_and_writes_inside_out_dir(submission, tmp_path):
    """three steps: LoraConfig(r=16, alpha=32, dropout=0.05, all-linear, CAUSAL_LM) saved, LoRA weights only in the
    file, the base weights unchanged, nothing written outside out_dir"""
    from safetensors import safe_open
    rows = (COURSE.datasets / "sft" / "train.jsonl").read_text().splitlines()[8:20]
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "work").mkdir()
    ids = torch.tensor([[1, 5, 20, 30, 7, 6]])
    seen = submission.probe(probes.sft_run, TOKENIZER, str(tmp_path / "train.jsonl"), str(tmp_path / "out"),
                            {"max_steps": 3, "learning_rate": 2e-3, "batch_size": 4}, str(tmp_path / "work"), ids)
    assert seen["left_in_work_dir"] == [], (f"files the run left in the working directory: expected [], got "
                                            f"{shown(seen['left_in_work_dir'])}; give the trainer an output_dir inside out_dir")
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["out", "train.jsonl", "work"], \
        f"the folder around out_dir after the run: expected ['out', 'train.jsonl', 'work'], got {shown(written)}"
    assert seen.get("base_weights_kept"), "the base model's weights changed in training: only the adapters train"
    config = learner_json(tmp_path / "out" / "adapter_config.json", tmp_path)
    got = {key: config.get(key) for key in ("r", "lora_alpha", "lora_dropout", "task_type")}
    want = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "task_type": "CAUSAL_LM"}
    assert got == want, f"adapter_config.json: expected {shown(want)} (the contract's LoraConfig), got {shown(got)}"
    projections = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert set(config.get("target_modules") or []) == projections, (
        f"adapter_config.json's target_modules: expected the seven projections {shown(sorted(projections))} "
        f"(all-linear on a Llama), got {shown(config.get('target_modules'))}")
    with tempfile.TemporaryDirectory() as trusted:
        adapter = lora_adapter_copy(tmp_path / "out", tmp_path, 16, Path(trusted))
        with safe_open(str(adapter / "adapter_model.safetensors"), "pt") as weights:
            names = list(weights.keys())
    assert names and all("lora_" in name for name in names), \
        f"adapter_model.safetensors holds {[n for n in names if 'lora_' not in n][:3]}: save the LoRA weights only"
    assert len(seen["result"]["train_loss"]) == 3, (f"sft_with_peft_trl(max_steps=3)['train_loss']: expected 3 losses, one "
                                                    f"per step, got {len(seen['result']['train_loss'])}: "
                                                    f"{shown(seen['result']['train_loss'])}")
    batch = seen["first_batch"]
    assert batch is not None and "labels" in batch, "the trainer computed no loss on a batch with labels"
    labelled = set(batch["labels"][batch["labels"] != -100].tolist())
    markers = {1: "<s>", 4: "<|system|>", 5: "<|user|>", 6: "<|assistant|>"}
    assert not labelled & set(markers), (
        f"the trainer's first batch: expected no labels on {shown(list(markers.values()))}, got labels on "
        f"{shown([markers[t] for t in sorted(labelled & set(markers))])}; with assistant_only_loss=True only the replies "
        "and their <|end|> are targets")
    assert END_OF_TURN in labelled, ("the trainer's first batch: expected labels on <|end|> (it closes each reply), got "
                                     "none there; with assistant_only_loss=True the replies and their <|end|> are targets")


@pytest.mark.points(1)
@pytest.mark.concept("Does it learn?")
@pytest.mark.timeout(300)
def test_a_few_steps_lower_the_loss_and_the_adapter_reloads(submission, tmp_path):
    """six steps of 4 conversations at 3e-3: the loss falls, and the saved adapter, reloaded with peft (and merged),
    gives the logits the trained model gave"""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    rows = (COURSE.datasets / "sft" / "train.jsonl").read_text().splitlines()[100:124]
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "work").mkdir()
    ids = torch.tensor([[1, 5, 40, 90, 120, 7, 6]])
    seen = submission.probe(probes.sft_run, TOKENIZER, str(tmp_path / "train.jsonl"), str(tmp_path / "out"),
                            {"max_steps": 6, "learning_rate": 3e-3, "batch_size": 4}, str(tmp_path / "work"), ids)
    losses = seen["result"]["train_loss"]
    assert len(losses) == 6, \
        f"sft_with_peft_trl(max_steps=6)['train_loss']: expected 6 losses, one per step, got {len(losses)}: {shown(losses)}"
    assert losses[-1] < 0.8 * losses[0], (
        f"training losses: expected the last below 0.8 x the first, {shown(round(0.8 * losses[0], 2))}, got "
        f"{shown([round(x, 2) for x in losses])}; six steps at 3e-3 bring the reply loss well down")
    assert "logits" in seen, "no SFTTrainer was trained: nothing to compare the adapter with"
    with tempfile.TemporaryDirectory() as trusted:
        adapter = str(lora_adapter_copy(seen["result"]["adapter_dir"], tmp_path, 16, Path(trusted)))
        base = AutoModelForCausalLM.from_pretrained(TOKENIZER, dtype=torch.float32)
        reloaded = PeftModel.from_pretrained(base, adapter).eval()
        with torch.no_grad():
            logits = reloaded(input_ids=ids).logits
            merged = reloaded.merge_and_unload()(input_ids=ids).logits
    scale = dict(rtol=0.0, atol=RELOAD * (1 + float(logits.abs().max())))
    assert_close(seen["logits"], logits, what="your trained model's logits against its adapter reloaded", tensor=True,
                 **scale)
    assert_close(merged, logits, what="the merged model's logits against the reloaded adapter", tensor=True, **scale)
