"""Mutants (realistic learner bugs) and alternative correct solutions for exercise 07. `grader audit
07` grades them all.

Written as edits of solutions/07_distributed/distributed.py. Every mutant names the rule it breaks,
as the README marks it, and every rule has at least one mutant.
"""
from grader.running.variants import INDEPENDENT, Alternative, Independent, Mutant

COURSE_MUTANTS = [
    # ---------------------------------------------------------------- Joining the group
    Mutant("nccl_on_cpu", rule="init.backend", note="nccl whatever the machine has",
           edits={'backend = "nccl" if torch.cuda.is_available() else "gloo"': 'backend = "nccl"'}),
    Mutant("hard_coded_port", rule="init.env_rendezvous", note="a port of its own, as tutorials write it",
           edits={"    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))":
                  '    os.environ["MASTER_PORT"] = "29500"\n'
                  "    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))"}),
    Mutant("no_timeout", rule="init.timeout", note="the default timeout: a dead peer is waited for ten minutes",
           edits={"    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))":
                  "    dist.init_process_group(backend)"}),
    Mutant("shutdown_without_a_group_raises", rule="init.shutdown", note="destroy_process_group called unconditionally",
           edits={"    if dist.is_initialized():\n        dist.destroy_process_group()": "    dist.destroy_process_group()"}),
    # ---------------------------------------------------------------- Sharding the data
    Mutant("no_sampler", rule="data.each_once", note="every rank iterates the whole dataset",
           edits={"    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)":
                  "    return DataLoader(dataset, batch_size=batch_size, shuffle=True)"}),
    Mutant("set_epoch_forgotten", rule="data.set_epoch", note="every epoch in the first one's order",
           edits={"    sampler.set_epoch(epoch)\n": ""}),
    Mutant("sampler_seed_ignored", rule="data.seeded", note="DistributedSampler's default seed, whatever `seed` says",
           edits={"shuffle=True,\n                                 seed=seed, drop_last=drop_last)":
                  "shuffle=True,\n                                 drop_last=drop_last)"}),
    Mutant("uneven_tail_dropped_always", rule="data.pad", note="drop_last=True whatever the argument",
           edits={"seed=seed, drop_last=drop_last)": "seed=seed, drop_last=True)"}),
    Mutant("uneven_tail_kept_always", rule="data.drop", note="drop_last=False whatever the argument",
           edits={"seed=seed, drop_last=drop_last)": "seed=seed, drop_last=False)"}),
    # ---------------------------------------------------------------- Seeds
    Mutant("model_seeded_by_rank", rule="seeds.build_alike", note="seed + rank before building the model",
           edits={"    torch.manual_seed(seed)\n    return model_class(config)":
                  "    torch.manual_seed(seed + dist.get_rank())\n    return model_class(config)"}),
    Mutant("dropout_seeded_alike", rule="seeds.dropout_per_rank", note="the same seed on every rank for dropout",
           edits={"    torch.manual_seed(seed + dist.get_rank())": "    torch.manual_seed(seed)"}),
    Mutant("dropout_seeded_by_local_rank", rule="seeds.dropout_per_rank", note="LOCAL_RANK: alike across machines",
           edits={"    torch.manual_seed(seed + dist.get_rank())": '    torch.manual_seed(seed + int(os.environ["LOCAL_RANK"]))'}),
    Mutant("main_seeds_dropout_before_build", rule="seeds.dropout_per_rank",
           note="main seeds dropout first: build_model's seed then holds on every rank",
           edits={"        ddp_model = wrap_ddp(model)\n        seed_for_dropout(spec[\"seed\"])\n":
                  "        ddp_model = wrap_ddp(model)\n",
                  "    init_distributed()\n    try:\n": "    init_distributed()\n    seed_for_dropout(spec[\"seed\"])\n    try:\n"}),
    # ---------------------------------------------------------------- The DDP step
    Mutant("gradients_not_zeroed", rule="step.zero_first", note="the step adds to whatever gradients were there",
           edits={"    optimizer.zero_grad(set_to_none=True)\n": ""}),
    Mutant("loss_not_shifted", rule="step.shifted_loss", note="logits at t against the label at t",
           edits={"    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), batch[\"labels\"][:, 1:].flatten().to(device),":
                  "    return F.cross_entropy(logits.flatten(0, 1).float(), batch[\"labels\"].flatten().to(device),"}),
    Mutant("rank_mean_averaged", rule="step.not_rank_mean", note="each rank's own mean, which DDP then averages",
           edits={"    dist.all_reduce(tokens)\n    world_size = dist.get_world_size()": "    world_size = 1"}),
    Mutant("loss_summed_over_ranks", rule="step.not_summed", note="the world size left in: gradients N times too large",
           edits={"            (loss_sum * world_size / tokens).backward()": "            (loss_sum * world_size ** 2 / tokens).backward()"}),
    Mutant("micro_batch_means_averaged", rule="step.token_weighted", note="each micro-batch's mean, averaged",
           edits={"            (loss_sum * world_size / tokens).backward()":
                  "            (loss_sum / max(count_label_tokens(batch[\"labels\"]), 1) / len(micro_batches)).backward()"}),
    Mutant("local_loss_returned", rule="step.returned_loss", note="this rank's own mean returned",
           edits={"    dist.all_reduce(summed)\n    return float(summed / tokens)":
                  "    local = sum(count_label_tokens(batch[\"labels\"]) for batch in micro_batches)\n"
                  "    return float(summed / max(local, 1))"}),
    Mutant("tokens_counted_before_the_shift", rule="step.count_tokens", note="the first position's label counted",
           edits={"    return int((labels[:, 1:] != IGNORE_INDEX).sum())": "    return int((labels != IGNORE_INDEX).sum())"}),
    # ---------------------------------------------------------------- Accumulation
    Mutant("no_sync_forgotten", rule="accumulation.no_sync", note="an all-reduce at every micro-batch",
           edits={"        with contextlib.nullcontext() if last else ddp_model.no_sync():":
                  "        with contextlib.nullcontext():"}),
    # ---------------------------------------------------------------- Rank 0 writes, every rank waits
    Mutant("every_rank_saves", rule="checkpoint.rank0_only", note="each rank writes the same file",
           edits={"    if dist.get_rank() == 0:\n        path = Path(path)": "    if True:\n        path = Path(path)"}),
    Mutant("local_rank_0_saves", rule="checkpoint.rank0_only", note="LOCAL_RANK 0: one writer per machine",
           edits={"    if dist.get_rank() == 0:\n        path = Path(path)":
                  '    if int(os.environ["LOCAL_RANK"]) == 0:\n        path = Path(path)'}),
    Mutant("ddp_prefix_kept", rule="checkpoint.no_prefix", note="the wrapper's state_dict, keys under module.",
           edits={'{"model": ddp_model.module.state_dict(),': '{"model": ddp_model.state_dict(),'}),
    Mutant("written_in_place", rule="checkpoint.atomic", note="torch.save straight to the final name",
           edits={"        torch.save({\"model\": ddp_model.module.state_dict(), \"optimizer\": optimizer.state_dict(), "
                  "\"step\": step}, partial)\n        os.replace(partial, path)":
                  "        torch.save({\"model\": ddp_model.module.state_dict(), \"optimizer\": optimizer.state_dict(), "
                  "\"step\": step}, path)"}),
    Mutant("barrier_before_the_write", rule="checkpoint.barrier", note="every rank waits, then rank 0 writes",
           edits={"    if dist.get_rank() == 0:\n        path = Path(path)": "    dist.barrier()\n    if dist.get_rank() == 0:\n        path = Path(path)",
                  "        os.replace(partial, path)\n    dist.barrier()": "        os.replace(partial, path)"}),
    Mutant("optimizer_state_not_loaded", rule="checkpoint.load", note="the weights loaded, the optimizer's moments not",
           edits={"    optimizer.load_state_dict(state[\"optimizer\"])\n": ""}),
    Mutant("every_rank_logs", rule="log.rank0_only", note="N copies of every line",
           edits={"    if dist.get_rank() == 0:\n        with open(path, \"a\", encoding=\"utf-8\") as log:":
                  "    if True:\n        with open(path, \"a\", encoding=\"utf-8\") as log:"}),
    Mutant("local_rank_0_logs", rule="log.rank0_only", note="LOCAL_RANK 0: one writer per machine",
           edits={"    if dist.get_rank() == 0:\n        with open(path, \"a\", encoding=\"utf-8\") as log:":
                  '    if int(os.environ["LOCAL_RANK"]) == 0:\n        with open(path, "a", encoding="utf-8") as log:'}),
    # ---------------------------------------------------------------- FSDP
    Mutant("root_only_fsdp", rule="fsdp.per_layer", note="one unit: the whole model gathered at once",
           edits={"    for layer in model.model.layers:\n        fully_shard(layer)\n": ""}),
    Mutant("whole_tensor_bytes", rule="fsdp.local_bytes", note="the DTensors' global sizes",
           edits={"        shard = tensor.to_local() if hasattr(tensor, \"to_local\") else tensor\n":
                  "        shard = tensor.full_tensor() if hasattr(tensor, \"full_tensor\") else tensor\n"}),
    Mutant("optimizer_state_left_out", rule="fsdp.share", note="AdamW's moments not counted",
           edits={"            \"optimizer\": sum(local(value) for state in optimizer.state.values() for value in state.values()\n"
                  "                             if torch.is_tensor(value) and value.dim() > 0)}":
                  "            \"optimizer\": 0}"}),
    # ---------------------------------------------------------------- Launching
    Mutant("main_saves_weights_on_every_rank", rule="launch.main", note="torch.save of the weights alone, on every rank",
           edits={"        save_checkpoint(ddp_model, optimizer, out / \"checkpoint.pt\", spec[\"steps\"])":
                  "        torch.save(ddp_model.module.state_dict(), out / \"checkpoint.pt\")"}),
]

