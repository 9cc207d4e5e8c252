"""The suite's tokenizer: one token per word, built with Hugging Face `tokenizers` and wrapped for
`transformers`, with special tokens for documents and chat and a chat template that marks assistant
replies for `return_assistant_tokens_mask` (and so for trl's `assistant_only_loss=True`).

Why word level: a document's tokenization is then exactly the concatenation of its words'
tokenizations, so the grammar's per-word probabilities are per-token probabilities and the corpus loss
floor is exact. Spaces are kept SentencePiece-style ("▁the"), so decoding restores the text exactly;
digits and punctuation are split into their own tokens so any number can be written.
"""
from __future__ import annotations

from pathlib import Path

from grammar_source import WORD_CLASSES
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SYSTEM, USER, ASSISTANT, END_OF_TURN = "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK, SYSTEM, USER, ASSISTANT, END_OF_TURN]  # ids 0..7 in this order

SPACE = "\u2581"  # "▁", marks "a space came before this token"

# Words that never occur in the pretraining corpus but that chat data (instructions, questions) may use.
CHAT_WORDS = (
    "you", "are", "a", "an", "helpful", "assistant", "reply", "answer", "with", "only", "first", "last",
    "second", "third", "word", "words", "noun", "nouns", "verb", "name", "sentence", "what", "which", "who",
    "is", "in", "of", "to", "it", "yes", "please", "say", "give", "repeat", "number", "question", "here",
    "next", "now", "another", "one", "ok", "thanks", "done",
)
DIGITS = tuple("0123456789")
PUNCTUATION = tuple(".,?!:;'\"()+-*/=%#")

# Each digit and punctuation mark is its own piece (with its leading "▁" if a space came before it), so
# "12 + 30" -> "▁1" "2" "▁+" "▁3" "0" and "sleeps." -> "▁sleeps" ".".
_PIECE = Regex(SPACE + r"?[0-9]|" + SPACE + r"?[^\w" + SPACE + r"]")

# Every message becomes <|role|>content<|end|>; the conversation starts with <s>. The end-of-turn token
# of an assistant message is inside {% generation %} so the model is trained to emit it (and so to stop).
# The role header <|assistant|> is not: it is given in the prompt, never predicted.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "<|assistant|>{% generation %}{{ message['content'] }}<|end|>{% endgeneration %}"
    "{% elif message['role'] in ['system', 'user'] %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}<|end|>"
    "{% else %}{{ raise_exception('unknown role: ' + message['role']) }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def vocabulary() -> list[str]:
    """Token strings in id order. The order is fixed by the word lists, so ids never move between builds."""
    words = [w for cls, ws in WORD_CLASSES.items() if cls != "STOP" for w in ws]
    words += [w for w in CHAT_WORDS if w not in words]
    pieces = [SPACE + w for w in words]
    for ch in DIGITS + PUNCTUATION:
        pieces += [SPACE + ch, ch]
    return SPECIAL_TOKENS + pieces


def build_tokenizer() -> Tokenizer:
    vocab = {tok: i for i, tok in enumerate(vocabulary())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True),
        pre_tokenizers.Split(_PIECE, behavior="isolated"),
    ])
    tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)
    # Registering them as special tokens means the text "<|user|>" is always that one id, never split,
    # and `skip_special_tokens=True` drops them when decoding.
    tok.add_special_tokens(SPECIAL_TOKENS)
    return tok


def to_transformers(tok: Tokenizer):
    """Wrap for `transformers`: a plain fast tokenizer (`TokenizersBackend`, loadable by AutoTokenizer)
    that prepends <s> like Llama's, and never appends </s> by itself."""
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    tok.post_processor = TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, SPECIAL_TOKENS.index(BOS))]
    )
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, unk_token=UNK, pad_token=PAD,
        additional_special_tokens=[SYSTEM, USER, ASSISTANT, END_OF_TURN], model_max_length=512,
        padding_side="right", clean_up_tokenization_spaces=False,
    )
    hf.chat_template = CHAT_TEMPLATE
    return hf


def save_tokenizer(out_dir: Path) -> list[str]:
    """Write tokenizer.json and tokenizer_config.json (chat template included) into out_dir."""
    hf = to_transformers(build_tokenizer())
    # save_jinja_files=False keeps the chat template inside tokenizer_config.json, where every
    # transformers version and trl look for it, instead of a separate chat_template.jinja.
    written = hf.save_pretrained(str(out_dir), save_jinja_files=False)
    return [Path(p).name for p in written]
