"""Trivial baselines every evaluation reports beside the detectors: a detector that does not beat
them tests nothing the benchmark's shortcuts do not already give away.

- `baseline_length`: the response's length in characters;
- `baseline_novel_tokens`: the share of the response's content words absent from the evidence
  (passages, history, question);
- `baseline_verbatim_copy`: whether some response sentence is not a verbatim substring of the passages.

Each is one feature and a one-feature logistic regression fit on the `train_split` labels (so it
picks its own direction), with its threshold chosen by best F1 on `tune_split`; like `learned`,
training rows get no detection, so the scores are out-of-sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from finhallu.detectors import Detection, register_detector
from finhallu.detectors.grounding import evidence_texts, passage_texts, sentences, words

GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)
BASELINES = ("baseline_length", "baseline_novel_tokens", "baseline_verbatim_copy")


def response_length(sample: dict) -> float:
    return float(len(sample.get("response") or ""))


def novel_token_share(sample: dict) -> float:
    mine = words(sample.get("response") or "")
    if not mine:
        return 0.0
    seen = frozenset().union(*(words(t) for t in evidence_texts(sample)))
    return len(mine - seen) / len(mine)


def not_verbatim(sample: dict) -> float:
    context = "\n".join(passage_texts(sample))
    return float(any(s.strip() and s.strip() not in context for s in sentences(sample.get("response") or "")))


def fit_one_feature(samples: list[dict], values: list[float], params: dict, what: str) -> list[Detection | None]:
    from sklearn.linear_model import LogisticRegression

    split = np.array([s.get("split") for s in samples])
    y = np.array([s.get("label_binary") == "hallucinated" for s in samples])
    train = split == params["train_split"]
    if train.sum() < 4 or len(np.unique(y[train])) < 2:
        return [None] * len(samples)  # nothing to fit on (e.g. an external set without a train split)
    x = np.asarray(values, dtype=float).reshape(-1, 1)
    mu, sd = x[train].mean(), x[train].std() or 1.0
    model = LogisticRegression(max_iter=1000).fit((x[train] - mu) / sd, y[train])
    p = model.predict_proba((x - mu) / sd)[:, list(model.classes_).index(True)]
    tune = split == params["tune_split"]
    threshold = 0.5
    if tune.any() and len(np.unique(y[tune])) == 2:
        from finhallu.scoring import best_threshold

        threshold = best_threshold(np.where(y[tune], "hallucinated", "faithful"), p[tune], GRID)
    direction = "higher" if model.coef_[0][0] > 0 else "lower"
    out: list[Detection | None] = []
    for i in range(len(samples)):
        if train[i]:
            out.append(None)
            continue
        hallucinated = bool(p[i] >= threshold)
        out.append(
            Detection(
                float(p[i]),
                "hallucinated" if hallucinated else "faithful",
                "hallucination" if hallucinated else "faithful_answer",
                None,
                f"{what} {values[i]:.3g} ({direction} = hallucinated on train); p={p[i]:.2f} vs {threshold:.2f}",
            )
        )
    return out


_FIT: dict[str, Any] = dict(train_split="train", tune_split="valid")


@register_detector("baseline_length", batch=True, version="1", **_FIT)
def length_baseline(samples: list[dict], params: dict, ctx=None) -> list[Detection | None]:
    return fit_one_feature(samples, [response_length(s) for s in samples], params, "length")


@register_detector("baseline_novel_tokens", batch=True, version="1", **_FIT)
def novel_tokens_baseline(samples: list[dict], params: dict, ctx=None) -> list[Detection | None]:
    return fit_one_feature(samples, [novel_token_share(s) for s in samples], params, "novel-token share")


@register_detector("baseline_verbatim_copy", batch=True, version="1", **_FIT)
def verbatim_baseline(samples: list[dict], params: dict, ctx=None) -> list[Detection | None]:
    return fit_one_feature(samples, [not_verbatim(s) for s in samples], params, "not-verbatim")
