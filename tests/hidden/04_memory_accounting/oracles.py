"""Trusted oracles for the hidden suite of exercise 04, built from transformers and peft in the
test process (never from the learner's code). Loaded with `sibling_module`, so the caches below
live as long as the process: a grading pool reuses its processes, and the audit grades dozens
of variants.

How saved tensors are counted (the measurement behind `activation_bytes`): a forward pass runs
under `torch.autograd.graph.saved_tensors_hooks`; every tensor autograd packs is recorded,
parameters excluded, memory shared between tensors counted once.
- On the CPU (scaled-down configs, real numbers) a tensor's memory is its storage: key
  `untyped_storage().data_ptr()`, size `untyped_storage().nbytes()`.
- On the meta device (full-size configs) there is no storage to identify. A tensor's memory is
  its view base instead: key the identity of `t._base` (or of `t` when it is not a view), size
  `base.numel() * base.element_size()`. Views share their base, as they share a storage on the
  CPU; on scaled-down configs both rules give the same bytes (checked by the suite).
`attention_mask` is always passed: without it the eager mask code calls `.item()`, which the
meta device cannot answer.

Gradient checkpointing is measured as the peak it produces: the bytes saved by a forward with
Hugging Face's (reentrant) checkpointing, which keeps the input of every decoder block plus what
lies outside the blocks, plus the largest number of bytes one block saves in a plain forward
(the block being recomputed during backward).
"""
import json
import os
from functools import cache, lru_cache

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.pytorch_utils import Conv1D

from grader.course import COURSE
from grader.suite.helpers import one_torch_thread, quiet_libraries

ZOO = COURSE.datasets / "configs"
MANIFEST = COURSE.datasets / "MANIFEST.json"
DTYPES = {2: torch.bfloat16, 4: torch.float32}


# ---------------------------------------------------------------- the model zoo

def zoo_param_counts():
    """facts.param_counts of datasets/MANIFEST.json: {config name: parameter count}, or {} without it."""
    if not MANIFEST.is_file():
        return {}
    return json.loads(MANIFEST.read_text(encoding="utf-8")).get("facts", {}).get("param_counts", {})


