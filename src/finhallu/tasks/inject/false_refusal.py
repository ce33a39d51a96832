"""False Refusal: the evidence answers the question, yet the response refuses (P_n kept)."""

from __future__ import annotations

import random

from finhallu.tasks.inject import Injected, TurnView, register_injector
from finhallu.tasks.responses import refuse_turn


@register_injector("false_refusal", (), prefers=lambda v, subtype=None: 1.0)
def inject(view: TurnView, subtype: str | None, rng: random.Random) -> Injected | None:
    if not view.turn["answerable"] or view.gold_text is None:
        return None
    refusal = refuse_turn(question=view.turn["standalone_query"], lang=view.lang, rng_seed=rng.randrange(2**31)).text
    return Injected(None, refusal, "answer replaced by a refusal; context kept")
