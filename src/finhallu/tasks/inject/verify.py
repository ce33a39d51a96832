"""Independent checks of injected samples (the injection judge's rules backend, DESIGN "Labels hold").

verify_label: does the injected response really carry the hallucination its label claims (the
number really changed and is absent from the evidence, the modifier really flipped, the
unanswerable context really lacks the clue, ...)? naturalness: 1-3 from surface defects.
edit_distance: how minimal an edit is (characters and words).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter

import numpy as np

from finhallu.tasks.inject.lexicon import MODIFIER_SET, TERM_SET
from finhallu.tasks.responses import is_refusal
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import find_numbers, number_keys
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_words, has_final_consonant


def _levenshtein(a, b) -> int:
    """Edit distance of two sequences (row-vectorized DP: cur[j] = j + cummin(tmp[k] - k))."""
    if not a or not b:
        return max(len(a), len(b))
    codes: dict = {}
    x = np.array([codes.setdefault(t, len(codes)) for t in a])
    y = np.array([codes.setdefault(t, len(codes)) for t in b])
    ar = np.arange(len(y) + 1)
    prev = ar.copy()
    for i, xi in enumerate(x, start=1):
        tmp = np.empty_like(prev)
        tmp[0] = i
        tmp[1:] = np.minimum(prev[1:] + 1, prev[:-1] + (y != xi))
        prev = np.minimum.accumulate(tmp - ar) + ar
    return int(prev[-1])


def edit_distance(a: str, b: str) -> tuple[int, int]:
    """(character, word) Levenshtein distance between two responses."""
    a, b = a or "", b or ""
    # trim the common prefix and suffix first: minimal edits leave a tiny middle
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    chars = _levenshtein(a[p:len(a) - s], b[p:len(b) - s])
    return chars, _levenshtein(a.split(), b.split())


def word_diff(a: str, b: str, context: int = 0) -> list[tuple[str, str]]:
    """Changed word runs of a -> b, each widened by `context` neighbouring words on both sides."""
    wa, wb = a.split(), b.split()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes():
        if op != "equal":
            out.append((" ".join(wa[max(0, i1 - context):i2 + context]), " ".join(wb[max(0, j1 - context):j2 + context])))
    return out


def _pair_in(diff: list[tuple[str, str]], lexicon: set[tuple[str, str]],
             wide: list[tuple[str, str]] = ()) -> bool:
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


def _char_swap(orig: str, new: str) -> tuple[str, str] | None:
    """The one contiguous span replaced in orig -> new, or None when the edit is not a single swap."""
    ops = [o for o in difflib.SequenceMatcher(a=orig, b=new, autojunk=False).get_opcodes() if o[0] != "equal"]
    if not ops:
        return None
    i1, i2, j1, j2 = ops[0][1], ops[-1][2], ops[0][3], ops[-1][4]
    if len(ops) > 1 and (ops[-1][1] - ops[0][2]) > 12:  # two edits far apart: not one swap
        return None
    return orig[i1:i2], new[j1:j2]


# Evaluative or subjective language: a judgement, recommendation or reassurance, not a fact.
_OPINION_MARKERS = re.compile(
    r"(가장|추천|권할|권해|유리|걱정|안심|안전하|합리적|바람직|괜찮|좋은 선택|훌륭|생각합니다|판단됩니다|볼 수 있습니다|보셔도|"
    r"(것이|셔도) 좋습니다|보시기 바랍니다|"
    r"개인적으로|솔직히|현실적으로|in my view|i think|i believe|frankly|honestly|clearly|excellent|sensible|safest|"
    r"should welcome|little reason|recommend)", re.IGNORECASE)


def _number_counts(text: str) -> Counter:
    """How often each normalized number key occurs (a value changed once may still occur elsewhere)."""
    return Counter(number_keys(s.raw) and next(iter(number_keys(s.raw))) for s in find_numbers(text or ""))


def verify_label(inj: dict, turn: dict, evidence: list[str], history: str) -> tuple[bool, str]:
    """Does the injected response really carry the hallucination its label claims?"""
    orig, new = inj["original_response"], inj["injected_response"]
    ev = "\n".join(evidence)
    ev_keys = number_keys(ev)
    before, after = _number_counts(orig), _number_counts(new)
    added_keys = {k for k in after if k and after[k] > before[k]}
    removed_keys = {k for k in before if k and before[k] > after[k]}
    diff = word_diff(orig, new)
    wide = word_diff(orig, new, context=3)
    sub, typ = inj["hallu_subtype"], inj["hallu_type"]
    if typ == "false_refusal":
        return (is_refusal(new) and turn["answerable"] and any(contains_normalized(x, turn["clue_text"]) for x in evidence),
                "refusal over evidence that holds the clue")
    if typ == "false_acceptance":
        lacks = not any(contains_normalized(x, turn["clue_text"]) for x in evidence) if turn["clue_text"] else True
        return (lacks and not is_refusal(new), "an answer over evidence that lacks the clue")
    if sub == "number_error":
        return (bool(added_keys) and not (added_keys & ev_keys), f"new numbers {sorted(added_keys)} absent from evidence")
    if sub == "inconsistency":
        hist_keys = number_keys(history)
        changed_from_history = bool(removed_keys & hist_keys)
        flipped = any(a.lower() in history.lower() for old, _ in wide for a, b in TERM_SET | MODIFIER_SET
                      if a.lower() in old.lower()) and _pair_in(diff, TERM_SET | MODIFIER_SET, wide)
        return ((bool(added_keys) and not (added_keys & hist_keys) and changed_from_history) or flipped,
                "restates an earlier statement differently")
    if sub == "modifier_change":
        return (_pair_in(diff, MODIFIER_SET, wide), f"modifier flipped: {diff[:2]}")
    if sub == "financial_term_misunderstanding":
        return (_pair_in(diff, TERM_SET, wide), f"term swapped: {diff[:2]}")
    if sub == "entity_error":
        swap = _char_swap(orig, new)
        if not swap or not swap[0].strip() or not swap[1].strip() or re.search(r"\d", swap[0] + swap[1]):
            return False, "not a single entity swap"
        changed = [s for s in split_sentences(new) if s not in orig]
        unsupported = bool(changed) and not any(contains_normalized(ev, s) for s in changed)
        return unsupported, f"entity swapped: {swap[0]!r} -> {swap[1]!r}"
    if sub == "fabricated_detail":
        added = [s for s in split_sentences(new) if s not in orig]
        unsupported = [s for s in added if not contains_normalized(ev, s) and (number_keys(s) - ev_keys or not content_words(s))]
        return (bool(unsupported), "adds a specific detail the evidence lacks")
    if sub == "subjective_opinion":
        added = [s for s in split_sentences(new) if s not in orig]
        return (any(_OPINION_MARKERS.search(s) and not contains_normalized(ev, s) for s in added), "adds an opinion")
    if sub == "condition_not_satisfied":
        # The answer's value is gone and every number now stated is one the evidence gives (for another condition).
        # The asked value is gone from the edited sentence, which now states one the evidence gives (for another condition).
        changed = [x for x in split_sentences(new) if x not in orig]
        return (bool(removed_keys) and bool(changed) and number_keys(new) <= ev_keys
                and not any(contains_normalized(x, turn["answer"]) for x in changed),
                "states a value the evidence gives for another condition")
    if sub in ("question_misunderstanding", "off_topic_drift"):
        return (not contains_normalized(new, turn["answer"]) and not contains_normalized(new, turn["clue_text"]),
                "does not answer the question asked")
    return False, f"no check for {typ}/{sub}"


def broken_particle(text: str) -> bool:
    """A doubled particle (원금을를, 한도는은). 이가 only after a batchim syllable (원금이가), since
    a noun ending in 이 takes 가 naturally (금리 차이가, 나이가)."""
    if re.search(r"(을를|를을|은는|는은|가이)\b", text):
        return True
    return any(has_final_consonant(m.group(1)) for m in re.finditer(r"([가-힣])이가\b", text))


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
