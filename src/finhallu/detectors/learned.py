"""learned: a scikit-learn classifier over the other detectors' outputs and evidence features.

Features: every feature detector's score and flag; the grounding measures (question and answer
coverage, weakest and mean claim support, numbers absent, contradicted and computed, names and
periods absent, modifier flips, relevance); and the trivial baselines' own features (length,
novel-token share, verbatim copy), so that it can only add to what they give away.
Fits on the `train_split` samples' labels (the only detector that sees labels, and only those);
`model: auto` fits logistic regression and gradient boosting and keeps the one with the better
ROC-AUC on `tune_split`; the decision threshold maximizes `threshold_metric` (f1 or accuracy) on
`tune_split` when that split exists (else 0.5). Every other sample is scored; training rows get no
detection, so its metrics are out-of-sample. `train_on: FORMAT:PATH` adds every row of an external
labelled set (external/) to the training rows (`finhallu eval-external --train-on`), e.g. a
public financial QA set beside the benchmark's train split.
Three models share the features: binary (hallucinated?), 4-class and hallucination type
(fit on the hallucinated train samples); the 4-class and type predictions are kept consistent
with the binary decision. Deterministic (lbfgs logistic regression; seeded gradient boosting).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from finhallu.detectors import Detection, register_detector
from finhallu.detectors.baselines import not_verbatim, novel_token_share
from finhallu.detectors.grounding import findings

FEATURE_DETECTORS = ["numeric_grounding", "lexical_support", "embedding_similarity", "refusal_answerability"]
GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)


def evidence_features(sample: dict) -> dict[str, float]:
    f = findings(sample)
    return {
        "answer_coverage": f.answer_coverage,
        "computed_numbers": len(f.derived_numbers),
        "claims": len(f.support),
        "novel_tokens": novel_token_share(sample),
        "not_verbatim": not_verbatim(sample),
        "refusal": float(f.refusal),
        "coverage": f.coverage,
        "relevance": f.relevance,
        "min_support": f.min_support,
        "mean_support": f.mean_support,
        "missing_numbers": len(f.missing_numbers),
        "contradicted": len(f.contradicted),
        "missing_entities": len(f.missing_entities),
        "missing_periods": len(f.missing_periods),
        "flips": len(f.flips),
        "numbers": f.n_numbers,
        "log_chars": math.log1p(len(sample.get("response") or "")),
        "history_turns": len(sample.get("history") or []) / 2,
    }


def feature_matrix(samples: list[dict], params: dict, ctx, shared: bool = True) -> tuple[np.ndarray, list[str]]:
    """Features of `samples`; `shared`: the feature detectors' runs over the evaluated samples are
    the run's own (memoized in ctx), other rows (an extra training set) get runs of their own."""
    from finhallu.detectors import get_detector

    cols: dict[str, list[float]] = {}
    for name in params["features"]:
        det = get_detector(name)
        found = ctx.detections(name, samples) if shared else det.run(samples, det.params({}), ctx)
        for d in found:
            cols.setdefault(f"{name}.score", []).append(d.score if d else 0.5)
            cols.setdefault(f"{name}.flag", []).append(float(d is not None and d.pred_binary == "hallucinated"))
    if params["evidence_features"]:
        for s in samples:
            for k, v in evidence_features(s).items():
                cols.setdefault(k, []).append(float(v))
    names = sorted(cols)
    return np.array([cols[n] for n in names], dtype=float).T.reshape(len(samples), len(names)), names


def _model(kind: str, seed: int, C: float):
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "logreg":
        return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, class_weight="balanced"))
    if kind == "gbdt":
        return GradientBoostingClassifier(n_estimators=150, max_depth=2, learning_rate=0.1, random_state=seed)
    raise ValueError(f"learned: model must be logreg, gbdt or auto, got {kind!r}")


def _fit(kind: str, seed: int, C: float, X: np.ndarray, y: np.ndarray):
    classes = np.unique(y)
    if len(classes) == 1:  # one class only: a constant predictor
        return None, classes
    return _model(kind, seed, C).fit(X, y), classes


def _proba(model, classes, X) -> np.ndarray:
    return np.ones((len(X), 1)) if model is None else model.predict_proba(X)


def _pick(probs: np.ndarray, classes: np.ndarray, allowed: tuple[str, ...], fallback: str) -> str:
    options = [(p, c) for p, c in zip(probs, classes) if c in allowed]
    return max(options)[1] if options else fallback


def split_spec(spec: str) -> tuple[str, str]:
    """FORMAT:PATH -> (format, path)."""
    fmt, _, path = (spec or "").partition(":")
    return fmt, path


def train_on_problem(detector: str, spec: str) -> str | None:
    """What is wrong with a `train_on: FORMAT:PATH` (an unknown format, a missing path), or None."""
    from pathlib import Path

    from finhallu.external import formats

    fmt, path = split_spec(spec)
    if fmt not in formats() or not path:
        return f"{detector}: train_on must be FORMAT:PATH with FORMAT one of {formats()}, got {spec!r}"
    if not Path(path).expanduser().exists():
        return f"{detector}: train_on {spec!r}: {path} does not exist"
    return None


def _preflight(params: dict) -> str | None:
    if params["threshold_metric"] not in ("f1", "accuracy"):
        return f"learned: threshold_metric must be f1 or accuracy, got {params['threshold_metric']!r}"
    return train_on_problem("learned", params["train_on"]) if params["train_on"] else None