def zoo_config(name):
    return json.loads((ZOO / f"{name}.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- models from config dicts

def _key(config):
    return json.dumps(config, sort_keys=True)


def hf_config(config):
    fields = {k: v for k, v in config.items() if k != "model_type"}
    return AutoConfig.for_model(config["model_type"], attn_implementation="eager", **fields)


@lru_cache(maxsize=8)          # results are cached below: the models need not outlive a grading
def _model(key, bytes_per_value, device):
    torch.manual_seed(0)
    with quiet_libraries(), torch.device(device):
        model = AutoModelForCausalLM.from_config(hf_config(json.loads(key)), dtype=DTYPES[bytes_per_value])
    return model.train()


def model(config, bytes_per_value=2, device="meta"):
    """The Hugging Face model of a config dict, in training mode (cached: do not keep changes)."""
    return _model(_key(config), bytes_per_value, device)


@cache
def _param_count(key):
    return sum(p.numel() for p in _model(key, 2, "meta").parameters())


def param_count(config):
    """Parameters of AutoModelForCausalLM.from_config on the meta device (tied weights once)."""
    return _param_count(_key(config))


def decoder_blocks(net):
    return net.transformer.h if hasattr(net, "transformer") else net.model.layers


# ---------------------------------------------------------------- LoRA

def linear_shapes(config):
    """(name, in_features, out_features) of every linear map inside the decoder blocks of the meta
    model, lm_head excluded. Fused MoE experts are 3-D parameters, not modules: expert e's
    gate_up_proj[e] is two linears hidden -> intermediate (w1, w3), down_proj[e] one linear
    intermediate -> hidden (w2); the router's weight (experts, hidden) is one linear, `gate`."""
    shapes = []
    for block in decoder_blocks(model(config)):
        for path, module in block.named_modules():
            name = path.rsplit(".", 1)[-1]
            if isinstance(module, torch.nn.Linear):
                shapes.append((name, module.in_features, module.out_features))
            elif isinstance(module, Conv1D):
                shapes.append((name, module.nx, module.nf))
            elif type(module).__name__.endswith("Experts"):
                experts, two_i, hidden = module.gate_up_proj.shape
                shapes += [("w1", hidden, two_i // 2), ("w3", hidden, two_i // 2)] * experts
                shapes += [("w2", module.down_proj.shape[2], module.down_proj.shape[1])] * experts
            elif type(module).__name__.endswith("Router"):
                experts, hidden = module.weight.shape
                shapes.append((name, hidden, experts))
    return shapes


def lora_count(config, r, targets="all-linear"):
    return sum(r * (n_in + n_out) for name, n_in, n_out in linear_shapes(config)
               if targets == "all-linear" or name in targets)


def peft_lora_count(config, r, targets="all-linear"):
    """Trainable parameters peft creates on a fresh meta model (dense model types)."""
    return _peft_lora_count(_key(config), r, targets if isinstance(targets, str) else tuple(targets))


@cache
def _peft_lora_count(key, r, targets):
    from peft import LoraConfig, get_peft_model
    with quiet_libraries(), torch.device("meta"):
        base = AutoModelForCausalLM.from_config(hf_config(json.loads(key)), dtype=torch.bfloat16)
        targets = targets if isinstance(targets, str) else list(targets)
        adapted = get_peft_model(base, LoraConfig(r=r, target_modules=targets))
    return sum(p.numel() for p in adapted.parameters() if p.requires_grad)


# ---------------------------------------------------------------- KV cache and residual stream

def _inputs(config, batch, seq_len, device):
    ids = torch.zeros(batch, seq_len, dtype=torch.long, device=device)
    if device != "meta":
        ids = torch.randint(0, config.get("vocab_size", 2), (batch, seq_len),
                            generator=torch.Generator().manual_seed(batch * 1000 + seq_len))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


def _bytes(t):
    return t.numel() * t.element_size()


def kv_cache_bytes(config, batch, seq_len, bytes_per_value=2):
    """Bytes of the cache Hugging Face's generation fills: keys and values of every layer after a
    meta-device prefill of (batch, seq_len)."""
    return _prefill(_key(config), batch, seq_len, bytes_per_value)["kv_cache"]


def residual_bytes(config, batch, seq_len, bytes_per_value=2):
    """Sum over decoder blocks of the bytes of the hidden states each block receives (meta device)."""
    return _prefill(_key(config), batch, seq_len, bytes_per_value)["residual"]


@cache
def _prefill(key, batch, seq_len, bytes_per_value):
    net = _model(key, bytes_per_value, "meta")
    inputs = _inputs(json.loads(key), batch, seq_len, "meta")
    del inputs["labels"]
    residual = 0

    def record(module, args, kwargs):
        nonlocal residual
        residual += _bytes(args[0] if args else kwargs["hidden_states"])

    handles = [block.register_forward_pre_hook(record, with_kwargs=True) for block in decoder_blocks(net)]
    try:
        with quiet_libraries(), torch.no_grad():
            cache_ = net(**inputs, use_cache=True).cache
    finally:
        for handle in handles:
            handle.remove()
    kv_cache = sum(_bytes(layer.keys) + _bytes(layer.values) for layer in cache_.layers)
    return {"kv_cache": kv_cache, "residual": residual}


# ---------------------------------------------------------------- saved tensors

class SavedTensors:
    """Bytes autograd saves during a forward pass, counted once per storage (CPU) or per view
    base (meta), parameters excluded, attributed to the decoder block that first saved them."""

    def __init__(self, net, by_storage):
        self.by_storage = by_storage
        self.params = {self._identity(p)[0] for p in net.parameters()}
        self.seen = {}                     # identity -> bytes
        self.per_block = {}                # block index -> bytes
        self.block = None                  # the block running now, None outside the blocks
        self.keep = []                     # keeps ids and pointers from being reused

    def _identity(self, t):
        if self.by_storage:
            storage = t.untyped_storage()
            return storage.data_ptr(), storage.nbytes()
        base = t if t._base is None else t._base
        return id(base), _bytes(base)

    def pack(self, t):
        self.keep.append(t)
        key, size = self._identity(t)
        if key not in self.params and key not in self.seen:
            self.seen[key] = size
            if self.block is not None:
                self.per_block[self.block] = self.per_block.get(self.block, 0) + size
        return t

    @property
    def total(self):
        return sum(self.seen.values())


def _run_saved(net, inputs, by_storage):
    counter = SavedTensors(net, by_storage)
    handles = []
    for index, block in enumerate(decoder_blocks(net)):
        handles.append(block.register_forward_pre_hook(lambda *_, i=index: setattr(counter, "block", i)))
        handles.append(block.register_forward_hook(lambda *_: setattr(counter, "block", None)))
    try:
        with quiet_libraries(), torch.autograd.graph.saved_tensors_hooks(counter.pack, lambda t: t):
            output = net(**inputs)
        del output
    finally:
        for handle in handles:
            handle.remove()
    return counter


@cache
def _plain(key, batch, seq_len, bytes_per_value, device):
    """(bytes saved by a plain forward, the most bytes one decoder block saves)."""
    net = _model(key, bytes_per_value, device)
    with one_torch_thread():
        counter = _run_saved(net, _inputs(json.loads(key), batch, seq_len, device), device != "meta")
    return counter.total, max(counter.per_block.values())


@cache
def _checkpointed(key, batch, seq_len, bytes_per_value, device):
    """Bytes saved by a forward with reentrant checkpointing, plus one block recomputed."""
    net = _model(key, bytes_per_value, device)
    with quiet_libraries():
        net.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": True})
    try:
        with one_torch_thread():
            kept = _run_saved(net, _inputs(json.loads(key), batch, seq_len, device), device != "meta").total
    finally:
        net.activation_checkpointing_disable()
    return kept + _plain(key, batch, seq_len, bytes_per_value, device)[1]


def saved_bytes(config, batch, seq_len, *, bytes_per_value=2, device="cpu", checkpointing=False):
    """Measured bytes of activations of one training forward (see the module docstring)."""
    measure = _checkpointed if checkpointing else (lambda *key: _plain(*key)[0])
    return measure(_key(config), batch, seq_len, bytes_per_value, device)


def saved_bytes_both_rules(config, batch, seq_len, bytes_per_value=2):
    """The CPU measurement counted by storage and by view base: the two rules must agree."""
    return _both_rules(_key(config), batch, seq_len, bytes_per_value)


@cache
def _both_rules(key, batch, seq_len, bytes_per_value):
    net = _model(key, bytes_per_value, "cpu")
    inputs = _inputs(json.loads(key), batch, seq_len, "cpu")
    with one_torch_thread():
        by_storage = _run_saved(net, inputs, by_storage=True).total
        by_base = _run_saved(net, inputs, by_storage=False).total       # the meta rule, on CPU tensors
    return by_storage, by_base


# ---------------------------------------------------------------- on a CUDA device

# HBM bandwidth (bytes/s) by device name; a device not listed is bounded by the fastest known
# (B200, 8 TB/s), which keeps "no faster than the bound" a true statement on any GPU.
BANDWIDTH_BY_NAME = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.039e12, "B200": 8e12}
FASTEST_BANDWIDTH = max(BANDWIDTH_BY_NAME.values())
DECODE_STEPS = 32


def cuda_training_step(config, batch, seq_len):
    """Memory of mixed-precision AdamW training on CUDA, as the 16 bytes/param convention has it:
    bf16 weights and grads on the model, an fp32 master copy and its AdamW moments outside it.
    "states": torch.cuda.memory_allocated() after one step (weights, grads, master, moments);
    "activations": the peak of the next forward + backward minus what was held before it."""
    return _cuda_training_step(_key(config), batch, seq_len)


@cache
def _cuda_training_step(key, batch, seq_len):
    config = json.loads(key)
    torch.cuda.empty_cache()
    start = torch.cuda.memory_allocated()
    torch.manual_seed(0)
    with torch.device("cuda"):
        net = AutoModelForCausalLM.from_config(hf_config(config), dtype=torch.bfloat16).train()
    params = list(net.parameters())
    master = [p.detach().float() for p in params]
    optimizer = torch.optim.AdamW(master, lr=1e-5)
    ids = torch.randint(0, config["vocab_size"], (batch, seq_len), device="cuda")

    def forward_backward():
        net(input_ids=ids, labels=ids).loss.backward()    # noqa: F821 (the closure runs before the del below)

    forward_backward()
    for m, p in zip(master, params):
        m.grad = p.grad.float()
    optimizer.step()
    with torch.no_grad():
        for m, p in zip(master, params):
            p.copy_(m)
            m.grad = None
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    forward_backward()                       # the grads exist: backward accumulates into them
    torch.cuda.synchronize()
    result = {"states": held - start, "activations": torch.cuda.max_memory_allocated() - held}
    del net, params, master, optimizer
    torch.cuda.empty_cache()
    return result


def cuda_decode_ms_per_token(config):
    """Measured ms per generated token at batch 1 (bf16, KV cache), and the device's bandwidth."""
    import time

    torch.manual_seed(0)
    with torch.device("cuda"):
        net = AutoModelForCausalLM.from_config(hf_config(config), dtype=torch.bfloat16).eval()
    ids = torch.randint(0, config["vocab_size"], (1, 16), device="cuda")
    with torch.no_grad():
        out = net(input_ids=ids, use_cache=True)

        def step(out):
            return net(input_ids=out.logits[:, -1:].argmax(-1), cache=out.cache, use_cache=True)    # noqa: F821 (the closure runs before the del below)

        for _ in range(4):                   # warm-up: kernels chosen, memory pooled
            out = step(out)
        torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(DECODE_STEPS):
            out = step(out)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - began) / DECODE_STEPS * 1e3
    name = torch.cuda.get_device_name()
    bandwidth = next((bw for key, bw in BANDWIDTH_BY_NAME.items() if key in name), FASTEST_BANDWIDTH)
    del net, out
    torch.cuda.empty_cache()
    return {"ms_per_token": ms, "mem_bandwidth": bandwidth, "device": name}
