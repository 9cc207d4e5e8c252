"""SFT data: chat conversations teaching one skill the pretrained model does not have.

The skill: reply to a sentence with its first noun (a common noun or a name), as one bare word, and
stop. "the old cat sees anna." -> "cat"; "anna sees the old cat." -> "anna". The sentences are
single-clause sentences of the pretraining grammar, so every word is known to the model; what it lacks
is the chat format, the habit of ending its turn with <|end|>, and the task itself (it would just
continue the text). The grammar's repeated subjects taught it to copy a subject from earlier context,
which is what LoRA can build on in well under a minute.

Rows are {"messages": [...]} in the usual role/content form: an optional system message, then 1 to 3
user/assistant exchanges. Every assistant reply is the answer for the user message just before it. For
evaluation only the last assistant message is scored (see sft/checker.py): the prompt is
messages[:-1], the gold answer messages[-1]["content"].
"""
from __future__ import annotations

import random
from pathlib import Path

from grammar_source import WORD_CLASSES, Grammar, document_text
from jsonl import write_jsonl
from stable_random import categorical, randint

TRAIN_SEED, EVAL_SEED = 3003, 4004
N_TRAIN, N_EVAL = 3000, 200

SYSTEM_PROMPTS = (
    "reply with the first noun only.",
    "you are a helpful assistant. reply with the first noun of each sentence, one word only.",
    "answer with one word: the first noun.",
)
P_SYSTEM = 0.7  # conversations without a system message still expect the same behaviour
TURN_WEIGHTS = (0.5, 0.3, 0.2)  # 1, 2 or 3 user/assistant exchanges

_NOUN_LIKE = set(WORD_CLASSES["NOUN"]) | set(WORD_CLASSES["NAME"])
_CONJUNCTIONS = set(WORD_CLASSES["CONJ"])


def first_noun(text: str) -> str:
    """The answer for a sentence: its first word that is a common noun or a name."""
    return next(w for w in text.replace(".", " ").split() if w in _NOUN_LIKE)


def _sentence(grammar: Grammar, rng: random.Random) -> str:
    """One single-clause sentence from the pretraining grammar: the first sentence of a sampled document,
    drawn again while it has a conjunction. With one clause the first noun is also the sentence's only
    subject, which is what the pretrained model already tracks (the grammar repeats subjects)."""
    while True:
        tokens = []
        for token in grammar.sample_document(rng):
            tokens.append(token)
            if token.word == ".":
                break
        if not any(t.word in _CONJUNCTIONS for t in tokens):
            return document_text(tokens)


def make_conversation(grammar: Grammar, rng: random.Random) -> dict:
    messages = []
    if rng.random() < P_SYSTEM:
        messages.append({"role": "system", "content": SYSTEM_PROMPTS[randint(rng, 0, len(SYSTEM_PROMPTS) - 1)]})
    for _ in range(1 + categorical(rng, list(TURN_WEIGHTS))):
        sentence = _sentence(grammar, rng)
        messages.append({"role": "user", "content": sentence})
        messages.append({"role": "assistant", "content": first_noun(sentence)})
    return {"messages": messages}


def make_split(n: int, seed: int) -> list[dict]:
    grammar, rng = Grammar(), random.Random(seed)
    return [make_conversation(grammar, rng) for _ in range(n)]


def build_sft_data(out_dir: Path, tokenizer) -> dict:
    """Write train.jsonl and eval.jsonl; check every conversation tokenizes without <unk> and that the
    assistant mask covers exactly the replies; return facts for the manifest."""
    facts = {}
    for split, n, seed in (("train", N_TRAIN, TRAIN_SEED), ("eval", N_EVAL, EVAL_SEED)):
        rows = make_split(n, seed)
        for row in rows:
            enc = tokenizer.apply_chat_template(row["messages"], return_dict=True, return_assistant_tokens_mask=True)
            assert tokenizer.unk_token_id not in enc["input_ids"], row
            replies = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
            # each reply is one word token plus <|end|>
            assert sum(enc["assistant_masks"]) == 2 * len(replies), row
        write_jsonl(out_dir / f"{split}.jsonl", rows)
        facts[split] = {"conversations": n, "seed": seed,
                        "multi_turn": sum(sum(m["role"] == "user" for m in r["messages"]) > 1 for r in rows),
                        "with_system": sum(r["messages"][0]["role"] == "system" for r in rows)}
    return facts