def extra_training(params: dict, ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(features, binary, 4-class and type labels) of every row of the `train_on` set, or None."""
    if not params["train_on"]:
        return None
    from finhallu.external import load_external

    rows = load_external(*split_spec(params["train_on"])).to_dicts()
    X, _ = feature_matrix(rows, params, ctx, shared=False)
    return (
        X,
        np.array([r["label_binary"] == "hallucinated" for r in rows]),
        np.array([r["label_4class"] for r in rows]),
        np.array([r.get("hallu_type") or "none" for r in rows]),
    )


def _auc(y: np.ndarray, p: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p)) if len(np.unique(y)) == 2 else 0.5


@register_detector(
    "learned",
    findings_inputs=lambda samples, params, ctx: [(s, True, None) for s in samples] if params["evidence_features"] else [],
    batch=True,
    version="2",
    preflight=_preflight,
    features=FEATURE_DETECTORS,
    evidence_features=True,
    model="auto",
    C=1.0,
    train_split="train",
    tune_split="valid",
    threshold_metric="f1",
    train_on=None,
    train_on_sha256=None,
    seed=0,
)
def detect(samples: list[dict], params: dict, ctx) -> list[Detection | None]:
    split = np.array([s.get("split") for s in samples])
    train = split == params["train_split"]
    y_bin = np.array([s.get("label_binary") == "hallucinated" for s in samples])
    problem = _preflight(params)
    if problem:
        raise ValueError(problem)
    X, names = feature_matrix(samples, params, ctx)
    y4 = np.array([s.get("label_4class") for s in samples])
    yt = np.array([s.get("hallu_type") or "none" for s in samples])
    Xt, yt_bin, yt4, ytt = X[train], y_bin[train], y4[train], yt[train]
    extra = extra_training(params, ctx)
    if extra is not None:
        Xt, yt_bin, yt4, ytt = (np.concatenate([a, b]) for a, b in zip((Xt, yt_bin, yt4, ytt), extra))
    if len(yt_bin) < 4 or len(np.unique(yt_bin)) < 2:
        raise ValueError(
            f"learned: needs labelled samples of both classes in split {params['train_split']!r}"
            f"{' and train_on' if extra is not None else ''}; found {len(yt_bin)} ({int(yt_bin.sum())} hallucinated)"
        )
    seed, C = params["seed"], params["C"]
    tune = split == params["tune_split"]
    kinds = ("logreg", "gbdt") if params["model"] == "auto" else (params["model"],)
    fitted: list[tuple[float, int, str, Any, np.ndarray]] = []  # (AUC on tune, -order, kind, model, p)
    # The fits run on threads: scikit-learn grows trees and solves outside the GIL, so two fits
    # take the two cores of a build that runs one stage at a time (each fit is seeded and on its
    # own data: the same models in any order).
    with ThreadPoolExecutor(max_workers=2) as pool:
        for k, (model, _) in zip(kinds, pool.map(lambda k: _fit(k, seed, C, Xt, yt_bin), kinds)):
            p = model.predict_proba(X)[:, list(model.classes_).index(True)]
            fitted.append((_auc(y_bin[tune], p[tune]) if tune.any() else 0.5, -len(fitted), k, model, p))
        _, _, kind, binary, p_hallu = max(fitted, key=lambda x: x[:2])  # ties keep the first (logreg)
        four_fit = pool.submit(_fit, kind, seed, C, Xt, yt4)
        typ, type_classes = _fit(kind, seed, C, Xt[yt_bin], ytt[yt_bin])
        four, four_classes = four_fit.result()
    threshold = 0.5
    if tune.any() and len(np.unique(y_bin[tune])) == 2:
        from finhallu.scoring import best_threshold

        threshold = best_threshold(
            np.where(y_bin[tune], "hallucinated", "faithful"), p_hallu[tune], GRID, params["threshold_metric"]
        )
    p4, pt = _proba(four, four_classes, X), _proba(typ, type_classes, X)
    if kind == "logreg":
        coef = binary[-1].coef_[0]
        top = ", ".join(f"{names[i]} {coef[i]:+.2f}" for i in np.argsort(-np.abs(coef))[:3])
    else:
        imp = binary.feature_importances_
        top = ", ".join(f"{names[i]} {imp[i]:.2f}" for i in np.argsort(-imp)[:3])
    from_extra = f" ({len(extra[1])} of them from {params['train_on']})" if extra is not None else ""
    out: list[Detection | None] = []
    for i, s in enumerate(samples):
        if train[i]:
            out.append(None)
            continue
        hallucinated = bool(p_hallu[i] >= threshold)
        if hallucinated:
            label4 = _pick(p4[i], four_classes, ("hallucination", "false_refusal"), "hallucination")
            htype = _pick(pt[i], type_classes, tuple(c for c in type_classes if c != "none"), "unverifiable")
            htype = "false_refusal" if label4 == "false_refusal" else ("unverifiable" if htype == "false_refusal" else htype)
        else:
            label4, htype = _pick(p4[i], four_classes, ("faithful_answer", "true_refusal"), "faithful_answer"), None
        out.append(
            Detection(
                float(p_hallu[i]),
                "hallucinated" if hallucinated else "faithful",
                label4,
                htype,
                f"{kind} on {len(names)} features, {len(yt_bin)} train samples{from_extra}; p={p_hallu[i]:.2f} vs "
                f"threshold {threshold:.2f}; strongest: {top}",
            )
        )
    return out
