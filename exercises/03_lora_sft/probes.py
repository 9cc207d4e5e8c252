"""Probes of the visible tests: they run beside your module (in the worker during official
grading), build the objects a call needs from data, and return what your code did, as data."""
import contextlib

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
    returned = module.add_lora(model, r, alpha, target_modules)
    return {"adapted": sorted(n for n, m in model.named_modules() if isinstance(m, module.LoRALinear)),
            "returned_the_model": returned is model,
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


def lora_details(module, weight, bias, r, alpha, x, A, B, upstream, dropout=0.0, train_mode=False):
    """A LoRALinear with dropout `dropout` around an nn.Linear of `weight` (and `bias`, or none),
    holding A and B, in train or eval mode: the fresh lora_A and the adapters' dtype, the output
    for x, the gradients of sum(output * upstream) on every parameter, and what merged() gives
    (its type, its output in eval mode) and leaves (the base weight)."""
    base = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, dtype=weight.dtype)
    with torch.no_grad():
        base.weight.copy_(weight)
        if bias is not None:
            base.bias.copy_(bias)
    layer = module.LoRALinear(base, r, alpha, dropout)
    report = {"fresh_A": layer.lora_A.detach().clone(), "dtypes": [str(layer.lora_A.dtype), str(layer.lora_B.dtype)]}
    with torch.no_grad():
        layer.lora_A.copy_(A)
        layer.lora_B.copy_(B)
    layer.train(train_mode)
    out = layer(x)
    out.backward(upstream)
    report.update(out=out.detach(), grads={name: None if p.grad is None else p.grad.clone()
                                           for name, p in layer.named_parameters()})
    before = layer.base.weight.detach().clone()
    merged = layer.merged()
    layer.eval()
    with torch.no_grad():
        report.update(merged_type=type(merged).__name__, merged_out=merged(x), unmerged_out=layer(x),
                      base_weight_kept=bool(torch.equal(layer.base.weight, before)))
    return report


def chat_tokens(module, tokenizer_dir, messages, max_length=None, pad_token=None):
    """tokenize_conversation with the tokenizer of `tokenizer_dir`, its pad token set to `pad_token` if given."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    if pad_token is not None:
        tokenizer.pad_token = pad_token
    return module.tokenize_conversation(tokenizer, messages, max_length)


def reply_and_mode(module, model_dir, messages, max_new_tokens, train_mode):
    """generate_reply of the model of `model_dir`, handed over in train or eval mode: the reply and
    the mode the model is left in."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(model_dir).train(train_mode)
    reply = module.generate_reply(model, AutoTokenizer.from_pretrained(model_dir), messages, max_new_tokens)
    return {"reply": reply, "training_after": model.training}


@contextlib.contextmanager
def _replaced(cls, name, replacement):
    """`cls.name` is `replacement` inside the block; afterwards the class is as it was (an inherited
    method is inherited again)."""
    own = vars(cls).get(name)
    setattr(cls, name, replacement)
    try:
        yield
    finally:
        if own is None:
            delattr(cls, name)
        else:
            setattr(cls, name, own)


def sft_run(module, model_dir, train_path, out_dir, kwargs, work_dir, input_ids):
    """sft_with_peft_trl run from `work_dir` (a fresh, empty folder): what it returned, the files
    it left there, the first batch the trainer computed its loss on (input_ids and labels), whether
    the base weights came out as the checkpoint holds them, and the trained model's logits for
    `input_ids` (eval mode)."""
    import os

    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    trained, train, first_batch, compute_loss = [], SFTTrainer.train, [], SFTTrainer.compute_loss

    def training(trainer, *args, **kw):
        output = train(trainer, *args, **kw)
        trained.append(trainer.model)
        return output

    def computing_loss(trainer, model, inputs, *args, **kw):
        if not first_batch:
            first_batch.append({key: inputs[key].detach().cpu() for key in ("input_ids", "labels") if key in inputs})
        return compute_loss(trainer, model, inputs, *args, **kw)

    here = os.getcwd()
    os.chdir(work_dir)
    try:
        with _replaced(SFTTrainer, "train", training), _replaced(SFTTrainer, "compute_loss", computing_loss):
            result = module.sft_with_peft_trl(model_dir, train_path, out_dir, **kwargs)
    finally:
        os.chdir(here)
    report = {"result": result, "left_in_work_dir": sorted(os.listdir(work_dir)),
              "first_batch": first_batch[0] if first_batch else None}
    if trained:
        model = trained[-1].eval()
        checkpoint = dict(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).named_parameters())
        base = {name.replace(".base_layer", ""): p for name, p in model.get_base_model().named_parameters()
                if "lora_" not in name}
        kept = [torch.equal(base[name].float(), weight) for name, weight in checkpoint.items() if name in base]
        with torch.no_grad():
            report["logits"] = model(input_ids=input_ids).logits.float()
        report["base_weights_kept"] = bool(kept) and all(kept)
    return report


def warm_up():
    """Run once by `grader watch`, in its own process, before its first check (never while
    grading): the libraries' first calls that every check would otherwise pay again (the course's
    tiny model and tokenizer loaded, an adapter added, stepped, saved, reloaded and merged; a
    dataset mapped; trainer arguments built), so that each check, forked from that process, finds
    them done. It runs none of your code."""
    import tempfile

    from datasets import Dataset
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments

    from grader.course import COURSE

    tiny = str(COURSE.datasets / "tiny_llama")
    AutoTokenizer.from_pretrained(tiny).apply_chat_template([{"role": "user", "content": "2+2?"}], tokenize=True)
    Dataset.from_list([{"ids": [1, 2]}, {"ids": [3]}]).map(lambda row: {"length": len(row["ids"])})
    ids = torch.tensor([[1, 5, 20, 30]])
    with torch.random.fork_rng(), tempfile.TemporaryDirectory() as folder:
        TrainingArguments(output_dir=folder, use_cpu=True, report_to=[])
        adapted = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32),
                                 LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], task_type="CAUSAL_LM"))
        adapted(input_ids=ids, labels=ids).loss.backward()
        adapted.save_pretrained(folder)
        reloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32), folder)
        with torch.no_grad():
            reloaded.eval().merge_and_unload()(input_ids=ids)
