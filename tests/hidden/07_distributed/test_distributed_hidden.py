"""Graded suite for exercise 07 (data parallelism). PYTEST_DONT_REWRITE

The visible checks at 4 ranks (two machines of two) and on uneven data, every stated
boundary against an oracle that runs in this process (DistributedSampler's own order, one process
on all the ranks' tokens, the weights one seed builds), a checkpoint write that crashes half-way,
and a real `torchrun` launch of the learner's module compared step by step with one process; on a
machine with two CUDA devices, that launch again over NCCL, in float32 and in bfloat16."""
import json
import math

import pytest
import torch
from torch.utils.data import DistributedSampler

from grader.course import COURSE
from grader.worker.loading import load_module, sibling_module

probes = sibling_module(__file__, "probes")
visible = load_module(COURSE.exercises / "07_distributed" / "probes.py")
visible_tests = load_module(COURSE.exercises / "07_distributed" / "test_distributed.py")
values, one_process, TINY_LLAMA = visible_tests.values, visible_tests.one_process, visible_tests.TINY_LLAMA
GRADIENT_TOLERANCE = visible_tests.GRADIENT_TOLERANCE
RANKS = 180
LAUNCH_S = 240
IGNORE_INDEX = -100


# ---------------------------------------------------------------- Joining the group

@pytest.mark.points(2)
@pytest.mark.concept("Joining the group")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_four_ranks_join_while_the_usual_ports_are_taken(submission):
    ranks = values(submission.probe(visible.joined, 4, 15.0))
    assert [r["returned"] for r in ranks] == [[rank, 4] for rank in range(4)]
    assert all(r["group"]["world_size"] == 4 and r["seen"]["timeout_s"] == 15.0 and r["left"] for r in ranks)


@pytest.mark.points(1)
@pytest.mark.concept("Joining the group")
@pytest.mark.timeout(60)
def test_shutdown_without_a_group_does_nothing(submission):
    raised = submission.probe(probes.shutdown_without_a_group)
    assert raised is None, f"shutdown() with no group raised {raised}"


# ---------------------------------------------------------------- Sharding the data

def sampler_order(n, world_size, rank, seed, epoch, drop_last):
    sampler = DistributedSampler(list(range(n)), num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=drop_last)
    sampler.set_epoch(epoch)
    return list(sampler)


@pytest.mark.points(2)
@pytest.mark.concept("Sharding the data")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
@pytest.mark.parametrize("drop_last", [None, True])       # None: the default, which pads
def test_an_uneven_dataset_on_four_ranks_against_distributed_sampler(submission, seed, drop_last):
    # batches of 3: a DataLoader's own drop_last (of a short last batch) would keep 3 of a padded 3, not 2
    n, world_size, batch_size, epochs, data_seed = 10, 4, 3, 3, seed % 1000 + 1
    ranks = values(submission.probe(visible.shards, world_size, n, batch_size, epochs, data_seed, drop_last))
    drop_last = bool(drop_last)
    per_rank = n // world_size if drop_last else math.ceil(n / world_size)
    for rank, epochs_seen in enumerate(ranks):
        for epoch, seen in enumerate(epochs_seen):
            assert len(seen) == per_rank, f"rank {rank} got {len(seen)} samples of {n} on {world_size} ranks, " \
                                          f"drop_last={drop_last}: each rank gets {per_rank}"
            assert seen == sampler_order(n, world_size, rank, data_seed, epoch, drop_last), \
                f"rank {rank}, epoch {epoch}: not DistributedSampler's order for seed {data_seed}"


# ---------------------------------------------------------------- Seeds

@pytest.mark.points(1)
@pytest.mark.concept("Seeds: alike and not alike")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_the_seeds_are_the_ones_the_readme_gives(submission, seed):
    from transformers import LlamaConfig, LlamaForCausalLM
    model_seed = seed % 1000
    ranks = values(submission.probe(visible.seeded, 4, TINY_LLAMA, model_seed))
    torch.manual_seed(model_seed)
    weights = torch.cat([p.detach().reshape(-1) for p in LlamaForCausalLM(LlamaConfig(**TINY_LLAMA)).parameters()])
    for rank, r in enumerate(ranks):
        assert torch.equal(r["weights"], weights[:64]), f"rank {rank} built other weights than torch.manual_seed(seed)"
        torch.manual_seed(model_seed + rank)
        assert torch.equal(r["draws"], torch.rand(8)), f"rank {rank}: its dropout generator is not seeded with seed + rank"


