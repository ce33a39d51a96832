"""nli: a cross-encoder NLI model (sentence-transformers CrossEncoder) checks each response sentence.

Premises are the passages (and the history unless `use_history: false`), hypotheses the
response sentences. A sentence is supported by its best-entailing premise; the response score
is 1 - (min over sentences of that entailment) (`aggregate: min`; `mean` averages instead).
A response whose score passes `threshold` is flagged: Contradictory when the weakest sentence's
premise contradicts it more than it leaves it neutral, else Unverifiable.

The model is loaded from local files only (finhallu/nli_model.py): $FINHALLU_NLI_PATH when set,
else the `model` parameter (a folder, or a hub id in the local Hugging Face cache), else
DEFAULT_MODEL from the cache. Nothing is downloaded; a missing model is named before any work.
"""

from __future__ import annotations

import numpy as np

from finhallu.detectors import Detection, looks_like_refusal, register_detector
from finhallu.detectors.grounding import Findings, evidence_texts, passage_texts, query_coverage, question_of, refusal_detection
from finhallu.nli_model import DEFAULT_MODEL, ENV, Scorer, _label_columns, _load, load_scorer, missing_model  # noqa: F401
from finhallu.text.sentences import split_sentences


def score_samples(samples: list[dict], scorer: Scorer, params: dict) -> list[Detection]:
    """Detections from any NLI scorer (the cross-encoder, or one a test injects)."""
    jobs: list[tuple[str, str]] = []
    spans: list[tuple[int, int, int]] = []
    for s in samples:
        premises = [t[: params["max_premise_chars"]] for t in evidence_texts(s, params["use_history"], use_query=False)]
        sents = [] if looks_like_refusal(s.get("response") or "") else split_sentences(s.get("response") or "")
        start = len(jobs)
        jobs += [(p, h) for h in sents for p in premises]
        spans.append((start, len(sents), len(premises)))
    probs = scorer(jobs) if jobs else np.zeros((0, 3))
    out = []
    for s, (start, n_sent, n_prem) in zip(samples, spans):
        if looks_like_refusal(s.get("response") or ""):
            coverage = query_coverage(question_of(s), passage_texts(s))
            out.append(refusal_detection(Findings(refusal=True, coverage=coverage), params["coverage_threshold"]))
            continue
        if not n_sent or not n_prem:
            out.append(
                Detection(
                    1.0 if n_sent else 0.5,
                    "hallucinated" if n_sent else "faithful",
                    "hallucination" if n_sent else "faithful_answer",
                    "unverifiable" if n_sent else None,
                    "no premises to check against" if n_sent else "no sentences to check",
                )
            )
            continue
        p = probs[start : start + n_sent * n_prem].reshape(n_sent, n_prem, 3)
        best = p[:, :, 0].argmax(axis=1)  # best-entailing premise per sentence
        entail = p[np.arange(n_sent), best, 0]
        weakest = int(entail.argmin())
        support = float(entail.min() if params["aggregate"] == "min" else entail.mean())
        score = 1.0 - support
        top_contra = float(p[weakest, :, 2].max())
        why = f"entailment per sentence {', '.join(f'{e:.2f}' for e in entail[:6])}; weakest contradiction {top_contra:.2f}"
        if score >= params["threshold"]:
            kind = "contradictory" if top_contra > float(p[weakest, best[weakest], 1]) else "unverifiable"
            out.append(Detection(score, "hallucinated", "hallucination", kind, why))
        else:
            out.append(Detection(score, "faithful", "faithful_answer", None, why))
    return out


def _describe(params: dict, ctx) -> dict:
    return {"model_id": load_scorer(params)[1]}


def _preflight(params: dict) -> str | None:
    if params["aggregate"] not in ("min", "mean"):
        return f"nli: aggregate must be min or mean, got {params['aggregate']!r}"
    return missing_model(params["model"])


@register_detector(
    "nli",
    batch=True,
    version="1",
    describe=_describe,
    preflight=_preflight,
    model=None,
    device="cpu",
    batch_size=16,
    aggregate="min",
    threshold=0.5,
    coverage_threshold=0.5,
    use_history=True,
    max_premise_chars=2000,
)
def detect(samples: list[dict], params: dict, ctx=None) -> list[Detection]:
    if params["aggregate"] not in ("min", "mean"):
        raise ValueError(f"nli: aggregate must be min or mean, got {params['aggregate']!r}")
    scorer, _ = load_scorer(params)
    return score_samples(samples, scorer, params)
