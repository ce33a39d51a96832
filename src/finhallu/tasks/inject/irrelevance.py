"""Irrelevance: a fluent, often true answer that does not answer *this* question."""

from __future__ import annotations

import random
import re

from finhallu.tasks.inject import Injected, TurnView, register_injector
from finhallu.tasks.responses import OPENERS, answer_turn
from finhallu.tasks.textnorm import contains_normalized, find_numbers, format_decimal, number_keys, split_sentences


_RANGE_LINK = re.compile(r"^\s*(?:부터|에서|이상|초과)?\s*(?:~|-|–|to|부터|에서)\s*$|^\s*(?:부터|에서)\s")


def _is_range(clue: str, a, b) -> bool:
    """Two numbers joined as one range ("6개월 전부터 2개월 전까지", "3~5%") state one condition."""
    first, second = (a, b) if a.start < b.start else (b, a)
    between = clue[first.end:second.start]
    return len(between) <= 8 and bool(_RANGE_LINK.search(between) or "부터" in between or "~" in between)


def condition_not_satisfied(view: TurnView, rng: random.Random) -> Injected | None:
    """The clue states values under several conditions; answer with the value of another condition."""
    clue = view.turn.get("clue_text") or ""
    resp = view.turn["response"]
    answer_keys = number_keys(view.turn.get("answer") or "")
    clue_nums = find_numbers(clue)
    for span in find_numbers(resp):
        key = number_keys(span.raw)
        if not key or not (key & answer_keys or not answer_keys):
            continue
        mine = next((c for c in clue_nums if number_keys(c.raw) == key), None)
        others = [c for c in clue_nums if c.unit == span.unit and number_keys(c.raw) and not (number_keys(c.raw) & key)
                  and not (mine is not None and _is_range(clue, mine, c))]
        if not others:
            continue
        other = rng.choice(others)
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
    out = answer_turn(question=s["question"], passage=view.gold_text, clue=s["clue_text"], answer=s["answer"],
                      qa_kind=s["qa_kind"], lang=view.lang, rng_seed=rng.randrange(2**31), support_probability=0.0)
    if contains_normalized(out.response, answer):
        return None
    return Injected("question_misunderstanding", out.response, f"answers instead: {s['question']}")


def off_topic_drift(view: TurnView, rng: random.Random) -> Injected | None:
    """Start on the question's topic, then drift to another document's content."""
    answer = view.turn.get("answer") or ""
    others = [p for p in view.other_context if p["doc_id"] != view.doc_id]
    rng.shuffle(others)
    for p in others:
        sents = [s for s in split_sentences(p["text"]) if not s.startswith("|") and 20 <= len(s) <= 200
                 and not contains_normalized(s, answer) and not contains_normalized(s, view.turn.get("clue_text"))]
        if sents:
            drift = rng.choice(sents)
            # keep the original's discourse opener so only the content drifts
            lead = next((o for o in OPENERS[view.lang] if o and view.turn["response"].startswith(o)), "")
            return Injected("off_topic_drift", (lead + drift).strip(), f"drifts to {p['passage_id']}: {drift}")
    return None


_SUBTYPES = {
    "condition_not_satisfied": condition_not_satisfied,
    "question_misunderstanding": question_misunderstanding,
    "off_topic_drift": off_topic_drift,
}


def _prefers(view: TurnView) -> float:
    clue = view.turn.get("clue_text") or ""
    return len(find_numbers(clue)) + (2 if any(w in clue for w in ("경우", "이상", "이하", "미만", "초과", "if ", "unless")) else 0)


@register_injector("irrelevance", tuple(_SUBTYPES), _prefers)
def inject(view: TurnView, subtype: str | None, rng: random.Random) -> Injected | None:
    if not view.turn["answerable"] or view.turn["kind"] == "reconfirm":
        return None
    return _SUBTYPES[subtype](view, rng)