INDEPENDENT_MUTANTS = [
    # The independent solution's author's own bugs (written from the README and stub alone), as edits of it.
    Mutant('no_set_epoch', rule='data.set_epoch', base=INDEPENDENT,
           edits={'    sampler.set_epoch(epoch)\n':
                  ''}),
    Mutant('plain_shuffle_no_sampler', rule='data.each_once', base=INDEPENDENT,
           edits={'    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)\n':
                  '    torch.manual_seed(seed + epoch)\n    return DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=drop_last)\n'}),
    Mutant('sampler_default_seed', rule='data.seeded', base=INDEPENDENT,
           edits={'        seed=seed,\n':
                  ''}),
    Mutant('drop_last_on_dataloader', rule='data.drop', base=INDEPENDENT,
           edits={'        drop_last=drop_last,\n':
                  '',
                  '    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)\n':
                  '    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last)\n'}),
    Mutant('dropout_seed_same_on_ranks', rule='seeds.dropout_per_rank', base=INDEPENDENT,
           edits={'    torch.manual_seed(seed + _rank())\n':
                  '    torch.manual_seed(seed)\n'}),
    Mutant('build_seeded_per_rank', rule='seeds.build_alike', base=INDEPENDENT,
           edits={'    torch.manual_seed(seed)\n':
                  '    torch.manual_seed(seed + _rank())\n'}),
    Mutant('mean_of_rank_means', rule='step.not_rank_mean', base=INDEPENDENT,
           edits={'    scale = world_size / denom\n':
                  '    scale = 1.0 / max(local_tokens, 1)\n'}),
    Mutant('local_mean_times_world', rule='step.not_summed', base=INDEPENDENT,
           edits={'    scale = world_size / denom\n':
                  '    scale = world_size / max(local_tokens, 1)\n'}),
    Mutant('forgot_ddp_divides', rule='step.token_weighted', base=INDEPENDENT,
           edits={'    scale = world_size / denom\n':
                  '    scale = 1.0 / denom\n'}),
    Mutant('mean_of_micro_batch_means', rule='step.token_weighted', base=INDEPENDENT,
           edits={'            (summed * scale).backward()\n':
                  '            n_mb = max(count_label_tokens(labels), 1)\n            (summed / n_mb * world_size / len(micro_batches) * local_tokens / denom).backward()\n'}),
    Mutant('no_no_sync', rule='accumulation.no_sync', base=INDEPENDENT,
           edits={'        if i < last and hasattr(ddp_model, "no_sync"):\n':
                  '        if False and i < last and hasattr(ddp_model, "no_sync"):\n'}),
    Mutant('no_sync_around_backward_only', rule='accumulation.no_sync', base=INDEPENDENT,
           edits={'            sync = ddp_model.no_sync()\n':
                  '            sync = ddp_model.no_sync()\n        logits = ddp_model(input_ids=input_ids, **kwargs).logits\n        summed = _summed_shifted_loss(logits, labels)\n',
                  '            logits = ddp_model(input_ids=input_ids, **kwargs).logits\n            summed = _summed_shifted_loss(logits, labels)\n':
                  ''}),
    Mutant('no_sync_on_every_backward', rule='accumulation.no_sync', base=INDEPENDENT,
           edits={'        if i < last and hasattr(ddp_model, "no_sync"):\n':
                  '        if hasattr(ddp_model, "no_sync"):\n'}),
    Mutant('loss_not_all_reduced', rule='step.returned_loss', base=INDEPENDENT,
           edits={'    if _group_ready():\n        dist.all_reduce(loss_sum)\n    return float(loss_sum.item() / denom)\n':
                  '    return float(loss_sum.item() / max(local_tokens, 1))\n'}),
    Mutant('unshifted_loss', rule='step.shifted_loss', base=INDEPENDENT,
           edits={'    logits = logits[..., :-1, :].float()\n    labels = labels[..., 1:]\n':
                  '    logits = logits.float()\n'}),
    Mutant('count_without_shift', rule='step.count_tokens', base=INDEPENDENT,
           edits={'    return int((labels[..., 1:] != IGNORE_INDEX).sum().item())\n':
                  '    return int((labels != IGNORE_INDEX).sum().item())\n'}),
    Mutant('every_rank_saves_atomically', rule='checkpoint.rank0_only', base=INDEPENDENT,
           edits={'    if _rank() == 0:\n':
                  '    if True:\n'}),
    Mutant('state_dict_with_module_prefix', rule='checkpoint.no_prefix', base=INDEPENDENT,
           edits={'        state = {"model": module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}\n':
                  '        state = {"model": ddp_model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}\n'}),
    Mutant('barrier_before_write', rule='checkpoint.barrier', base=INDEPENDENT,
           edits={'    """Rank 0 writes the checkpoint, whole or not at all; every rank returns once it is complete."""\n    path = Path(path)\n':
                  '    """Rank 0 writes the checkpoint, whole or not at all; every rank returns once it is complete."""\n    path = Path(path)\n    if _group_ready():\n        dist.barrier()\n',
                  '                tmp.unlink()\n    if _group_ready():\n        dist.barrier()\n':
                  '                tmp.unlink()\n'}),
    Mutant('save_in_place_not_atomic', rule='checkpoint.atomic', base=INDEPENDENT,
           edits={'            torch.save(state, tmp)\n            os.replace(tmp, path)\n':
                  '            torch.save(state, path)\n'}),
    Mutant('log_on_every_rank', rule='log.rank0_only', base=INDEPENDENT,
           edits={'    if _rank() != 0:\n        return\n':
                  ''}),
    Mutant('fsdp_root_only', rule='fsdp.per_layer', base=INDEPENDENT,
           edits={'    for layer in model.model.layers:\n        fully_shard(layer)\n':
                  ''}),
    Mutant('fsdp_global_numel', rule='fsdp.local_bytes', base=INDEPENDENT,
           edits={'    if hasattr(t, "to_local"):\n        t = t.to_local()\n':
                  ''}),
    Mutant('fsdp_counts_adam_step', rule='fsdp.share', base=INDEPENDENT,
           edits={'            if key == "step" or (value.dim() == 0 and not hasattr(value, "to_local")):\n                continue\n':
                  ''}),
    Mutant('fixed_port', rule='init.env_rendezvous', base=INDEPENDENT,
           edits={'    dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))\n':
                  '    dist.init_process_group(backend=backend, init_method="tcp://127.0.0.1:29500",\n                            rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),\n                            timeout=timedelta(seconds=timeout_s))\n'}),
    Mutant('no_timeout_either', rule='init.timeout', base=INDEPENDENT,
           edits={'    dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))\n':
                  '    dist.init_process_group(backend=backend)\n'}),
    Mutant('shutdown_unconditional', rule='init.shutdown', base=INDEPENDENT,
           edits={'    if _group_ready():\n        dist.destroy_process_group()\n':
                  '    dist.destroy_process_group()\n'}),
    Mutant('main_epoch_zero_every_step', rule='launch.main', base=INDEPENDENT,
           edits={'            loader = shard_loader(dataset, spec["batch_size"], epoch=step, seed=seed)\n':
                  '            loader = shard_loader(dataset, spec["batch_size"], epoch=0, seed=seed)\n'}),
    Mutant('main_only_rank0_saves', rule='launch.main', base=INDEPENDENT,
           edits={'    init_distributed()\n':
                  '    rank, _ = init_distributed()\n',
                  '        save_checkpoint(ddp_model, optimizer, args.out / "checkpoint.pt", steps)\n':
                  '        if rank == 0:\n            save_checkpoint(ddp_model, optimizer, args.out / "checkpoint.pt", steps)\n'}),
]

