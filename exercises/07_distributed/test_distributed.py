"""Visible tests for exercise 07. Run: pytest exercises/07_distributed

Each test starts real ranks of a gloo process group beside your module (2 of them; the graded
suite also runs 4, uneven datasets and a torchrun launch) and compares what they did with one
process doing the same work alone. A pass here is a start, not a grade.
"""
import json
import os

import pytest
import torch
import torch.nn.functional as F

from grader.course import COURSE
from grader.suite.checks import shown
from grader.worker.loading import sibling_module

# by path: a notebook has no __file__
probes = sibling_module(COURSE.exercises / "07_distributed" / "test_distributed.py", "probes")

# Seconds for a test: its ranks take a second or two, but the first test of a task also waits for
# the worker that runs your module to start (importing torch and transformers).
RANKS = 120
WORLD_SIZE = 2
TINY_LLAMA = {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
IGNORE_INDEX = -100
GRADIENT_TOLERANCE = dict(rtol=1e-4, atol=1e-6)     # float32 sums in another order: all-reduce, micro-batches

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def values(data):
    """Every rank's return value, or the test fails naming the ranks that did not return."""
    failed = "; ".join(outcome.describe() for outcome in probes.outcomes(data) if outcome.state != "returned")
    assert not failed, failed
    return [entry["value"] for entry in data]


# ---------------------------------------------------------------- Joining the group

@pytest.mark.points(1)
@pytest.mark.concept("Joining the group")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_the_ranks_join_through_torchruns_environment(submission):
    """Two ranks: init_distributed() returns (rank, 2), on gloo, with its default 60 s timeout; shutdown leaves."""
    ranks = values(submission.probe(probes.joined, WORLD_SIZE, None))
    returned = [r["returned"] for r in ranks]
    assert returned == [[0, WORLD_SIZE], [1, WORLD_SIZE]], \
        f"init_distributed: expected (rank, world_size) = {shown([[0, 2], [1, 2]])}, got {shown(returned)}"
    for rank, r in enumerate(ranks):
        assert r["seen"]["backend"] == "gloo", f"rank {rank}: expected backend gloo on CPU, got {shown(r['seen']['backend'])}"
        assert r["seen"]["timeout_s"] == 60.0, \
            f"rank {rank}: init_process_group's timeout: expected the default 60 s, got {shown(r['seen']['timeout_s'])}"
        assert r["left"], f"rank {rank}: shutdown() did not leave the group"


# ---------------------------------------------------------------- Sharding the data

@pytest.mark.points(1)
@pytest.mark.concept("Sharding the data")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_every_sample_once_per_epoch_in_a_new_order(submission):
    """12 samples on 2 ranks for 2 epochs: each sample once per epoch across the ranks, a new order each epoch."""
    n = 12
    ranks = values(submission.probe(probes.shards, WORLD_SIZE, n, 3, 2, 0, False))
    for epoch in range(2):
        seen = sorted(i for r in ranks for i in r[epoch])
        assert seen == list(range(n)), f"epoch {epoch}: expected every sample once across the ranks, got {shown(seen)}"
    assert ranks[0][0] != ranks[0][1], \
        f"rank 0's order in epoch 1: expected another than epoch 0's, got the same {shown(ranks[0][1])}"


# ---------------------------------------------------------------- Seeds

@pytest.mark.points(1)
@pytest.mark.concept("Seeds: alike and not alike")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_same_weights_different_dropout_draws(submission):
    """build_model gives both ranks the same weights; after seed_for_dropout they draw different numbers."""
    ranks = values(submission.probe(probes.seeded, WORLD_SIZE, TINY_LLAMA, 5))
    assert torch.equal(ranks[0]["weights"], ranks[1]["weights"]), "the two ranks built different weights"
    assert not torch.equal(ranks[0]["draws"], ranks[1]["draws"]), "the two ranks drew the same dropout randomness"


# ---------------------------------------------------------------- The DDP step

def micro_batches(seed, per_rank, batch=2, length=10):
    """Random tokens; labels are the inputs with a prompt of random length masked (-100), so the
    ranks' micro-batches carry different numbers of loss tokens."""
    generator = torch.Generator().manual_seed(seed)
    ranks = []
    for _ in range(WORLD_SIZE):
        batches = []
        for _ in range(per_rank):
            ids = torch.randint(0, TINY_LLAMA["vocab_size"], (batch, length), generator=generator)
            labels = ids.clone()
            labels[:, :int(torch.randint(1, length - 2, (1,), generator=generator))] = IGNORE_INDEX
            batches.append({"input_ids": ids, "labels": labels})
        ranks.append(batches)
    return ranks


def one_process(seed, ranks):
    """The oracle: one process, every rank's micro-batches together, the mean over all loss tokens
    (log-probabilities of each predicted token picked out, in float32)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**TINY_LLAMA))
    picked = []
    for batch in (batch for rank in ranks for batch in rank):
        log_probs = F.log_softmax(model(input_ids=batch["input_ids"]).logits[:, :-1].float(), dim=-1)
        targets = batch["labels"][:, 1:]
        kept = targets != IGNORE_INDEX
        picked.append(log_probs[kept].gather(-1, targets[kept].unsqueeze(-1)).squeeze(-1))
    loss = -torch.cat(picked).mean()
    loss.backward()
    return float(loss.detach()), torch.cat([p.grad.reshape(-1) for p in model.parameters()])


@pytest.mark.points(1)
@pytest.mark.concept("The DDP step")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_the_gradient_is_one_processs_on_all_the_tokens(submission):
    """Two ranks with different numbers of loss tokens: the gradient and the loss of one process on all of them."""
    batches = micro_batches(seed=1, per_rank=1)
    ranks = values(submission.probe(probes.stepped, WORLD_SIZE, TINY_LLAMA, 0, batches))
    loss, grad = one_process(0, batches)
    for rank, r in enumerate(ranks):
        assert r["wrapped"] == "DistributedDataParallel", \
            f"wrap_ddp: expected a DistributedDataParallel, got {shown(r['wrapped'])}"
        torch.testing.assert_close(r["grad"], grad, **GRADIENT_TOLERANCE,
                                   msg=f"rank {rank}: the gradient differs from one process's on all the ranks' tokens")
        assert r["loss"] == pytest.approx(loss, rel=1e-4), \
            f"rank {rank}'s loss: expected {shown(loss)} (one process's mean), got {shown(r['loss'])}"


@pytest.mark.points(1)
@pytest.mark.concept("Accumulation without extra all-reduces")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_three_micro_batches_one_all_reduce(submission):
    """Three micro-batches per rank: the accumulated gradient is one process's, all-reduced once."""
    batches = micro_batches(seed=2, per_rank=3)
    ranks = values(submission.probe(probes.stepped, WORLD_SIZE, TINY_LLAMA, 0, batches))
    _, grad = one_process(0, batches)
    for rank, r in enumerate(ranks):
        torch.testing.assert_close(r["grad"], grad, **GRADIENT_TOLERANCE, msg=f"rank {rank}: the accumulated gradient differs")
        assert r["all_reduces"] == r["buckets"], (f"rank {rank}: bucket all-reduces in a step of 3 micro-batches: "
                                                  f"expected {r['buckets']} (one backward's), got {r['all_reduces']}")


# ---------------------------------------------------------------- Rank 0 writes, every rank waits

@pytest.mark.points(1)
@pytest.mark.concept("Rank 0 writes, every rank waits")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_rank_0_saves_and_every_rank_reads_it_whole(submission, tmp_path):
    """Rank 0 alone saves (slowly, here); each rank then loads the step and weights it saved."""
    folder = tmp_path / "run"
    folder.mkdir()
    ranks = values(submission.probe(probes.checkpointed, WORLD_SIZE, TINY_LLAMA, 0, str(folder), 7))
    savers = sorted({s["rank"] for r in ranks for s in r["saves"]})
    assert savers == [0], f"ranks calling torch.save: expected [0], got {shown(savers)}"
    for rank, r in enumerate(ranks):
        assert r["keys"] == ["model", "optimizer", "step"], \
            f"the checkpoint's keys: expected ['model', 'optimizer', 'step'], got {shown(r['keys'])}"
        assert not r["model_keys_prefixed"], "the model's keys start with DDP's module. prefix"
        assert r["step"] == 7, f"rank {rank} loaded step: expected 7, got {shown(r['step'])}"
        assert r["same_weights"], f"rank {rank} loaded other weights than the ones saved"


@pytest.mark.points(1)
@pytest.mark.concept("Rank 0 writes, every rank waits")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_rank_0_alone_logs(submission, tmp_path):
    """Both ranks log 3 steps, each its own losses: the file holds rank 0's 3 JSON lines."""
    lines = values(submission.probe(probes.logged, WORLD_SIZE, str(tmp_path / "log.jsonl"), 3))[0]
    expected = [{"step": s, "loss": 1.0 / (s + 1)} for s in range(3)]
    got = [json.loads(line) for line in lines]
    assert got == expected, f"the log: expected {shown(expected)}, got {shown(got)}"


# ---------------------------------------------------------------- FSDP

@pytest.mark.points(1)
@pytest.mark.concept("FSDP: sharding the training state")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_each_layer_a_unit_and_each_rank_holds_its_share(submission):
    """Two ranks: each layer and the root are FSDP units; the bytes reported are the local shards'."""
    ranks = values(submission.probe(probes.sharded_state, WORLD_SIZE, TINY_LLAMA, 0))
    layers = [f"model.layers.{i}" for i in range(TINY_LLAMA["num_hidden_layers"])]
    for rank, r in enumerate(ranks):
        units = sorted(["<root>", *layers])
        assert r["units"] == units, f"rank {rank}'s FSDP units: expected {shown(units)}, got {shown(r['units'])}"
        assert r["reported"] == r["held"], f"rank {rank}'s bytes: expected {shown(r['held'])}, got {shown(r['reported'])}"


# ---------------------------------------------------------------- Launching with torchrun

@pytest.mark.points(1)
@pytest.mark.concept("Launching with torchrun")
@pytest.mark.distributed
@pytest.mark.timeout(300)
def test_torchrun_runs_main_on_two_ranks(submission, tmp_path):
    """`torchrun --standalone --nproc-per-node 2` on your module, in bfloat16: rank 0 logs every step and saves the checkpoint."""
    generator = torch.Generator().manual_seed(0)
    data = {"config": TINY_LLAMA, "seed": 1, "steps": 2, "batch_size": 2, "lr": 1e-3, "dtype": "bfloat16",
            "samples": torch.randint(0, TINY_LLAMA["vocab_size"], (6, 8), generator=generator).tolist()}
    run = submission.probe(probes.launched, data, str(tmp_path), WORLD_SIZE, 240)
    assert run["status"] == 0, f"torchrun's exit status: expected 0, got {shown(run['status'])}: {run['printed']}"
    steps = [json.loads(line)["step"] for line in run["log"] or []]
    assert steps == [0, 1], f"the log's steps: expected [0, 1] (rank 0 alone logs), got {shown(steps)}"
    keys = run["checkpoint"] and run["checkpoint"]["keys"]
    assert keys == ["model", "optimizer", "step"], \
        f"the checkpoint's keys: expected ['model', 'optimizer', 'step'], got {shown(keys)}"
    dtypes = run["checkpoint"]["dtypes"]
    assert dtypes == ["torch.bfloat16"], \
        f"the weights' dtypes with dtype bfloat16: expected ['torch.bfloat16'], got {shown(dtypes)}"
