"""numeric_grounding: every number/unit/period in the response must occur in the passages or history.

Refusals are judged by whether the passages cover the question; answers over passages that
do not cover the question are flagged as False Acceptance.
"""

from __future__ import annotations

from finhallu.tasks.detectors import Detection, looks_like_refusal, register_detector
from finhallu.tasks.detectors.grounding import query_coverage
from finhallu.tasks.textnorm import number_keys


@register_detector("numeric_grounding", coverage_threshold=0.5)
def detect(sample: dict, params: dict) -> Detection:
    texts = [p["text"] for p in sample["passages"]]
    history = " ".join(m["content"] for m in sample["history"])
    coverage = query_coverage(sample["standalone_query"] or sample["query"], texts)
    thr = params["coverage_threshold"]
    if looks_like_refusal(sample["response"]):
        if coverage >= thr:
            return Detection(coverage, "hallucinated", "false_refusal", "false_refusal",
                             f"refusal although the passages cover {coverage:.0%} of the question")
        return Detection(coverage * 0.5, "faithful", "true_refusal", None, f"refusal; question coverage {coverage:.0%}")
    resp_keys = number_keys(sample["response"])
    evidence = set().union(*(number_keys(t) for t in texts)) | number_keys(history) | number_keys(sample["query"])
    missing = sorted(resp_keys - evidence)
    if missing:
        return Detection(0.5 + 0.5 * len(missing) / max(1, len(resp_keys)), "hallucinated", "hallucination", "contradictory",
                         f"numbers not in the evidence: {', '.join(missing[:4])}")
    if coverage < thr:
        return Detection(1.0 - coverage, "hallucinated", "hallucination", "false_acceptance",
                         f"answer although the passages cover only {coverage:.0%} of the question")
    return Detection(0.5 * (1.0 - coverage), "faithful", "faithful_answer", None, "all numbers grounded; question covered")
