"""Trusted probes for the hidden suite of exercise 03. Each runs beside the learner's code, builds
the objects a call needs from data (layers, models, tokenizers), watches what the learner's code
does with them, and returns data only. Probes observe; they never compute an expected value."""
import contextlib
import copy
import hashlib
import os
from functools import lru_cache
from pathlib import Path

import torch
from torch import nn


def _linear(weight, bias):
    base = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, dtype=weight.dtype)
    with torch.no_grad():
        base.weight.copy_(weight)
        if bias is not None:
            base.bias.copy_(bias)
    return base


def _set_adapters(layer, A, B):
    with torch.no_grad():
        layer.lora_A.copy_(A)
        layer.lora_B.copy_(B)


def _grad(tensor):
    return None if tensor is None or tensor.grad is None else tensor.grad.detach().clone()


# ---------------------------------------------------------------- LoRALinear

def lora_layer(module, weight, bias, r, alpha, x, A=None, B=None, grad_out=None, dropout=0.0):
    """A LoRALinear around an nn.Linear holding `weight` and `bias`: its parameters as created
    (and, with A and B, after setting them), its output for x, and the gradients a backward of
    (output * grad_out).sum() leaves on every parameter and on x."""
    base = _linear(weight, bias)
    base_out = base(x).detach()
    layer = module.LoRALinear(base, r, alpha, dropout) if dropout else module.LoRALinear(base, r, alpha)
    fresh = {"A": layer.lora_A.detach().clone(), "B": layer.lora_B.detach().clone()}
    seen = {"fresh": fresh, "base_out": base_out, "base_is_attribute": layer.base is base,
            "parameters": {name: {"shape": tuple(p.shape), "dtype": str(p.dtype), "requires_grad": p.requires_grad,
                                  "is_parameter": isinstance(p, nn.Parameter)}
                           for name, p in layer.named_parameters()},
            "lora_types": [type(layer.lora_A).__name__, type(layer.lora_B).__name__],
            "scaling": float(layer.scaling) if isinstance(getattr(layer, "scaling", None), (int, float)) else None}
    if A is not None:
        _set_adapters(layer, A, B)
    layer.eval()
    x = x.clone().requires_grad_(True)
    out = layer(x)
    seen["out"] = out.detach()
    if grad_out is not None:
        (out * grad_out).sum().backward()
        seen["grads"] = {name: _grad(p) for name, p in layer.named_parameters()}
        seen["grad_x"] = _grad(x)
    return seen


def lora_dropout(module, weight, bias, r, alpha, p, x, A, B, seed):
    """Outputs of a LoRALinear with dropout p in training mode (seeded) and in eval mode."""
    layer = module.LoRALinear(_linear(weight, bias), r, alpha, p)
    _set_adapters(layer, A, B)
    layer.train()
    torch.manual_seed(seed)
    with torch.no_grad():
        train_out = layer(x)
        layer.eval()
        eval_out = layer(x)
    return {"train": train_out, "eval": eval_out}


def lora_merged(module, weight, bias, r, alpha, A, B, x):
    """merged() of a LoRALinear holding A and B: the new layer's type, weight, bias and output,
    and the LoRA layer's base weight and output afterwards."""
    layer = module.LoRALinear(_linear(weight, bias), r, alpha)
    _set_adapters(layer, A, B)
    layer.eval()
    merged = layer.merged()
    with torch.no_grad():
        return {"is_linear": isinstance(merged, nn.Linear), "is_lora": isinstance(merged, module.LoRALinear),
                "weight": merged.weight.detach().clone(),
                "bias": None if merged.bias is None else merged.bias.detach().clone(),
                "out": merged(x), "layer_out_after": layer(x), "base_weight_after": layer.base.weight.detach().clone()}


def lora_merged_on_meta(module, n_in, n_out, r, alpha, dtype):
    """merged() of a fresh LoRALinear around an nn.Linear on the meta device, in `dtype`: the
    device and dtype of the merged layer's weight (`dtype` named as torch names it: "float64")."""
    layer = module.LoRALinear(nn.Linear(n_in, n_out, device="meta", dtype=getattr(torch, dtype)), r, alpha)
    merged = layer.merged()
    return {"device": str(merged.weight.device), "dtype": str(merged.weight.dtype)}


