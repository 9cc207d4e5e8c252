"""The convergence run of exercise 02's graded suite, and its loss curves for the score report.

The run trains a scaled-down `datasets/tiny_llama` configuration from scratch on the corpus. The
test hands the learner's curve and the reference loop's curve (recorded once with the same
configuration, `reference_curve.json`) to the report, so that a report can draw the learner's
run beside the one to aim at: the reference curve is what a correct loop does, not a hidden value.

Re-record the reference curve after changing the run or the data:

    python tests/hidden/02_train_loop/convergence.py
"""
import json
import math
import sys
from pathlib import Path

from transformers import AutoConfig

from grader.course import COURSE
from grader.schema.record import data_version

MODEL = dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, head_dim=16)  # ~10 s of CPU
EVAL_DOCUMENTS = 200
RUN = {"init": "scratch", "seed": 0, "batch_size": 32, "grad_accum_steps": 1, "max_steps": 150, "warmup_steps": 15,
       "max_lr": 1e-2, "min_lr": 1e-3, "weight_decay": 0.1, "clip_norm": 1.0, "log_every": 10, "eval_every": 1000}
REFERENCE_CURVE = Path(__file__).with_name("reference_curve.json")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def model_config():
    """The architecture the run trains: `datasets/tiny_llama`'s, scaled down."""
    config = AutoConfig.from_pretrained(COURSE.datasets / "tiny_llama")
    config.update(MODEL)
    return config


def eval_documents() -> list[dict]:
    return read_jsonl(COURSE.datasets / "corpus" / "eval.jsonl")[:EVAL_DOCUMENTS]


def setup(folder: Path) -> tuple[dict, float]:
    """Write the run's model config and eval split into `folder`; return the train config and
    the source's exact loss floor on those eval documents. What the test measures afterwards it
    takes from here (`model_config`, `eval_documents`), never from the copies in `folder`, which
    the learner's code may change."""
    model_config().save_pretrained(folder / "model")
    documents = eval_documents()
    (folder / "eval.jsonl").write_text("".join(json.dumps(d) + "\n" for d in documents))
    # The floor of these documents, exactly: the source's own negative log-likelihood per predicted token.
    floor = sum(d["source_nll"] for d in documents) / sum(len(d["input_ids"]) - 1 for d in documents)
    cfg = {**RUN, "model_dir": str(folder / "model"), "train_path": str(COURSE.datasets / "corpus" / "train.jsonl"),
           "eval_path": str(folder / "eval.jsonl"), "out_dir": str(folder / "run")}
    return cfg, floor


def curve_of(result) -> dict:
    """The training loss per logged step and the final eval loss of a `train` result, keeping
    only what is well formed: a learner's broken result still yields the part that can be drawn."""
    log = result.get("log") if isinstance(result, dict) else None
    points = [(entry.get("step"), entry.get("loss")) for entry in log or [] if isinstance(entry, dict)]
    points = [(step, loss) for step, loss in points if _number(step) and _number(loss)]
    final = result.get("final_eval_loss") if isinstance(result, dict) else None
    return {"step": [float(s) for s, _ in points], "loss": [float(loss) for _, loss in points],
            "final_eval_loss": float(final) if _number(final) else None}


def loss_curves(result, floor: float, margin: float) -> dict:
    """The artifact the convergence test records: both curves, the floor and the pass line."""
    reference = json.loads(REFERENCE_CURVE.read_text()) if REFERENCE_CURVE.exists() else None
    return {"learner": curve_of(result), "reference": reference and reference["curve"],
            "floor": floor, "pass_line": floor + margin, "max_steps": RUN["max_steps"]}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def record_reference_curve() -> None:
    """Run the reference loop with the graded configuration and keep its curve."""
    import tempfile

    import torch

    from grader.worker.loading import load_module
    torch.set_num_threads(1)          # as graded: one thread per grading process
    reference = load_module(COURSE.solutions / "02_train_loop" / "train_loop.py")
    with tempfile.TemporaryDirectory() as scratch:
        cfg, _ = setup(Path(scratch))
        curve = curve_of(reference.train(cfg))
    REFERENCE_CURVE.write_text(json.dumps({"run": RUN, "model": MODEL, "eval_documents": EVAL_DOCUMENTS,
                                           "data_version": data_version(), "torch": torch.__version__,
                                           "curve": curve}, indent=1) + "\n")
    print(f"wrote {REFERENCE_CURVE} (final eval loss {curve['final_eval_loss']:.4f})")


if __name__ == "__main__":
    sys.exit(record_reference_curve())
