"""Tests of the shipped datasets/ artifacts: they match their manifest, rebuild bit-for-bit, load offline
with the Hugging Face stack, and have the properties the exercises rely on (loss floor, assistant mask,
parameter counts, planted regressions)."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing here may come from a hub

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / "datasets"
MODEL_DIR = DATASETS / "tiny_llama"
BUILD = DATASETS / "build.py"
LLAMA_3_8B_PARAMS = 8_030_261_248  # published figure for Meta-Llama-3-8B
# Other published totals, as cross-checks of the zoo configs (the build computes counts, never reads these).
PUBLISHED_PARAMS = {
    "llama-3-8b": LLAMA_3_8B_PARAMS, "llama-3-70b": 70_553_706_496, "llama-3.2-1b": 1_235_814_400,
    "mistral-7b": 7_241_732_096, "qwen2.5-7b": 7_615_616_512, "mixtral-8x7b": 46_702_792_704,
    "gpt2": 124_439_808,
}
END_OF_TURN, ASSISTANT = "<|end|>", "<|assistant|>"


def run(*args: str, cwd: Path = ROOT, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((DATASETS / "MANIFEST.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def facts(manifest) -> dict:
    return manifest["facts"]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MODEL_DIR)


@pytest.fixture(scope="module")
def model():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(MODEL_DIR).eval()


@pytest.fixture(scope="module")
def eval_rows() -> list[dict]:
    return read_jsonl(DATASETS / "corpus" / "eval.jsonl")


@pytest.fixture(scope="module")
def grammar_module():
    """datasets/grammar_source.py, loaded by path (datasets/ is not a package)."""
    sys.path.insert(0, str(DATASETS))  # grammar_source imports its sibling stable_random by name
    try:
        spec = importlib.util.spec_from_file_location("datasets_grammar_source", DATASETS / "grammar_source.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(DATASETS))
    return module


@pytest.fixture(scope="module")
def checker():
    spec = importlib.util.spec_from_file_location("sft_checker", DATASETS / "sft" / "checker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the folder is data, not a package ------------------------------------------------------------------

def test_import_datasets_is_hugging_face_package():
    result = run("-c", "import datasets; print(datasets.__file__)")
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip()).resolve()
    assert "site-packages" in path.parts and path.parent.name == "datasets", path
    assert DATASETS not in path.parents, f"`import datasets` resolved to the repo folder: {path}"


def test_datasets_folder_is_never_a_package():
    assert not list(DATASETS.rglob("__init__.py"))


# --- manifest, verify, rebuild ------------------------------------------------------------------------------

def test_verify_passes():
    result = run(str(BUILD), "--verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 failed" in result.stdout


def test_verify_catches_changed_missing_and_unlisted_files(tmp_path):
    copy = tmp_path / "datasets"
    shutil.copytree(DATASETS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "sft" / "eval.jsonl", "a", encoding="utf-8") as f:
        f.write("\n")
    (copy / "configs" / "gpt2.json").unlink()
    (copy / "corpus" / "stray.txt").write_text("not built by the build\n")
    result = run(str(copy / "build.py"), "--verify", "--out", str(copy))
    assert result.returncode == 1
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert any("sft/eval.jsonl" in line and "size" in line for line in failed), result.stdout
    assert any("configs/gpt2.json" in line and "missing" in line for line in failed), result.stdout
    assert any("corpus/stray.txt" in line and "not listed" in line for line in failed), result.stdout
    assert len(failed) == 3, result.stdout


def test_manifest_lists_every_artifact_with_a_consistent_data_version(manifest):
    files = manifest["files"]
    for rel, entry in files.items():
        path = DATASETS / rel
        assert path.stat().st_size == entry["bytes"], rel
        assert entry["description"].strip(), rel
    # data_version: sha256 over sorted "relpath sha256\n" lines of the files marked in_data_version
    lines = "".join(f"{rel} {files[rel]['sha256']}\n" for rel in sorted(files) if files[rel]["in_data_version"])
    assert manifest["data_version"] == hashlib.sha256(lines.encode()).hexdigest()
    # Trained weights are listed but left out of it; every file this suite's data builders write is in it.
    # (Other builders may add machine-dependent files, such as recorded profiles, outside it too.)
    assert files["tiny_llama/model.safetensors"]["in_data_version"] is False
    for rel, entry in files.items():
        if rel.split("/")[0] in {"corpus", "sft", "configs", "eval_results", "tiny_llama"}:
            assert entry["in_data_version"] == (rel != "tiny_llama/model.safetensors"), rel
    assert manifest["data_version_rule"]
    assert sum(e["bytes"] for e in files.values()) <= 20 * 1024 * 1024


def test_manifest_facts_have_the_documented_shape(facts):
    assert facts["corpus"]["loss_floor_nats_per_token"] > 0
    for key in ("eval_loss", "n_params", "train_seconds"):
        assert facts["tiny_llama"][key] > 0, key
    assert 0.0 <= facts["sft"]["base_accuracy"] <= 1.0 and 0.0 <= facts["sft"]["lora_accuracy"] <= 1.0
    assert set(facts["param_counts"]) >= set(PUBLISHED_PARAMS) | {"gemma-2b"}


@pytest.mark.e2e
@pytest.mark.full       # the files' integrity is checked in the default tier against the manifest (test_verify_passes)
def test_data_files_rebuild_bit_for_bit(tmp_path, manifest):
    out = tmp_path / "rebuilt"
    result = run(str(BUILD), "--data-only", "--out", str(out), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    rebuilt = json.loads((out / "MANIFEST.json").read_text())
    data_files = {rel for rel, e in manifest["files"].items() if e["in_data_version"]}
    assert set(rebuilt["files"]) == data_files  # no weights without training, every data file present
    for rel in sorted(data_files):
        assert sha256(out / rel) == manifest["files"][rel]["sha256"], f"{rel} did not rebuild bit-for-bit"
    assert rebuilt["data_version"] == manifest["data_version"]
    assert rebuilt["facts"]["corpus"] == manifest["facts"]["corpus"]
    assert rebuilt["facts"]["param_counts"] == manifest["facts"]["param_counts"]


# --- corpus and loss floor -------------------------------------------------------------------------------

def test_corpus_rows_have_the_documented_form(tokenizer, eval_rows):
    train_rows = read_jsonl(DATASETS / "corpus" / "train.jsonl")
    for rows in (train_rows, eval_rows):
        assert all(set(r) == {"id", "text", "input_ids", "source_nll"} for r in rows)
        ids = tokenizer([r["text"] for r in rows])["input_ids"]
        for row, encoded in zip(rows, ids):
            # input_ids = tokenizer(text).input_ids (which starts with <s>) + [</s>]
            assert encoded[0] == tokenizer.bos_token_id
            assert row["input_ids"] == encoded + [tokenizer.eos_token_id]
            assert tokenizer.unk_token_id not in row["input_ids"]
        assert max(len(r["input_ids"]) for r in rows) <= 512


def test_loss_floor_is_mean_source_nll_per_predicted_token(facts, eval_rows, grammar_module):
    n_predicted = sum(len(r["input_ids"]) - 1 for r in eval_rows)
    floor = sum(r["source_nll"] for r in eval_rows) / n_predicted
    assert floor == pytest.approx(facts["corpus"]["loss_floor_nats_per_token"], abs=1e-6)
    # The stored source_nll agrees with the grammar's own log-probability of each text (a separate code
    # path from the sampler), and each document has one token per word plus <s> and </s>.
    grammar = grammar_module.Grammar()
    for row in eval_rows[:300]:
        words = row["text"].replace(".", " .").split()
        logps = grammar.log_prob(words)
        assert len(logps) == len(row["input_ids"]) - 1
        assert -sum(logps) == pytest.approx(row["source_nll"], abs=1e-5)


def test_grammar_log_prob_matches_the_sampler(grammar_module):
    import math
    import random

    grammar = grammar_module.Grammar()
    rng = random.Random(123)
    for _ in range(200):
        tokens = grammar.sample_document(rng)
        words = [t.word for t in tokens if t.word is not None]
        assert grammar.log_prob(words) == pytest.approx([math.log(t.prob) for t in tokens], abs=1e-9)
    # text outside the grammar has probability zero
    assert grammar.log_prob(["cat", "the", "."])[0] == -math.inf


# --- tokenizer -----------------------------------------------------------------------------------------------

def test_tokenizer_and_model_load_offline_in_a_fresh_process():
    code = ("from transformers import AutoModelForCausalLM, AutoTokenizer; "
            "t = AutoTokenizer.from_pretrained('datasets/tiny_llama'); "
            "m = AutoModelForCausalLM.from_pretrained('datasets/tiny_llama'); "
            "print(type(m).__name__, len(t))")
    result = run("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "LlamaForCausalLM"


def test_special_tokens_are_single_ids_and_never_split(tokenizer):
    specials = ["<pad>", "<s>", "</s>", "<unk>", "<|system|>", "<|user|>", ASSISTANT, END_OF_TURN]
    assert [tokenizer.pad_token, tokenizer.bos_token, tokenizer.eos_token] == specials[:3]
    ids = [tokenizer.convert_tokens_to_ids(t) for t in specials]
    assert len(set(ids)) == len(specials)
    for token, token_id in zip(specials, ids):
        assert token in tokenizer.all_special_tokens
        assert tokenizer.encode(token, add_special_tokens=False) == [token_id]
        glued = tokenizer.encode(f"the cat{token}sleeps.", add_special_tokens=False)
        assert glued.count(token_id) == 1 and len(glued) == 5, (token, glued)


def test_round_trip_is_exact_on_corpus_and_chat_text(tokenizer, eval_rows):
    rows = eval_rows + read_jsonl(DATASETS / "corpus" / "train.jsonl")
    decoded = tokenizer.batch_decode([r["input_ids"] for r in rows], skip_special_tokens=True)
    mismatches = [(r["text"], d) for r, d in zip(rows, decoded) if r["text"] != d]
    assert not mismatches, mismatches[:3]
    texts = [m["content"] for r in read_jsonl(DATASETS / "sft" / "train.jsonl") for m in r["messages"]]
    texts += ["12 + 30 = 42.", "(7 * 6) / 2 = 21!"]
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.unk_token_id not in ids, text
        assert tokenizer.decode(ids) == text


# --- chat template and assistant mask ----------------------------------------------------------------------

def expected_assistant_mask(ids: list[int], tokenizer) -> list[int]:
    """1 from the token after each <|assistant|> header up to and including the <|end|> that closes it."""
    start, end = tokenizer.convert_tokens_to_ids(ASSISTANT), tokenizer.convert_tokens_to_ids(END_OF_TURN)
    mask, inside = [], False
    for token in ids:
        mask.append(1 if inside else 0)
        if token == start:
            inside = True
        elif token == end:
            inside = False
    return mask


CONVERSATIONS = [
    [{"role": "user", "content": "the old cat sees my dog."},
     {"role": "assistant", "content": "cat"}],
    [{"role": "system", "content": "reply with the first noun only."},
     {"role": "user", "content": "anna sleeps."},
     {"role": "assistant", "content": "anna"},
     {"role": "user", "content": "each tired fox chases the bird near the river."},
     {"role": "assistant", "content": "fox"},
     {"role": "user", "content": "what is 12 + 30?"},
     {"role": "assistant", "content": "the answer is 42."}],
]


@pytest.mark.parametrize("messages", CONVERSATIONS, ids=["single_turn", "multi_turn_with_system"])
def test_assistant_mask_marks_exactly_the_replies_and_their_end_of_turn(tokenizer, messages):
    out = tokenizer.apply_chat_template(messages, return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    assert ids[0] == tokenizer.bos_token_id
    assert mask == expected_assistant_mask(ids, tokenizer)
    # the masked spans, decoded, are the replies, each followed by <|end|>
    spans, current = [], []
    for token, m in zip(ids, mask):
        if m:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    assert [tokenizer.decode(s[:-1]) for s in spans] == replies
    assert all(s[-1] == tokenizer.convert_tokens_to_ids(END_OF_TURN) for s in spans)


def test_generation_prompt_ends_with_the_assistant_header(tokenizer):
    ids = tokenizer.apply_chat_template(CONVERSATIONS[0][:1], add_generation_prompt=True, return_dict=True)["input_ids"]
    assert ids[-1] == tokenizer.convert_tokens_to_ids(ASSISTANT)


def test_trl_accepts_the_template_for_assistant_only_loss(tokenizer):
    from trl.chat_template_utils import has_generation_markers, is_chat_template_stop_token_trained

    assert has_generation_markers(tokenizer.chat_template)
    assert is_chat_template_stop_token_trained(tokenizer)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # trl's own use of renamed TrainingArguments fields
def test_trl_sft_trainer_trains_on_assistant_tokens_only(tmp_path, tokenizer, model):
    import copy
    import math

    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    rows = read_jsonl(DATASETS / "sft" / "train.jsonl")[:16]
    config = SFTConfig(output_dir=str(tmp_path), assistant_only_loss=True, bf16=False, use_cpu=True, max_steps=1,
                       per_device_train_batch_size=8, report_to="none", save_strategy="no", seed=0)
    trainer = SFTTrainer(model=copy.deepcopy(model), args=config, train_dataset=Dataset.from_list(rows),
                         processing_class=tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
        expected = [t if m else -100 for t, m in zip(ids, expected_assistant_mask(ids, tokenizer))]
        assert labels == [e if t != tokenizer.pad_token_id else -100 for t, e in zip(ids, expected)]
    assert math.isfinite(trainer.train().training_loss)


# --- tiny Llama ------------------------------------------------------------------------------------------------

def test_model_is_a_small_gqa_llama_matching_the_manifest(model, tokenizer, facts):
    config = model.config
    assert type(model).__name__ == "LlamaForCausalLM"
    assert config.num_key_value_heads < config.num_attention_heads  # grouped-query attention
    assert config.vocab_size == len(tokenizer)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == facts["tiny_llama"]["n_params"]
    assert 500_000 <= n_params <= 3_000_000


def test_model_eval_loss_matches_manifest_and_sits_above_the_floor(model, eval_rows, facts):
    import torch

    rows = eval_rows[:500]
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(rows), 50):
            batch = [r["input_ids"] for r in rows[start:start + 50]]
            width = max(map(len, batch))
            ids = torch.tensor([b + [0] * (width - len(b)) for b in batch])
            mask = torch.tensor([[1] * len(b) + [0] * (width - len(b)) for b in batch])
            labels = ids.masked_fill(mask == 0, -100)
            n = int((labels[:, 1:] != -100).sum())
            total += model(input_ids=ids, attention_mask=mask, labels=labels).loss.item() * n
            count += n
    loss = total / count
    floor = sum(r["source_nll"] for r in rows) / sum(len(r["input_ids"]) - 1 for r in rows)
    recorded = facts["tiny_llama"]
    # half the eval split, so compare gaps to the floor (both move together with the sample)
    assert loss - floor == pytest.approx(recorded["gap_to_floor"], abs=0.03)
    assert floor < loss < floor + 0.2
    assert recorded["eval_loss"] == pytest.approx(facts["corpus"]["loss_floor_nats_per_token"]
                                                  + recorded["gap_to_floor"], abs=1e-9)


def test_sampled_text_looks_like_the_corpus(model, tokenizer, grammar_module):
    import torch

    grammar = grammar_module.Grammar()

    def sentence_follows_the_grammar(words: list[str]) -> bool:
        """The sentence's word classes are a path through the grammar (word choice not checked)."""
        state = "start1"
        for word in words:
            moves = [nxt for cls, nxt, _ in grammar_module.GRAMMAR[state] if cls == grammar.word_class.get(word)]
            if not moves:
                return False
            state = moves[0]
        return state == "sentence_end"

    torch.manual_seed(0)
    start = torch.tensor([[tokenizer.bos_token_id]] * 20)
    out = model.generate(start, do_sample=True, max_new_tokens=400, pad_token_id=tokenizer.pad_token_id)
    sentences = []
    for seq in out.tolist():
        assert tokenizer.eos_token_id in seq, "a document should end within 400 tokens"
        text = tokenizer.decode(seq[: seq.index(tokenizer.eos_token_id)], skip_special_tokens=True)
        assert text.endswith(".") and set(text.replace(".", " ").split()) <= set(grammar.words), text
        sentences += [s.split() + ["."] for s in text.split(".")[:-1]]
    grammatical = sum(map(sentence_follows_the_grammar, sentences)) / len(sentences)
    assert len(sentences) >= 40 and grammatical >= 0.85, f"{grammatical:.0%} of {len(sentences)} sentences"


