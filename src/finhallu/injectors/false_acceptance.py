"""False Acceptance: the evidence cannot answer, yet the response answers.

Answerable turn: P_n is replaced by the seed's hard negatives and the answer is kept; its
faithful counterpart is a refusal over the same passages (a True Refusal). Unanswerable
turn (a shipped `is_impossible` question): the refusal becomes the plausible-looking answer.
"""

from __future__ import annotations

import random

from finhallu.injectors import Injected, TurnView, register_leaf, register_type
from finhallu.injectors.verify import Proposal
from finhallu.dialogue.assistant import direct_answer, is_refusal, refuse_turn
from finhallu.text.phrases import topic_of
from finhallu.text.words import particle

MIN_HARD_NEGATIVES = 3


def _prefers(view: TurnView, subtype: str | None = None) -> float:
    return float(len(view.hard_negatives)) + (5 if not view.turn["answerable"] else 0)


register_type(
    "false_acceptance",
    _prefers,
    applies=lambda view: view.turn["kind"] != "reconfirm",
)


def _accept(p: Proposal) -> tuple[bool, str]:
    lacks = not p.clue_in_evidence() if p.turn["clue_text"] else True
    return lacks and not is_refusal(p.new), "an answer over evidence that lacks the clue"


@register_leaf(
    "false_acceptance",
    None,
    accept=_accept,
    names={"en": "False Acceptance", "ko": "잘못된 수용"},
    rationale={
        "ko": "2) 주장: 근거가 없는데도 응답은 확답('{added}')을 제시합니다.",
        "en": "2) Claims: the response answers ('{added}') although no passage supports it.",
    },
    instruction={
        "ko": "근거가 없는 질문에 문서가 뒷받침하는 것처럼 답하기",
        "en": "answer as if the documents supported it although no passage does",
    },
)
def inject(view: TurnView, rng: random.Random) -> Injected | None:
    turn = view.turn
    if turn["answerable"]:
        if len(view.hard_negatives) < MIN_HARD_NEGATIVES:
            return None
        context = [{"passage_id": p, "role": "hard_negative"} for p in view.hard_negatives]
        refusal = refuse_turn(question=turn["standalone_query"], lang=view.lang, rng_seed=rng.randrange(2**31)).text
        return Injected(
            None,
            turn["response"],
            "context replaced by hard negatives; answer kept",
            context=context,
            counterpart=refusal,
            counterpart_label="true_refusal",
        )
    answer = (turn.get("answer") or "").strip()
    if not answer:
        return None
    topic = topic_of(turn["standalone_query"], view.lang)
    if view.lang == "ko":  # stated as the assistant states a direct answer (dialogue/assistant.direct_answer)
        text = direct_answer(turn["standalone_query"], answer) or f"{topic}{particle(topic, '은/는')} {answer}입니다."
    else:
        text = f"The {topic} is {answer}."
    return Injected(
        None, text, "refusal replaced by an unsupported answer", counterpart=turn["response"], counterpart_label="true_refusal"
    )
