"""lexical_support: each response sentence must be lexically supported by one passage (or the history).

The least-supported sentence decides: support below `threshold` flags the response
(contradictory when that sentence carries numbers, else unverifiable).
"""

from __future__ import annotations

from finhallu.tasks.detectors import Detection, looks_like_refusal, register_detector
from finhallu.tasks.detectors.grounding import query_coverage, sentence_support
from finhallu.tasks.textnorm import find_numbers


@register_detector("lexical_support", threshold=0.6, coverage_threshold=0.5)
def detect(sample: dict, params: dict) -> Detection:
    texts = [p["text"] for p in sample["passages"]]
    sources = texts + [m["content"] for m in sample["history"]] + [sample["query"]]
    coverage = query_coverage(sample["standalone_query"] or sample["query"], texts)
    if looks_like_refusal(sample["response"]):
        if coverage >= params["coverage_threshold"]:
            return Detection(coverage, "hallucinated", "false_refusal", "false_refusal",
                             f"refusal although the passages cover {coverage:.0%} of the question")
        return Detection(coverage * 0.5, "faithful", "true_refusal", None, f"refusal; question coverage {coverage:.0%}")
    support = sentence_support(sample["response"], sources)
    if not support:
        return Detection(0.5, "faithful", "faithful_answer", None, "no content words to check")
    weakest, value = min(support, key=lambda x: x[1])
    score = 1.0 - value
    if coverage < params["coverage_threshold"]:
        return Detection(max(score, 1.0 - coverage), "hallucinated", "hallucination", "false_acceptance",
                         f"passages cover only {coverage:.0%} of the question")
    if value < params["threshold"]:
        kind = "contradictory" if find_numbers(weakest) else "unverifiable"
        return Detection(score, "hallucinated", "hallucination", kind, f"weakly supported ({value:.0%}): {weakest[:80]}")
    return Detection(score, "faithful", "faithful_answer", None, f"every sentence supported (min {value:.0%})")
