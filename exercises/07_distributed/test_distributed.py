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
    ranks = values(submission.probe(probes.joined, WORLD_SIZE, 20.0))
    assert [r["returned"] for r in ranks] == [[0, WORLD_SIZE], [1, WORLD_SIZE]], "init_distributed returns (rank, world_size)"
    for r in ranks:
        assert r["seen"]["backend"] == "gloo", f"the backend on CPU is gloo, not {r['seen']['backend']!r}"
        assert r["seen"]["timeout_s"] == 20.0, "init_process_group gets timeout=timedelta(seconds=timeout_s)"
        assert r["left"], "shutdown() leaves the group"


# ---------------------------------------------------------------- Sharding the data

@pytest.mark.points(1)
@pytest.mark.concept("Sharding the data")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_every_sample_once_per_epoch_in_a_new_order(submission):
    n = 12
    ranks = values(submission.probe(probes.shards, WORLD_SIZE, n, 3, 2, 0, False))
    for epoch in range(2):
        seen = sorted(i for r in ranks for i in r[epoch])
        assert seen == list(range(n)), f"epoch {epoch}: every sample once across the ranks, not {seen}"
    assert ranks[0][0] != ranks[0][1], "each epoch has a new order (set_epoch)"


# ---------------------------------------------------------------- Seeds

@pytest.mark.points(1)
@pytest.mark.concept("Seeds: alike and not alike")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_same_weights_different_dropout_draws(submission):
    ranks = values(submission.probe(probes.seeded, WORLD_SIZE, TINY_LLAMA, 5))
    assert torch.equal(ranks[0]["weights"], ranks[1]["weights"]), "every rank builds the same weights"
    assert not torch.equal(ranks[0]["draws"], ranks[1]["draws"]), "each rank draws its own dropout masks"


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
    """The oracle: one process, every rank's micro-batches together, the mean over all loss tokens."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**TINY_LLAMA))
    batches = [batch for rank in ranks for batch in rank]
    total = sum(int((b["labels"][:, 1:] != IGNORE_INDEX).sum()) for b in batches)
    summed = sum(F.cross_entropy(model(input_ids=b["input_ids"]).logits[:, :-1].flatten(0, 1).float(),
                                 b["labels"][:, 1:].flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
                 for b in batches)
    (summed / total).backward()
    return float(summed.detach() / total), torch.cat([p.grad.reshape(-1) for p in model.parameters()])


@pytest.mark.points(2)
@pytest.mark.concept("The DDP step")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_the_gradient_is_one_processs_on_all_the_tokens(submission):
    batches = micro_batches(seed=1, per_rank=1)
    ranks = values(submission.probe(probes.stepped, WORLD_SIZE, TINY_LLAMA, 0, batches))
    loss, grad = one_process(0, batches)
    for rank, r in enumerate(ranks):
        assert r["wrapped"] == "DistributedDataParallel", "wrap_ddp returns DistributedDataParallel(model)"
        torch.testing.assert_close(r["grad"], grad, **GRADIENT_TOLERANCE,
                                   msg=f"rank {rank}: the gradient differs from one process's on all the ranks' tokens")
        assert r["loss"] == pytest.approx(loss, rel=1e-4), f"rank {rank} returned {r['loss']}, one process's mean is {loss}"


@pytest.mark.points(1)
@pytest.mark.concept("Accumulation without extra all-reduces")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_three_micro_batches_one_all_reduce(submission):
    batches = micro_batches(seed=2, per_rank=3)
    ranks = values(submission.probe(probes.stepped, WORLD_SIZE, TINY_LLAMA, 0, batches))
    _, grad = one_process(0, batches)
    for rank, r in enumerate(ranks):
        torch.testing.assert_close(r["grad"], grad, **GRADIENT_TOLERANCE, msg=f"rank {rank}: the accumulated gradient differs")
        assert r["all_reduces"] == r["buckets"], (f"rank {rank}: {r['all_reduces']} bucket all-reduces in one step of 3 "
                                                  f"micro-batches; one backward takes {r['buckets']}")


# ---------------------------------------------------------------- Rank 0 writes, every rank waits

@pytest.mark.points(2)
@pytest.mark.concept("Rank 0 writes, every rank waits")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_rank_0_saves_and_every_rank_reads_it_whole(submission, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    ranks = values(submission.probe(probes.checkpointed, WORLD_SIZE, TINY_LLAMA, 0, str(folder), 7))
    savers = sorted({s["rank"] for r in ranks for s in r["saves"]})
    assert savers == [0], f"only rank 0 saves; ranks {savers} called torch.save"
    for rank, r in enumerate(ranks):
        assert r["keys"] == ["model", "optimizer", "step"] and not r["model_keys_prefixed"], r["keys"]
        assert r["step"] == 7 and r["same_weights"], f"rank {rank} read back step {r['step']}"


@pytest.mark.points(1)
@pytest.mark.concept("Rank 0 writes, every rank waits")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_rank_0_alone_logs(submission, tmp_path):
    lines = values(submission.probe(probes.logged, WORLD_SIZE, str(tmp_path / "log.jsonl"), 3))[0]
    assert [json.loads(line) for line in lines] == [{"step": s, "loss": 1.0 / (s + 1)} for s in range(3)], lines


# ---------------------------------------------------------------- FSDP

@pytest.mark.points(2)
@pytest.mark.concept("FSDP: sharding the training state")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_each_layer_a_unit_and_each_rank_holds_its_share(submission):
    ranks = values(submission.probe(probes.sharded_state, WORLD_SIZE, TINY_LLAMA, 0))
    layers = [f"model.layers.{i}" for i in range(TINY_LLAMA["num_hidden_layers"])]
    for rank, r in enumerate(ranks):
        assert r["units"] == sorted(["<root>", *layers]), f"rank {rank}: the FSDP units are {r['units']}"
        assert r["reported"] == r["held"], f"rank {rank}: reported {r['reported']}, the local shards hold {r['held']}"
    whole = ranks[0]["whole_param_bytes"]
    assert sum(r["held"]["params"] for r in ranks) == whole, "the ranks' shards together are the whole model"
