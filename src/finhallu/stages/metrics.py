"""metrics: detections x samples -> `metrics` (bootstrap CIs), `confusion` and `detector_tests` (K-FinHallu §5, App. F).

Settings (the `setting` column):
  binary     hallucinated = positive: accuracy, precision, recall, f1, balanced_accuracy, mcc, miss_rate,
             and from the scores roc_auc and pr_auc (average precision)
  4class     faithful_answer / hallucination / false_refusal / true_refusal: accuracy, macro_f1,
             per-class accuracy (`class_accuracy:<label>`, Table 4) and F1 (`f1:<label>`)
  3class     the collapsed view: both refusals -> `refusal` (did the detector see a refusal at all?)
  type       hallucination type on hallucinated samples (prediction `none` = judged faithful): accuracy,
             macro_f1, per-type F1 (Tables 9, 10)
  sweep      binary f1/precision/recall/accuracy at thresholds 0.05..0.95 on the scores, per split
  threshold  the best-F1 threshold chosen on one split and applied to another (slice `valid->test`)
Slices: all; split, source, lang; hallu_type, hallu_subtype (each type's pairs, both sides);
hallu_type x injector (Table 11); turn_index (turn position).
CIs: percentile bootstrap, resampling within each true label (stratified), `bootstrap_resamples` times.
Pairwise statistics (`detector_tests`): McNemar per detector pair with Holm-Bonferroni, Cochran's Q
across detectors, helped/hurt/net for configured condition pairs (stats.py).
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator, TypedDict

import numpy as np
import polars as pl

from finhallu.taxonomy import HALLU_TYPES, LABEL_4CLASS
from finhallu import stats
from finhallu.scoring import POS, best_threshold, binary_metrics, binary_metrics_many, multiclass_from_codes, positive, sweep
from finhallu.schemas.rows import ConfusionRow, DetectorTestsRow, MetricsRow
from finhallu.stages.base import Frames, Stage, StageContext, rows_frame
from finhallu.stages.detect import dataset_of
from finhallu.fanout import Fanout, InProcess
from typing import Literal
from pydantic import Field, model_validator
from finhallu.schemas.section import Section


class MetricsConfig(Section):
    bootstrap_resamples: int = Field(10_000, ge=0)  # 0 = no confidence intervals
    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    # threshold sweep over detector scores; the best threshold (by `threshold_metric`) is chosen on the
    # first of `threshold_tune_splits` present and applied to `threshold_apply_split`
    sweep_min: float = Field(0.05, ge=0.0, le=1.0)
    sweep_max: float = Field(0.95, ge=0.0, le=1.0)
    sweep_step: float = Field(0.05, gt=0.0, le=1.0)
    threshold_metric: Literal["f1", "accuracy", "precision", "recall"] = "f1"
    threshold_tune_splits: list[str] = Field(default_factory=lambda: ["valid", "train"])
    threshold_apply_split: str = "test"
    # [baseline, condition] detector pairs scored as helped/hurt/net (e.g. without vs with extra evidence)
    condition_pairs: list[tuple[str, str]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _sweep_range(self) -> "MetricsConfig":
        if self.sweep_min > self.sweep_max:
            raise ValueError(f"metrics.sweep_min ({self.sweep_min}) exceeds sweep_max ({self.sweep_max})")
        return self


LABEL_3CLASS = ("faithful_answer", "hallucination", "refusal")
TYPE_LABELS = HALLU_TYPES + ("none",)


class _EvalKey(TypedDict):
    """The columns a `detector_tests` row starts with: which evaluation of which dataset version."""

    eval_id: str
    dataset: str
    dataset_version: str


class _DetectorKey(_EvalKey):
    """The columns a `metrics` row starts with: the evaluation and the detector scored."""

    detector: str


# Resamples x samples scored at once: the metric functions' float64 work arrays stay near 16 MB each
# (all resamples of 25,000 samples at once held over 3 GB). Each resample is scored on its own row,
# so the values do not depend on the cut.
BOOTSTRAP_CELLS = 1 << 21


def _weight_chunks(counts: np.ndarray) -> Iterator[np.ndarray]:
    """The (resamples, n) counts as float weights, a block of resamples at a time."""
    step = max(1, BOOTSTRAP_CELLS // max(1, counts.shape[-1]))
    for i in range(0, len(counts), step):
        yield counts[i : i + step].astype(float)


def _bootstrap(y, p, fn, counts: np.ndarray, confidence: float, s=None) -> dict[str, tuple[float, float]]:
    """Percentile intervals over bootstrap resamples given as (resamples, n) occurrence counts."""
    return _intervals([fn(y, p, w=w) if s is None else fn(y, p, s, w=w) for w in _weight_chunks(counts)], confidence)


def _intervals(parts: list[dict[str, np.ndarray]], confidence: float) -> dict[str, tuple[float, float]]:
    """Percentile intervals of each metric over its values in every block of resamples."""
    return _intervals_many([parts], confidence)[0]


class Resampler:
    """Stratified bootstrap counts, drawn once per sample set and strata and shared by every detector
    and setting over it (a paired bootstrap), seeded by the sample ids so results never depend on
    the order detectors or slices are visited. Held until `clear()`: the caller scores one slice
    of every detector, then clears (all slices' counts at once were 2.6 GB at 23,500 samples)."""

    def __init__(self, seed: int, resamples: int):
        self.seed, self.resamples = seed, resamples
        self._cache: dict[tuple, np.ndarray] = {}

    def counts(self, sample_ids, strata) -> np.ndarray:
        key = (tuple(sample_ids), tuple(np.asarray(strata).tolist()))
        if key not in self._cache:
            digest = hashlib.sha256(repr(key).encode()).digest()
            rng = np.random.default_rng([self.seed, int.from_bytes(digest[:8], "big")])
            self._cache[key] = stats.bootstrap_counts(np.asarray(strata), self.resamples, rng)
        return self._cache[key]

    def clear(self) -> None:
        self._cache.clear()


# ---- slices -------------------------------------------------------------------------------------


class _Rows:
    """A detector's joined rows as the settings read them: numpy columns, converted once per
    detector. A slice is a gather of row positions: a polars filter per detector and slice (the
    lazy engine's fixed cost, ~60 slices x the detectors) was over half of the stage at demo scale."""

    __slots__ = ("cols", "height")

    def __init__(self, cols: dict[str, np.ndarray]):
        self.cols = cols
        self.height = len(cols["sample_id"])

    @classmethod
    def of(cls, df: pl.DataFrame) -> "_Rows":
        hallu = df["hallu_type"].is_not_null().to_numpy()
        return cls(
            {
                "sample_id": df["sample_id"].to_numpy(),
                "label_4class": df["label_4class"].to_numpy().astype(str),
                "label_binary": df["label_binary"].to_numpy().astype(str),
                "pred_binary": df["pred_binary"].to_numpy().astype(str),
                "pred_4class": df["pred_4class"].to_numpy().astype(str),
                "score": df["score"].to_numpy().astype(float),
                "hallucinated": hallu,
                # read on hallucinated rows only (where the type is set)
                "hallu_type": df["hallu_type"].fill_null("").to_numpy().astype(str),
                "pred_type": df["pred_type"].fill_null("none").to_numpy().astype(str),
            }
        )

    def take(self, positions: np.ndarray) -> "_Rows":
        return _Rows({name: col[positions] for name, col in self.cols.items()})

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]


