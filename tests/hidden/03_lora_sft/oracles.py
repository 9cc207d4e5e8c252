"""Trusted oracles for the hidden suite of exercise 03, run in the test process on inputs the test
chose: peft's LoRA layers and get_peft_model, transformers' chat template and generate, trl's
dataset preparation, pack_dataset and padding-free collator. Loaded with `sibling_module`, so the
caches below live as long as the process (a grading pool reuses its processes)."""
import copy
import importlib
import importlib.util
import inspect
import json
import os
import re
import select
import signal
import time
from contextlib import contextmanager, suppress
from functools import cache, lru_cache

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets.utils.logging  # noqa: F401  (loaded first, so that quiet_libraries() turns its progress bars off)
import torch
from torch import nn

from grader.course import COURSE
from grader.suite.checks import in_fork
from grader.suite.helpers import quiet_libraries

MODEL_DIR = COURSE.datasets / "tiny_llama"
SFT_DIR = COURSE.datasets / "sft"
END_OF_TURN = "<|end|>"
IGNORE_INDEX = -100


# ---------------------------------------------------------------- peft

def peft_layer(weight, bias, r, alpha, A, B, dropout=0.0):
    """peft's LoRA Linear around an nn.Linear holding weight and bias, with A and B set."""
    from peft import LoraConfig
    from peft.tuners.lora.layer import Linear as LoraLinear

    base = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, dtype=weight.dtype)
    with torch.no_grad():
        base.weight.copy_(weight)
        if bias is not None:
            base.bias.copy_(bias)
    layer = LoraLinear(base, "default", config=LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout),
                       r=r, lora_alpha=alpha)
    with torch.no_grad():
        layer.lora_A["default"].weight.copy_(A)
        layer.lora_B["default"].weight.copy_(B)
    return layer


def hf_config(config):
    from transformers import AutoConfig
    return AutoConfig.for_model(config["model_type"], **{k: v for k, v in config.items() if k != "model_type"})


@lru_cache(maxsize=32)
def _peft_adapted(key, r, targets):
    from peft import LoraConfig, get_peft_model
    from peft.tuners.tuners_utils import BaseTunerLayer
    from transformers import AutoModelForCausalLM

    config = json.loads(key)
    with quiet_libraries():
        if "model_dir" in config:
            base = AutoModelForCausalLM.from_pretrained(config["model_dir"], dtype=torch.float32)
        else:
            with torch.device("meta"):
                base = AutoModelForCausalLM.from_config(hf_config(config), dtype=torch.float32)
        try:
            model = get_peft_model(base, LoraConfig(r=r, target_modules=targets if isinstance(targets, str)
                                                    else list(targets)))
        except ValueError:
            return None
    adapted = sorted(name.removeprefix("base_model.model.") for name, module in model.named_modules()
                     if isinstance(module, BaseTunerLayer) and hasattr(module, "lora_A"))
    trainable, total = model.get_nb_trainable_parameters()
    return {"adapted": adapted, "trainable": trainable, "total": total}


def peft_adapted(config, r, targets="all-linear"):
    """What get_peft_model does to the model of `config`: the adapted module names (as in the
    base model) and (trainable, total) as peft counts them; None when peft refuses the targets."""
    return _peft_adapted(json.dumps(config, sort_keys=True), r, targets if isinstance(targets, str) else tuple(targets))


# ---------------------------------------------------------------- chat template

@lru_cache(maxsize=1)
def tokenizer():
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(MODEL_DIR)


def template_labels(messages, max_length=None, chat_template=None):
    """input_ids and labels from the template's own generation mask, cut to max_length."""
    tok = tokenizer()
    encoded = tok.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                      chat_template=chat_template)
    ids = list(encoded["input_ids"])
    labels = [t if m else IGNORE_INDEX for t, m in zip(ids, encoded["assistant_masks"])]
    if max_length is not None:
        ids, labels = ids[:max_length], labels[:max_length]
    return ids, labels


@lru_cache(maxsize=4)
@in_fork                       # trl, datasets and a trainer: an oracle's, not the grading's, for the rest of the task
def _trl_prepared(key, max_length):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    conversations = json.loads(key)
    rows = [{"idx": i, "messages": messages} for i, messages in enumerate(conversations)]
    with quiet_libraries(), tempfile_dir() as out:
        trainer = SFTTrainer(
            model=AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32),
            args=SFTConfig(output_dir=out, assistant_only_loss=True, max_length=max_length, bf16=False, use_cpu=True,
                           activation_checkpointing=False, report_to="none", dataset_num_proc=None),
            train_dataset=Dataset.from_list(rows), processing_class=copy.deepcopy(tokenizer()))
        prepared = trainer.train_dataset
    return {row["idx"]: {"input_ids": list(row["input_ids"]), "labels": list(row["labels"])} for row in prepared}


@contextmanager
def tempfile_dir():
    import tempfile
    with tempfile.TemporaryDirectory(prefix="oracle-sft-") as folder:
        yield folder


