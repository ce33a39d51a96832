"""numeric_grounding: numbers, units, periods and named entities of the response must be in the evidence.

Evidence = the passages and (unless `use_history: false`) the dialogue history and question.
Figures are compared as quantities (text/quantities: scale notes, 억/조 and million words, rounding),
so a table value in 백만원 or "(in millions)" grounds the same amount written out in the response;
a figure restated at another scale or computed from the evidence figures it is about (a ratio,
share, change, sum or difference: text/derived) is grounded too.
A number that an evidence number of the same unit *contradicts* (same wording, other value), one
the evidence states only for another year (periods.py) or only as another metric's value
(attribution.py; a bare answer is about the question's metric and year), flags a Contradictory
response; a number, period or name found nowhere flags it Unverifiable.
Refusals are judged by whether the passages cover the question; an answer over passages that
do not cover the question, saying what they do not hold, is flagged as False Acceptance.
"""

from __future__ import annotations

from finhallu.detectors import Detection, register_detector
from finhallu.detectors.grounding import evidence_findings_inputs, findings, refusal_detection, unanswerable_answer


@register_detector(
    "numeric_grounding",
    version="6",
    findings_inputs=evidence_findings_inputs,
    coverage_threshold=0.5,
    answer_threshold=0.7,
    use_history=True,
    max_passages=None,
)
def detect(sample: dict, params: dict, ctx=None) -> Detection:
    f = findings(sample, use_history=params["use_history"], max_passages=params["max_passages"])
    if f.refusal:
        return refusal_detection(f, params["coverage_threshold"])
    checked = max(1, f.n_numbers)
    if f.contradicted:
        said, ev = f.contradicted[0]
        return Detection(
            min(1.0, 0.85 + 0.15 * len(f.contradicted) / checked),
            "hallucinated",
            "hallucination",
            "contradictory",
            f"{said} contradicts the evidence ({ev} in the same wording)",
        )
    if f.missing_numbers:
        return Detection(
            min(1.0, 0.7 + 0.3 * len(f.missing_numbers) / checked),
            "hallucinated",
            "hallucination",
            "unverifiable",
            f"numbers not in the evidence: {', '.join(f.missing_numbers[:4])}",
        )
    if f.missing_periods or f.missing_entities:
        what = f.missing_periods + f.missing_entities
        return Detection(
            min(0.95, 0.62 + 0.05 * len(what)),
            "hallucinated",
            "hallucination",
            "unverifiable",
            f"periods/names not in the evidence: {', '.join(what[:4])}",
        )
    if unanswerable_answer(f, params["coverage_threshold"], params["answer_threshold"]):
        return Detection(
            0.5 + 0.5 * (1.0 - f.coverage),
            "hallucinated",
            "hallucination",
            "false_acceptance",
            f"answer although the passages cover only {f.coverage:.0%} of the question and hold "
            f"{f.answer_coverage:.0%} of what the response adds to it",
        )
    computed = f"; computed: {'; '.join(f.derived_numbers[:3])}" if f.derived_numbers else ""
    return Detection(
        0.45 * (1.0 - f.answer_coverage),
        "faithful",
        "faithful_answer",
        None,
        f"all {f.n_numbers} numbers, periods and names grounded{computed}; question coverage {f.coverage:.0%}",
    )