def _matching(cols: dict[str, np.ndarray], **match) -> np.ndarray:
    """Whether each row has every `column=value` of `match` (a null never matches)."""
    cond = None
    for col, val in match.items():
        hit = cols[col] == val  # elementwise, None (or NaN) equal to nothing
        cond = hit if cond is None else cond & hit
    assert cond is not None, "a slice matches at least one column"
    return cond


def _pairs_of(cols: dict[str, np.ndarray], **match) -> np.ndarray:
    """Both sides of the pairs whose hallucinated sample matches (the faithful side has no type):
    their row positions."""
    pair = cols["pair_id"]
    ids = {p for p in pair[_matching(cols, **match)].tolist() if p is not None}
    return np.flatnonzero(np.fromiter((p in ids for p in pair.tolist()), bool, len(pair)))


def _where(cols: dict[str, np.ndarray], col: str, key) -> np.ndarray:
    return np.flatnonzero(_matching(cols, **{col: key}))


SliceRows = Callable[[], _Rows]


def _slices(df: pl.DataFrame) -> dict[str, tuple[SliceRows, bool]]:
    """name -> (its rows, taken when asked for, full): full slices get every setting, the
    fine-grained ones binary only. Taken on demand, so only the slice being scored is held."""
    rows = _Rows.of(df)
    whole: SliceRows = lambda: rows  # noqa: E731
    cols: dict[str, np.ndarray] = {
        c: df[c].to_numpy()
        for c in ("split", "source", "lang", "hallu_type", "hallu_subtype", "injector", "turn_index", "pair_id")
        if c in df.columns
    }

    def part(positions: np.ndarray) -> SliceRows:
        return partial(rows.take, positions)

    out: dict[str, tuple[SliceRows, bool]] = {"all": (whole, True)}
    for col in ("split", "source", "lang"):
        for key in sorted(df[col].drop_nulls().unique().to_list()):
            out[f"{col}={key}"] = (part(_where(cols, col, key)), True)
    hallu = df.filter(pl.col("hallu_type").is_not_null())
    for t in sorted(hallu["hallu_type"].unique().to_list()):
        out[f"hallu_type={t}"] = (part(_pairs_of(cols, hallu_type=t)), True)
    for sub in sorted(hallu["hallu_subtype"].drop_nulls().unique().to_list()):
        out[f"hallu_subtype={sub}"] = (part(_pairs_of(cols, hallu_subtype=sub)), False)
    if "injector" in df.columns:
        for t, inj in sorted(set(hallu.filter(pl.col("injector").is_not_null()).select("hallu_type", "injector").iter_rows())):
            out[f"hallu_type={t}&injector={inj}"] = (part(_pairs_of(cols, hallu_type=t, injector=inj)), False)
    if "turn_index" in df.columns:
        for k in sorted(df["turn_index"].drop_nulls().unique().to_list()):
            out[f"turn_index={k}"] = (part(_where(cols, "turn_index", k)), False)
    return out