def trl_prepared(conversations, max_length):
    """trl's own dataset preparation with assistant_only_loss=True: {index: {input_ids, labels}}
    for the conversations it keeps (trl drops those left without any target by truncation)."""
    return _trl_prepared(json.dumps(conversations), max_length)


# ---------------------------------------------------------------- packing

def trl_pieces(examples, seq_len):
    """trl's "bfd_split" packing of the examples: the pieces it packs, as (example index, start,
    end) spans, found from the row contents (every token id in the test's examples is unique).
    It calls the kernel pack_dataset maps over a dataset, `trl.data_utils._pack_bfd`, on a table
    directly: the same packing without a Dataset.map per drawn example."""
    import pyarrow as pa
    from trl.data_utils import _pack_bfd

    where = {t: (i, j) for i, e in enumerate(examples) for j, t in enumerate(e["input_ids"])}
    if not where:
        return []           # nothing to pack (trl cannot take a table of empty rows)
    lists = pa.list_(pa.int64())
    table = pa.table({"input_ids": pa.array([e["input_ids"] for e in examples], lists),
                      "labels": pa.array([e.get("labels", e["input_ids"]) for e in examples], lists)})
    packed = _pack_bfd(table, seq_len, on_seq_length_overflow="split").to_pydict()
    pieces = []
    for ids, lengths in zip(packed["input_ids"], packed["seq_lengths"]):
        start = 0
        for length in lengths:
            first = where[ids[start]]
            pieces.append((first[0], first[1], first[1] + length))
            start += length
    return sorted(pieces)


def trl_collated(pieces):
    """trl's padding-free collator on one packed row given as its pieces [(input_ids, labels)]:
    the row's input_ids, labels and position_ids."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)
    batch = collator([{"input_ids": ids, "labels": labels} for ids, labels in pieces])
    return {key: batch[key][0].tolist() for key in ("input_ids", "labels", "position_ids")}


# ---------------------------------------------------------------- generation and exact match

def load_checker():
    spec = importlib.util.spec_from_file_location("sft_checker", SFT_DIR / "checker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_model(adapter_dir=None, merge=False):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    with quiet_libraries():
        model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32)
        if adapter_dir is not None:
            model = PeftModel.from_pretrained(model, str(adapter_dir))
            if merge:
                model = model.merge_and_unload()
    return model.eval()


def seeded_lora_A(r, alpha, dropout, seed):
    """The lora_A matrices get_peft_model draws for the tiny Llama right after
    torch.manual_seed(seed): what a run seeded before get_peft_model starts from (loading the
    model draws nothing, so seeding before or after loading gives the same)."""
    from peft import LoraConfig, get_peft_model

    state = torch.random.get_rng_state()
    try:
        model = load_model()
        torch.manual_seed(seed)
        with quiet_libraries():
            model = get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout,
                                                     target_modules="all-linear", task_type="CAUSAL_LM"))
    finally:
        torch.random.set_rng_state(state)
    return [p.detach() for name, p in model.named_parameters() if "lora_A" in name]


def greedy_replies(model, conversations, max_new_tokens=8):
    """The checker's convention: chat template with the generation prompt, greedy, stop at
    <|end|> or </s>, the new tokens decoded without special tokens."""
    tok = tokenizer()
    stop = [tok.convert_tokens_to_ids(END_OF_TURN), tok.eos_token_id]
    replies = []
    with torch.no_grad(), quiet_libraries():
        for messages in conversations:
            prompt = tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")
            out = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop,
                                 pad_token_id=tok.pad_token_id)
            replies.append(tok.decode(out[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True))
    return replies


def exact_match(adapter_dir, examples):
    checker = load_checker()
    model = load_model(adapter_dir)
    answers = greedy_replies(model, [checker.prompt_messages(e) for e in examples])
    return checker.exact_match_accuracy(examples, answers), answers


# The adapter `generate_reply` is graded on, built here rather than trained (training one that
# stops reliably takes longer than the whole budget of this test): rank 1 on lm_head, adding
# REFERENCE_BOOST times the logit of "." to the logit of <|end|>. Where the base model would end
# a sentence, this model ends its reply; some replies end at once, others run to max_new_tokens.
# Its lora_dropout of 0.9 makes generation in training mode differ on about half the prompts.
REFERENCE_BOOST, REFERENCE_DROPOUT = 2.0, 0.9


def build_reference_adapter(folder):
    from peft import LoraConfig, get_peft_model

    tok = tokenizer()
    end, period = tok.convert_tokens_to_ids(END_OF_TURN), tok.convert_tokens_to_ids(".")
    with quiet_libraries():
        model = get_peft_model(load_model(), LoraConfig(r=1, lora_alpha=1, target_modules=["lm_head"],
                                                        lora_dropout=REFERENCE_DROPOUT))
        head = model.base_model.model.lm_head
        with torch.no_grad():
            head.lora_A["default"].weight.copy_(REFERENCE_BOOST * head.base_layer.weight[period][None])
            head.lora_B["default"].weight.zero_()
            head.lora_B["default"].weight[end, 0] = 1.0
        model.save_pretrained(folder)
    return folder


@cache
@in_fork                       # a training run's libraries and heap end with it
def reference_adapter_files():
    """The reference adapter's files {name: bytes}, built once per process."""
    from pathlib import Path
    with tempfile_dir() as folder:
        build_reference_adapter(folder)
        return {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.is_file()}


