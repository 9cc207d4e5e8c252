"""The synthetic language behind the pretraining corpus: a probabilistic grammar over words whose exact
log-probability for any document can be computed, which is what makes the corpus's loss floor exact.

The source is a deterministic probabilistic automaton. Its state (grammar position, previous word,
subject of the previous clause, sentences so far) is fully determined by the words emitted so far: every
word belongs to exactly one word class, and the grammar never has two paths that emit the same class
sequence. So the probability of the next word given the whole history is
    p(class | grammar position) * p(word | class, previous word, previous subject),
and the probability of a document is the product of those terms and of the end-of-document event.

Sampling goes through `stable_random` (only `random.Random(seed).random()`), so the corpus rebuilds
bit-for-bit.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from stable_random import categorical, shuffled

# Word classes. Every word appears in exactly one class (checked in `Grammar.__init__`), which is what
# keeps the automaton deterministic. Everything is lowercase so one token covers each word.
WORD_CLASSES: dict[str, tuple[str, ...]] = {
    "DET": ("the", "this", "that", "my", "your", "our", "every", "one", "no", "each"),
    "ADJ": (
        "old", "young", "small", "big", "red", "blue", "green", "quiet", "loud", "happy", "sad", "brave",
        "lazy", "clever", "gentle", "wild", "tired", "hungry", "strange", "bright", "dark", "tiny", "huge",
        "calm", "busy", "shy", "proud", "kind", "cold", "warm", "silver", "golden", "wooden", "soft",
        "sleepy", "curious",
    ),
    "NOUN": (
        "cat", "dog", "bird", "fox", "horse", "rabbit", "mouse", "owl", "wolf", "bear", "frog", "fish",
        "goat", "sheep", "duck", "lion", "tiger", "snake", "whale", "crow",
        "farmer", "baker", "teacher", "doctor", "sailor", "child", "king", "queen", "painter", "singer",
        "soldier", "pilot", "student", "miner", "hunter", "guard", "nurse", "judge", "poet", "clerk",
        "house", "river", "garden", "forest", "hill", "road", "bridge", "tower", "village", "market",
        "field", "lake", "castle", "school", "station", "island", "valley", "harbor", "cave", "meadow",
        "book", "lamp", "cup", "key", "box", "letter", "coin", "ring", "basket", "boat", "apple", "bell",
        "hat", "stone", "rope", "drum", "map", "candle", "kettle", "flag",
    ),
    "NAME": (
        "anna", "ben", "clara", "david", "ella", "frank", "grace", "henry", "iris", "jack", "kate", "leo",
        "mia", "noah", "olga", "paul",
    ),
    "VERB_T": (
        "sees", "finds", "likes", "follows", "watches", "carries", "helps", "paints", "remembers", "chases",
        "calls", "meets", "visits", "feeds", "loves", "fears", "builds", "opens", "hides", "pushes", "pulls",
        "drops", "holds", "greets", "leaves", "wants", "sells", "buys", "cleans", "draws",
    ),
    "VERB_I": (
        "sleeps", "runs", "sings", "waits", "laughs", "dances", "swims", "cries", "smiles", "rests", "walks",
        "jumps", "falls", "shouts", "works", "plays", "listens", "hurries", "wanders", "dreams",
    ),
    "ADV": (
        "quietly", "slowly", "quickly", "loudly", "happily", "softly", "early", "late", "again", "today",
        "tonight", "alone", "together", "often",
    ),
    "PREP": (
        "near", "under", "behind", "inside", "beside", "across", "above", "below", "beyond", "around", "past",
        "toward",
    ),
    "CONJ": ("and", "but", "while", "because"),
    "STOP": (".",),
}

END_OF_DOCUMENT = None  # the event "the document ends here"; a causal LM predicts it as the eos token

# Grammar transitions: state -> list of (class emitted, next state, probability). A sentence is
#   subject (DET [ADJ] NOUN | NAME), then a transitive verb with an object or an intransitive verb with an
#   optional adverb, then an optional prepositional phrase, then either "." or (in the first clause only)
#   a conjunction and a second clause. States ending in "2" belong to the second clause, which cannot
#   take another conjunction; that is what bounds sentence length.
def _clause_states(c: str) -> dict[str, list[tuple[str, str, float]]]:
    after_clause = [("PREP", "pp_start" + c, 0.3), ("STOP", "sentence_end", 0.55), ("CONJ", "start2", 0.15)]
    after_pp = [("STOP", "sentence_end", 0.8), ("CONJ", "start2", 0.2)]
    if c == "2":  # no conjunction in the second clause: renormalise over what is left
        after_clause = [("PREP", "pp_start2", 0.35), ("STOP", "sentence_end", 0.65)]
        after_pp = [("STOP", "sentence_end", 1.0)]
    return {
        "start" + c: [("DET", "subj_det" + c, 0.75), ("NAME", "subj_done" + c, 0.25)],
        "subj_det" + c: [("ADJ", "subj_adj" + c, 0.35), ("NOUN", "subj_done" + c, 0.65)],
        "subj_adj" + c: [("NOUN", "subj_done" + c, 1.0)],
        "subj_done" + c: [("VERB_T", "obj_start" + c, 0.6), ("VERB_I", "vi_done" + c, 0.4)],
        "obj_start" + c: [("DET", "obj_det" + c, 0.8), ("NAME", "clause_done" + c, 0.2)],
        "obj_det" + c: [("ADJ", "obj_adj" + c, 0.35), ("NOUN", "clause_done" + c, 0.65)],
        "obj_adj" + c: [("NOUN", "clause_done" + c, 1.0)],
        "vi_done" + c: [("ADV", "clause_done" + c, 0.4)] + [(k, s, p * 0.6) for k, s, p in after_clause],
        "clause_done" + c: after_clause,
        "pp_start" + c: [("DET", "pp_det" + c, 1.0)],
        "pp_det" + c: [("ADJ", "pp_adj" + c, 0.3), ("NOUN", "pp_done" + c, 0.7)],
        "pp_adj" + c: [("NOUN", "pp_done" + c, 1.0)],
        "pp_done" + c: after_pp,
    }


GRAMMAR: dict[str, list[tuple[str, str, float]]] = {**_clause_states("1"), **_clause_states("2")}

# After each "." the document ends with probability END_HAZARD, and always after MAX_SENTENCES sentences,
# which keeps every document well inside the model's 512-position window.
END_HAZARD = 0.3
MAX_SENTENCES = 10

# How peaked the word choices are. Each (class, previous word) pair gets its own distribution over the
# class's words: a random subset of SUPPORT words with Zipf-like weights 1/rank**ZIPF_EXPONENT. Small
# supports give the corpus structure a ~1M-parameter model learns in minutes; the exponent keeps a few
# choices dominant, as in natural text.
SUPPORT = {"DET": 4, "ADJ": 8, "NOUN": 10, "NAME": 5, "VERB_T": 6, "VERB_I": 5, "ADV": 4, "PREP": 4, "CONJ": 3}
ZIPF_EXPONENT = 1.0

GRAMMAR_SEED = 20240601  # fixes which words prefer which successors

# Long-range structure: a clause's subject (its NOUN or NAME head) repeats the previous clause's subject
# with this probability, as in "the old cat sees my dog. the cat sleeps." Predicting the repeat needs
# attention back to an earlier sentence, so the model must learn to copy from context, which is also
# what the SFT skill builds on.
SUBJECT_REPEAT = 0.5
SUBJECT_HEAD_STATES = {"subj_done1", "subj_done2"}  # states entered by emitting a subject head


@dataclass(frozen=True)
class Token:
    """One emitted event: a word, or END_OF_DOCUMENT, with its exact probability under the source."""
    word: str | None
    prob: float


class Grammar:
    def __init__(self, seed: int = GRAMMAR_SEED):
        self.word_class = {}
        for cls, words in WORD_CLASSES.items():
            for w in words:
                assert w not in self.word_class, f"{w!r} is in two classes; the automaton would be ambiguous"
                self.word_class[w] = cls
        for state, moves in GRAMMAR.items():
            assert abs(sum(p for _, _, p in moves) - 1.0) < 1e-12, state
            assert len({cls for cls, _, _ in moves}) == len(moves), f"{state}: a class may lead to one state only"
        rng = random.Random(seed)
        # Every word that can precede a class gets a successor distribution; "." and the document start
        # share one context, since the start of a document is also the start of a sentence.
        contexts = ["."] + [w for words in WORD_CLASSES.values() for w in words if w != "."]
        self.successors: dict[tuple[str, str], tuple[list[str], list[float]]] = {}
        for cls, words in WORD_CLASSES.items():
            if cls == "STOP":
                continue
            k = min(SUPPORT[cls], len(words))
            raw = [1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in range(k)]
            total = math.fsum(raw)
            probs = [r / total for r in raw]
            for prev in contexts:
                self.successors[(cls, prev)] = (shuffled(rng, words)[:k], probs)

    @property
    def words(self) -> list[str]:
        """All words the source can emit, in a fixed order (class by class)."""
        return [w for words in WORD_CLASSES.values() for w in words]

    def word_distribution(self, cls: str, next_state: str, prev: str, last_subject: str | None):
        """(words, probs) for the word of class `cls` that moves the grammar into `next_state`.

        Subject heads repeat the previous clause's subject with probability SUBJECT_REPEAT (when it has
        the same class), otherwise they are fresh draws. The two paths can give the same word, so the
        probabilities are summed: the source's probability of the word, not of how it was chosen."""
        if cls == "STOP":
            return ["."], [1.0]
        choices, probs = self.successors[(cls, prev)]
        if next_state not in SUBJECT_HEAD_STATES or self.word_class.get(last_subject) != cls:
            return choices, probs
        merged = {w: (1.0 - SUBJECT_REPEAT) * p for w, p in zip(choices, probs)}
        merged[last_subject] = merged.get(last_subject, 0.0) + SUBJECT_REPEAT
        return list(merged), list(merged.values())

    def sample_document(self, rng: random.Random) -> list[Token]:
        """One document: sentences until the end-of-document event, each word with its exact probability
        given everything before it."""
        out: list[Token] = []
        sentences, state, prev, last_subject = 0, "start1", ".", None
        carried = 1.0  # probability of "the document goes on", owed by the first word of the next sentence
        while True:
            moves = GRAMMAR[state]
            cls, state, p_cls = moves[categorical(rng, [p for _, _, p in moves])]
            choices, probs = self.word_distribution(cls, state, prev, last_subject)
            i = categorical(rng, probs)
            word = choices[i]
            out.append(Token(word, carried * p_cls * probs[i]))
            carried, prev = 1.0, word
            if state in SUBJECT_HEAD_STATES:
                last_subject = word
            if state == "sentence_end":
                sentences += 1
                p_end = 1.0 if sentences >= MAX_SENTENCES else END_HAZARD
                if rng.random() < p_end:
                    out.append(Token(END_OF_DOCUMENT, p_end))
                    return out
                carried, state = 1.0 - p_end, "start1"

    def log_prob(self, words: list[str]) -> list[float]:
        """Exact natural-log probability of each word of a document given all earlier words, followed by
        the log-probability of the end-of-document event. It parses the text rather than replaying the
        sampler, so the two check each other (see the tests)."""
        logps: list[float] = []
        sentences, state, prev, last_subject = 0, "start1", ".", None
        for word in words:
            p = 1.0
            if state == "sentence_end":
                sentences += 1
                if sentences >= MAX_SENTENCES:
                    return logps + [-math.inf]
                p *= 1.0 - END_HAZARD
                state = "start1"
            cls = self.word_class.get(word)
            move = [(s, pc) for c, s, pc in GRAMMAR[state] if c == cls]
            if not move:
                return logps + [-math.inf]
            state, p_cls = move[0]
            choices, probs = self.word_distribution(cls, state, prev, last_subject)
            p *= p_cls * (probs[choices.index(word)] if word in choices else 0.0)
            logps.append(math.log(p) if p > 0 else -math.inf)
            prev = word
            if state in SUBJECT_HEAD_STATES:
                last_subject = word
        if state != "sentence_end":
            return logps + [-math.inf]
        sentences += 1
        logps.append(math.log(1.0 if sentences >= MAX_SENTENCES else END_HAZARD))
        return logps


def document_text(tokens: list[Token]) -> str:
    """Words joined by single spaces, with "." attached to the word before it: "the cat sleeps. anna runs." """
    text = ""
    for t in tokens:
        if t.word is None:
            continue
        text += t.word if (t.word == "." or not text) else " " + t.word
    return text