def _collapse3(labels: np.ndarray) -> np.ndarray:
    return np.where(np.isin(labels, ("false_refusal", "true_refusal")), "refusal", labels)


@dataclass(frozen=True)
class Setting:
    """One setting of one slice: y and p as the metric function takes them (booleans or integer codes),
    the readable labels for the confusion table, and the bootstrap's sample ids and strata."""

    name: str
    y: np.ndarray
    p: np.ndarray
    scores: np.ndarray | None
    fn: Callable
    y_labels: np.ndarray
    p_labels: np.ndarray
    ids: tuple
    strata: np.ndarray

    def metrics(self, w=None) -> dict[str, np.ndarray]:
        return self.fn(self.y, self.p, w=w) if self.scores is None else self.fn(self.y, self.p, self.scores, w=w)


def _coded(name: str, y: np.ndarray, p: np.ndarray, labels: tuple, ids: tuple, strata: np.ndarray) -> Setting:
    names, codes = np.unique(np.concatenate([y, p]), return_inverse=True)
    fn = lambda a, b, w=None: multiclass_from_codes(a, b, names, labels, w)  # noqa: E731
    return Setting(name, codes[: len(y)], codes[len(y) :], None, fn, y, p, ids, strata)


def _settings(s: _Rows, full: bool) -> list[Setting]:
    """The settings scored on one slice. Binary, 4-class and 3-class share resamples stratified by
    the 4-class label (which fixes the binary class counts too); type resamples within each type."""
    ids, y4 = tuple(s["sample_id"].tolist()), s["label_4class"]
    ys, ps = s["label_binary"], s["pred_binary"]
    out = [Setting("binary", positive(ys), positive(ps), s["score"], binary_metrics, ys, ps, ids, y4)]
    if not full:
        return out
    p4 = s["pred_4class"]
    out.append(_coded("4class", y4, p4, LABEL_4CLASS, ids, y4))
    out.append(_coded("3class", _collapse3(y4), _collapse3(p4), LABEL_3CLASS, ids, y4))
    hallu = s["hallucinated"]
    if hallu.any():
        yt, pt = s["hallu_type"][hallu], s["pred_type"][hallu]
        out.append(_coded("type", yt, pt, TYPE_LABELS, tuple(s["sample_id"][hallu].tolist()), yt))
    return out


