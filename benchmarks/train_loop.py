"""Throughput of the reference training loop (exercise 02). A benchmark, not a test: it prints
numbers and asserts nothing.

    python benchmarks/train_loop.py                        # the tiny Llama on CPU
    python benchmarks/train_loop.py --device cuda --amp bf16 --hidden 768 --layers 12 --peak-tflops 989

Model FLOPs utilisation uses the usual 6 x parameters x tokens per training step (attention's
own FLOPs left out, so it is a slight underestimate); it is printed when --peak-tflops is given.
"""
import argparse
import json
import tempfile
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from grader.course import COURSE, locate_module
from grader.worker.loading import load_module

DATASETS = COURSE.root / "datasets"


def model_dir(folder: Path, hidden: int | None, layers: int | None) -> str:
    """The tiny Llama's config, optionally widened and deepened (heads of 64 dimensions)."""
    config = AutoConfig.from_pretrained(DATASETS / "tiny_llama")
    if hidden:
        config.update({"hidden_size": hidden, "intermediate_size": 4 * hidden, "num_attention_heads": hidden // 64,
                       "num_key_value_heads": hidden // 64, "head_dim": 64})
    if layers:
        config.num_hidden_layers = layers
    config.save_pretrained(folder / "model")
    return str(folder / "model")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp", default=None, choices=[None, "bf16"])
    parser.add_argument("--hidden", type=int, help="hidden size (default: the tiny Llama's)")
    parser.add_argument("--layers", type=int, help="decoder layers (default: the tiny Llama's)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--peak-tflops", type=float, help="the device's dense peak, for MFU")
    args = parser.parse_args()
    train_loop = load_module(locate_module(COURSE.solutions, COURSE.task_named("02")))

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        eval_lines = (DATASETS / "corpus" / "eval.jsonl").read_text().splitlines(keepends=True)[:64]
        (tmp / "eval.jsonl").write_text("".join(eval_lines))
        cfg = {"model_dir": model_dir(tmp, args.hidden, args.layers), "train_path": str(DATASETS / "corpus" / "train.jsonl"),
               "eval_path": str(tmp / "eval.jsonl"), "out_dir": str(tmp / "run"), "batch_size": args.batch_size,
               "max_steps": args.steps, "warmup_steps": args.steps // 10, "eval_every": 10**9, "log_every": 10,
               "device": args.device, "amp": args.amp}
        record = json.loads(Path(train_loop.train(cfg)["record"]).read_text())
        with torch.device("meta"):
            n_params = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg["model_dir"])).num_parameters()

    metrics = record["metrics"]
    print(f"model: {n_params:,} parameters, device {args.device}, amp {args.amp}, batch {args.batch_size}")
    print(f"  {metrics['steps']} steps, {metrics['tokens']:,} tokens in {metrics['wall_s']:.1f} s "
          f"(model build and final eval included)")
    print(f"  throughput {metrics['tokens_per_s']:,.0f} tokens/s")
    if args.peak_tflops:
        achieved = 6 * n_params * metrics["tokens_per_s"]
        print(f"  MFU {achieved / (args.peak_tflops * 1e12):.1%} (6 x params x tokens/s = {achieved / 1e12:.2f} TFLOP/s)")


if __name__ == "__main__":
    main()
