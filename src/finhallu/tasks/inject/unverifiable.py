"""Unverifiable: the response adds what the evidence cannot support (a fabricated detail or an opinion).

Fabricated details are claims mined from other passages of the same split, source and language
with every figure changed (fabricate.py); opinions are composed from a stance, the turn's topic
or one of its aspects, and an evaluative predicate (opinion.py). Neither comes from a bank of
whole sentences: a response-only classifier must not find the label in the added sentence's
phrasing.

The added sentence takes the place of a trailing supporting sentence when the response has
one, so the edit stays minimal and the length does not give the label away.
"""

from __future__ import annotations

import random

from finhallu.tasks.inject import Injected, TurnView, register_injector
from finhallu.tasks.inject.fabricate import fabricated_detail
from finhallu.tasks.inject.opinion import compose_opinion
from finhallu.text.normalize import contains_normalized
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_words

_YES_NO = {"예", "네", "아니오", "아니요", "yes", "no"}


def carries_answer(sentence: str, answer: str, clue: str) -> bool:
    """Whether a sentence states the turn's answer or clue content (normalised): the answer itself
    (not a bare yes/no), a part of the clue, or mostly the clue's content words."""
    a = (answer or "").strip()
    if a and a.lower().rstrip(".") not in _YES_NO and contains_normalized(sentence, a):
        return True
    if clue and (contains_normalized(clue, sentence) or contains_normalized(sentence, clue)):
        return True
    words, clue_words = set(content_words(sentence)), set(content_words(clue))
    return bool(words) and len(words & clue_words) / len(words) >= 0.5


def _place(view: TurnView, sentence: str, rng: random.Random) -> tuple[str, str]:
    """Replace the trailing supporting sentence, or insert before it (seeded, half each: the
    response's length then says nothing about the label); a one-sentence answer gets it appended.
    A trailing sentence that carries the answer or the clue is never replaced: the new sentence
    goes before it, and the response still answers."""
    response, answer, clue = view.turn["response"], view.turn.get("answer") or "", view.turn.get("clue_text") or ""
    sents = split_sentences(response)
    if len(sents) >= 2:
        if rng.random() < 0.5 and not carries_answer(sents[-1], answer, clue):
            new = " ".join(sents[:-1] + [sentence])
            if not contains_normalized(response, answer) or contains_normalized(new, answer):
                return new, f"replaced supporting sentence with: {sentence}"
        return " ".join(sents[:-1] + [sentence, sents[-1]]), f"inserted: {sentence}"
    return response.rstrip() + " " + sentence, f"added: {sentence}"


@register_injector("unverifiable", ("fabricated_detail", "subjective_opinion"),
                   prefers=lambda v, subtype=None: 1.0 + len(split_sentences(v.turn["response"])))
def inject(view: TurnView, subtype: str | None, rng: random.Random) -> Injected | None:
    if not view.turn["answerable"]:
        return None
    if subtype == "fabricated_detail":
        sent = fabricated_detail(view, view.donor_claims(), rng)
    elif subtype == "subjective_opinion":
        sent = compose_opinion(view, rng)
    else:
        return None
    if not sent or contains_normalized(view.turn["response"], sent):
        return None
    new, edit = _place(view, sent, rng)
    return Injected(subtype, new, edit)
