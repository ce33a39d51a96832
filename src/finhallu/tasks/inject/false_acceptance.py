"""False Acceptance: the evidence cannot answer, yet the response answers.

Answerable turn: P_n is replaced by the seed's hard negatives and the answer is kept; its
faithful counterpart is a refusal over the same passages (a True Refusal). Unanswerable
turn (a shipped `is_impossible` question): the refusal becomes the plausible-looking answer.
"""

from __future__ import annotations

import random

from finhallu.tasks.inject import Injected, TurnView, register_injector
from finhallu.tasks.responses import direct_answer, refuse_turn
from finhallu.text.phrases import topic_of
from finhallu.text.words import particle

MIN_HARD_NEGATIVES = 3


@register_injector("false_acceptance", (), prefers=lambda v, subtype=None: float(len(v.hard_negatives)) + (5 if not v.turn["answerable"] else 0))
def inject(view: TurnView, subtype: str | None, rng: random.Random) -> Injected | None:
    turn = view.turn
    if turn["kind"] == "reconfirm":
        return None
    if turn["answerable"]:
        if len(view.hard_negatives) < MIN_HARD_NEGATIVES:
            return None
        context = [{"passage_id": p, "role": "hard_negative"} for p in view.hard_negatives]
        refusal = refuse_turn(question=turn["standalone_query"], lang=view.lang, rng_seed=rng.randrange(2**31)).text
        return Injected(None, turn["response"], "context replaced by hard negatives; answer kept",
                        context=context, counterpart=refusal, counterpart_label="true_refusal")
    answer = (turn.get("answer") or "").strip()
    if not answer:
        return None
    topic = topic_of(turn["standalone_query"], view.lang)
    if view.lang == "ko":  # stated as the assistant states a direct answer (tasks/responses.direct_answer)
        text = direct_answer(turn["standalone_query"], answer) or f"{topic}{particle(topic, '은/는')} {answer}입니다."
    else:
        text = f"The {topic} is {answer}."
    return Injected(None, text, "refusal replaced by an unsupported answer", counterpart=turn["response"],
                    counterpart_label="true_refusal")