# ---------------------------------------------------------------- models

def build_model(config, device="cpu", seed=0):
    """The Hugging Face causal LM a config dict describes (a "model_dir" key: from_pretrained)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    if "model_dir" in config:
        return AutoModelForCausalLM.from_pretrained(config["model_dir"], dtype=torch.float32)
    fields = {k: v for k, v in config.items() if k != "model_type"}
    torch.manual_seed(seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(AutoConfig.for_model(config["model_type"], **fields),
                                                dtype=torch.float32)


def adapted_model(module, config, r, alpha, target_modules="all-linear", device="meta", dropout=0.0):
    """The learner's add_lora on a model built from `config`: which modules became LoRALinear,
    which parameters are trainable, what it returned, or the exception it raised."""
    model = build_model(config, device)
    try:
        returned = module.add_lora(model, r, alpha, target_modules, dropout)
    except Exception as exc:          # a refusal is an answer here (a list that selects nothing)
        return {"raised": type(exc).__name__, "message": str(exc)[:200]}
    adapted = {name: m for name, m in model.named_modules() if isinstance(m, module.LoRALinear)}
    return {"raised": None, "returned_same": returned is model, "adapted": sorted(adapted),
            "shapes": {name: [tuple(m.lora_A.shape), tuple(m.lora_B.shape)] for name, m in adapted.items()},
            "trainable": sorted(name for name, p in model.named_parameters() if p.requires_grad),
            "trainable_numel": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "total_numel": sum(p.numel() for p in model.parameters())}


def adapted_dropout(module, config, r, alpha, dropout, x_seed=0):
    """add_lora(..., dropout) on a model built from `config` (on the CPU): for every adapted layer,
    whether its training-mode output differs from its eval-mode output once lora_B is nonzero,
    that is, whether the adapters drop anything."""
    model = build_model(config, "cpu")
    module.add_lora(model, r, alpha, "all-linear", dropout)
    return _dropping(module, model, x_seed)


def _dropping(module, model, x_seed):
    """For every LoRALinear of `model`: whether its training-mode output differs from its eval-mode
    output once lora_B is nonzero."""
    dropping = {}
    gen = torch.Generator().manual_seed(x_seed)
    for name, layer in model.named_modules():
        if isinstance(layer, module.LoRALinear):
            with torch.no_grad():
                layer.lora_B.fill_(1.0)
                x = torch.randn(4, layer.lora_A.shape[1], generator=gen)
                layer.train()
                train_out = layer(x)
                layer.eval()
                dropping[name] = not torch.equal(train_out, layer(x))
    return dropping


def adapted_with_defaults(module, config, r, alpha, x_seed=0):
    """add_lora(model, r, alpha) with target_modules and dropout left at their defaults, on a
    model built from `config` (on the CPU): the adapted modules, and for each whether it drops
    anything in training mode once lora_B is nonzero; or the exception it raised."""
    model = build_model(config, "cpu")
    try:
        module.add_lora(model, r, alpha)
    except Exception as exc:          # a default that selects nothing raises: an answer to judge
        return {"raised": type(exc).__name__, "message": str(exc)[:200]}
    dropping = _dropping(module, model, x_seed)
    return {"raised": None, "adapted": sorted(dropping), "dropping": dropping}


def count_peft_model(module, config, r, target_modules="all-linear"):
    """The learner's trainable_parameters on a peft model built from `config` on the meta device."""
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(build_model(config, "meta"), LoraConfig(r=r, target_modules=target_modules))
    return tuple(module.trainable_parameters(model))


def count_frozen_model(module, config, frozen):
    """The learner's trainable_parameters on a plain model whose parameters named with one of
    the `frozen` fragments are frozen."""
    model = build_model(config, "meta")
    for name, parameter in model.named_parameters():
        if any(part in name for part in frozen):
            parameter.requires_grad_(False)
    return tuple(module.trainable_parameters(model))


# ---------------------------------------------------------------- tokenization

@lru_cache(maxsize=2)
def _pristine_tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(tokenizer_dir)