@pytest.mark.points(1)
@pytest.mark.concept("Seeds: alike and not alike")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_main_seeds_dropout_per_rank_once_the_model_is_built(submission, tmp_path, seed):
    """main's steps draw dropout from seed + rank: seeded once the model is built, since build_model seeds every rank alike"""
    data = launch_data(seed)
    ranks = values(submission.probe(probes.seeds_in_main, 2, data, str(tmp_path)))
    for rank, seeds in enumerate(ranks):
        expected = [data["seed"] + rank] * data["steps"]
        assert seeds == expected, (f"rank {rank}: the seed of torch's generator at main's train_step calls: expected "
                                   f"{expected}, got {seeds}: seed_for_dropout comes after build_model, which seeds "
                                   "every rank alike")


# ---------------------------------------------------------------- The DDP step

def micro_batches(seed, world_size, per_rank, batch=2, length=10):
    generator = torch.Generator().manual_seed(seed)
    ranks = []
    for _ in range(world_size):
        batches = []
        for _ in range(per_rank):
            ids = torch.randint(0, TINY_LLAMA["vocab_size"], (batch, length), generator=generator)
            labels = ids.clone()
            labels[:, :int(torch.randint(1, length - 1, (1,), generator=generator))] = IGNORE_INDEX
            batches.append({"input_ids": ids, "labels": labels})
        ranks.append(batches)
    return ranks


@pytest.mark.points(3)
@pytest.mark.concept("The DDP step")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
@pytest.mark.parametrize("per_rank", [1, 2])
def test_four_ranks_of_unequal_tokens_step_as_one_process(submission, seed, per_rank):
    batches = micro_batches(seed, 4, per_rank)
    ranks = values(submission.probe(visible.stepped, 4, TINY_LLAMA, 0, batches))
    loss, grad = one_process(0, batches)
    for rank, r in enumerate(ranks):
        torch.testing.assert_close(r["grad"], grad, **GRADIENT_TOLERANCE,
                                   msg=f"rank {rank}: the gradient differs from one process's on all the ranks' tokens")
        assert r["loss"] == pytest.approx(loss, rel=1e-4), f"rank {rank} returned {r['loss']}, one process's mean is {loss}"


@pytest.mark.points(1)
@pytest.mark.concept("The DDP step")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_gradients_left_from_before_the_step_count_for_nothing(submission, seed):
    batches = micro_batches(seed, 2, 1)
    ranks = values(submission.probe(visible.stepped, 2, TINY_LLAMA, 0, batches, True))
    _, grad = one_process(0, batches)
    for rank, r in enumerate(ranks):
        torch.testing.assert_close(r["grad"], grad, **GRADIENT_TOLERANCE,
                                   msg=f"rank {rank}: each parameter held a gradient of 0.5 before the step, and the "
                                       "step applied more than its own gradient (zero them first)")


@pytest.mark.points(1)
@pytest.mark.concept("The DDP step")
@pytest.mark.timeout(60)
def test_label_tokens_are_counted_after_the_shift(submission):
    labels = torch.tensor([[5, 6, -100, 7], [-100, -100, 8, 9]])
    assert submission.count_label_tokens(labels) == 4, "position 0's label is never predicted: 6, 7 and 8, 9 remain"


# ---------------------------------------------------------------- Rank 0 writes, every rank waits

