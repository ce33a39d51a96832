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

from finhallu.injectors import Injected, TurnView, register_leaf, register_type
from finhallu.injectors.fabricate import fabricated_detail
from finhallu.injectors.opinion import compose_opinion
from finhallu.injectors.verify import OPINION_MARKERS, Proposal
from finhallu.text.normalize import contains_normalized
from finhallu.text.sentences import split_sentences
from finhallu.text.numbers import number_keys
from finhallu.text.words import content_word_set, content_words

_YES_NO = {"예", "네", "아니오", "아니요", "yes", "no"}


def carries_answer(sentence: str, answer: str, clue: str) -> bool:
    """Whether a sentence states the turn's answer or clue content (normalised): the answer itself
    (not a bare yes/no), a part of the clue, or mostly the clue's content words."""
    a = (answer or "").strip()
    if a and a.lower().rstrip(".") not in _YES_NO and contains_normalized(sentence, a):
        return True
    if clue and (contains_normalized(clue, sentence) or contains_normalized(sentence, clue)):
        return True
    words, clue_words = content_word_set(sentence), content_word_set(clue)
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


def _insert(view: TurnView, subtype: str, sentence: str | None, rng: random.Random) -> Injected | None:
    """Place the unverifiable sentence where the answer's last supporting sentence was (or add it)."""
    if not sentence or contains_normalized(view.turn["response"], sentence):
        return None
    new, edit = _place(view, sentence, rng)
    return Injected(subtype, new, edit)


def _prefers(view: TurnView, subtype: str | None = None) -> float:
    return 1.0 + len(split_sentences(view.turn["response"]))


register_type(
    "unverifiable",
    _prefers,
    applies=lambda view: view.turn["answerable"],
)


# ---- acceptance rules: an added sentence the evidence does not support ---------------------------------
def _accept_fabricated_detail(p: Proposal) -> tuple[bool, str]:
    unsupported = [
        s
        for s in p.new_sentences
        if not contains_normalized(p.evidence, s) and (number_keys(s) - p.evidence_keys or not content_words(s))
    ]
    return bool(unsupported), "adds a specific detail the evidence lacks"


def _accept_subjective_opinion(p: Proposal) -> tuple[bool, str]:
    return (
        any(OPINION_MARKERS.search(s) and not contains_normalized(p.evidence, s) for s in p.new_sentences),
        "adds an opinion",
    )


@register_leaf(
    "unverifiable",
    "fabricated_detail",
    accept=_accept_fabricated_detail,
    names={"en": "Fabricated Detail", "ko": "세부 정보 날조"},
    rationale={
        "ko": "2) 주장: 응답의 '{added}'는 문서에서 확인할 수 없는 세부 정보입니다.",
        "en": "2) Claims: '{added}' is a detail the passages do not support.",
    },
    instruction={
        "ko": "근거 어디에도 없는 구체적 수치, 날짜, 기관, 절차",
        "en": "a specific figure, date, party or procedure that appears nowhere in the evidence",
    },
)
def fabricated_detail_leaf(view: TurnView, rng: random.Random) -> Injected | None:
    return _insert(view, "fabricated_detail", fabricated_detail(view, view.donor_claims(), rng), rng)


@register_leaf(
    "unverifiable",
    "subjective_opinion",
    accept=_accept_subjective_opinion,
    names={"en": "Subjective Opinion", "ko": "주관적 의견"},
    rationale={
        "ko": "2) 주장: 응답의 '{added}'는 문서에 근거하지 않은 주관적 의견입니다.",
        "en": "2) Claims: '{added}' is a subjective opinion the passages do not support.",
    },
    instruction={"ko": "근거 없는 평가나 추천", "en": "an unsupported judgement or recommendation"},
)
def subjective_opinion_leaf(view: TurnView, rng: random.Random) -> Injected | None:
    return _insert(view, "subjective_opinion", compose_opinion(view, rng), rng)
