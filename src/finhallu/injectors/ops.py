"""The injection operations: one LLM operation per hallucination type (`inject_<type>`).

Their inputs are a TurnView as plain data (`TurnView.payload()`) plus the subtype, the
injector variant and a seed; the LLM backend renders `prompts/<lang>/inject_<type>.j2`, the
rules backend rebuilds the view and runs the registered rule-based injector. An empty
`response` means the turn cannot carry the subtype.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, field_validator

from finhallu.llm.operations import operation
from finhallu.taxonomy import HALLU_TYPES
from finhallu.injectors import INJECTORS, LEAVES, Injected, TurnView


class InjectOut(BaseModel):
    response: str  # the hallucinated response; "" = this turn cannot carry the subtype
    edit: str = ""  # what changed, in words
    # A registered subtype (validation rejects, then repairs, any other value) and the counterpart's label.
    subtype: str | None = None
    replace_context: bool = False  # False Acceptance: P_n becomes the turn's hard negatives
    counterpart: str | None = None  # the faithful counterpart when it is not the original response
    counterpart_label: Literal["faithful_answer", "true_refusal"] = "faithful_answer"
    strategy: str = "rules"

    @field_validator("subtype")
    @classmethod
    def _registered(cls, subtype: str | None) -> str | None:
        if subtype is not None and subtype not in {leaf.subtype for leaf in LEAVES.in_order()}:
            raise ValueError(f"unknown subtype {subtype!r}")
        return subtype


def to_out(out: Injected | None) -> InjectOut:
    if out is None:
        return InjectOut(response="")
    return InjectOut(
        response=out.response,
        edit=out.edit,
        subtype=out.subtype,
        replace_context=out.context is not None,
        counterpart=out.counterpart,
        counterpart_label=out.counterpart_label,
        strategy=out.strategy,
    )


def _rules(hallu_type: str):
    def run(view: dict, subtype: str | None, lang: str, rng_seed: int, instruction: str = "") -> InjectOut:
        return to_out(INJECTORS.get(hallu_type).inject(TurnView.from_payload(view), subtype, random.Random(rng_seed)))

    run.__name__ = f"inject_{hallu_type}"
    return run


for _type in HALLU_TYPES:
    operation(f"inject_{_type}", InjectOut)(_rules(_type))