@pytest.mark.points(1)
@pytest.mark.concept("Rank 0 writes, every rank waits")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_the_optimizer_state_comes_back_too(submission, tmp_path):
    ranks = values(submission.probe(visible.checkpointed, 4, TINY_LLAMA, 0, str(tmp_path), 11))
    savers = sorted({s["rank"] for r in ranks for s in r["saves"]})
    assert savers == [0], f"ranks {savers} called torch.save on two machines of two ranks: rank 0 alone writes " \
                          "(LOCAL_RANK 0 is one rank per machine)"
    for rank, r in enumerate(ranks):
        assert r["step"] == 11 and r["same_weights"], f"rank {rank} read back step {r['step']}"
        assert r["optimizer_steps"] == [1], \
            f"rank {rank}: the optimizer's state was not loaded (its steps: {r['optimizer_steps']})"


@pytest.mark.points(1)
@pytest.mark.concept("Rank 0 writes, every rank waits")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_on_two_machines_one_line_per_step_is_logged(submission, tmp_path):
    lines = values(submission.probe(visible.logged, 4, str(tmp_path / "log.jsonl"), 2))[0]
    assert [json.loads(line) for line in lines] == [{"step": 0, "loss": 1.0}, {"step": 1, "loss": 0.5}], \
        f"four ranks on two machines, each logging losses of its own, logged {lines}: rank 0 alone writes " \
        "(LOCAL_RANK 0 is one rank per machine)"


@pytest.mark.points(2)
@pytest.mark.concept("Rank 0 writes, every rank waits")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_a_write_that_dies_half_way_leaves_no_checkpoint_at_its_name(submission, tmp_path):
    crashed = submission.probe(probes.crash_while_saving, 2, TINY_LLAMA, 0, str(tmp_path))
    writer = visible.outcomes(crashed["ranks"])[0]
    assert writer.state == "died" and writer.error == f"exit status {probes.CRASH_STATUS}", \
        f"rank 0 never reached torch.save: {writer.describe()}"
    assert "checkpoint.pt" not in crashed["left"], \
        f"a torn file is left at checkpoint.pt ({crashed['left']}): write elsewhere, then os.replace"


# ---------------------------------------------------------------- FSDP

@pytest.mark.points(2)
@pytest.mark.concept("FSDP: sharding the training state")
@pytest.mark.distributed
@pytest.mark.timeout(RANKS)
def test_four_ranks_each_hold_a_quarter_of_the_adamw_state(submission):
    config = {**TINY_LLAMA, "num_hidden_layers": 3, "hidden_size": 36, "num_attention_heads": 6}
    ranks = values(submission.probe(visible.sharded_state, 4, config, 0))
    whole = ranks[0]["whole_param_bytes"]
    assert [r["units"] for r in ranks] == [sorted(["<root>", *(f"model.layers.{i}" for i in range(3))])] * 4
    assert sum(r["reported"]["params"] for r in ranks) == whole
    for rank, r in enumerate(ranks):
        share = r["reported"]
        assert share == r["held"], f"rank {rank}: reported {share}, its shards hold {r['held']}"
        assert abs(share["params"] - whole / 4) <= whole / 4 * 0.1 and share["grads"] == share["params"] \
            and share["optimizer"] == 2 * share["params"], f"rank {rank}: {share} is not a quarter of 16 bytes per parameter"


# ---------------------------------------------------------------- Launching with torchrun

def launch_data(seed):
    generator = torch.Generator().manual_seed(seed)
    return {"config": TINY_LLAMA, "seed": 3, "steps": 3, "batch_size": 2, "lr": 1e-2,
            "samples": torch.randint(0, TINY_LLAMA["vocab_size"], (9, 8), generator=generator).tolist()}