def _row(
    ctx: _DetectorKey,
    setting: str,
    slice_name: str,
    metric: str,
    value: float | np.ndarray,
    ci: tuple[float | None, float | None] = (None, None),
    n: int = 0,
) -> MetricsRow:
    """A `metrics` row; `value` a number or a 0-d array (an unweighted metric)."""
    return {
        **ctx,
        "setting": setting,
        "slice": slice_name,
        "metric": metric,
        "value": float(value),
        "ci_low": ci[0],
        "ci_high": ci[1],
        "n": n,
    }


# ---- threshold sweep ----------------------------------------------------------------------------


def thresholds(cfg: MetricsConfig) -> np.ndarray:
    return np.round(np.arange(cfg.sweep_min, cfg.sweep_max + 1e-9, cfg.sweep_step), 4)


def _tune_apply(splits: set[str], cfg: MetricsConfig) -> tuple[str, str] | None:
    """(split to choose the threshold on, split to apply it to), or None (one split: no honest choice)."""
    if cfg.threshold_apply_split not in splits:
        return None
    tune = next((t for t in cfg.threshold_tune_splits if t in splits and t != cfg.threshold_apply_split), None)
    return (tune, cfg.threshold_apply_split) if tune else None


def _threshold_rows(df: pl.DataFrame, cfg: MetricsConfig, base: _DetectorKey, resampler: "Resampler | None") -> list[MetricsRow]:
    rows: list[MetricsRow] = []
    grid = thresholds(cfg)
    parts = [("all", df)] + [(f"split={k}", df.filter(pl.col("split") == k)) for k in sorted(df["split"].unique().to_list())]
    for name, part in parts:
        y, s = part["label_binary"].to_numpy().astype(str), part["score"].to_numpy().astype(float)
        if not len(y):
            continue
        for metric, values in sweep(y, s, grid).items():
            rows += [_row(base, "sweep", name, f"{metric}@{t:.2f}", v, n=len(y)) for t, v in zip(grid, values)]
    plan = _tune_apply(set(df["split"].unique().to_list()), cfg)
    tune, apply = plan if plan else ("all", "all")
    tdf = df if tune == "all" else df.filter(pl.col("split") == tune)
    adf = df if apply == "all" else df.filter(pl.col("split") == apply)
    yt, st = tdf["label_binary"].to_numpy().astype(str), tdf["score"].to_numpy().astype(float)
    if len(np.unique(yt)) < 2 or not adf.height:
        return rows
    t = best_threshold(yt, st, grid, cfg.threshold_metric)
    ya, sa = adf["label_binary"].to_numpy().astype(str), adf["score"].to_numpy().astype(float)
    pa = np.where(sa >= t, POS, "faithful")
    point = binary_metrics(ya, pa)
    cis: dict[str, tuple[float, float]] = {}
    if resampler:
        counts = resampler.counts(adf["sample_id"].to_list(), adf["label_4class"].to_numpy().astype(str))
        cis = _bootstrap(ya, pa, binary_metrics, counts, cfg.confidence)
    name = f"{tune}->{apply}"
    rows.append(_row(base, "threshold", name, "threshold", t, n=len(yt)))
    for metric in ("accuracy", "precision", "recall", "f1", "mcc", "balanced_accuracy"):
        rows.append(_row(base, "threshold", name, metric, point[metric], cis.get(metric, (None, None)), len(ya)))
    return rows


