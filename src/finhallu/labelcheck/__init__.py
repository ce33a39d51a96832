"""The label verifier (DESIGN "Labels hold"): is each sample what its label says?

`verify_sample` is an LLM operation (role `label_verifier`) whose rules backend applies the
written acceptance rule of the sample's label leaf (rules.py) plus the fluency checks
(fluency.py). It shares no code with the injectors: it reads the response, its evidence,
history and pair, never the edit that made it. Injection QC runs it on every injected
response and on every faithful counterpart; a sample it rejects is dropped with its reasons.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from finhallu.llm.operations import operation
from finhallu.labelcheck.fluency import fluency_issues
from finhallu.labelcheck.rules import RULES, Case

FAITHFUL_LABELS = ("faithful_answer", "true_refusal")


class SampleVerdict(BaseModel):
    ok: bool
    reasons: list[str] = Field(default_factory=list)


def leaf(hallu_type: str | None, subtype: str | None, label_4class: str) -> str:
    """The acceptance rule a sample answers to: its subtype, else its type, else its 4-class label."""
    return subtype or hallu_type or label_4class


@operation("verify_sample", SampleVerdict)
def verify_sample(
    label: str,
    rule: str,
    response: str,
    paired: str,
    evidence: list[str],
    history: str,
    question: str,
    answer: str | None,
    clue: str | None,
    lang: str,
) -> SampleVerdict:
    """Rules backend: the label's acceptance rule, and (for hallucinations) no surface defect."""
    acc = RULES.get(label) if label in RULES else None
    if acc is None:
        return SampleVerdict(ok=False, reasons=[f"no acceptance rule for {label!r}"])
    case = Case(response or "", paired or "", list(evidence), history or "", question or "", answer, clue, lang)
    reasons = [f"{label}: {r}" for r in acc.check(case)]
    if label not in FAITHFUL_LABELS:
        reasons += [f"fluency: {i}" for i in fluency_issues(case.response, lang)]
    return SampleVerdict(ok=not reasons, reasons=reasons)


def verify_inputs(
    label: str,
    response: str,
    paired: str,
    evidence: list[str],
    history: str,
    question: str,
    answer: str | None,
    clue: str | None,
    lang: str,
) -> dict:
    """The operation's inputs for one sample; `rule` is the leaf's written rule (what an LLM verifier is told)."""
    rule = RULES.get(label).rule if label in RULES else ""
    return dict(
        label=label,
        rule=rule,
        response=response,
        paired=paired,
        evidence=evidence,
        history=history,
        question=question,
        answer=answer,
        clue=clue,
        lang=lang,
    )