MUTANTS = COURSE_MUTANTS + INDEPENDENT_MUTANTS

ALTERNATIVES = [
    Alternative("hf_loss_with_num_items", note="the model's own loss with num_items_in_batch, times the world size",
                functions={"_loss_sum": '''def _loss_sum(model, batch):
    """The summed cross-entropy of a batch's predicted tokens, from the model's own loss."""
    count = max(count_label_tokens(batch["labels"]), 1)
    return model(input_ids=batch["input_ids"], labels=batch["labels"]).loss.float() * count
'''}),
    Alternative("sampler_indices_by_hand", note="the shard computed from a seeded permutation, as DistributedSampler does",
                functions={"shard_loader": '''def shard_loader(dataset, batch_size, epoch, seed, drop_last=False):
    """This rank's share of a shuffled order, computed as DistributedSampler computes it."""
    import math
    rank, world = dist.get_rank(), dist.get_world_size()
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    order = torch.randperm(len(dataset), generator=generator).tolist()
    if drop_last and len(dataset) % world:
        size = len(dataset) // world * world
        order = order[:size]
    else:
        size = math.ceil(len(dataset) / world) * world
        order = (order * math.ceil(size / max(len(order), 1)))[:size]
    return DataLoader(torch.utils.data.Subset(dataset, order[rank:size:world]), batch_size=batch_size)
'''}),
    Alternative("one_all_reduce_for_loss_and_count", note="the returned loss: its sum and the token count in one tensor",
                functions={"train_step": '''def train_step(ddp_model, optimizer, micro_batches):
    """One optimizer step; the loss is reduced once, with the token count beside it."""
    local = float(sum(count_label_tokens(batch["labels"]) for batch in micro_batches))
    total = torch.tensor([local])
    dist.all_reduce(total)
    optimizer.zero_grad(set_to_none=True)
    stack = contextlib.ExitStack()
    stack.enter_context(ddp_model.no_sync())
    summed = 0.0
    for index, batch in enumerate(micro_batches):
        if index == len(micro_batches) - 1:
            stack.close()
        loss_sum = _loss_sum(ddp_model, batch)
        (loss_sum / total[0] * dist.get_world_size()).backward()
        summed += float(loss_sum.detach())
    stack.close()
    optimizer.step()
    pair = torch.tensor([summed, local], dtype=torch.float64)
    dist.all_reduce(pair)
    return float(pair[0] / pair[1])
'''}),
    Independent(note="written from the README and the stub alone, before the README was settled where it found it "
                     "ambiguous; main's dtype, which the README gained later, added by one line"),
]

