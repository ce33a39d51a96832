"""False Refusal: the evidence answers the question, yet the response refuses (P_n kept)."""

from __future__ import annotations

import random

from finhallu.injectors import Injected, TurnView, register_leaf, register_type
from finhallu.injectors.verify import Proposal
from finhallu.dialogue.assistant import is_refusal, refuse_turn


def _prefers(view: TurnView, subtype: str | None = None) -> float:
    return 1.0


register_type("false_refusal", _prefers, applies=lambda view: view.turn["answerable"] and view.gold_text is not None)


def _accept(p: Proposal) -> tuple[bool, str]:
    return is_refusal(p.new) and p.turn["answerable"] and p.clue_in_evidence(), "refusal over evidence that holds the clue"


@register_leaf(
    "false_refusal",
    None,
    accept=_accept,
    names={"en": "False Refusal", "ko": "잘못된 거절"},
    rationale={
        "ko": "2) 주장: 문서 [{k}]에 근거가 있는데도 응답은 답변을 거절합니다.",
        "en": "2) Claims: the response refuses although passage [{k}] answers the question.",
    },
    instruction={
        "ko": "근거가 있는데도 문서에 내용이 없다며 답변을 거절하기",
        "en": "refuse, saying the documents do not cover the question, although they do",
    },
)
def inject(view: TurnView, rng: random.Random) -> Injected | None:
    refusal = refuse_turn(question=view.turn["standalone_query"], lang=view.lang, rng_seed=rng.randrange(2**31)).text
    return Injected(None, refusal, "answer replaced by a refusal; context kept")
