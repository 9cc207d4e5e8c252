"""Inputs of exercise 04's hidden suite drawn from the grading's seed.

Official grading draws each submission's seed (grader/session/seeds.py), so a module that replays
the expected values earlier feedback showed finds other inputs, and other expected numbers, every
time. Every draw here takes a NumPy generator: the `rng` fixture (the run's seed and the test's
id) or `run_generator(seed, what)` for draws that several tests share, so that their oracles'
results are cached once per run. The oracles compute the expected value of whatever is drawn.

The test chooses the structure (model type, tying, an explicit head_dim, biases, experts, grouped
KV heads), the generator only sizes it: every seed still exercises each feature the README
promises. Sizes are valid for Hugging Face (hidden_size a multiple of the head count where
head_dim is implied, KV heads dividing the heads) and small, so a model builds on the meta device
in milliseconds.
"""
import hashlib
import json

import numpy as np

from grader.course import COURSE

LLAMA_LIKE = ("llama", "mistral", "qwen2", "gemma", "mixtral")
HEAD_DIMS = (8, 12, 16, 32)
# Mixtral's fused experts run a grouped matmul whose bf16 operands need rows of a multiple of 16
# bytes: hidden and intermediate sizes of a multiple of 8.
GROUPED_MM_MULTIPLE = 8
# LoRA ranks drawn for a test: 16, the default of training_memory and fits, is left out, so that
# a rank passed but never used shows.
RANKS = (1, 2, 4, 8, 12, 24, 32, 64)
# The linear layers of a block by model type, as the README's table names them.
LINEAR_NAMES = {"dense": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                "mixtral": ["q_proj", "k_proj", "v_proj", "o_proj", "w1", "w2", "w3", "gate"],
                "gpt2": ["c_attn", "c_proj", "c_fc"]}


