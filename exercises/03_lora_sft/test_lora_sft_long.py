"""The long visible check of exercise 03: an SFT run of the kind the graded suite makes, on a
smaller budget. Left out unless asked for:

    OMP_NUM_THREADS=1 pytest exercises/03_lora_sft --long         # or: grader check 03 --long

Your sft_with_peft_trl trains the tiny Llama for 40 steps of 8 of the first 320 train conversations
(about 5 s of one CPU core); the test reloads your adapter and scores the first 50 eval
conversations with the checker's convention. README.md, section "Does it learn?", states the
graded run and its bar.
"""
import tempfile
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from grader.course import COURSE
from grader.suite.checks import shown
from grader.suite.learner_files import lora_adapter_copy
from grader.worker.loading import load_module

torch.set_num_threads(1)        # as graded: one thread per grading process

# 40 steps: the reference scores 0.74 on the first 50 eval conversations (the base model 0.00); the
# graded run (80 steps, 100 conversations) asks for 0.60, which the reference passes with 0.78.
HOME_BAR = 0.5
HOME_RUN = {"r": 16, "alpha": 32, "dropout": 0.05, "max_steps": 40, "learning_rate": 3e-3, "batch_size": 8, "seed": 0}
TRAIN_CONVERSATIONS, EVAL_CONVERSATIONS = 320, 50
PAD, END_OF_TURN, EOS = 0, 7, 2     # the tiny Llama's <pad>, <|end|> and </s>


@pytest.mark.long
@pytest.mark.points(1)
@pytest.mark.concept("Does it learn?")
@pytest.mark.timeout(600)
def test_forty_steps_teach_the_skill(submission, tmp_path):
    """40 steps of 8 conversations: your adapter, reloaded with peft, answers at least half of 50 held-out
    conversations exactly (greedy, stopping at <|end|>)"""
    rows = (COURSE.datasets / "sft" / "train.jsonl").read_text().splitlines()[:TRAIN_CONVERSATIONS]
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n")
    result = submission.sft_with_peft_trl(str(COURSE.datasets / "tiny_llama"), str(tmp_path / "train.jsonl"),
                                          str(tmp_path / "adapter"), **HOME_RUN)
    checker = load_module(COURSE.datasets / "sft" / "checker.py")
    examples = checker.load_examples(COURSE.datasets / "sft" / "eval.jsonl")[:EVAL_CONVERSATIONS]
    tokenizer = AutoTokenizer.from_pretrained(COURSE.datasets / "tiny_llama")
    with tempfile.TemporaryDirectory() as trusted:
        lora_adapter_copy(result["adapter_dir"], tmp_path, HOME_RUN["r"], Path(trusted))
        base = AutoModelForCausalLM.from_pretrained(COURSE.datasets / "tiny_llama", dtype=torch.float32)
        model = PeftModel.from_pretrained(base, trusted).eval()
        answers = []
        with torch.no_grad():
            for example in examples:
                asked = tokenizer.apply_chat_template(checker.prompt_messages(example), add_generation_prompt=True,
                                                      return_dict=True, return_tensors="pt")
                out = model.generate(**asked, max_new_tokens=8, do_sample=False, eos_token_id=[END_OF_TURN, EOS],
                                     pad_token_id=PAD)
                answers.append(tokenizer.decode(out[0, asked["input_ids"].shape[1]:], skip_special_tokens=True))
    score = checker.exact_match_accuracy(examples, answers)
    wrong = [(checker.gold_answer(e), a) for e, a in zip(examples, answers) if not checker.is_correct(e, a)]
    assert score >= HOME_BAR, (
        f"exact match on {EVAL_CONVERSATIONS} held-out conversations after 40 steps: expected at least {HOME_BAR:.2f}, got "
        f"{score:.2f} (base model 0.00, a correct run about 0.74)\n"
        f"some (gold, reply) pairs: {shown(wrong[:3])}; every 8th training loss: "
        f"{shown([round(x, 2) for x in result['train_loss'][::8]])}")