# --- SFT data and checker -----------------------------------------------------------------------------------

def test_sft_data_is_multi_turn_chat_with_first_noun_answers(checker, grammar_module):
    nouns = set(grammar_module.WORD_CLASSES["NOUN"]) | set(grammar_module.WORD_CLASSES["NAME"])
    for split in ("train", "eval"):
        rows = checker.load_examples(DATASETS / "sft" / f"{split}.jsonl")
        assert rows and all(set(r) == {"messages"} for r in rows)
        assert any(r["messages"][0]["role"] == "system" for r in rows)
        assert any(r["messages"][0]["role"] != "system" for r in rows)
        assert any(sum(m["role"] == "user" for m in r["messages"]) > 1 for r in rows)
        for row in rows:
            turns = [m for m in row["messages"] if m["role"] != "system"]
            assert [m["role"] for m in turns] == ["user", "assistant"] * (len(turns) // 2)
            for question, reply in zip(turns[::2], turns[1::2]):
                first = next(w for w in question["content"].replace(".", "").split() if w in nouns)
                assert reply["content"] == first


def test_checker_scores_exact_matches_only(checker):
    examples = checker.load_examples(DATASETS / "sft" / "eval.jsonl")
    gold = [checker.gold_answer(e) for e in examples]
    assert checker.exact_match_accuracy(examples, gold) == 1.0
    assert checker.exact_match_accuracy(examples, [f" {g}\n" for g in gold]) == 1.0
    assert checker.exact_match_accuracy(examples, [g + "." for g in gold]) == 0.0
    assert checker.exact_match_accuracy(examples, [g.upper() for g in gold]) == 0.0
    half = gold[:100] + ["nothing"] * (len(gold) - 100)
    assert checker.exact_match_accuracy(examples, half) == pytest.approx(100 / len(gold))
    assert checker.prompt_messages(examples[0]) == examples[0]["messages"][:-1]
    with pytest.raises(ValueError):
        checker.exact_match_accuracy(examples, gold[:-1])


def test_recorded_sft_accuracies_show_a_skill_lora_teaches(facts):
    assert facts["sft"]["base_accuracy"] <= 0.05
    assert facts["sft"]["lora_accuracy"] >= 0.9


def test_base_model_cannot_do_the_sft_skill(model, tokenizer, checker):
    import torch

    examples = checker.load_examples(DATASETS / "sft" / "eval.jsonl")[:20]
    stop = [tokenizer.convert_tokens_to_ids(END_OF_TURN), tokenizer.eos_token_id]
    answers = []
    with torch.no_grad():
        for example in examples:
            enc = tokenizer.apply_chat_template(checker.prompt_messages(example), add_generation_prompt=True,
                                                return_dict=True, return_tensors="pt")
            out = model.generate(**enc, max_new_tokens=8, do_sample=False, eos_token_id=stop)
            answers.append(tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True))
    assert checker.exact_match_accuracy(examples, answers) <= 0.1


