"""nli: a cross-encoder NLI model (sentence-transformers CrossEncoder) checks each response sentence.

Premises are the passages (and the history unless `use_history: false`), hypotheses the
response sentences. A sentence is supported by its best-entailing premise; the response score
is 1 - (min over sentences of that entailment) (`aggregate: min`; `mean` averages instead).
A response whose score passes `threshold` is flagged: Contradictory when the weakest sentence's
premise contradicts it more than it leaves it neutral, else Unverifiable.

The model is loaded from local files only: $FINHALLU_NLI_PATH when set, else the `model` parameter
(a folder, or a hub id found in the local Hugging Face cache), else DEFAULT_MODEL from the cache.
Nothing is downloaded; a missing model raises ModelNotAvailableError naming what is missing.
Label order comes from the model's config (id2label: entailment / neutral / contradiction).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

from finhallu.tasks.detectors import Detection, looks_like_refusal, register_detector
from finhallu.tasks.detectors.grounding import Findings, evidence_texts, passage_texts, query_coverage, question_of, refusal_detection
from finhallu.local_models import ModelNotAvailableError, resolve_model_dir
from finhallu.text.sentences import split_sentences

DEFAULT_MODEL = "cross-encoder/nli-deberta-v3-xsmall"
ENV = "FINHALLU_NLI_PATH"
# A scorer maps (premise, hypothesis) pairs to an (n, 3) array of probabilities: entailment, neutral, contradiction.
Scorer = Callable[[list[tuple[str, str]]], np.ndarray]


def _label_columns(id2label: dict) -> list[int]:
    """Column of entailment, neutral, contradiction in the model's output."""
    names = {int(i): str(n).lower() for i, n in id2label.items()}
    order = []
    for want in ("entail", "neutral", "contradict"):
        hit = [i for i, n in names.items() if n.startswith(want)]
        if len(hit) != 1:
            raise ModelNotAvailableError(f"NLI model labels {names} do not name entailment/neutral/contradiction")
        order.append(hit[0])
    return order


@lru_cache(maxsize=2)
def _load(spec: str, device: str) -> tuple[object, list[int], str]:
    folder, revision = resolve_model_dir(spec, "config.json", env_var=ENV, what="NLI cross-encoder")
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(folder), device=device)
    id2label = getattr(model.model.config, "id2label", None) or {}
    if len(id2label) != 3:
        raise ModelNotAvailableError(f"NLI cross-encoder {folder} has {len(id2label)} output labels; an NLI model has 3")
    return model, _label_columns(id2label), f"{spec}@{revision}"


def load_scorer(params: dict) -> tuple[Scorer, str]:
    """(scorer, model id) of the configured cross-encoder; raises ModelNotAvailableError when absent."""
    model, cols, model_id = _load(params["model"] or DEFAULT_MODEL, params["device"])

    def score(pairs: list[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros((0, 3))
        logits = np.asarray(model.predict(pairs, batch_size=params["batch_size"], apply_softmax=False,
                                          show_progress_bar=False), dtype=float).reshape(len(pairs), -1)
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (z / z.sum(axis=1, keepdims=True))[:, cols]

    return score, model_id


def score_samples(samples: list[dict], scorer: Scorer, params: dict) -> list[Detection]:
    """Detections from any NLI scorer (the cross-encoder, or one a test injects)."""
    jobs, spans = [], []
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
            out.append(Detection(1.0 if n_sent else 0.5, "hallucinated" if n_sent else "faithful",
                                 "hallucination" if n_sent else "faithful_answer", "unverifiable" if n_sent else None,
                                 "no premises to check against" if n_sent else "no sentences to check"))
            continue
        p = probs[start:start + n_sent * n_prem].reshape(n_sent, n_prem, 3)
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
    try:
        resolve_model_dir(params["model"] or DEFAULT_MODEL, "config.json", env_var=ENV, what="NLI cross-encoder")
    except ModelNotAvailableError as exc:
        return " ".join(str(exc).split())
    return None


@register_detector("nli", batch=True, version="1", describe=_describe, preflight=_preflight, model=None, device="cpu", batch_size=16,
                   aggregate="min", threshold=0.5, coverage_threshold=0.5, use_history=True, max_premise_chars=2000)
def detect(samples: list[dict], params: dict, ctx=None) -> list[Detection]:
    if params["aggregate"] not in ("min", "mean"):
        raise ValueError(f"nli: aggregate must be min or mean, got {params['aggregate']!r}")
    scorer, _ = load_scorer(params)
    return score_samples(samples, scorer, params)
