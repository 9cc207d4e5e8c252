"""Exact-match checker for the SFT skill ("reply with the first noun").

Self-contained on purpose (standard library only) so graders and exercises can load it by path:

    import importlib.util
    spec = importlib.util.spec_from_file_location("sft_checker", "datasets/sft/checker.py")
    checker = importlib.util.module_from_spec(spec); spec.loader.exec_module(checker)
    examples = checker.load_examples("datasets/sft/eval.jsonl")
    prompts = [checker.prompt_messages(ex) for ex in examples]
    # ... apply_chat_template(prompt, add_generation_prompt=True), generate, decode each reply ...
    accuracy = checker.exact_match_accuracy(examples, answers)

An example is one line of sft/eval.jsonl: {"messages": [...]} whose last message is the gold assistant
reply. Only that last reply is scored; earlier assistant turns are context. A model answer counts as
correct when, after removing surrounding whitespace, it equals the gold reply exactly: "cat" is right;
"cat.", "Cat", "the cat" and "cat dog" are wrong. Decode replies with skip_special_tokens=True and cut
them at the end-of-turn token, which is what generate() does when <|end|> is an eos token.
"""
from __future__ import annotations

import json


def load_examples(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def prompt_messages(example: dict) -> list[dict]:
    """Everything before the scored reply."""
    assert example["messages"][-1]["role"] == "assistant", "the last message must be the gold reply"
    return example["messages"][:-1]


def gold_answer(example: dict) -> str:
    return example["messages"][-1]["content"]


def is_correct(example: dict, answer: str) -> bool:
    return answer.strip() == gold_answer(example)


def exact_match_accuracy(examples: list[dict], answers: list[str]) -> float:
    """Fraction of examples whose answer matches the gold reply exactly (see the module docstring)."""
    if len(examples) != len(answers):
        raise ValueError(f"{len(examples)} examples but {len(answers)} answers")
    if not examples:
        raise ValueError("no examples")
    return sum(is_correct(ex, ans) for ex, ans in zip(examples, answers)) / len(examples)
