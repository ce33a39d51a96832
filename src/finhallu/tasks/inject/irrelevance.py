"""Irrelevance: a fluent, often true answer that does not answer *this* question."""

from __future__ import annotations

import random
import re

from finhallu.tasks.inject import Injected, TurnView, register_injector
from finhallu.tasks.responses import OPENERS, answer_turn
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import find_numbers, format_decimal, number_keys
from finhallu.text.sentences import split_sentences


_RANGE_LINK = re.compile(r"^\s*(?:부터|에서|이상|초과)?\s*(?:~|-|–|to|부터|에서)\s*$|^\s*(?:부터|에서)\s")


def _is_range(clue: str, a, b) -> bool:
    """Two numbers joined as one range ("6개월 전부터 2개월 전까지", "3~5%") state one condition."""
    first, second = (a, b) if a.start < b.start else (b, a)
    between = clue[first.end:second.start]
    return len(between) <= 8 and bool(_RANGE_LINK.search(between) or "부터" in between or "~" in between)


def _parallel(clue: str, a, b, max_gap: int = 30) -> bool:
    """Two values listed side by side for different conditions ("은행권 40%, 비은행권 50%", table cells):
    a separator between them, close together, and not the two ends of one range."""
    first, second = (a, b) if a.start < b.start else (b, a)
    between = clue[first.end:second.start]
    return len(between) <= max_gap and bool(re.search(r"[,|·/、]", between)) and not _is_range(clue, a, b)


def condition_not_satisfied(view: TurnView, rng: random.Random) -> Injected | None:
    """The clue states the asked value beside values for other conditions; answer with one of those."""
    clue = view.turn.get("clue_text") or ""
    resp = view.turn["response"]
    answer_keys = number_keys(view.turn.get("answer") or "")
    clue_nums = find_numbers(clue)
    for span in find_numbers(resp):
        key = number_keys(span.raw)
        if not span.unit or not key or not (key & answer_keys):
            continue  # only the asked value itself, with its unit (years and counts of other things stay)
        mine = next((c for c in clue_nums if number_keys(c.raw) == key), None)
        if mine is None:
            continue
        others = [c for c in clue_nums if c.unit == span.unit and number_keys(c.raw) and not (number_keys(c.raw) & key)
                  and _parallel(clue, mine, c)]
        if not others:
            continue
        # the adjacent condition's value (the nearest listed one; ties broken by the seed)
        gap = lambda c: c.start - mine.end if c.start > mine.start else mine.start - c.end  # noqa: E731
        nearest = min(gap(c) for c in others)
        other = rng.choice([c for c in others if gap(c) == nearest])
        new = resp[: span.start] + other.raw + resp[span.end:]
        return Injected("condition_not_satisfied", new,
                        f"{span.raw} -> {other.raw} (the value stated for another condition, {format_decimal(other.value)})")
    return None


def question_misunderstanding(view: TurnView, rng: random.Random) -> Injected | None:
    """Answer a different question about the same passage (a sibling QA), phrased like the original."""
    answer = view.turn.get("answer") or ""
    gold = view.seed["passage_id"]
    siblings = [s for s in view.sibling_seeds if s["passage_id"] == gold and s["answer"] != answer
                and s["qa_kind"] != "yesno" and not contains_normalized(s["clue_text"], answer)]
    if not siblings or view.gold_text is None:
        return None
    s = rng.choice(siblings)
    # a supporting sentence when the original has one, so the length does not give the label away
    support = 1.0 if len(split_sentences(view.turn["response"])) >= 2 else 0.0
    out = answer_turn(question=s["question"], passage=view.gold_text, clue=s["clue_text"], answer=s["answer"],
                      qa_kind=s["qa_kind"], lang=view.lang, rng_seed=rng.randrange(2**31), support_probability=support)
    if contains_normalized(out.response, answer):
        return None
    return Injected("question_misunderstanding", out.response, f"answers instead: {s['question']}")


def _drift_sentences(text: str, view: TurnView) -> list[str]:
    answer, clue = view.turn.get("answer") or "", view.turn.get("clue_text")
    return [s for s in split_sentences(text) if "|" not in s and 20 <= len(s) <= 200
            and not contains_normalized(s, answer) and not contains_normalized(s, clue)
            and not contains_normalized(view.turn["response"], s)]


def off_topic_drift(view: TurnView, rng: random.Random) -> Injected | None:
    """Start on the question's topic, then drift: to another document's content, or (the hard
    variant) to adjacent information of the same document that does not answer the question."""
    others = [p for p in view.other_context if p["doc_id"] != view.doc_id]
    same = [p for p in view.other_context if p["doc_id"] == view.doc_id]
    pools = {
        "other_document": [(p["passage_id"], s) for p in others for s in _drift_sentences(p["text"], view)],
        "same_document": [(p["passage_id"], s) for p in same for s in _drift_sentences(p["text"], view)]
        + [(view.seed.get("passage_id"), s) for s in _drift_sentences(view.gold_text or "", view)],
    }
    kinds = [k for k in ("same_document", "other_document") if pools[k]]
    if not kinds:
        return None
    kind = rng.choice(kinds)
    pid, drift = rng.choice(pools[kind])
    if len(split_sentences(view.turn["response"])) >= 2:  # drift as long as the original runs
        more = [s for p, s in pools[kind] if p == pid and s != drift]
        if more:
            drift = drift + " " + more[0]
    # keep the original's discourse opener so only the content drifts
    lead = next((o for o in OPENERS[view.lang] if o and view.turn["response"].startswith(o)), "")
    return Injected("off_topic_drift", (lead + drift).strip(), f"drifts to {pid}: {drift}", strategy=kind)


_SUBTYPES = {
    "condition_not_satisfied": condition_not_satisfied,
    "question_misunderstanding": question_misunderstanding,
    "off_topic_drift": off_topic_drift,
}
_CONDITION_WORDS = ("경우", "이상", "이하", "미만", "초과", "다만", "단,", "if ", "unless", "except")


def _prefers(view: TurnView, subtype: str | None = None) -> float:
    """Turns with conditions or multi-aspect answers: several values, condition words, several sentences."""
    clue = view.turn.get("clue_text") or ""
    resp = view.turn["response"]
    return (len(find_numbers(clue)) + 2 * any(w in clue for w in _CONDITION_WORDS)
            + 0.5 * (len(split_sentences(resp)) - 1) + 0.5 * clue.count(","))


@register_injector("irrelevance", tuple(_SUBTYPES), _prefers)
def inject(view: TurnView, subtype: str | None, rng: random.Random) -> Injected | None:
    if not view.turn["answerable"] or view.turn["kind"] == "reconfirm":
        return None
    return _SUBTYPES[subtype](view, rng)