# Operator mutants (mutmut's operators on the reference) that no test can tell from it, with why.
EQUIVALENT = {
    'init_distributed: backend = "nccl" if torch.cuda.is_available() else "gloo" -> backend = "nccl" if (torch.cuda.is_available()) and False else "gloo"':
        'the nccl branch runs only where CUDA is available, where the GPU tests grade it: the CPU tests hide every CUDA device',
    'init_distributed: backend = "nccl" if torch.cuda.is_available() else "gloo" -> backend = "XXncclXX" if torch.cuda.is_available() else "gloo"':
        'the nccl branch runs only where CUDA is available, where the GPU tests grade it: the CPU tests hide every CUDA device',
    'init_distributed: if backend == "nccl": -> if backend == "XXncclXX":':
        'the nccl branch runs only where CUDA is available, where the GPU tests grade it: the CPU tests hide every CUDA device',
    'init_distributed: if backend == "nccl": -> if backend == "NCCL":':
        'the nccl branch runs only where CUDA is available, where the GPU tests grade it: the CPU tests hide every CUDA device',
    'init_distributed: torch.cuda.set_device(int(os.environ["LOCAL_RANK"])) -> torch.cuda.set_device(None)':
        'the nccl branch runs only where CUDA is available, where the GPU tests grade it: the CPU tests hide every CUDA device',
    'init_distributed: torch.cuda.set_device(int(os.environ["LOCAL_RANK"])) -> torch.cuda.set_device(int(None))':
        'the nccl branch runs only where CUDA is available, where the GPU tests grade it: the CPU tests hide every CUDA device',
    'init_distributed: torch.cuda.set_device(int(os.environ["LOCAL_RANK"])) -> torch.cuda.set_device(int(os.environ["XXLOCAL_RANKXX"]))':
        'the nccl branch runs only where CUDA is available, where the GPU tests grade it: the CPU tests hide every CUDA device',
    'init_distributed: torch.cuda.set_device(int(os.environ["LOCAL_RANK"])) -> torch.cuda.set_device(int(os.environ["local_rank"]))':
        'the nccl branch runs only where CUDA is available, where the GPU tests grade it: the CPU tests hide every CUDA device',
    'shard_loader: sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank(), shuffle=True, -> sampler = DistributedSampler(dataset, num_replicas=None, rank=dist.get_rank(), shuffle=True,':
        "DistributedSampler's num_replicas, rank and shuffle default to the group's world size, its rank and True",
    'shard_loader: sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank(), shuffle=True, -> sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=None, shuffle=True,':
        "DistributedSampler's num_replicas, rank and shuffle default to the group's world size, its rank and True",
    'shard_loader: sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank(), shuffle=True, -> sampler = DistributedSampler(dataset, rank=dist.get_rank(), shuffle=True,':
        "DistributedSampler's num_replicas, rank and shuffle default to the group's world size, its rank and True",
    'shard_loader: sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank(), shuffle=True, -> sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), shuffle=True,':
        "DistributedSampler's num_replicas, rank and shuffle default to the group's world size, its rank and True",
    'shard_loader: sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank(), shuffle=True, seed=seed, drop_last=drop_last) -> sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank(), seed=seed, drop_last=drop_last)':
        "DistributedSampler's num_replicas, rank and shuffle default to the group's world size, its rank and True",
    'wrap_ddp: return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None) -> return DistributedDataParallel(model, )':
        "for a module on one CUDA device DDP takes device_ids=None as that device, and on the CPU it needs none",
    'wrap_ddp: return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None) -> return DistributedDataParallel(model, device_ids=[device.index] if device.type == "XXcudaXX" else None)':
        "for a module on one CUDA device DDP takes device_ids=None as that device, and on the CPU it needs none",
    'wrap_ddp: return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None) -> return DistributedDataParallel(model, device_ids=[device.index] if device.type == "CUDA" else None)':
        "for a module on one CUDA device DDP takes device_ids=None as that device, and on the CPU it needs none",
    '_loss_sum: device = next(model.parameters()).device -> device = None':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    '_loss_sum: logits = model(input_ids=batch["input_ids"].to(device)).logits -> logits = model(input_ids=batch["input_ids"].to(None)).logits':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    '_loss_sum: ignore_index=IGNORE_INDEX, reduction="sum") -> reduction="sum")':
        "F.cross_entropy's ignore_index defaults to -100",
    'train_step: device = next(ddp_model.parameters()).device -> device = None':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'train_step: tokens = torch.tensor(float(sum(count_label_tokens(batch["labels"]) for batch in micro_batches)), device=device) -> tokens = torch.tensor(float(sum(count_label_tokens(batch["labels"]) for batch in micro_batches)), device=None)':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'train_step: tokens = torch.tensor(float(sum(count_label_tokens(batch["labels"]) for batch in micro_batches)), device=device) -> tokens = torch.tensor(float(sum(count_label_tokens(batch["labels"]) for batch in micro_batches)), )':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'train_step: optimizer.zero_grad(set_to_none=True) -> optimizer.zero_grad(set_to_none=None)':
        'zeros or None: either way nothing of an earlier gradient is left, and the tests read a missing gradient as zeros',
    'train_step: optimizer.zero_grad(set_to_none=True) -> optimizer.zero_grad(set_to_none=False)':
        'zeros or None: either way nothing of an earlier gradient is left, and the tests read a missing gradient as zeros',
    'train_step: summed = torch.zeros((), device=device) -> summed = torch.zeros((), device=None)':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'train_step: summed = torch.zeros((), device=device) -> summed = torch.zeros((), )':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'save_checkpoint: partial = path.with_name(path.name + ".partial") -> partial = path.with_name(path.name + "XX.partialXX")':
        'any other temporary name beside the checkpoint does as well: it is moved into place',
    'save_checkpoint: partial = path.with_name(path.name + ".partial") -> partial = path.with_name(path.name + ".PARTIAL")':
        'any other temporary name beside the checkpoint does as well: it is moved into place',
    'load_checkpoint: state = torch.load(path, map_location="cpu", weights_only=True) -> state = torch.load(path, map_location=None, weights_only=True)':
        'the checkpoints the tests load hold CPU tensors, which load onto the CPU anyway',
    'load_checkpoint: state = torch.load(path, map_location="cpu", weights_only=True) -> state = torch.load(path, map_location="cpu", weights_only=None)':
        "torch.load's weights_only defaults to True, and a checkpoint of tensors and plain data loads alike either way",
    'load_checkpoint: state = torch.load(path, map_location="cpu", weights_only=True) -> state = torch.load(path, weights_only=True)':
        'the checkpoints the tests load hold CPU tensors, which load onto the CPU anyway',
    'load_checkpoint: state = torch.load(path, map_location="cpu", weights_only=True) -> state = torch.load(path, map_location="cpu", )':
        "torch.load's weights_only defaults to True, and a checkpoint of tensors and plain data loads alike either way",
    'load_checkpoint: state = torch.load(path, map_location="cpu", weights_only=True) -> state = torch.load(path, map_location="cpu", weights_only=False)':
        "torch.load's weights_only defaults to True, and a checkpoint of tensors and plain data loads alike either way",
    'log_metrics: with open(path, "a", encoding="utf-8") as log: -> with open(path, "a", encoding=None) as log:':
        'the JSON lines are ASCII: any encoding writes them alike',
    'log_metrics: with open(path, "a", encoding="utf-8") as log: -> with open(path, "a", ) as log:':
        'the JSON lines are ASCII: any encoding writes them alike',
    'fsdp_state_bytes: shard = tensor.to_local() if hasattr(tensor, "to_local") else tensor -> shard = tensor.to_local() if (hasattr(tensor, "to_local")) or True else tensor':
        'after fully_shard every parameter, gradient and AdamW moment is a DTensor: each has to_local',
    'main: parser.add_argument("--data", required=True, help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}") -> parser.add_argument("--data", required=True, help=None)':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: parser.add_argument("--data", required=True, help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}") -> parser.add_argument("--data", help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}")':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: parser.add_argument("--data", required=True, help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}") -> parser.add_argument("--data", required=True, )':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: parser.add_argument("--data", required=True, help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}") -> parser.add_argument("--data", required=False, help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}")':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: parser.add_argument("--data", required=True, help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}") -> parser.add_argument("--data", required=True, help="XXa JSON file: {config, seed, steps, batch_size, lr, samples, dtype}XX")':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: parser.add_argument("--data", required=True, help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}") -> parser.add_argument("--data", required=True, help="a json file: {config, seed, steps, batch_size, lr, samples, dtype}")':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: parser.add_argument("--data", required=True, help="a JSON file: {config, seed, steps, batch_size, lr, samples, dtype}") -> parser.add_argument("--data", required=True, help="A JSON FILE: {CONFIG, SEED, STEPS, BATCH_SIZE, LR, SAMPLES, DTYPE}")':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: parser.add_argument("--out", required=True) -> parser.add_argument("--out", required=None)':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: parser.add_argument("--out", required=True) -> parser.add_argument("--out", )':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: parser.add_argument("--out", required=True) -> parser.add_argument("--out", required=False)':
        'main is always run with --data and --out: a help text or a required flag changes nothing it does',
    'main: args = parser.parse_args(argv) -> args = parser.parse_args(None)':
        'under torchrun main is called without argv, so parse_args reads sys.argv either way',
    'main: spec = json.loads(Path(args.data).read_text(encoding="utf-8")) -> spec = json.loads(Path(args.data).read_text(encoding=None))':
        'the data file is ASCII JSON: any encoding reads it alike',
    'main: spec = json.loads(Path(args.data).read_text(encoding="utf-8")) -> spec = json.loads(Path(args.data).read_text(encoding="UTF-8"))':
        'the data file is ASCII JSON: any encoding reads it alike',
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = None':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = torch.device("cuda", torch.cuda.current_device()) if (dist.get_backend() == "nccl") and False else torch.device("cpu")':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = torch.device(None, torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = torch.device("cuda", None) if dist.get_backend() == "nccl" else torch.device("cpu")':
        "torch.device('cuda') and torch.device(index) name the current device, which init_distributed set to LOCAL_RANK: the same device",
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = torch.device(torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")':
        "torch.device('cuda') and torch.device(index) name the current device, which init_distributed set to LOCAL_RANK: the same device",
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = torch.device("cuda", ) if dist.get_backend() == "nccl" else torch.device("cpu")':
        "torch.device('cuda') and torch.device(index) name the current device, which init_distributed set to LOCAL_RANK: the same device",
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = torch.device("XXcudaXX", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = torch.device("CUDA", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "XXncclXX" else torch.device("cpu")':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'main: device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu") -> device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "NCCL" else torch.device("cpu")':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'main: model = model.to(device, getattr(torch, spec.get("dtype", "float32"))) -> model = model.to(None, getattr(torch, spec.get("dtype", "float32")))':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'main: model = model.to(device, getattr(torch, spec.get("dtype", "float32"))) -> model = model.to(getattr(torch, spec.get("dtype", "float32")))':
        "observable on CUDA devices only, where the GPU tests grade it: the CPU tests' group is gloo, and every tensor is already on the model's device, the CPU",
    'main: optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=spec.get("lr", 1e-3)) -> optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=spec.get("lr", None))':
        "the data file always gives lr (the README's contract): the default is never read",
    'main: optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=spec.get("lr", 1e-3)) -> optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=spec.get("lr", ))':
        "the data file always gives lr (the README's contract): the default is never read",
    'main: optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=spec.get("lr", 1e-3)) -> optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=spec.get("lr", 1.001))':
        "the data file always gives lr (the README's contract): the default is never read",
}