def one_process_run(data, world_size):
    """The oracle of `main`: each step, every rank's first batch of that epoch's DistributedSampler
    order, stepped as one process on all of them (the mean over every token), with AdamW."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(data["seed"])
    model = LlamaForCausalLM(LlamaConfig(**data["config"]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=data["lr"])
    losses = []
    for step in range(data["steps"]):
        ids = torch.tensor([data["samples"][i] for rank in range(world_size)
                            for i in sampler_order(len(data["samples"]), world_size, rank, data["seed"], step, False)
                            [:data["batch_size"]]])
        optimizer.zero_grad()
        logits = model(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses, model.state_dict()


@pytest.mark.points(3)
@pytest.mark.concept("Launching with torchrun")
@pytest.mark.distributed
@pytest.mark.timeout(LAUNCH_S + 60)
def test_torchrun_runs_main_as_one_process_would(submission, tmp_path, seed):
    data = launch_data(seed)
    run = submission.probe(visible.launched, data, str(tmp_path), 2, LAUNCH_S)
    assert run["status"] == 0, f"torchrun ended with {run['status']}: {run['printed']}"
    losses, weights = one_process_run(data, 2)
    assert run["log"] is not None, "main wrote no log.jsonl"
    logged = [json.loads(line) for line in run["log"]]
    assert [entry["step"] for entry in logged] == list(range(data["steps"])), f"the log's steps: {logged} (rank 0 alone logs)"
    assert [entry["loss"] for entry in logged] == pytest.approx(losses, rel=1e-3), (logged, losses)
    held = run["checkpoint"]
    assert held is not None and held["keys"] == ["model", "optimizer", "step"] and held["step"] == data["steps"], held
    assert not held["prefixed"]
    for name, value in weights.items():
        torch.testing.assert_close(held["weights"][name], value, rtol=1e-3, atol=1e-5, msg=f"{name} after the run")


# ---------------------------------------------------------------- GPU: NCCL on two devices

BF16_LOSS_TOLERANCE = 3e-2      # bfloat16 weights and activations against the float32 oracle: a tracking check
BF16_WEIGHT_TOLERANCE = 5e-2    # three AdamW steps of lr 1e-2 each move a weight by at most 3e-2


@pytest.mark.gpu(2)
@pytest.mark.points(2)
@pytest.mark.concept("Launching with torchrun")
@pytest.mark.distributed
@pytest.mark.timeout(LAUNCH_S + 60)
def test_torchrun_on_two_cuda_devices_runs_main_as_one_process_would(submission, tmp_path, seed):
    """NCCL on two CUDA devices: main's log and checkpoint against one process on the CPU"""
    data = launch_data(seed)
    run = submission.probe(visible.launched, data, str(tmp_path), 2, LAUNCH_S, True)
    assert run["status"] == 0, f"torchrun on two CUDA devices ended with {run['status']}: {run['printed']}"
    assert run["checkpoint"]["saved_from"] == ["cuda"], \
        f"the checkpoint's tensors were saved from {run['checkpoint']['saved_from']}: the model trained off its rank's device"
    losses, weights = one_process_run(data, 2)
    assert [json.loads(line)["loss"] for line in run["log"] or []] == pytest.approx(losses, rel=1e-3), run["log"]
    for name, value in weights.items():
        torch.testing.assert_close(run["checkpoint"]["weights"][name], value, rtol=1e-3, atol=1e-5,
                                   msg=f"{name} after the run on two CUDA devices")


@pytest.mark.gpu(2)
@pytest.mark.points(1)
@pytest.mark.concept("Launching with torchrun")
@pytest.mark.distributed
@pytest.mark.timeout(LAUNCH_S + 60)
def test_torchrun_on_two_cuda_devices_in_bfloat16_tracks_float32(submission, tmp_path, seed):
    """bfloat16 on two CUDA devices: main's losses and weights track one float32 process"""
    data = {**launch_data(seed), "dtype": "bfloat16"}
    run = submission.probe(visible.launched, data, str(tmp_path), 2, LAUNCH_S, True)
    assert run["status"] == 0, f"torchrun in bfloat16 on two CUDA devices ended with {run['status']}: {run['printed']}"
    assert run["checkpoint"]["dtypes"] == ["torch.bfloat16"], f"the checkpoint's weights are {run['checkpoint']['dtypes']}"
    losses, weights = one_process_run(data, 2)
    assert [json.loads(line)["loss"] for line in run["log"] or []] == pytest.approx(losses, rel=BF16_LOSS_TOLERANCE), \
        f"bfloat16 losses {run['log']} against float32 {losses}"
    for name, value in weights.items():
        torch.testing.assert_close(run["checkpoint"]["weights"][name], value, rtol=0, atol=BF16_WEIGHT_TOLERANCE,
                                   msg=f"{name} after the run in bfloat16")