# --- model-config zoo ------------------------------------------------------------------------------------------

def meta_count(cfg: dict) -> tuple[int, object]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg))
    return sum(p.numel() for p in model.parameters()), model


def test_zoo_meta_device_counts_match_manifest_and_published_figures(facts):
    counts = facts["param_counts"]
    names = sorted(p.stem for p in (DATASETS / "configs").glob("*.json"))
    assert names == sorted(counts)
    models = {}
    for name in names:
        n, models[name] = meta_count(json.loads((DATASETS / "configs" / f"{name}.json").read_text()))
        assert n == counts[name], name
        if name in PUBLISHED_PARAMS:
            assert n == PUBLISHED_PARAMS[name], name
    assert counts["llama-3-8b"] == LLAMA_3_8B_PARAMS
    # the features each zoo entry is there to show
    assert models["llama-3.2-1b"].lm_head.weight is models["llama-3.2-1b"].model.embed_tokens.weight
    assert models["qwen2.5-7b"].model.layers[0].self_attn.q_proj.bias is not None
    assert models["llama-3-8b"].model.layers[0].self_attn.q_proj.bias is None
    gemma = models["gemma-7b"]
    assert gemma.lm_head.weight is gemma.model.embed_tokens.weight
    assert gemma.model.layers[0].self_attn.q_proj.weight.shape == (16 * 256, 3072)  # head_dim * heads != hidden
    assert models["mixtral-8x7b"].config.num_local_experts == 8
    assert models["gpt2"].lm_head.weight is models["gpt2"].transformer.wte.weight