def run_generator(seed, what):
    """A generator shared by every test of one run (the same draws for the same seed and `what`)."""
    digest = hashlib.sha256(f"{seed}:{what}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def integer(rng, low, high):
    """An int in [low, high], both included."""
    return int(rng.integers(low, high + 1))


def choice(rng, options):
    return options[int(rng.integers(len(options)))]


def log_uniform(rng, low, high):
    """A float between low and high, every decade as likely as the next."""
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def names_of(config):
    family = config["model_type"]
    return LINEAR_NAMES["gpt2" if family == "gpt2" else "mixtral" if family == "mixtral" else "dense"]


def some_names(rng, config):
    """A non-empty list of the layer names a model type's blocks have, in a drawn order."""
    names = names_of(config)
    chosen = rng.permutation(len(names))[:integer(rng, 1, len(names) - 1)]
    return [names[i] for i in chosen]


# ---------------------------------------------------------------- configs drawn whole

def llama_like(rng, family, *, tied=None, explicit_head_dim=None, grouped=None, layers=(1, 3),
               attention_bias=None, mlp_bias=None):
    """A Llama-, Mistral-, Qwen2-, Gemma- or Mixtral-shaped config as it appears in config.json.
    A feature left None is drawn; an explicit head_dim always makes heads x head_dim differ from
    hidden_size (Gemma configs always state head_dim)."""
    kv_heads = integer(rng, 1, 4)
    grouped = bool(rng.random() < 0.75) if grouped is None else grouped
    heads = kv_heads * (integer(rng, 2, 4) if grouped else 1)
    step = GROUPED_MM_MULTIPLE if family == "mixtral" else 4
    head_dim = choice(rng, [d for d in HEAD_DIMS if d % step == 0])
    explicit = family == "gemma" or (bool(rng.random() < 0.5) if explicit_head_dim is None else explicit_head_dim)
    width = choice(rng, [w for w in (8, 12, 16, 20, 24) if w != head_dim and w % step == 0]) if explicit else head_dim
    intermediate = integer(rng, 8, 200) if family != "mixtral" else GROUPED_MM_MULTIPLE * integer(rng, 1, 25)
    config = {"model_type": family, "hidden_size": heads * width, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "intermediate_size": intermediate,
              "num_hidden_layers": integer(rng, *layers), "vocab_size": integer(rng, 16, 400),
              "tie_word_embeddings": bool(rng.random() < 0.5) if tied is None else tied}
    if explicit:
        config["head_dim"] = head_dim
    # Every model type may carry the bias keys; only llama and gemma read attention_bias, only llama
    # mlp_bias, and the meta-device model says which.
    config["attention_bias"] = bool(rng.random() < 0.5) if attention_bias is None else attention_bias
    config["mlp_bias"] = bool(rng.random() < 0.5) if mlp_bias is None else mlp_bias
    if family == "mixtral":
        config["num_local_experts"] = integer(rng, 2, 6)
        config["num_experts_per_tok"] = integer(rng, 1, 2)
    return config


def gpt2(rng, *, tied=None, n_inner=None, layers=(1, 3)):
    """A GPT-2 config: `tied` None leaves tie_word_embeddings out (gpt2 ties by default), n_inner
    None leaves it out (4 x n_embd), "null" writes it as null, "set" draws one."""
    heads = integer(rng, 1, 4)
    config = {"model_type": "gpt2", "n_embd": heads * choice(rng, (8, 12, 16)), "n_layer": integer(rng, *layers),
              "n_head": heads, "n_positions": integer(rng, 8, 128), "vocab_size": integer(rng, 16, 400)}
    if n_inner == "null":
        config["n_inner"] = None
    elif n_inner == "set":
        config["n_inner"] = integer(rng, 8, 160)
    if tied is not None:
        config["tie_word_embeddings"] = tied
    return config


# ---------------------------------------------------------------- configs derived from the model zoo

def zoo_config(name):
    return json.loads((COURSE.datasets / "configs" / f"{name}.json").read_text(encoding="utf-8"))


def derived(rng, name):
    """A config derived from a published one (datasets/configs): every key the same, its sizes
    redrawn small, its structure kept: the model type, tying, the ratio of query to KV heads, an
    explicit head_dim (and whether heads x head_dim equals hidden_size), the experts."""
    config = zoo_config(name)
    if config["model_type"] == "gpt2":
        heads = integer(rng, 1, 4)
        positions = integer(rng, 16, 256)
        config.update(n_embd=heads * choice(rng, (8, 16, 32)), n_head=heads, n_layer=integer(rng, 1, 4),
                      n_positions=positions, n_ctx=positions, vocab_size=integer(rng, 64, 1024))
        return config
    group = config["num_attention_heads"] // (config.get("num_key_value_heads") or config["num_attention_heads"])
    kv_heads = integer(rng, 1, 3)
    heads = kv_heads * group
    head_dim = choice(rng, (8, 16, 32))
    hidden = heads * head_dim
    if config.get("head_dim") and config["head_dim"] * config["num_attention_heads"] != config["hidden_size"]:
        hidden = heads * choice(rng, [w for w in (8, 12, 16, 24) if w != head_dim])
    config.update(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads,
                  intermediate_size=integer(rng, 16, 256), num_hidden_layers=integer(rng, 1, 4),
                  vocab_size=integer(rng, 64, 2048))
    if "head_dim" in config:
        config["head_dim"] = head_dim
    if config["model_type"] == "mixtral":
        config.update(intermediate_size=GROUPED_MM_MULTIPLE * integer(rng, 2, 32), num_local_experts=integer(rng, 2, 8),
                      num_experts_per_tok=integer(rng, 1, 2))
    return config


# ---------------------------------------------------------------- the scaled-down models measured on the CPU

def jitter(rng, value, spread=0.2, multiple=1):
    """`value` moved by up to +-spread of itself, kept a positive multiple of `multiple`."""
    moved = value * (1 + rng.uniform(-spread, spread))
    return max(multiple, int(round(moved / multiple)) * multiple)


def resized(rng, config):
    """A scaled-down config of the suite's with its sizes moved by up to 20%: heads, KV heads and
    layers as they are (the term each model makes dominant depends on them), hidden_size a
    multiple of the heads (of head_dim's width when head_dim is explicit)."""
    heads = config["num_attention_heads"]
    moved = dict(config)
    width = config["hidden_size"] // heads
    moved["hidden_size"] = heads * jitter(rng, width, multiple=4)
    if config.get("head_dim"):
        moved["head_dim"] = jitter(rng, config["head_dim"], multiple=4)
    moved["intermediate_size"] = jitter(rng, config["intermediate_size"], multiple=8)
    moved["vocab_size"] = jitter(rng, config["vocab_size"])
    return moved