def tokenizer_for(tokenizer_dir, pad_token=None, chat_template=None):
    """A fresh copy of the tokenizer, optionally with another pad token or chat template."""
    tokenizer = copy.deepcopy(_pristine_tokenizer(tokenizer_dir))
    if pad_token is not None:
        tokenizer.pad_token = pad_token
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    return tokenizer


def tokenize(module, tokenizer_dir, conversations, max_length=None, pad_token=None, chat_template=None):
    """The learner's tokenize_conversation on each conversation, with a fresh tokenizer each."""
    results = []
    for messages in conversations:
        tokenizer = tokenizer_for(tokenizer_dir, pad_token, chat_template)
        got = module.tokenize_conversation(tokenizer, messages, max_length)
        results.append({key: (value.tolist() if hasattr(value, "tolist") else value)
                        for key, value in got.items()} | {"_types": {k: type(v).__name__ for k, v in got.items()}})
    return results


# ---------------------------------------------------------------- the SFT run, watched

def sha256_of(tensor):
    return hashlib.sha256(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def _original_name(name):
    """A peft model's parameter name as it is in the base model's checkpoint."""
    return name.removeprefix("base_model.model.").replace(".base_layer.", ".")


def _listing(folder):
    folder = Path(folder)
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@contextlib.contextmanager
def _watching_trainer(batches, keep_batches, captured):
    """Record what SFTTrainer computes its loss on, and the trainer it builds."""
    from trl import SFTTrainer

    original_init, original_loss = SFTTrainer.__init__, SFTTrainer.compute_loss

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        captured["trainer"] = self
        # The adapters as drawn, before any step: the trainer seeds itself only now, after they were.
        captured["lora_A_at_start"] = sorted(sha256_of(p) for name, p in self.model.named_parameters() if "lora_A" in name)
        # Mixed precision wraps the model's forward (accelerate), not compute_loss: look from inside.
        first_linear = next((m for m in self.model.modules() if isinstance(m, nn.Linear)), None)
        if first_linear is not None:
            captured["autocast"] = []
            first_linear.register_forward_pre_hook(lambda module, args: captured["autocast"].append(
                torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda")) if module.training else None)

    def compute_loss(self, model, inputs, *args, **kwargs):
        if self.model.training and len(batches) < keep_batches:
            batches.append({"input_ids": inputs["input_ids"].detach().cpu().clone(),
                            "labels": inputs["labels"].detach().cpu().clone(),
                            "attention_mask": None if inputs.get("attention_mask") is None
                            else inputs["attention_mask"].detach().cpu().clone()})
        return original_loss(self, model, inputs, *args, **kwargs)

    SFTTrainer.__init__, SFTTrainer.compute_loss = init, compute_loss
    try:
        yield
    finally:
        SFTTrainer.__init__, SFTTrainer.compute_loss = original_init, original_loss


def watch_sft(module, model_dir, train_path, out_dir, kwargs, scratch, keep_batches=4, logits_input=None,
              measure_cuda_memory=False, rng_seed_before=None):
    """Run the learner's sft_with_peft_trl and watch it from outside: the batches the trainer
    computes its loss on (the first `keep_batches`), every optimizer step (learning rate,
    weight decay, how many parameters it updates), the model afterwards (dtypes, which
    parameters train, a hash of every base weight, gradient checkpointing), the files written
    outside out_dir (the working directory and the datasets cache are pointed into `scratch`
    for the call), the adapters' lora_A as the trainer received them, and the trained model's
    logits for `logits_input`. With `rng_seed_before`, torch's generator is seeded with it before
    the call, so that an unseeded draw of the adapters shows."""
    import datasets.config
    from torch.optim.optimizer import register_optimizer_step_post_hook

    scratch = Path(scratch)
    (scratch / "cwd").mkdir(parents=True, exist_ok=True)
    (scratch / "hf_datasets_cache").mkdir(parents=True, exist_ok=True)
    batches, steps, captured = [], [], {}

    def after_step(optimizer, args, kwargs_):
        params = [p for group in optimizer.param_groups for p in group["params"]]
        steps.append({"lr": [group["lr"] for group in optimizer.param_groups],
                      "weight_decay": [group.get("weight_decay") for group in optimizer.param_groups],
                      "numel": sum(p.numel() for p in params),
                      "dtypes": sorted({str(p.dtype) for p in params})})

    cwd, cache = os.getcwd(), datasets.config.HF_DATASETS_CACHE
    before = {"cwd": _listing(scratch / "cwd"), "cache": _listing(scratch / "hf_datasets_cache")}
    if measure_cuda_memory:
        torch.cuda.reset_peak_memory_stats()
    hook = register_optimizer_step_post_hook(after_step)
    if rng_seed_before is not None:
        torch.manual_seed(rng_seed_before)
    os.chdir(scratch / "cwd")
    datasets.config.HF_DATASETS_CACHE = scratch / "hf_datasets_cache"
    try:
        with _watching_trainer(batches, keep_batches, captured):
            result = module.sft_with_peft_trl(model_dir, train_path, out_dir, **kwargs)
    finally:
        os.chdir(cwd)
        datasets.config.HF_DATASETS_CACHE = cache
        hook.remove()
    seen = {"result": result, "batches": batches, "steps": steps,
            "written_outside": sorted(set(_listing(scratch / "cwd")) - set(before["cwd"]))
            + sorted(set(_listing(scratch / "hf_datasets_cache")) - set(before["cache"]))}
    if measure_cuda_memory:
        seen["peak_cuda_bytes"] = torch.cuda.max_memory_allocated()
    trainer = captured.get("trainer")
    if trainer is None:
        return seen
    model = trainer.model
    parameters = dict(model.named_parameters())
    seen["model"] = {
        "dtypes": sorted({str(p.dtype) for p in parameters.values()}),
        "trainable": sorted(name for name, p in parameters.items() if p.requires_grad),
        "base_sha256": {_original_name(name): sha256_of(p) for name, p in parameters.items() if "lora_" not in name},
        "base_dtypes": {_original_name(name): str(p.dtype).removeprefix("torch.")
                        for name, p in parameters.items() if "lora_" not in name},
        "checkpointing": bool(getattr(model, "is_gradient_checkpointing", False)),
        "autocast_in_training": any(captured.get("autocast", [])),
        "lora_A_at_start": captured.get("lora_A_at_start"),
        "seed": getattr(trainer.args, "seed", None),      # the data order and dropout draws follow it
    }
    if logits_input is not None:
        model.eval()
        with torch.no_grad():
            device = next(model.parameters()).device
            seen["logits"] = model(input_ids=logits_input.to(device)).logits.float().cpu()
    return seen


# ---------------------------------------------------------------- generation

def never_stopping(model, stop_ids):
    """`model` with an output head that never says a token of `stop_ids`: the same weight, and a
    bias of -1e4 on those tokens' logits. Used by the oracle and by `replies` alike."""
    head = model.lm_head
    biased = nn.Linear(head.in_features, head.out_features, bias=True, dtype=head.weight.dtype)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[list(stop_ids)] = -1e4
    model.lm_head = biased
    return model


def replies(module, model_dir, adapter_dir, conversations, max_new_tokens, start_in_train_mode=False, sample_seed=0,
            never_stop=False):
    """The learner's generate_reply for each conversation, on the base model of `model_dir` with
    the adapter in `adapter_dir` (or none), and the model's mode afterwards. max_new_tokens=None
    leaves it at generate_reply's default. The model's generation config samples (temperature 2,
    torch seeded with `sample_seed`) and knows </s> alone as its end, as many a checkpoint's does:
    greedy decoding and both stop tokens are generate_reply's to ask for. With `never_stop`, the
    model's head never says <|end|> or </s> (`never_stopping`)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, adapter_dir)
    tokenizer = tokenizer_for(model_dir)
    if never_stop:
        never_stopping(model, [tokenizer.convert_tokens_to_ids("<|end|>"), tokenizer.eos_token_id])
    config = model.generation_config
    config.do_sample, config.temperature, config.eos_token_id = True, 2.0, tokenizer.eos_token_id
    torch.manual_seed(sample_seed)
    got, modes = [], []
    for messages in conversations:
        model.train(start_in_train_mode)
        if max_new_tokens is None:
            got.append(module.generate_reply(model, tokenizer, messages))
        else:
            got.append(module.generate_reply(model, tokenizer, messages, max_new_tokens))
        modes.append(model.training)
    return {"replies": got, "training_after": modes}
