"""Visible tests for exercise 02. Run: pytest exercises/02_train_loop

They check the basics quickly. The graded suite replays your loop step by step against a
reference built from library pieces (and checks resuming, mixed precision, the run record and
convergence); a pass here is a start, not a grade.
"""
import json
import math

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig

from grader.core.checks import assert_close, assert_equal, learner_file


@pytest.mark.points(1)
@pytest.mark.concept("Batching and padding")
def test_collate_pads_on_the_right(submission):
    """two examples of lengths 3 and 1: pad_id and -100 fill the right end, the mask marks real tokens"""
    batch = submission.collate([{"input_ids": [5, 6, 7]}, {"input_ids": [8], "labels": [-100]}], pad_id=0)
    assert_equal(batch["input_ids"], torch.tensor([[5, 6, 7], [8, 0, 0]]), what="input_ids", tensor=True)
    assert_equal(batch["labels"], torch.tensor([[5, 6, 7], [-100, -100, -100]]), what="labels", tensor=True)
    assert_equal(batch["attention_mask"], torch.tensor([[1, 1, 1], [1, 0, 0]]), what="attention_mask", tensor=True)


@pytest.mark.points(1)
@pytest.mark.concept("Warmup and cosine")
def test_lr_at_landmarks(submission):
    """0 at step 0, max_lr at the end of warmup, half way down in the middle of the cosine, min_lr at the end"""
    lr = lambda step: submission.lr_at(step, max_lr=1.0, warmup_steps=10, total_steps=110, min_lr=0.1)
    for step, expected in [(0, 0.0), (5, 0.5), (10, 1.0), (60, 0.55), (110, 0.1), (200, 0.1)]:
        assert math.isclose(lr(step), expected, abs_tol=1e-12), f"lr_at({step}) = {lr(step)}, expected {expected}"


@pytest.mark.points(1)
@pytest.mark.concept("The loss: shift, ignore_index, float32")
def test_causal_lm_loss_shifts_and_ignores(submission):
    """position t predicts token t+1, and -100 labels count for nothing"""
    logits = torch.randn(2, 5, 11, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([[1, 2, 3, 4, 5], [-100, -100, 6, 7, -100]])
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, 11), labels[:, 1:].reshape(-1), ignore_index=-100)
    assert_close(submission.causal_lm_loss(logits, labels), expected, what="causal_lm_loss", tensor=True,
                 rtol=1e-6, atol=1e-7)


@pytest.mark.points(1)
@pytest.mark.concept("The run record")
@pytest.mark.timeout(120)
def test_a_short_run_writes_its_files(submission, tmp_path):
    """three steps on a micro model: the log, a checkpoint and run.json appear, and the loss is finite"""
    LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, pad_token_id=0).save_pretrained(tmp_path / "model")
    docs = [{"input_ids": [1] + [3 + (7 * i + j) % 40 for j in range(3 + i % 9)] + [2]} for i in range(40)]
    for name in ("train", "eval"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    cfg = {"model_dir": str(tmp_path / "model"), "train_path": str(tmp_path / "train.jsonl"),
           "eval_path": str(tmp_path / "eval.jsonl"), "out_dir": str(tmp_path / "run"),
           "max_steps": 3, "warmup_steps": 1, "batch_size": 4, "eval_every": 3}
    result = submission.train(cfg)
    assert [entry["step"] for entry in result["log"]] == [1, 2, 3], "one log entry per step with log_every=1"
    assert math.isfinite(result["final_eval_loss"]), "the final eval loss is not finite"
    for name in ("log.jsonl", "checkpoint.pt", "run.json"):
        assert (tmp_path / "run" / name).exists(), f"train wrote no {name}"


@pytest.mark.points(1)
@pytest.mark.concept("Curves")
def test_plot_curves_writes_a_png(submission, tmp_path):
    """plot_curves turns a log.jsonl into a PNG file"""
    log = [{"step": s, "loss": 4.0 / s, "lr": 1e-3, "grad_norm": 1.0, "tokens": 10} for s in range(1, 6)]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    submission.plot_curves(str(tmp_path / "log.jsonl"), str(tmp_path / "curves.png"))
    assert learner_file(tmp_path / "curves.png", tmp_path)[:4] == b"\x89PNG", "no PNG was written"
