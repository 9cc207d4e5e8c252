"""Probes of the visible tests: they run beside your module (in the worker during official
grading), build the objects a call needs from data, and return what your code did, as data."""
import torch
from torch import nn


def lora_layer(module, weight, bias, r, alpha, x, A=None, B=None):
    """LoRALinear around an nn.Linear with the given weights; optionally set A and B; forward x."""
    base = nn.Linear(weight.shape[1], weight.shape[0])
    with torch.no_grad():
        base.weight.copy_(weight)
        base.bias.copy_(bias)
    layer = module.LoRALinear(base, r, alpha)
    if A is not None:
        with torch.no_grad():
            layer.lora_A.copy_(A)
            layer.lora_B.copy_(B)
    merged = layer.merged()
    return {"out": layer(x).detach(), "merged_out": merged(x).detach(), "A_shape": tuple(layer.lora_A.shape),
            "B_shape": tuple(layer.lora_B.shape), "scaling": layer.scaling,
            "trainable": sorted(n for n, p in layer.named_parameters() if p.requires_grad)}


def adapted_model(module, config, r, alpha, target_modules):
    """add_lora on a model built from a LlamaConfig: the adapted modules, the trainable parameters, the counts."""
    from transformers import AutoModelForCausalLM, LlamaConfig
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**config))
    module.add_lora(model, r, alpha, target_modules)
    return {"adapted": sorted(n for n, m in model.named_modules() if isinstance(m, module.LoRALinear)),
            "trainable": sorted(n for n, p in model.named_parameters() if p.requires_grad),
            "counts": tuple(module.trainable_parameters(model))}


def tokenized(module, tokenizer_dir, messages, max_length=None):
    """tokenize_conversation with the tokenizer of `tokenizer_dir`."""
    from transformers import AutoTokenizer
    return module.tokenize_conversation(AutoTokenizer.from_pretrained(tokenizer_dir), messages, max_length)


def reply(module, model_dir, messages, max_new_tokens):
    """generate_reply of the model and tokenizer of `model_dir`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    return module.generate_reply(model, AutoTokenizer.from_pretrained(model_dir), messages, max_new_tokens)
