"""Pretraining corpus: documents sampled from the grammar, tokenized, written as JSONL, with the exact
loss floor of each split.

Each line is {"id", "text", "input_ids", "source_nll"}:
  input_ids  = [<s>] + one id per word/punctuation piece + [</s>]
             = tokenizer(text).input_ids + [tokenizer.eos_token_id]   (the tokenizer adds <s> itself)
  source_nll = -log p_source(document), in nats: the sum over the len(input_ids) - 1 predicted tokens
               (every token after <s>, </s> included) of the grammar's exact conditional probability.
The loss floor of a split is sum(source_nll) / sum(len(input_ids) - 1): the best mean cross-entropy any
model can reach when each document is scored on its own, starting from <s>, predicting up to </s>.
"""
from __future__ import annotations

import math
import random
from pathlib import Path

from grammar_source import END_OF_DOCUMENT, Grammar, document_text
from jsonl import write_jsonl

# Separate seeds per split: the eval documents do not change if the train split grows.
TRAIN_SEED, EVAL_SEED = 1001, 2002
N_TRAIN_DOCS, N_EVAL_DOCS = 20000, 1000


def make_split(grammar: Grammar, tokenizer, n_docs: int, seed: int) -> tuple[list[dict], float, int]:
    """Sample n_docs documents; return rows, total source NLL (nats) and number of predicted tokens."""
    rng = random.Random(seed)
    rows, total_nll, n_predicted = [], [], 0
    for i in range(n_docs):
        tokens = grammar.sample_document(rng)
        text = document_text(tokens)
        ids = tokenizer(text)["input_ids"] + [tokenizer.eos_token_id]
        # One id per word plus <s> and </s> is what makes the floor exact; a word that tokenizes to
        # two pieces (or to <unk>) would break it, so refuse to build rather than ship a wrong floor.
        n_words = sum(1 for t in tokens if t.word is not END_OF_DOCUMENT)
        assert len(ids) == n_words + 2 and tokenizer.unk_token_id not in ids, text
        nll = -math.fsum(math.log(t.prob) for t in tokens)
        rows.append({"id": i, "text": text, "input_ids": ids, "source_nll": round(nll, 6)})
        total_nll.append(nll)
        n_predicted += len(ids) - 1
    return rows, math.fsum(total_nll), n_predicted


def build_corpus(out_dir: Path, tokenizer) -> dict:
    """Write train.jsonl and eval.jsonl into out_dir; return the facts for the manifest."""
    grammar = Grammar()
    facts = {}
    for split, n_docs, seed in (("train", N_TRAIN_DOCS, TRAIN_SEED), ("eval", N_EVAL_DOCS, EVAL_SEED)):
        rows, nll, n_predicted = make_split(grammar, tokenizer, n_docs, seed)
        write_jsonl(out_dir / f"{split}.jsonl", rows)
        facts[split] = {"documents": n_docs, "predicted_tokens": n_predicted, "seed": seed,
                        "loss_floor_nats_per_token": nll / n_predicted}
    return {
        "loss_floor_nats_per_token": facts["eval"]["loss_floor_nats_per_token"],
        "train_loss_floor_nats_per_token": facts["train"]["loss_floor_nats_per_token"],
        "splits": facts,
        "vocab_words": len(grammar.words),
    }
