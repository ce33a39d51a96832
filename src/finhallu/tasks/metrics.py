"""metrics: detections x samples -> `metrics` (with bootstrap CIs) and `confusion` (K-FinHallu §5).

Settings: binary (hallucinated = positive), 4-class (faithful_answer / hallucination /
false_refusal / true_refusal) and type (hallucination type on hallucinated samples).
Slices: all, split, source, language, and hallucination type (each type's pairs).
Confidence intervals: percentile bootstrap, resampling within each true label (stratified).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from finhallu.config import MetricsConfig
from finhallu.tasks.base import Frames, StageContext, rows_frame
from finhallu.tasks.detect import DATASET


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b, out=np.zeros_like(a, dtype=float), where=b > 0)


def _f1(y: np.ndarray, p: np.ndarray, label) -> np.ndarray:
    tp = np.sum((y == label) & (p == label), axis=-1)
    fp = np.sum((y != label) & (p == label), axis=-1)
    fn = np.sum((y == label) & (p != label), axis=-1)
    return _div(2.0 * tp, (2 * tp + fp + fn).astype(float))


# Metric functions take (..., n) label arrays and return (...)-shaped values, so one call
# scores the point estimate (1-D) or every bootstrap resample at once (2-D).
def binary_metrics(y: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
    pos = "hallucinated"
    tp = np.sum((y == pos) & (p == pos), axis=-1).astype(float)
    fp = np.sum((y != pos) & (p == pos), axis=-1).astype(float)
    fn = np.sum((y == pos) & (p != pos), axis=-1).astype(float)
    tn = np.sum((y != pos) & (p != pos), axis=-1).astype(float)
    rec, spec = _div(tp, tp + fn), _div(tn, tn + fp)
    # Balanced accuracy is the mean recall over the classes present in y (sklearn's definition):
    # a slice holding one class only is scored by that class's recall, not halved by an absent one.
    has_pos, has_neg = (tp + fn > 0).astype(float), (tn + fp > 0).astype(float)
    balanced = _div(rec * has_pos + spec * has_neg, has_pos + has_neg)
    return {"accuracy": np.mean(y == p, axis=-1), "precision": _div(tp, tp + fp), "recall": rec,
            "f1": _f1(y, p, pos), "balanced_accuracy": balanced}


def multiclass_metrics(y: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
    """Macro F1 over the labels present in y or p of each row (sklearn's f1_score(average='macro'))."""
    y, p = np.asarray(y), np.asarray(p)
    labels = np.unique(np.concatenate([y.ravel(), p.ravel()]))
    f1 = np.zeros((len(labels),) + y.shape[:-1])
    present = np.zeros_like(f1)
    for i, lab in enumerate(labels):
        f1[i] = _f1(y, p, lab)
        present[i] = np.any(y == lab, axis=-1) | np.any(p == lab, axis=-1)
    macro = _div((f1 * present).sum(axis=0), present.sum(axis=0))
    return {"accuracy": np.mean(y == p, axis=-1), "macro_f1": macro}


def _bootstrap(y, p, fn, resamples: int, confidence: float, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """Percentile intervals; each resample draws within each true label (stratified)."""
    strata = [np.flatnonzero(y == lab) for lab in np.unique(y)]
    idx = np.concatenate([s[rng.integers(0, len(s), size=(resamples, len(s)))] for s in strata], axis=1)
    a = (1 - confidence) / 2
    return {k: (float(np.quantile(v, a)), float(np.quantile(v, 1 - a))) for k, v in fn(y[idx], p[idx]).items()}


def _slices(df: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    out = [("all", df)]
    for col in ("split", "source", "lang"):
        for key in sorted(df[col].unique().to_list()):
            out.append((f"{col}={key}", df.filter(pl.col(col) == key)))
    pairs_type = df.filter(pl.col("hallu_type").is_not_null()).select("pair_id", "hallu_type")
    for t in sorted(pairs_type["hallu_type"].unique().to_list()):
        ids = pairs_type.filter(pl.col("hallu_type") == t)["pair_id"].to_list()
        out.append((f"hallu_type={t}", df.filter(pl.col("pair_id").is_in(ids))))
    return out


def evaluate(samples: pl.DataFrame, detections: pl.DataFrame, cfg: MetricsConfig, seed: int,
             dataset: str, dataset_version: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    joined = detections.join(samples.drop("history", "passages"), on="sample_id", how="inner").sort("detector", "sample_id")
    rows, conf = [], []
    rng = np.random.default_rng(seed)
    for (eval_id, detector), df in sorted(joined.group_by("eval_id", "detector"), key=lambda kv: kv[0]):
        for slice_name, s in _slices(df):
            settings = [("binary", s["label_binary"], s["pred_binary"], binary_metrics),
                        ("4class", s["label_4class"], s["pred_4class"], multiclass_metrics)]
            hs = s.filter(pl.col("hallu_type").is_not_null())
            if hs.height:
                settings.append(("type", hs["hallu_type"], hs["pred_type"].fill_null("none"), multiclass_metrics))
            for setting, y_s, p_s, fn in settings:
                y, p = y_s.to_numpy().astype(str), p_s.to_numpy().astype(str)
                if len(y) == 0:
                    continue
                point = {k: float(v) for k, v in fn(y, p).items()}
                cis = _bootstrap(y, p, fn, cfg.bootstrap_resamples, cfg.confidence, rng) if cfg.bootstrap_resamples else {}
                for metric, value in point.items():
                    lo, hi = cis.get(metric, (None, None))
                    rows.append({"eval_id": eval_id, "dataset": dataset, "dataset_version": dataset_version,
                                 "detector": detector, "setting": setting, "slice": slice_name, "metric": metric,
                                 "value": value, "ci_low": lo, "ci_high": hi, "n": len(y)})
                if slice_name == "all":
                    pairs = pl.DataFrame({"t": y, "p": p}).group_by("t", "p").len()
                    for t, pr, n in pairs.iter_rows():
                        conf.append({"eval_id": eval_id, "detector": detector, "setting": setting, "slice": slice_name,
                                     "true_label": t, "pred_label": pr, "count": n})
    metrics = rows_frame(rows, ["eval_id", "detector", "setting", "slice", "metric"])
    confusion = rows_frame(conf, ["eval_id", "detector", "setting", "slice", "true_label", "pred_label"])
    return metrics, confusion


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: MetricsConfig = ctx.config
    version = ctx.input_hashes.get("samples", "unversioned")[:16]
    metrics, confusion = evaluate(inputs["samples"], inputs["detections"], cfg, ctx.seed, DATASET, version)
    ctx.progress(1, 1)
    return {"metrics": metrics, "confusion": confusion}
