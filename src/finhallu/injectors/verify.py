"""Checks of injected samples (the injection judge's rules backend, DESIGN "Labels hold").

verify_label: does the injected response really carry the hallucination its label claims (the
number really changed and is absent from the evidence, the modifier really flipped, the
unanswerable context really lacks the clue, ...)? Each leaf registers its own rule over a
`Proposal`; the measures they share are here. naturalness: 1-3 from surface defects.
edit_distance: how minimal an edit is (characters and words). The label verifier of injection QC
(labelcheck/) checks the same labels again with code of its own.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property


from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import find_numbers, number_keys, number_keys_in
from finhallu.text.sentences import split_sentences
from finhallu.text.words import broken_particle


def _levenshtein(a, b) -> int:
    """Edit distance of two sequences: Myers' bit-parallel algorithm (Hyyro's formulation), one
    column of the DP table per element of b as bit vectors over a (Python integers of any width);
    2-4x faster than the plain DP even on the few words of a minimal edit's middle."""
    if not a or not b:
        return max(len(a), len(b))
    m = len(a)
    full, top = (1 << m) - 1, 1 << (m - 1)
    peq: dict = {}  # element -> the positions of a that hold it
    for i, x in enumerate(a):
        peq[x] = peq.get(x, 0) | (1 << i)
    pv, mv, score = full, 0, m  # vertical +1 / -1 deltas of the current column; D[m][j]
    for y in b:
        eq = peq.get(y, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & full
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = ((ph << 1) | 1) & full
        mh = (mh << 1) & full
        pv = (mh | ~(xv | ph)) & full
        mv = ph & xv
    return score


def _trimmed(a, b):
    """a and b without their common prefix and suffix (which leave the edit distance as it is):
    minimal edits leave a tiny middle."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return a[p : len(a) - s], b[p : len(b) - s]


def edit_distance(a: str, b: str) -> tuple[int, int]:
    """(character, word) Levenshtein distance between two responses."""
    a, b = a or "", b or ""
    return _levenshtein(*_trimmed(a, b)), word_edit_distance(a, b)


def word_edit_distance(a: str, b: str) -> int:
    """The word Levenshtein distance alone (`edit_distance(a, b)[1]`)."""
    return _levenshtein(*_trimmed((a or "").split(), (b or "").split()))


def word_diff(a: str, b: str, context: int = 0) -> list[tuple[str, str]]:
    """Changed word runs of a -> b, each widened by `context` neighbouring words on both sides."""
    wa, wb = a.split(), b.split()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes():
        if op != "equal":
            out.append((" ".join(wa[max(0, i1 - context) : i2 + context]), " ".join(wb[max(0, j1 - context) : j2 + context])))
    return out


def pair_in(diff: list[tuple[str, str]], lexicon: set[tuple[str, str]], wide: Sequence[tuple[str, str]] = ()) -> bool:
    for old, new in diff:
        for a, b in lexicon:
            if a.lower() in old.lower() and b.lower() in new.lower():
                return True
    # Multi-word entries share words with their counterpart, which the bare diff leaves out
    # ("net interest income" -> "noninterest income", "more than" -> "less than"): in the widened
    # runs the edit must remove an occurrence of a and add one of b.
    for old, new in wide:
        o, n = old.lower(), new.lower()
        for a, b in lexicon:
            a, b = a.lower(), b.lower()
            if o.count(a) > n.count(a) and n.count(b) > o.count(b):
                return True
    return False


def char_swap(orig: str, new: str) -> tuple[str, str] | None:
    """The one contiguous span replaced in orig -> new, or None when the edit is not a single swap."""
    ops = [o for o in difflib.SequenceMatcher(a=orig, b=new, autojunk=False).get_opcodes() if o[0] != "equal"]
    if not ops:
        return None
    i1, i2, j1, j2 = ops[0][1], ops[-1][2], ops[0][3], ops[-1][4]
    if len(ops) > 1 and (ops[-1][1] - ops[0][2]) > 12:  # two edits far apart: not one swap
        return None
    return orig[i1:i2], new[j1:j2]


# Evaluative or subjective language: a judgement, recommendation or reassurance, not a fact.
OPINION_MARKERS = re.compile(
    r"(가장|추천|권할|권해|유리|걱정|안심|안전하|합리적|바람직|괜찮|좋은 선택|훌륭|생각합니다|판단됩니다|볼 수 있습니다|보셔도|"
    r"(것이|셔도) 좋습니다|보시기 바랍니다|"
    r"개인적으로|솔직히|현실적으로|in my view|i think|i believe|frankly|honestly|clearly|excellent|sensible|safest|"
    r"should welcome|little reason|recommend)",
    re.IGNORECASE,
)


def _number_counts(text: str) -> Counter:
    """How often each normalized number key occurs (a value changed once may still occur elsewhere)."""
    return Counter(number_keys(s.raw) and next(iter(number_keys(s.raw))) for s in find_numbers(text or ""))


@dataclass
class Proposal:
    """An injected response beside the faithful one it was made from, the evidence shown with it and
    the dialogue before it: what a leaf's acceptance rule reads (each measure computed once, on use)."""

    inj: dict  # injected_response, original_response, hallu_type, hallu_subtype
    turn: dict  # answerable, clue_text, answer
    evidence: list[str]
    history: str

    @property
    def orig(self) -> str:
        return self.inj["original_response"]

    @property
    def new(self) -> str:
        return self.inj["injected_response"]

    @cached_property
    def evidence_text(self) -> str:
        return "\n".join(self.evidence)

    @cached_property
    def evidence_keys(self) -> frozenset[str]:
        return number_keys_in(self.evidence)

    @cached_property
    def added_keys(self) -> set[str]:
        """Numbers the injected response states more often than the original."""
        before, after = _number_counts(self.orig), _number_counts(self.new)
        return {k for k in after if k and after[k] > before[k]}

    @cached_property
    def removed_keys(self) -> set[str]:
        before, after = _number_counts(self.orig), _number_counts(self.new)
        return {k for k in before if k and before[k] > after[k]}

    @cached_property
    def diff(self) -> list[tuple[str, str]]:
        return word_diff(self.orig, self.new)

    @cached_property
    def wide_diff(self) -> list[tuple[str, str]]:
        return word_diff(self.orig, self.new, context=3)

    @cached_property
    def new_sentences(self) -> list[str]:
        """Sentences of the injected response the original does not contain."""
        return [x for x in split_sentences(self.new) if x not in self.orig]

    def clue_in_evidence(self) -> bool:
        return any(contains_normalized(x, self.turn["clue_text"]) for x in self.evidence)


def verify_label(inj: dict, turn: dict, evidence: list[str], history: str) -> tuple[bool, str]:
    """Does the injected response really carry the hallucination its label claims? (the acceptance
    rule registered with the label's leaf)"""
    from finhallu.injectors import find_leaf

    leaf = find_leaf(inj["hallu_type"], inj["hallu_subtype"])
    if leaf is None:
        return False, f"no check for {inj['hallu_type']}/{inj['hallu_subtype']}"
    return leaf.accept(Proposal(inj, turn, evidence, history))


def naturalness(orig: str, new: str, hallu_type: str) -> tuple[int, list[str]]:
    issues = []
    if re.search(r"\s{2,}", new):
        issues.append("double space")
    if broken_particle(new):
        issues.append("broken particle")
    if not new.strip().endswith((".", "다", "요", "!", "?", ")")):
        issues.append("no sentence ending")
    if hallu_type not in ("false_refusal", "false_acceptance"):
        ratio = len(new) / max(1, len(orig))
        if not 0.4 <= ratio <= 2.5:
            issues.append(f"length ratio {ratio:.2f}")
    return max(1, 3 - len(issues)), issues