# --- evaluation results with planted regressions --------------------------------------------------------

def test_planted_regressions_are_in_the_data_as_documented():
    import pandas as pd

    df = pd.read_json(DATASETS / "eval_results" / "eval_results.jsonl", lines=True, dtype={"gold": str,
                      "pred_baseline": str, "pred_new": str})
    doc = json.loads((DATASETS / "eval_results" / "planted_regressions.json").read_text())
    assert list(df.columns) == sorted(["id", "category", "prompt_tokens", "gold", "pred_baseline", "pred_new"])
    assert df["id"].is_unique and len(df) == 600
    readme = (DATASETS / "README.md").read_text(encoding="utf-8")
    names = set()
    for effect in doc["effects"]:
        where = effect["where"]
        rows = df
        if where.get("categories"):
            rows = rows[rows["category"].isin(where["categories"])]
        rows = rows[rows["prompt_tokens"].between(where.get("min_prompt_tokens", 0),
                                                  where.get("max_prompt_tokens", 10**9))]
        base_ok = rows["pred_baseline"].str.strip() == rows["gold"]
        new_ok = rows["pred_new"].str.strip() == rows["gold"]
        new_ok_stripped = rows["pred_new"].str.strip().str.strip("`") == rows["gold"]
        assert len(rows) == effect["n"], effect["name"]
        assert int(base_ok.sum()) == effect["baseline_correct"], effect["name"]
        assert int(new_ok.sum()) == effect["new_correct"], effect["name"]
        assert int(new_ok_stripped.sum()) == effect["new_correct_after_stripping_backticks"], effect["name"]
        assert base_ok.mean() == pytest.approx(effect["baseline_accuracy"], abs=5e-5)
        assert new_ok.mean() == pytest.approx(effect["new_accuracy"], abs=5e-5)
        if effect["kind"] == "regression":
            assert new_ok.mean() < base_ok.mean() - 0.1, effect["name"]
        if effect["kind"] == "improvement":
            assert new_ok.mean() > base_ok.mean() + 0.1, effect["name"]
        if effect["kind"] == "control":
            assert abs(new_ok.mean() - base_ok.mean()) < 0.05, effect["name"]
        assert effect["name"] in readme, f"{effect['name']} is not documented in datasets/README.md"
        names.add(effect["name"])
    assert {"long_prompt_retrieval_regression", "code_answers_wrapped_in_backticks"} <= names
    # the headline number hides the retrieval collapse: after stripping backticks new wins overall
    overall = next(e for e in doc["effects"] if e["kind"] == "aggregate")
    assert overall["new_accuracy_after_stripping_backticks"] > overall["baseline_accuracy"]


def test_readme_documents_every_artifact_folder_and_the_floor(manifest):
    readme = (DATASETS / "README.md").read_text(encoding="utf-8")
    for folder in {rel.split("/")[0] for rel in manifest["files"]}:
        assert f"{folder}/" in readme, folder
    assert f"{manifest['facts']['corpus']['loss_floor_nats_per_token']:.4f}" in readme
    assert "data_version" in readme and "MIT" in readme


# --- slow: retrain everything ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_full_rebuild_retrains_the_model_to_the_recorded_loss(tmp_path, manifest):
    out = tmp_path / "full"
    result = run(str(BUILD), "--out", str(out), timeout=1700)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rebuilt = json.loads((out / "MANIFEST.json").read_text())
    facts, recorded = rebuilt["facts"], manifest["facts"]
    assert rebuilt["data_version"] == manifest["data_version"]
    tolerance = recorded["tiny_llama"]["eval_loss_tolerance"]
    assert facts["tiny_llama"]["eval_loss"] == pytest.approx(recorded["tiny_llama"]["eval_loss"], abs=tolerance)
    assert facts["sft"]["base_accuracy"] <= 0.05 and facts["sft"]["lora_accuracy"] >= 0.9