# ---------------------------------------------------------------- reading the source

def resolve(path):
    """The object a dotted path names in the installed libraries, or a reason it does not resolve."""
    if not isinstance(path, str) or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", path):
        return None, f"{path!r} is not a dotted path"
    if path.split(".")[0] not in {"trl", "peft", "transformers"}:
        return None, f"{path!r} is not inside trl, peft or transformers"
    parts = path.split(".")
    target, cut = None, 0
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
            break
        except ImportError:
            continue
    if target is None:
        return None, f"{path!r}: no module of it imports"
    for name in parts[cut:]:
        if not hasattr(target, name):
            return None, f"{path!r}: {'.'.join(parts[:cut])} has no attribute {name!r} in the installed version"
        target = getattr(target, name)
        cut += 1
    target = inspect.unwrap(target)
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        return None, f"{path!r} names a {type(target).__name__}, not a function or method"
    return target, ""


RESOLVE_LIMIT_S = 60        # resolving imports a module or two: seconds, not minutes


def own_code(path):
    """The own code of the function `path` names (see `resolve`), or None and why not.

    Resolving imports the module the learner named, anywhere inside trl, peft or transformers,
    and an import can change the process it runs in (one module of transformers sets its logging
    to INFO). It runs in a forked child, so whatever it does ends with that child instead of
    carrying over to the rest of this grading and the next ones in this process. A child that
    does not answer in time, or dies first, is killed, and the path is resolved here after all."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child: answer, then vanish without cleanup
        try:
            os.close(read_end)
            try:
                answer = _resolved_code(path)
            except Exception as exc:               # noqa: BLE001 (an import that fails otherwise than ImportError)
                answer = [None, f"{path!r}: importing it raised {type(exc).__name__}: {str(exc)[:200]}"]
            with os.fdopen(write_end, "w", encoding="utf-8") as out:
                json.dump(answer, out)
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        text = _read_until_closed(read_end, RESOLVE_LIMIT_S)
    finally:
        os.close(read_end)
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    try:
        code, why = json.loads(text)
    except (TypeError, ValueError):
        code, why = _resolved_code(path)
    return code, why


def _resolved_code(path):
    function, why = resolve(path)
    return (_code(function) if function is not None else None), why


def _read_until_closed(fd, limit_s):
    """Everything written to the pipe `fd` until its writer closes it, or None past `limit_s`."""
    deadline, chunks = time.monotonic() + limit_s, []
    while (remaining := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], remaining)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks).decode("utf-8")
            chunks.append(chunk)
    return None


def _code(function):
    """A function's own source, without its docstring and comments (the doing, not the telling)."""
    source = inspect.getsource(function)
    source = re.sub(r'"""[\s\S]*?"""', "", source)
    return "\n".join(line.split("#", 1)[0] for line in source.splitlines())


# What each concept's function must itself do, read from its code. Written against the concept,
# not against one library version: any function that does the thing passes.
DOES = {
    "assistant_mask": ("build the assistant token mask from the template's generation spans",
                       lambda c: "assistant_masks" in c and "generation" in c and ("offset" in c or "span" in c)),
    "assistant_only_loss": ("turn the assistant mask into -100 labels",
                            lambda c: "assistant_mask" in c and "-100" in c),
    "packing": ("pack examples into rows with best-fit decreasing",
                lambda c: ("seq_length" in c or "seq_len" in c) and re.search(r"bin|space", c) is not None
                and ("sort" in c) and "search" in c),
    "packed_boundaries": ("set the label of every packed example's first token to -100",
                          lambda c: re.search(r"position_ids.*==\s*0\]\s*=\s*-100", c) is not None),
    "all_linear": ("expand all-linear and leave the output head out",
                   lambda c: "get_output_embeddings" in c and re.search(r"Linear", c) is not None
                   and ("INCLUDE_LINEAR_LAYERS_SHORTHAND" in c or "all-linear" in c)),
    "lora_init": ("draw A Kaiming-uniform and set B to zeros",
                  lambda c: "kaiming_uniform_" in c and "zeros_" in c and "lora_B" in c),
    "lora_scaling": ("add the adapter's output times the scaling to the base output",
                     lambda c: re.search(r"lora_B\w*\(\s*lora_A\w*\(.*\)\s*\)\s*\*\s*scaling", c) is not None),
    "merge": ("compute the B A update, times the scaling, that merging adds to W",
              lambda c: re.search(r"(weight_B|lora_B\S*weight)\s*@\s*(weight_A|lora_A\S*weight)", c) is not None
              and "scaling" in c),
}


def does(concept, code):
    return DOES[concept][1](code)
