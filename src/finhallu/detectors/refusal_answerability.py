"""refusal_answerability: is the response a refusal, and does the evidence answer the question?

The two answers give the 4-class label directly (K-FinHallu's answerability axis):
  answer  + evidence covers the question       -> faithful answer
  answer  + evidence does not cover it         -> hallucination (False Acceptance)
  refusal + evidence covers the question       -> false refusal
  refusal + evidence does not cover it         -> true refusal
Evidence coverage mixes the question coverage of the best passage with, for answers, how much
of the response the passages back (an answer built from a clue the passages lack is unbacked).
It does not check an answer's claims: that is the grounding detectors' job.
"""

from __future__ import annotations

from finhallu.detectors import Detection, looks_like_refusal, register_detector
from finhallu.detectors.grounding import Findings, passage_texts, query_coverage, question_of, refusal_detection, sentence_support


def answer_evidence(sample: dict, support_weight: float) -> tuple[float, float, float]:
    """(combined evidence coverage, question coverage, mean response support by the passages alone)."""
    passages = passage_texts(sample)
    coverage = query_coverage(question_of(sample), passages)
    support = sentence_support(sample.get("response") or "", passages)
    mean_support = sum(v for _, v in support) / len(support) if support else 0.0
    return (1 - support_weight) * coverage + support_weight * mean_support, coverage, mean_support


@register_detector("refusal_answerability", version="1", coverage_threshold=0.5, answer_threshold=0.5, support_weight=0.5)
def detect(sample: dict, params: dict, ctx=None) -> Detection:
    response = sample.get("response") or ""
    if looks_like_refusal(response):
        coverage = query_coverage(question_of(sample), passage_texts(sample))
        return refusal_detection(Findings(refusal=True, coverage=coverage), params["coverage_threshold"])
    combined, coverage, support = answer_evidence(sample, params["support_weight"])
    why = f"question coverage {coverage:.0%}, response backed {support:.0%} by the passages"
    if combined < params["answer_threshold"]:
        return Detection(
            0.5 + 0.5 * (1.0 - combined / params["answer_threshold"]),
            "hallucinated",
            "hallucination",
            "false_acceptance",
            f"answers although the evidence does not cover the question ({why})",
        )
    return Detection(0.5 * (1.0 - combined), "faithful", "faithful_answer", None, f"answerable and answered ({why})")
