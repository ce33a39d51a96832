"""Unverifiable: the response adds what the evidence cannot support (a fabricated detail or an opinion).

The added sentence takes the place of a trailing supporting sentence when the response has
one, so the edit stays minimal and the length does not give the label away.
"""

from __future__ import annotations

import random

from finhallu.tasks.inject import Injected, TurnView, register_injector
from finhallu.tasks.inject.lexicon import FABRICATED, OPINIONS, ORGS
from finhallu.tasks.inject.edits import malformed_numeral
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import number_keys
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_words, particle

_MONTHS = ["January", "March", "June", "September", "December"]


def _bank(items: list[str], variant: str) -> list[str]:
    # Two injectors draw from interleaved halves of each bank: different phrasing, same kinds of claims.
    half = items[0::2] if variant.endswith("a") else items[1::2]
    return half or items


def _fill(template: str, lang: str, rng: random.Random) -> str:
    values = dict(
        year=rng.choice([2026, 2027]), month=rng.randint(1, 12), pct=rng.choice(["0.3", "0.5", "1.2", "2.5"]),
        days=rng.choice([3, 5, 7, 14]), fee=rng.choice(["1,000", "2,000", "5,000"]), amount=rng.choice([30, 50, 200, 300]),
        count=rng.choice([3, 12, 27, 41]), org=rng.choice(ORGS[lang]), quarter=rng.choice(["first", "third"]),
        month_name=rng.choice(_MONTHS),
    )
    values["wa"] = particle(values["org"], "과/와")  # 시중은행과 / 주택도시보증공사와
    return template.format(**values)


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
    evidence_keys = set().union(*(number_keys(t) for t in view.evidence)) if view.evidence else set()
    if subtype == "fabricated_detail":
        for _ in range(6):
            sent = _fill(rng.choice(_bank(FABRICATED[view.lang], view.variant)), view.lang, rng)
            if not (number_keys(sent) & evidence_keys) and not malformed_numeral(sent):
                new, edit = _place(view, sent, rng)
                return Injected("fabricated_detail", new, edit)
        return None
    if subtype == "subjective_opinion":
        sent = rng.choice(_bank(OPINIONS[view.lang], view.variant))
        new, edit = _place(view, sent, rng)
        return Injected("subjective_opinion", new, edit)
    return None
