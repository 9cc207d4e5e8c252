"""Build every artifact in datasets/ from fixed seeds and write MANIFEST.json, or verify the tree.

    python datasets/build.py               # everything, into datasets/ (about 4.5 minutes on 2 idle cores)
    python datasets/build.py --data-only   # skip model training and the LoRA measurement
    python datasets/build.py --out DIR     # build into DIR instead of datasets/
    python datasets/build.py --verify      # check datasets/ (or --out DIR) against its MANIFEST.json

Each builder below writes its files, registers them with a one-line description, and adds its facts.
To add an artifact, write a builder function and append it to BUILDERS.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# datasets/ is deliberately not a package (so `import datasets` stays Hugging Face's); its modules
# import each other by plain name from this folder.
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here is generated locally; never reach a hub

import manifest  # noqa: E402


class Build:
    """What builders share: the output folder, the mode, and what has been written and measured."""

    def __init__(self, out: Path, data_only: bool):
        self.out, self.data_only = out, data_only
        self.files: dict[str, dict] = {}
        self.facts: dict = {}
        self.previous = manifest.read_manifest(out) if (out / manifest.MANIFEST).exists() else None
        self.tokenizer = None  # set by the tokenizer builder, used by later ones
        self.started = time.perf_counter()

    def add(self, rel: str, description: str, in_data_version: bool = True) -> None:
        """Register a file this build wrote. Files whose bytes a rebuild does not reproduce (trained
        weights) pass in_data_version=False: they are listed and verified like any file, but they do not
        change the data version (see manifest.py)."""
        self.files[rel] = manifest.file_entry(self.out, rel, description, in_data_version)

    def keep_previous_file(self, rel: str) -> bool:
        """--data-only: keep a trained file that is already in the output folder, listed with the sha256
        its manifest recorded, so --verify still catches a changed file."""
        if self.previous and rel in self.previous["files"] and (self.out / rel).exists():
            self.files[rel] = self.previous["files"][rel]
            return True
        return False

    def keep_previous_facts(self, section: str) -> None:
        """--data-only: carry the facts of a section that this build did not measure again (they came
        with a kept file)."""
        old = (self.previous or {}).get("facts", {}).get(section, {})
        new = self.facts.setdefault(section, {})
        new.update({k: v for k, v in old.items() if k not in new})

    def log(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.started:6.1f}s] {message}", flush=True)


def build_tokenizer_and_corpus(b: Build) -> None:
    from corpus_files import build_corpus
    from transformers import AutoTokenizer
    from word_tokenizer import SPECIAL_TOKENS, save_tokenizer

    descriptions = {
        "tokenizer.json": "word-level tokenizer (tokenizers library): vocabulary, pre-tokenizer, decoder, "
                          "<s> post-processor",
        "tokenizer_config.json": "transformers tokenizer settings: special tokens and the chat template with "
                                 "{% generation %} markers",
    }
    for name in save_tokenizer(b.out / "tiny_llama"):
        b.add(f"tiny_llama/{name}", descriptions[name])
    # Load it back the way users will, so the corpus is tokenized by exactly what ships.
    b.tokenizer = AutoTokenizer.from_pretrained(b.out / "tiny_llama")
    b.facts["tokenizer"] = {"vocab_size": len(b.tokenizer),
                            "special_tokens": {t: b.tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}}
    b.facts["corpus"] = build_corpus(b.out / "corpus", b.tokenizer)
    b.add("corpus/train.jsonl", "pretraining corpus, train split: text, input_ids (<s> ... </s>), source_nll")
    b.add("corpus/eval.jsonl", "pretraining corpus, eval split: text, input_ids (<s> ... </s>), source_nll")
    b.log(f"corpus built; eval loss floor {b.facts['corpus']['loss_floor_nats_per_token']:.4f} nats/token")


def build_sft(b: Build) -> None:
    from sft_task import build_sft_data

    b.facts["sft"] = build_sft_data(b.out / "sft", b.tokenizer)
    if b.out.resolve() != HERE:  # the checker is hand-written source that ships with the data
        shutil.copyfile(HERE / "sft" / "checker.py", b.out / "sft" / "checker.py")
    b.add("sft/train.jsonl", "SFT conversations (messages: system/user/assistant), train split")
    b.add("sft/eval.jsonl", "SFT conversations, eval split; the last assistant message is the gold answer")
    b.add("sft/checker.py", "exact-match checker for SFT answers (standard library only, load by path)")
    b.log("SFT data built")


def build_tiny_llama(b: Build) -> None:
    from jsonl import read_jsonl
    from tiny_llama_training import (
        EVAL_LOSS_TOLERANCE,
        SCRATCH_30S,
        TRAINING,
        eval_loss,
        make_config,
        train,
        write_model_configs,
    )

    folder = b.out / "tiny_llama"
    write_model_configs(folder, b.tokenizer)
    b.add("tiny_llama/config.json", "LlamaConfig of the tiny pretrained model (GQA, untied embeddings)")
    b.add("tiny_llama/generation_config.json", "generation defaults: stop at </s> or <|end|>")
    if b.data_only:
        if b.keep_previous_file("tiny_llama/model.safetensors"):
            b.keep_previous_facts("tiny_llama")
        return
    train_rows, eval_rows = read_jsonl(b.out / "corpus" / "train.jsonl"), read_jsonl(b.out / "corpus" / "eval.jsonl")
    floor = b.facts["corpus"]["loss_floor_nats_per_token"]
    config = make_config(b.tokenizer)

    b.log(f"training the tiny Llama ({TRAINING['steps']} steps)")
    model, watch, curve = train(config, train_rows, eval_rows, eval_every=TRAINING["steps"] // 8, log=b.log,
                                **TRAINING)
    loss = eval_loss(model, eval_rows)
    model.save_pretrained(folder, safe_serialization=True)
    write_model_configs(folder, b.tokenizer)  # same bytes as --data-only writes
    b.add("tiny_llama/model.safetensors", "weights of the tiny pretrained Llama (fp32)", in_data_version=False)

    # A short run from scratch, as the training-loop exercise does, to show how close ~30 s gets.
    b.log(f"reference from-scratch run ({SCRATCH_30S['steps']} steps)")
    scratch_model, scratch_watch, _ = train(config, train_rows, eval_rows, log=b.log, **SCRATCH_30S)
    scratch_loss = eval_loss(scratch_model, eval_rows)

    b.facts["tiny_llama"] = {
        "eval_loss": loss, "gap_to_floor": loss - floor, "eval_loss_tolerance": EVAL_LOSS_TOLERANCE,
        "n_params": sum(p.numel() for p in model.parameters()), **watch.facts("train_"),
        "training": TRAINING, "curve": curve,
        "scratch_30s": {**SCRATCH_30S, **scratch_watch.facts("train_"), "eval_loss": scratch_loss,
                        "gap_to_floor": scratch_loss - floor},
    }
    b.log(f"tiny Llama eval loss {loss:.4f} (floor {floor:.4f}); "
          f"{SCRATCH_30S['steps']} steps from scratch: {scratch_loss:.4f}")


def build_sft_reference(b: Build) -> None:
    if b.data_only:  # the measurement belongs to the kept weights, if any
        if "tiny_llama/model.safetensors" in b.files:
            b.keep_previous_facts("sft")
        return
    from lora_reference import measure

    b.facts["sft"].update(measure(b.out / "tiny_llama", b.out / "sft", log=b.log))


def build_zoo(b: Build) -> None:
    from model_zoo import ZOO, build_model_zoo

    b.facts["param_counts"] = build_model_zoo(b.out / "configs")
    for name in ZOO:
        b.add(f"configs/{name}.json", f"published architecture config of {name} (no weights)")
    b.log("model zoo configs written and counted")


def build_eval_results(b: Build) -> None:
    from eval_results_builder import build_eval_results as build

    b.facts["eval_results"] = build(b.out / "eval_results")
    b.add("eval_results/eval_results.jsonl", "per-question results of a baseline and a new model, planted effects")
    b.add("eval_results/planted_regressions.json", "the planted effects, as filters and exact expected counts")
    b.log("eval results written")


def build_profiles(b: Build) -> None:
    """Profiler fixtures for exercise 05, made by profiles_build.py: synthetic CUDA profiles, rebuilt
    bit-for-bit, and a real CPU recording, which is data: it is kept (copied when building elsewhere) and
    only `python datasets/profiles_build.py --record` makes a new one."""
    import profiles_build

    info = profiles_build.build(b.out / "profiles")
    for name, meta in sorted(info["files"].items()):
        for suffix, what in ((".trace.json.gz", "Chrome trace"), (".table.json", "key_averages table")):
            b.add(f"profiles/{name}{suffix}", f"{what} of the {meta['source']} profile {name}")
    b.add("profiles/build_info.json", "how each profile was made, and where the CPU one was recorded")
    b.log("profiler fixtures written")


BUILDERS = [build_tokenizer_and_corpus, build_sft, build_tiny_llama, build_sft_reference, build_zoo,
            build_eval_results, build_profiles]


def run_build(out: Path, data_only: bool) -> dict:
    import torch
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    b = Build(out, data_only)
    for builder in BUILDERS:
        builder(b)
    b.facts["build"] = {"data_only": data_only, "seconds": round(time.perf_counter() - b.started, 1),
                        "torch": torch.__version__, "transformers": transformers.__version__,
                        "threads": torch.get_num_threads()}
    written = manifest.write_manifest(out, b.files, b.facts)
    total = sum(e["bytes"] for e in written["files"].values())
    b.log(f"{len(written['files'])} files, {total / 1e6:.2f} MB, data_version {written['data_version'][:16]}")
    return written


def run_verify(root: Path) -> int:
    results = manifest.verify(root)
    for rel, problem in results:
        print(f"{'FAIL' if problem else 'ok  '} {rel}{': ' + problem if problem else ''}")
    failed = sum(1 for _, problem in results if problem)
    print(f"{len(results) - failed} ok, {failed} failed")
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: datasets/ itself)")
    parser.add_argument("--data-only", action="store_true", help="skip model training and the LoRA measurement")
    parser.add_argument("--verify", action="store_true", help="check the folder against its MANIFEST.json")
    args = parser.parse_args(argv)
    if args.verify:
        return run_verify(args.out)
    run_build(args.out.resolve(), args.data_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
