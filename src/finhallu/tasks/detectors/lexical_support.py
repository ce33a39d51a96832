"""lexical_support: each response sentence must be lexically supported by one evidence text.

The least-supported sentence decides: support below `threshold` flags the response
(Contradictory when that sentence carries numbers or flips a modifier of the sentence it copies,
else Unverifiable; Irrelevance when the response barely touches the question's words).
"""

from __future__ import annotations

from finhallu.tasks.detectors import Detection, register_detector
from finhallu.tasks.detectors.grounding import findings, refusal_detection
from finhallu.text.numbers import find_numbers


@register_detector("lexical_support", version="2", threshold=0.6, coverage_threshold=0.5, relevance_threshold=0.2,
                   use_history=True, max_passages=None)
def detect(sample: dict, params: dict, ctx=None) -> Detection:
    f = findings(sample, use_history=params["use_history"], max_passages=params["max_passages"])
    if f.refusal:
        return refusal_detection(f, params["coverage_threshold"])
    if not f.support:
        return Detection(0.5, "faithful", "faithful_answer", None, "no content words to check")
    value, weakest = f.min_support, f.weakest
    score = 1.0 - value
    if f.flips:
        said, ev = f.flips[0]
        return Detection(max(score, 0.8), "hallucinated", "hallucination", "contradictory",
                         f"'{said}' where the evidence says '{ev}'")
    if f.coverage < params["coverage_threshold"]:
        return Detection(max(score, 1.0 - f.coverage), "hallucinated", "hallucination", "false_acceptance",
                         f"passages cover only {f.coverage:.0%} of the question")
    if f.relevance < params["relevance_threshold"]:
        return Detection(max(score, 0.6 + 0.4 * (params["relevance_threshold"] - f.relevance)), "hallucinated", "hallucination",
                         "irrelevance", f"the response takes up only {f.relevance:.0%} of the question's words")
    if value < params["threshold"]:
        kind = "contradictory" if find_numbers(weakest) else "unverifiable"
        return Detection(score, "hallucinated", "hallucination", kind, f"weakly supported ({value:.0%}): {weakest[:80]}")
    return Detection(score, "faithful", "faithful_answer", None, f"every sentence supported (min {value:.0%})")