# ---- pairwise statistics -----------------------------------------------------------------------


class _Correctness:
    """Which detectors were right on which samples, per setting and split: one pivot of every
    detector, from which each test takes its detectors' columns (a pivot per pair of detectors was
    a fifth of the stage at demo scale)."""

    def __init__(self, joined: pl.DataFrame):
        self.joined = joined
        self._wide: dict[tuple[str, str | None], tuple[list[str], np.ndarray]] = {}

    def _all(self, setting: str, split: str | None) -> tuple[list[str], np.ndarray]:
        key = (setting, split)
        if key not in self._wide:
            label, pred = ("label_binary", "pred_binary") if setting == "binary" else ("label_4class", "pred_4class")
            df = self.joined if split is None else self.joined.filter(pl.col("split") == split)
            wide = (
                df.with_columns(ok=(pl.col(label) == pl.col(pred)).cast(pl.Int8))
                .pivot(on="detector", index="sample_id", values="ok")
                .sort("sample_id")
            )
            names = [c for c in wide.columns if c != "sample_id"]
            self._wide[key] = (names, wide.select(names).to_numpy().astype(float))  # NaN: not scored
        return self._wide[key]

    def matrix(self, detectors: list[str], setting: str, split: str | None) -> tuple[np.ndarray, int]:
        """(n, k) correctness of `detectors` on the samples every one of them scored."""
        names, values = self._all(setting, split)
        if any(d not in names for d in detectors):
            return np.zeros((0, len(detectors))), 0
        x = values[:, [names.index(d) for d in detectors]]
        x = x[~np.isnan(x).any(axis=1)]
        if not len(x):
            return np.zeros((0, len(detectors))), 0
        return x.astype(bool), len(x)


class _BlankTest(TypedDict):
    df: None
    p_holm: None
    a_only_correct: None
    b_only_correct: None
    net: None


# The columns a test row leaves empty unless its test fills them.
_BLANK_TEST: _BlankTest = {"df": None, "p_holm": None, "a_only_correct": None, "b_only_correct": None, "net": None}


def _mcnemar_rows(
    correct: _Correctness, detectors: list[str], setting: str, slice_name: str, split: str | None, base: _EvalKey
) -> list[DetectorTestsRow]:
    """McNemar for every pair of detectors, with Holm-adjusted p-values over the pairs."""
    pair_rows: list[DetectorTestsRow] = []
    for a, b in itertools.combinations(detectors, 2):
        x, n = correct.matrix([a, b], setting, split)
        if not n:
            continue
        t = stats.mcnemar(x[:, 0], x[:, 1])
        pair_rows.append(
            {
                **base,
                **_BLANK_TEST,
                "test": "mcnemar_exact" if t.exact else "mcnemar_chi2",
                "setting": setting,
                "slice": slice_name,
                "detector_a": a,
                "detector_b": b,
                "detectors": [a, b],
                "n": n,
                "statistic": t.statistic,
                "p_value": t.p_value,
                "a_only_correct": t.a_only,
                "b_only_correct": t.b_only,
                "net": t.b_only - t.a_only,
            }
        )
    for r, p in zip(pair_rows, stats.holm([r["p_value"] for r in pair_rows])):
        r["p_holm"] = float(p)
    return pair_rows


