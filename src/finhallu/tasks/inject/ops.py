"""The injection operations: one LLM operation per hallucination type (`inject_<type>`).

Their inputs are a TurnView as plain data (`TurnView.payload()`) plus the subtype, the
injector variant and a seed; the LLM backend renders `prompts/<lang>/inject_<type>.j2`, the
rules backend rebuilds the view and runs the registered rule-based injector. An empty
`response` means the turn cannot carry the subtype.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel

from finhallu.taxonomy import HALLU_SUBTYPES

from finhallu.llm.operations import operation
from finhallu.tasks.inject import INJECTORS, Injected, TurnView, load_injectors


class InjectOut(BaseModel):
    response: str  # the hallucinated response; "" = this turn cannot carry the subtype
    edit: str = ""  # what changed, in words
    # Literal types: structured output constrains them, and validation rejects (then repairs) any other value.
    subtype: Literal[HALLU_SUBTYPES] | None = None  # type: ignore[valid-type]
    replace_context: bool = False  # False Acceptance: P_n becomes the turn's hard negatives
    counterpart: str | None = None  # the faithful counterpart when it is not the original response
    counterpart_label: Literal["faithful_answer", "true_refusal"] = "faithful_answer"
    strategy: str = "rules"


def to_out(out: Injected | None) -> InjectOut:
    if out is None:
        return InjectOut(response="")
    return InjectOut(response=out.response, edit=out.edit, subtype=out.subtype, replace_context=out.context is not None,
                     counterpart=out.counterpart, counterpart_label=out.counterpart_label, strategy=out.strategy)


def _rules(hallu_type: str):
    def run(view: dict, subtype: str | None, lang: str, rng_seed: int) -> InjectOut:
        if not INJECTORS:
            load_injectors()
        return to_out(INJECTORS[hallu_type].inject(TurnView.from_payload(view), subtype, random.Random(rng_seed)))

    run.__name__ = f"inject_{hallu_type}"
    return run


for _type in ("contradictory", "unverifiable", "irrelevance", "false_acceptance", "false_refusal"):
    operation(f"inject_{_type}", InjectOut)(_rules(_type))
