"""tasks/metrics: binary / multiclass metrics against sklearn, row-wise (bootstrap) calls, the
stratified percentile bootstrap, and `evaluate` over small samples/detections frames."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    f1_score,
    precision_score,
    recall_score,
)

from finhallu.config import MetricsConfig
from finhallu.schemas.contracts import CONTRACTS
from finhallu.taxonomy import HALLU_TYPES, LABEL_4CLASS, LABEL_BINARY
from finhallu.tasks.metrics import _bootstrap, binary_metrics, evaluate, multiclass_metrics

POS = "hallucinated"


def _draw(rng: np.random.Generator, labels, n: int, probs=None) -> np.ndarray:
    return rng.choice(np.array(labels), size=n, p=probs)


def binary_cases():
    """(y, p) pairs: balanced, imbalanced, degenerate (one class in y and/or p), tiny."""
    for seed in range(8):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(5, 300))
        yield _draw(rng, LABEL_BINARY, n), _draw(rng, LABEL_BINARY, n)
        y = _draw(rng, LABEL_BINARY, n, [0.95, 0.05])  # rare positives
        flip = rng.random(n) < 0.2
        yield y, np.where(flip, np.where(y == POS, "faithful", POS), y)
        yield _draw(rng, LABEL_BINARY, n, [0.1, 0.9]), _draw(rng, LABEL_BINARY, n, [0.5, 0.5])
    rng = np.random.default_rng(99)
    allpos, allneg = np.array([POS] * 20), np.array(["faithful"] * 20)
    mixed = _draw(rng, LABEL_BINARY, 20)
    yield allpos, allpos  # perfect, one class
    yield allpos, allneg
    yield allneg, allneg  # no positives anywhere: precision/recall/f1 are 0 by zero_division=0
    yield allneg, mixed
    yield allpos, mixed
    yield mixed, allneg
    yield np.array([POS]), np.array(["faithful"])


def sk_binary(y, p) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "accuracy": accuracy_score(y, p),
            "precision": precision_score(y, p, pos_label=POS, zero_division=0),
            "recall": recall_score(y, p, pos_label=POS, zero_division=0),
            "f1": f1_score(y, p, pos_label=POS, zero_division=0),
            "balanced_accuracy": balanced_accuracy_score(y, p),
        }


def sk_multi(y, p) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"accuracy": accuracy_score(y, p), "macro_f1": f1_score(y, p, average="macro", zero_division=0)}


@pytest.mark.parametrize("case", range(len(list(binary_cases()))))
def test_binary_metrics_agree_with_sklearn(case):
    y, p = list(binary_cases())[case]
    got = binary_metrics(y, p)
    want = sk_binary(y, p)
    assert set(got) == set(want)
    for k in want:
        assert float(got[k]) == pytest.approx(want[k], abs=1e-12), (k, y.tolist()[:10], p.tolist()[:10])


def multiclass_cases():
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        n = int(rng.integers(4, 250))
        yield _draw(rng, LABEL_4CLASS, n), _draw(rng, LABEL_4CLASS, n)
        y = _draw(rng, LABEL_4CLASS, n, [0.7, 0.2, 0.07, 0.03])
        yield y, np.where(rng.random(n) < 0.3, _draw(rng, LABEL_4CLASS, n), y)
        # predictions use a label no true sample has (the 'type' setting's "none")
        yt = _draw(rng, HALLU_TYPES[:3], n)
        yield yt, np.where(rng.random(n) < 0.25, "none", np.where(rng.random(n) < 0.3, _draw(rng, HALLU_TYPES, n), yt))
    yield np.array(["hallucination"] * 10), np.array(["hallucination"] * 10)  # one class, perfect
    yield np.array(["contradictory"] * 6), np.array(["none"] * 6)  # nothing right
    yield np.array(["a", "b", "c"]), np.array(["a", "b", "d"])


@pytest.mark.parametrize("case", range(len(list(multiclass_cases()))))
def test_multiclass_metrics_agree_with_sklearn(case):
    y, p = list(multiclass_cases())[case]
    got, want = multiclass_metrics(y, p), sk_multi(y, p)
    assert set(got) == set(want)
    for k in want:
        assert float(got[k]) == pytest.approx(want[k], abs=1e-12), k


def test_macro_f1_counts_predicted_only_labels():
    # sklearn's macro F1 averages over labels in y_true or y_pred: a wrongly predicted class scores 0.
    y, p = np.array(["a", "a", "b", "b"]), np.array(["a", "a", "b", "c"])
    assert float(multiclass_metrics(y, p)["macro_f1"]) == pytest.approx((1 + 2 / 3 + 0) / 3)


@pytest.mark.parametrize("seed", range(5))
def test_two_dimensional_call_equals_per_row_calls(seed):
    rng = np.random.default_rng(seed)
    rows, n = 40, int(rng.integers(3, 12))  # short rows: many rows miss some class entirely
    yb, pb = _draw(rng, LABEL_BINARY, (rows, n), [0.7, 0.3]), _draw(rng, LABEL_BINARY, (rows, n))
    ym, pm = _draw(rng, LABEL_4CLASS, (rows, n)), _draw(rng, LABEL_4CLASS, (rows, n), [0.4, 0.4, 0.1, 0.1])
    for fn, y, p in ((binary_metrics, yb, pb), (multiclass_metrics, ym, pm)):
        batch = fn(y, p)
        for k, v in batch.items():
            assert np.shape(v) == (rows,), k
            per_row = np.array([float(fn(y[r], p[r])[k]) for r in range(rows)])
            np.testing.assert_allclose(v, per_row, atol=1e-12, err_msg=f"{fn.__name__}:{k}")


def _noisy(n: int, rng: np.random.Generator, pos_share=0.4, err=0.2):
    y = np.where(rng.random(n) < pos_share, POS, "faithful")
    p = np.where(rng.random(n) < err, np.where(y == POS, "faithful", POS), y)
    return y, p


def test_bootstrap_contains_point_is_reproducible_and_narrows_with_n():
    widths = {}
    for n in (60, 600, 6000):
        y, p = _noisy(n, np.random.default_rng(7))
        point = binary_metrics(y, p)
        ci = _bootstrap(y, p, binary_metrics, 400, 0.95, np.random.default_rng(11))
        assert set(ci) == set(point)
        for k, (lo, hi) in ci.items():
            assert lo <= float(point[k]) <= hi, (n, k, lo, float(point[k]), hi)
            assert 0.0 <= lo < hi <= 1.0
        widths[n] = {k: hi - lo for k, (lo, hi) in ci.items()}
        assert ci == _bootstrap(y, p, binary_metrics, 400, 0.95, np.random.default_rng(11))
        assert ci != _bootstrap(y, p, binary_metrics, 400, 0.95, np.random.default_rng(12))
    for k in widths[60]:
        assert widths[6000][k] < widths[600][k] < widths[60][k], (k, widths)
    # a higher confidence gives a wider interval
    y, p = _noisy(300, np.random.default_rng(3))
    c90 = _bootstrap(y, p, binary_metrics, 400, 0.90, np.random.default_rng(5))
    c99 = _bootstrap(y, p, binary_metrics, 400, 0.99, np.random.default_rng(5))
    assert all(c99[k][1] - c99[k][0] > c90[k][1] - c90[k][0] for k in c90)


def test_bootstrap_resamples_within_each_true_label():
    y, p = _noisy(97, np.random.default_rng(1), pos_share=0.1)
    k = int(np.sum(y == POS))

    def count(yy, pp):
        return {"n_pos": np.sum(yy == POS, axis=-1).astype(float), "n": np.full(yy.shape[:-1], yy.shape[-1], float)}

    ci = _bootstrap(y, p, count, 200, 0.95, np.random.default_rng(0))
    assert ci == {"n_pos": (k, k), "n": (97.0, 97.0)}
    ci = _bootstrap(y, p, multiclass_metrics, 300, 0.95, np.random.default_rng(0))
    point = multiclass_metrics(y, p)
    assert all(lo <= float(point[m]) <= hi for m, (lo, hi) in ci.items())


# ---- evaluate ------------------------------------------------------------------------------------
# pair -> (hallu_type, split, source, lang, faithful counterpart's 4-class label, hallucinated 4-class label)
PAIRS = {
    "A": ("contradictory", "test", "aihub", "ko", "faithful_answer", "hallucination"),
    "B": ("unverifiable", "test", "dart", "ko", "faithful_answer", "hallucination"),
    "C": ("irrelevance", "valid", "aihub", "ko", "faithful_answer", "hallucination"),
    "D": ("false_acceptance", "train", "dart", "ko", "true_refusal", "hallucination"),
    "E": ("false_refusal", "train", "sec10k", "en", "faithful_answer", "false_refusal"),
    "F": ("contradictory", "test", "sec10k", "en", "faithful_answer", "hallucination"),
}


def _samples() -> pl.DataFrame:
    rows = []
    for pid, (htype, split, source, lang, flabel, hlabel) in PAIRS.items():
        for hallu in (False, True):
            rows.append({
                "sample_id": f"{pid}-{'h' if hallu else 'f'}", "pair_id": pid, "dialogue_id": f"dlg-{pid}",
                "split": split, "source": source, "institution": "inst", "lang": lang, "turn_index": 2,
                "history": [{"role": "user", "content": "q0"}, {"role": "assistant", "content": "a0"}],
                "query": "q", "standalone_query": "q",
                "passages": [{"passage_id": f"p-{pid}", "text": "t", "role": "gold"}],
                "response": "r", "answerable": flabel != "true_refusal",
                "label_binary": "hallucinated" if hallu else "faithful",
                "label_4class": hlabel if hallu else flabel,
                "hallu_type": htype if hallu else None, "hallu_subtype": None, "injector": "rules_a" if hallu else None,
            })
    return CONTRACTS["samples"].conform(pl.DataFrame(rows, infer_schema_length=None))


def _detections(samples: pl.DataFrame) -> pl.DataFrame:
    rows = []
    rng = np.random.default_rng(0)
    for s in samples.iter_rows(named=True):
        b4, bb, bt = s["label_4class"], s["label_binary"], s["hallu_type"]
        rows.append(dict(detector="oracle", pred_binary=bb, pred_4class=b4, pred_type=bt))
        rows.append(dict(detector="always_faithful", pred_binary="faithful", pred_4class="faithful_answer", pred_type=None))
        rows.append(dict(detector="noisy", pred_binary=str(rng.choice(LABEL_BINARY)), pred_4class=str(rng.choice(LABEL_4CLASS)),
                         pred_type=str(rng.choice(HALLU_TYPES)) if rng.random() < 0.7 else None))
        for r in rows[-3:]:
            r.update(eval_id="finhallu@test", sample_id=s["sample_id"], score=0.5, rationale="")
    rows.append(dict(eval_id="finhallu@test", detector="oracle", sample_id="not-a-sample", score=0.5,
                     pred_binary="faithful", pred_4class="faithful_answer", pred_type=None, rationale=""))
    return CONTRACTS["detections"].conform(pl.DataFrame(rows, infer_schema_length=None))


@pytest.fixture(scope="module")
def evaluated():
    samples = _samples()
    dets = _detections(samples)
    metrics, confusion = evaluate(samples, dets, MetricsConfig(bootstrap_resamples=50), 7, "finhallu", "v1")
    return samples, dets, metrics, confusion


def test_evaluate_rows_cover_settings_and_slices(evaluated):
    samples, _, metrics, _ = evaluated
    CONTRACTS["metrics"].conform(metrics)
    assert set(metrics["setting"]) == {"binary", "4class", "type"}
    assert set(metrics["detector"]) == {"oracle", "always_faithful", "noisy"}
    slices = set(metrics["slice"])
    types = {t for t, *_ in PAIRS.values()}
    assert slices == ({"all"} | {f"hallu_type={t}" for t in types} | {f"split={s}" for s in ("test", "valid", "train")}
                      | {f"source={s}" for s in ("aihub", "dart", "sec10k")} | {"lang=ko", "lang=en"})
    keys = metrics.select("eval_id", "detector", "setting", "slice", "metric")
    assert keys.unique().height == keys.height
    m = {(r["detector"], r["setting"], r["slice"], r["metric"]): r for r in metrics.iter_rows(named=True)}
    assert m[("oracle", "binary", "all", "f1")]["n"] == samples.height  # the stray detection is not joined
    assert {r["metric"] for r in metrics.filter(pl.col("setting") == "binary").iter_rows(named=True)} == \
        {"accuracy", "precision", "recall", "f1", "balanced_accuracy"}
    assert {r["metric"] for r in metrics.filter(pl.col("setting") != "binary").iter_rows(named=True)} == {"accuracy", "macro_f1"}
    # a type slice holds its pairs (both sides); the type setting only the hallucinated side
    assert m[("oracle", "binary", "hallu_type=contradictory", "f1")]["n"] == 4
    assert m[("oracle", "binary", "hallu_type=false_refusal", "f1")]["n"] == 2
    assert m[("oracle", "type", "hallu_type=false_refusal", "macro_f1")]["n"] == 1
    assert m[("oracle", "type", "all", "macro_f1")]["n"] == len(PAIRS)
    assert m[("oracle", "4class", "split=test", "accuracy")]["n"] == 6
    assert m[("oracle", "binary", "all", "f1")]["dataset"] == "finhallu" and m[("oracle", "binary", "all", "f1")]["dataset_version"] == "v1"


def test_evaluate_values_match_sklearn_per_slice(evaluated):
    samples, dets, metrics, _ = evaluated
    joined = dets.join(samples, on="sample_id")
    for r in metrics.iter_rows(named=True):
        df = joined.filter(pl.col("detector") == r["detector"])
        key = r["slice"]
        if key != "all":
            col, val = key.split("=")
            if col == "hallu_type":
                pairs = df.filter(pl.col("hallu_type") == val)["pair_id"].to_list()
                df = df.filter(pl.col("pair_id").is_in(pairs))
            else:
                df = df.filter(pl.col(col) == val)
        if r["setting"] == "binary":
            want = sk_binary(df["label_binary"].to_numpy().astype(str), df["pred_binary"].to_numpy().astype(str))
        elif r["setting"] == "4class":
            want = sk_multi(df["label_4class"].to_numpy().astype(str), df["pred_4class"].to_numpy().astype(str))
        else:
            hs = df.filter(pl.col("hallu_type").is_not_null())
            want = sk_multi(hs["hallu_type"].to_numpy().astype(str), hs["pred_type"].fill_null("none").to_numpy().astype(str))
        assert r["value"] == pytest.approx(want[r["metric"]], abs=1e-12), r
        assert r["ci_low"] is not None and r["ci_low"] <= r["ci_high"]


def test_evaluate_oracle_and_trivial_detector(evaluated):
    _, _, metrics, confusion = evaluated
    oracle = metrics.filter(pl.col("detector") == "oracle")
    assert oracle["value"].to_list() == [1.0] * oracle.height
    assert (oracle["ci_low"] == 1.0).all() and (oracle["ci_high"] == 1.0).all()
    m = {(r["setting"], r["slice"], r["metric"]): r["value"] for r in metrics.filter(pl.col("detector") == "always_faithful").iter_rows(named=True)}
    assert m[("binary", "all", "accuracy")] == 0.5 and m[("binary", "all", "recall")] == 0.0
    assert m[("binary", "all", "f1")] == 0.0 and m[("binary", "all", "balanced_accuracy")] == 0.5
    assert m[("type", "all", "macro_f1")] == 0.0 and m[("type", "all", "accuracy")] == 0.0
    # confusion: slice 'all' only, counts add up to n per detector and setting
    assert set(confusion["slice"]) == {"all"}
    totals = confusion.group_by("detector", "setting").agg(pl.col("count").sum())
    want = {"binary": 12, "4class": 12, "type": 6}
    assert {(d, s): c for d, s, c in totals.iter_rows()} == {(d, s): want[s] for d in ("oracle", "always_faithful", "noisy") for s in want}
    af = confusion.filter((pl.col("detector") == "always_faithful") & (pl.col("setting") == "type"))
    assert set(af["pred_label"]) == {"none"}


def test_evaluate_is_reproducible_and_bootstrap_can_be_off(evaluated):
    samples, dets, metrics, confusion = evaluated
    again = evaluate(samples, dets, MetricsConfig(bootstrap_resamples=50), 7, "finhallu", "v1")
    assert again[0].equals(metrics) and again[1].equals(confusion)
    plain, _ = evaluate(samples, dets, MetricsConfig(bootstrap_resamples=0), 7, "finhallu", "v1")
    assert plain["ci_low"].is_null().all() and plain["ci_high"].is_null().all()
    assert plain.drop("ci_low", "ci_high").equals(metrics.drop("ci_low", "ci_high"))
