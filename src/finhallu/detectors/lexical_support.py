"""lexical_support: each response sentence must be lexically supported by one evidence text.

A response whose own words (those beyond the question's) the evidence holds less than
`answer_threshold` of is flagged (False Acceptance when the passages do not cover the question
either, else Unverifiable); so is one whose least-supported claim has support below `threshold`
(Contradictory when that claim carries numbers or flips a modifier of the sentence it copies,
else Unverifiable), and one that barely touches the question's words (Irrelevance).
"""

from __future__ import annotations

from finhallu.detectors import Detection, register_detector
from finhallu.detectors.grounding import evidence_findings_inputs, findings, refusal_detection
from finhallu.text.numbers import find_numbers


@register_detector(
    "lexical_support",
    findings_inputs=evidence_findings_inputs,
    version="3",
    threshold=0.6,
    coverage_threshold=0.5,
    answer_threshold=0.7,
    relevance_threshold=0.2,
    use_history=True,
    max_passages=None,
)
def detect(sample: dict, params: dict, ctx=None) -> Detection:
    f = findings(sample, use_history=params["use_history"], max_passages=params["max_passages"])
    if f.refusal:
        return refusal_detection(f, params["coverage_threshold"])
    if not f.support:
        return Detection(0.5, "faithful", "faithful_answer", None, "no content words to check")
    value, weakest = f.min_support, f.weakest
    score = 1.0 - min(value, f.answer_coverage)
    if f.flips:
        said, ev = f.flips[0]
        return Detection(
            max(score, 0.8), "hallucinated", "hallucination", "contradictory", f"'{said}' where the evidence says '{ev}'"
        )
    if f.answer_coverage < params["answer_threshold"]:
        kind = "false_acceptance" if f.coverage < params["coverage_threshold"] else "unverifiable"
        return Detection(
            max(score, 0.5 + 0.5 * (params["answer_threshold"] - f.answer_coverage)),
            "hallucinated",
            "hallucination",
            kind,
            f"the evidence holds only {f.answer_coverage:.0%} of what the response "
            f"adds to the question (the passages cover {f.coverage:.0%} of the question)",
        )
    if f.relevance < params["relevance_threshold"]:
        return Detection(
            max(score, 0.6 + 0.4 * (params["relevance_threshold"] - f.relevance)),
            "hallucinated",
            "hallucination",
            "irrelevance",
            f"the response takes up only {f.relevance:.0%} of the question's words",
        )
    if value < params["threshold"]:
        kind = "contradictory" if find_numbers(weakest) else "unverifiable"
        return Detection(score, "hallucinated", "hallucination", kind, f"weakly supported ({value:.0%}): {weakest[:80]}")
    return Detection(
        score,
        "faithful",
        "faithful_answer",
        None,
        f"every claim supported (min {value:.0%}); the evidence holds {f.answer_coverage:.0%} of the answer",
    )