def _cochran_rows(
    correct: _Correctness, detectors: list[str], setting: str, slice_name: str, split: str | None, base: _EvalKey
) -> list[DetectorTestsRow]:
    """Cochran's Q over all detectors (three or more, on the samples every one scored)."""
    if len(detectors) < 3:
        return []
    x, n = correct.matrix(detectors, setting, split)
    if not n:
        return []
    q = stats.cochrans_q(x)
    return [
        {
            **base,
            **_BLANK_TEST,
            "test": "cochran_q",
            "setting": setting,
            "slice": slice_name,
            "detector_a": "*",
            "detector_b": "*",
            "detectors": detectors,
            "n": n,
            "statistic": q.statistic,
            "df": q.df,
            "p_value": q.p_value,
        }
    ]


def _helped_hurt_rows(
    correct: _Correctness,
    detectors: list[str],
    setting: str,
    slice_name: str,
    split: str | None,
    cfg: MetricsConfig,
    base: _EvalKey,
) -> list[DetectorTestsRow]:
    """Per configured (baseline, condition) pair: the samples the condition helped and hurt."""
    rows: list[DetectorTestsRow] = []
    for baseline, condition in cfg.condition_pairs:
        if baseline not in detectors or condition not in detectors:
            continue
        x, n = correct.matrix([baseline, condition], setting, split)
        if not n:
            continue
        imp = stats.helped_hurt(x[:, 0], x[:, 1])
        rows.append(
            {
                **base,
                **_BLANK_TEST,
                "test": "helped_hurt",
                "setting": setting,
                "slice": slice_name,
                "detector_a": baseline,
                "detector_b": condition,
                "detectors": [baseline, condition],
                "n": n,
                "statistic": imp.test.statistic,
                "p_value": imp.test.p_value,
                "a_only_correct": imp.hurt,
                "b_only_correct": imp.helped,
                "net": imp.net,
            }
        )
    return rows


def pairwise_tests(joined: pl.DataFrame, cfg: MetricsConfig, base: _EvalKey) -> list[DetectorTestsRow]:
    detectors = sorted(joined["detector"].unique().to_list())
    splits = set(joined["split"].unique().to_list())
    scopes = [("all", None)] + (
        [(f"split={cfg.threshold_apply_split}", cfg.threshold_apply_split)]
        if cfg.threshold_apply_split in splits and len(splits) > 1
        else []
    )
    rows: list[DetectorTestsRow] = []
    correct = _Correctness(joined)
    for setting in ("binary", "4class"):
        for slice_name, split in scopes:
            rows += _mcnemar_rows(correct, detectors, setting, slice_name, split, base)
            rows += _cochran_rows(correct, detectors, setting, slice_name, split, base)
            rows += _helped_hurt_rows(correct, detectors, setting, slice_name, split, cfg, base)
    return rows


# ---- evaluate -----------------------------------------------------------------------------------


def _slice_rows(
    base: _DetectorKey,
    slice_name: str,
    settings: list[Setting],
    intervals: dict[str, dict],
    rows: list[MetricsRow],
    conf: list[ConfusionRow],
) -> None:
    """One detector's metrics rows (point values and CIs) and confusion rows on one slice."""
    for st in settings:
        point = {k: float(v) for k, v in st.metrics().items()}
        cis = intervals.get(st.name, {})
        rows += [_row(base, st.name, slice_name, m, v, cis.get(m, (None, None)), len(st.y)) for m, v in point.items()]
        if slice_name == "all" or slice_name.startswith("split="):
            pairs = Counter(zip(st.y_labels.tolist(), st.p_labels.tolist()))
            conf += [
                {
                    "eval_id": base["eval_id"],
                    "detector": base["detector"],
                    "setting": st.name,
                    "slice": slice_name,
                    "true_label": t,
                    "pred_label": pr,
                    "count": n,
                }
                for (t, pr), n in pairs.items()
            ]


def _slice_intervals(per_detector: list[list[Setting]], resampler: Resampler, confidence: float) -> list[dict[str, dict]]:
    """Each detector's settings' bootstrap intervals on one slice (`per_detector`: the detectors'
    settings on it). Settings on the same resamples are scored block by block together, each block
    of counts made float weights once for all of them (those conversions were an eighth of the
    stage); the binary settings of every detector on the same samples in one product
    (`binary_metrics_many`), and every interval of the slice in one quantile: per detector and
    setting they were most of the stage (346 detector-slices at demo scale)."""
    by_counts: dict[int, tuple[np.ndarray, list[tuple[int, Setting]]]] = {}
    for d, settings in enumerate(per_detector):
        for st in settings:
            counts = resampler.counts(st.ids, st.strata)  # the same array for the same resamples
            by_counts.setdefault(id(counts), (counts, []))[1].append((d, st))
    parts: dict[tuple[int, str], list[dict[str, np.ndarray]]] = {}
    for counts, sharing in by_counts.values():
        binary = [(d, st) for d, st in sharing if st.fn is binary_metrics]
        rest = [(d, st) for d, st in sharing if st.fn is not binary_metrics]
        for w in _weight_chunks(counts):
            if binary:  # the same samples (the counts' ids), so the same y
                scored = binary_metrics_many(binary[0][1].y, [st.p for _, st in binary], [st.scores for _, st in binary], w=w)
                for (d, st), m in zip(binary, scored):
                    parts.setdefault((d, st.name), []).append(m)
            for d, st in rest:
                parts.setdefault((d, st.name), []).append(st.metrics(w))
    found = _intervals_many(list(parts.values()), confidence)
    out: list[dict[str, dict]] = [{} for _ in per_detector]
    for (d, name), cis in zip(parts, found):
        out[d][name] = cis
    return out


def _intervals_many(parts_of: list[list[dict[str, np.ndarray]]], confidence: float) -> list[dict[str, tuple[float, float]]]:
    """The intervals of each list of metric blocks (`_intervals`), in one quantile over all their
    rows (each row's quantiles are its own)."""
    keys = [list(parts[0]) if parts else [] for parts in parts_of]
    values = [np.concatenate([part[k] for part in parts]) for parts, ks in zip(parts_of, keys) for k in ks]
    if not values:
        return [{} for _ in parts_of]
    a = (1 - confidence) / 2
    lo, hi = np.quantile(np.stack(values), [a, 1 - a], axis=1)
    out, i = [], 0
    for ks in keys:
        out.append({k: (float(lo[i + j]), float(hi[i + j])) for j, k in enumerate(ks)})
        i += len(ks)
    return out


def detector_metrics(
    jobs: list[tuple[_DetectorKey, pl.DataFrame, MetricsConfig, int]],
) -> list[tuple[list[MetricsRow], list[ConfusionRow]]]:
    """The metrics and confusion rows of each (detector key, its joined rows, config, seed) job
    (module level, so a Dask worker can run a partition of them). Slice by slice across the jobs:
    detectors scored on the same samples share a slice's bootstrap counts, drawn once and dropped
    before the next slice, so memory holds one slice's counts, not every slice's."""
    resamplers: dict[tuple[int, int], Resampler] = {}

    def resampler_of(cfg: MetricsConfig, seed: int) -> Resampler | None:
        if not cfg.bootstrap_resamples:
            return None
        return resamplers.setdefault((seed, cfg.bootstrap_resamples), Resampler(seed, cfg.bootstrap_resamples))

    out: list[tuple[list[MetricsRow], list[ConfusionRow]]] = [([], []) for _ in jobs]
    plans = [_slices(df) for _, df, _, _ in jobs]
    for slice_name in dict.fromkeys(name for plan in plans for name in plan):
        on_slice = []  # (job, its settings on the slice)
        for j, ((_, _, cfg, seed), plan) in enumerate(zip(jobs, plans)):
            if slice_name in plan:
                rows_of, full = plan[slice_name]
                s = rows_of()
                on_slice.append((j, _settings(s, full) if s.height else []))
        # Jobs on the same resampler and confidence have their intervals drawn together
        groups: dict[tuple[int, float], tuple[Resampler, float, list[int]]] = {}
        for k, (j, _) in enumerate(on_slice):
            cfg, seed = jobs[j][2], jobs[j][3]
            resampler = resampler_of(cfg, seed)
            if resampler is not None:
                groups.setdefault((id(resampler), cfg.confidence), (resampler, cfg.confidence, []))[2].append(k)
        intervals: list[dict[str, dict]] = [{} for _ in on_slice]
        for resampler, confidence, members in groups.values():
            found = _slice_intervals([on_slice[k][1] for k in members], resampler, confidence)
            for k, cis in zip(members, found):
                intervals[k] = cis
        for (j, settings), cis in zip(on_slice, intervals):
            rows, conf = out[j]
            _slice_rows(jobs[j][0], slice_name, settings, cis, rows, conf)
        for r in resamplers.values():
            r.clear()
    for (base, df, cfg, seed), (rows, _) in zip(jobs, out):
        rows += _threshold_rows(df, cfg, base, resampler_of(cfg, seed))
    return out


# What a detector reads of a sample; the metrics need its labels and slices only
SAMPLE_TEXTS = ("history", "passages", "response", "query", "standalone_query")
# Neither the metrics nor the report read a detection's rationale
UNREAD = {"samples": SAMPLE_TEXTS, "detections": ("rationale",)}


def evaluate(
    samples: pl.DataFrame,
    detections: pl.DataFrame,
    cfg: MetricsConfig,
    seed: int,
    dataset: str,
    dataset_version: str,
    fanout: Fanout = InProcess(),
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    keep = [c for c in samples.columns if c not in SAMPLE_TEXTS]
    joined = detections.join(samples.select(keep), on="sample_id", how="inner").sort("detector", "sample_id")
    rows: list[MetricsRow] = []
    conf: list[ConfusionRow] = []
    tests: list[DetectorTestsRow] = []
    jobs = [
        ({"eval_id": eval_id, "dataset": dataset, "dataset_version": dataset_version, "detector": detector}, df, cfg, seed)
        for (eval_id, detector), df in sorted(joined.group_by("eval_id", "detector"), key=lambda kv: kv[0])
    ]
    # Each detector's rows on their own (a partition per detector or few, on the cluster's workers
    # under --runner dask); the bootstrap counts are seeded by the sample ids, so every partition
    # draws the same resamples and the detectors stay paired.
    for det_rows, det_conf in fanout.map(detector_metrics, jobs, name="metrics", min_items=2):
        rows += det_rows
        conf += det_conf
    for eval_id, df in sorted(joined.group_by("eval_id"), key=lambda kv: kv[0]):
        tests += pairwise_tests(df, cfg, {"eval_id": eval_id[0], "dataset": dataset, "dataset_version": dataset_version})
    metrics = rows_frame(rows, ["eval_id", "detector", "setting", "slice", "metric"])
    confusion = rows_frame(conf, ["eval_id", "detector", "setting", "slice", "true_label", "pred_label"])
    detector_tests = rows_frame(tests, ["eval_id", "test", "setting", "slice", "detector_a", "detector_b"])
    return metrics, confusion, detector_tests


def run(inputs: Frames, ctx: StageContext[MetricsConfig]) -> Frames:
    cfg: MetricsConfig = ctx.config
    samples = inputs["samples"]
    version = ctx.input_hashes.get("samples", "unversioned")[:16]
    metrics, confusion, tests = evaluate(samples, inputs["detections"], cfg, ctx.seed, dataset_of(samples), version, ctx.fanout)
    ctx.progress(1, 1)
    return {"metrics": metrics, "confusion": confusion, "detector_tests": tests}


STAGE = Stage(
    "metrics",
    run,
    MetricsConfig,
    inputs=("samples", "detections"),
    outputs=("metrics", "confusion", "detector_tests"),
    unread=UNREAD,
    description="metrics with bootstrap CIs and paired tests",
    imports=("scipy.stats",),  # the paired tests (finhallu/stats.py)
)
