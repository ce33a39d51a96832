"""stages/metrics: binary / multiclass metrics against sklearn on randomized cases, weighted (bootstrap)
calls against explicit resamples, the stratified percentile bootstrap, the threshold sweep, and
`evaluate` over small samples/detections frames."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    balanced_accuracy_score,
    f1_score,
    matthews_corrcoef,
    precision_score,
    recall_score,
    roc_auc_score,
)

from finhallu.stages.metrics import MetricsConfig
from finhallu.schemas.contracts import CONTRACTS
from finhallu.taxonomy import HALLU_TYPES, LABEL_4CLASS, LABEL_BINARY
from finhallu import stats
from finhallu.scoring import best_threshold, binary_metrics, binary_metrics_many, multiclass_metrics, sweep
from finhallu.stages.metrics import _bootstrap, evaluate, thresholds

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


def sk_binary(y, p, s=None) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = {
            "accuracy": accuracy_score(y, p),
            "precision": precision_score(y, p, pos_label=POS, zero_division=0),
            "recall": recall_score(y, p, pos_label=POS, zero_division=0),
            "f1": f1_score(y, p, pos_label=POS, zero_division=0),
            "balanced_accuracy": balanced_accuracy_score(y, p),
            "mcc": matthews_corrcoef(y, p),
        }
        out["miss_rate"] = 1 - out["recall"] if np.any(y == POS) else 0.0
        if s is not None and len(set(y.tolist())) == 2:
            out["roc_auc"] = roc_auc_score(y == POS, s)
            out["pr_auc"] = average_precision_score(y == POS, s)
        return out


def sk_multi(y, p, labels=()) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = {"accuracy": accuracy_score(y, p), "macro_f1": f1_score(y, p, average="macro", zero_division=0)}
        for lab in labels:
            if np.any(y == lab):
                out[f"f1:{lab}"] = f1_score(y, p, labels=[lab], average=None, zero_division=0)[0]
                out[f"class_accuracy:{lab}"] = recall_score(y, p, labels=[lab], average=None, zero_division=0)[0]
        return out


def _scores(rng: np.random.Generator, y: np.ndarray) -> np.ndarray:
    """Scores loosely tied to the label, rounded so that many tie (as rule-based detectors' do)."""
    s = np.clip(rng.normal(0.4 + 0.25 * (y == POS), 0.25), 0, 1)
    return np.round(s, int(rng.integers(1, 3)))


@pytest.mark.parametrize("case", range(len(list(binary_cases()))))
def test_binary_metrics_agree_with_sklearn(case):
    y, p = list(binary_cases())[case]
    s = _scores(np.random.default_rng(case), y)
    got = binary_metrics(y, p, s)
    want = sk_binary(y, p, s)
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
    labels = tuple(sorted(set(LABEL_4CLASS) | set(HALLU_TYPES) | {"a", "none"}))
    got, want = multiclass_metrics(y, p, labels), sk_multi(y, p, labels)
    assert set(got) == set(want)
    for k in want:
        assert float(got[k]) == pytest.approx(want[k], abs=1e-12), k


def test_macro_f1_counts_predicted_only_labels():
    # sklearn's macro F1 averages over labels in y_true or y_pred: a wrongly predicted class scores 0.
    y, p = np.array(["a", "a", "b", "b"]), np.array(["a", "a", "b", "c"])
    assert float(multiclass_metrics(y, p)["macro_f1"]) == pytest.approx((1 + 2 / 3 + 0) / 3)


@pytest.mark.parametrize("seed", range(6))
def test_weighted_call_equals_explicit_resamples(seed):
    """The bootstrap scores resamples through occurrence counts; each row must equal the metric of
    the resample written out (ROC/PR-AUC ties and per-class metrics included)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 60))
    yb, pb = _draw(rng, LABEL_BINARY, n, [0.6, 0.4]), _draw(rng, LABEL_BINARY, n)
    yb[:2] = ["faithful", POS]
    s = _scores(rng, yb)
    y4, p4 = _draw(rng, LABEL_4CLASS, n), _draw(rng, LABEL_4CLASS, n, [0.4, 0.4, 0.1, 0.1])
    counts = stats.bootstrap_counts(yb, 25, rng)
    idx = [np.repeat(np.arange(n), c.astype(int)) for c in counts]
    batch_b, batch_m = binary_metrics(yb, pb, s, w=counts), multiclass_metrics(y4, p4, LABEL_4CLASS, w=counts)
    for r, ix in enumerate(idx):
        for k, v in binary_metrics(yb[ix], pb[ix], s[ix]).items():
            assert batch_b[k][r] == pytest.approx(float(v), abs=1e-12), k
        for k, v in multiclass_metrics(y4[ix], p4[ix], LABEL_4CLASS).items():
            if k in batch_m:
                assert batch_m[k][r] == pytest.approx(float(v), abs=1e-12), k


@pytest.mark.parametrize("seed", range(4))
def test_many_predictions_in_one_product_equal_each_scored_alone(seed):
    """The detectors of a slice scored together give exactly (not approximately) each one's metrics:
    with and without scores, with and without weights, and a slice of one class."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 60))
    y = _draw(rng, LABEL_BINARY, n, [0.6, 0.4])
    if seed == 3:
        y[:] = POS  # one class only: no ROC/PR-AUC
    ps = [_draw(rng, LABEL_BINARY, n) for _ in range(5)]
    scores = [_scores(rng, y) if i % 2 else None for i in range(5)]
    counts = stats.bootstrap_counts(y, 25, rng)
    for w in (None, counts):
        together = binary_metrics_many(y, ps, scores, w=w)
        for p, s, got in zip(ps, scores, together):
            alone = binary_metrics(y, p, s, w=w)
            assert got.keys() == alone.keys()
            for k in alone:
                assert np.array_equal(got[k], alone[k]), k


def _noisy(n: int, rng: np.random.Generator, pos_share=0.4, err=0.2):
    y = np.where(rng.random(n) < pos_share, POS, "faithful")
    p = np.where(rng.random(n) < err, np.where(y == POS, "faithful", POS), y)
    return y, p


def _ci(y, p, fn, resamples, confidence, seed, s=None):
    return _bootstrap(y, p, fn, stats.bootstrap_counts(y, resamples, np.random.default_rng(seed)), confidence, s)


def test_bootstrap_in_chunks_of_resamples_gives_the_same_intervals(monkeypatch):
    import finhallu.stages.metrics as metrics_stage

    rng = np.random.default_rng(5)
    y, p = _noisy(300, rng)
    s = _scores(rng, y)
    whole = _ci(y, p, binary_metrics, 400, 0.95, 3, s)
    calls = []
    real = binary_metrics

    def counted(*args, w):
        calls.append(len(w))
        return real(*args, w=w)

    monkeypatch.setattr(metrics_stage, "BOOTSTRAP_CELLS", 300 * 37)  # 37 resamples at a time, the last 30
    assert _ci(y, p, counted, 400, 0.95, 3, s) == whole
    assert calls == [37] * 10 + [30]
    assert "roc_auc" in whole


def test_bootstrap_contains_point_is_reproducible_and_narrows_with_n():
    widths = {}
    for n in (60, 600, 6000):
        y, p = _noisy(n, np.random.default_rng(7))
        point = binary_metrics(y, p)
        ci = _ci(y, p, binary_metrics, 400, 0.95, 11)
        assert set(ci) == set(point)
        for k, (lo, hi) in ci.items():
            assert lo <= float(point[k]) <= hi, (n, k, lo, float(point[k]), hi)
            assert 0.0 <= lo <= hi <= 1.0
        widths[n] = {k: hi - lo for k, (lo, hi) in ci.items()}
        assert ci == _ci(y, p, binary_metrics, 400, 0.95, 11)
        assert ci != _ci(y, p, binary_metrics, 400, 0.95, 12)
    for k in ("accuracy", "precision", "recall", "f1", "mcc"):
        assert widths[6000][k] < widths[600][k] < widths[60][k], (k, widths)
    # a higher confidence gives a wider interval
    y, p = _noisy(300, np.random.default_rng(3))
    c90 = _ci(y, p, binary_metrics, 400, 0.90, 5)
    c99 = _ci(y, p, binary_metrics, 400, 0.99, 5)
    assert all(c99[k][1] - c99[k][0] > c90[k][1] - c90[k][0] for k in ("accuracy", "f1", "precision"))


def test_bootstrap_resamples_within_each_true_label():
    y, p = _noisy(97, np.random.default_rng(1), pos_share=0.1)
    k = int(np.sum(y == POS))

    def count(yy, pp, w=None):
        return {"n_pos": w @ (yy == POS).astype(float), "n": w.sum(axis=-1)}

    assert _ci(y, p, count, 200, 0.95, 0) == {"n_pos": (k, k), "n": (97.0, 97.0)}
    ci = _ci(y, p, multiclass_metrics, 300, 0.95, 0)
    point = multiclass_metrics(y, p)
    assert all(lo <= float(point[m]) <= hi for m, (lo, hi) in ci.items())


def test_sweep_and_best_threshold_match_brute_force():
    rng = np.random.default_rng(5)
    y = _draw(rng, LABEL_BINARY, 150)
    s = _scores(rng, y)
    grid = thresholds(MetricsConfig())
    assert grid[0] == 0.05 and grid[-1] == 0.95 and len(grid) == 19
    sw = sweep(y, s, grid)
    for i, t in enumerate(grid):
        pred = np.where(s >= t, POS, "faithful")
        assert sw["f1"][i] == pytest.approx(f1_score(y, pred, pos_label=POS, zero_division=0))
        assert sw["recall"][i] == pytest.approx(recall_score(y, pred, pos_label=POS, zero_division=0))
    t = best_threshold(y, s, grid)
    assert sw["f1"][list(grid).index(t)] == pytest.approx(sw["f1"].max())


# ---- evaluate ------------------------------------------------------------------------------------
# pair -> (hallu_type, subtype, injector, split, source, lang, turn, faithful 4-class label, hallucinated 4-class label)
PAIRS = {
    "A": ("contradictory", "number_error", "rules_a", "test", "aihub", "ko", 1, "faithful_answer", "hallucination"),
    "B": ("unverifiable", "fabricated_detail", "rules_b", "test", "dart", "ko", 2, "faithful_answer", "hallucination"),
    "C": ("irrelevance", "off_topic_drift", "rules_a", "valid", "aihub", "ko", 3, "faithful_answer", "hallucination"),
    "D": ("false_acceptance", None, "rules_a", "train", "dart", "ko", 1, "true_refusal", "hallucination"),
    "E": ("false_refusal", None, "rules_b", "train", "sec10k", "en", 2, "faithful_answer", "false_refusal"),
    "F": ("contradictory", "modifier_change", "rules_a", "test", "sec10k", "en", 1, "faithful_answer", "hallucination"),
    "G": ("contradictory", "number_error", "rules_b", "valid", "aihub", "ko", 2, "faithful_answer", "hallucination"),
    "H": ("unverifiable", "subjective_opinion", "rules_a", "valid", "aihub", "ko", 1, "faithful_answer", "hallucination"),
}


def _samples() -> pl.DataFrame:
    rows = []
    for pid, (htype, sub, inj, split, source, lang, turn, flabel, hlabel) in PAIRS.items():
        for hallu in (False, True):
            rows.append(
                {
                    "sample_id": f"{pid}-{'h' if hallu else 'f'}",
                    "pair_id": pid,
                    "dialogue_id": f"dlg-{pid}",
                    "split": split,
                    "source": source,
                    "institution": "inst",
                    "lang": lang,
                    "turn_index": turn,
                    "history": [{"role": "user", "content": "q0"}, {"role": "assistant", "content": "a0"}],
                    "query": "q",
                    "standalone_query": "q",
                    "passages": [{"passage_id": f"p-{pid}", "text": "t", "role": "gold"}],
                    "response": "r",
                    "answerable": flabel != "true_refusal",
                    "label_binary": "hallucinated" if hallu else "faithful",
                    "label_4class": hlabel if hallu else flabel,
                    "hallu_type": htype if hallu else None,
                    "hallu_subtype": sub if hallu else None,
                    "injector": inj if hallu else None,
                }
            )
    return CONTRACTS["samples"].conform(pl.DataFrame(rows, infer_schema_length=None))


def _detections(samples: pl.DataFrame) -> pl.DataFrame:
    rows = []
    rng = np.random.default_rng(0)
    for s in samples.iter_rows(named=True):
        b4, bb, bt = s["label_4class"], s["label_binary"], s["hallu_type"]
        rows.append(dict(detector="oracle", pred_binary=bb, pred_4class=b4, pred_type=bt, score=float(bb == POS)))
        rows.append(
            dict(detector="always_faithful", pred_binary="faithful", pred_4class="faithful_answer", pred_type=None, score=0.1)
        )
        rows.append(
            dict(
                detector="noisy",
                pred_binary=str(rng.choice(LABEL_BINARY)),
                pred_4class=str(rng.choice(LABEL_4CLASS)),
                pred_type=str(rng.choice(HALLU_TYPES)) if rng.random() < 0.7 else None,
                score=float(np.round(rng.random(), 1)),
            )
        )
        for r in rows[-3:]:
            r.update(eval_id="finhallu@test", sample_id=s["sample_id"], rationale="", detector_version="v1", detector_config="{}")
    rows.append(
        dict(
            eval_id="finhallu@test",
            detector="oracle",
            sample_id="not-a-sample",
            score=0.5,
            pred_binary="faithful",
            pred_4class="faithful_answer",
            pred_type=None,
            rationale="",
            detector_version="v1",
            detector_config="{}",
        )
    )
    return CONTRACTS["detections"].conform(pl.DataFrame(rows, infer_schema_length=None))


CFG = MetricsConfig(bootstrap_resamples=50, condition_pairs=[("always_faithful", "oracle")])


@pytest.fixture(scope="module")
def evaluated():
    samples = _samples()
    dets = _detections(samples)
    metrics, confusion, tests = evaluate(samples, dets, CFG, 7, "finhallu", "v1")
    return samples, dets, metrics, confusion, tests


def _slice_rows(joined: pl.DataFrame, key: str) -> pl.DataFrame:
    if key == "all":
        return joined
    out = joined
    for part in key.split("&"):
        col, val = part.split("=")
        if col in ("hallu_type", "hallu_subtype", "injector"):
            pairs = out.filter(pl.col(col) == val)["pair_id"].to_list()
            out = out.filter(pl.col("pair_id").is_in(pairs))
        else:
            out = out.filter(pl.col(col) == (int(val) if col == "turn_index" else val))
    return out


def test_evaluate_rows_cover_settings_and_slices(evaluated):
    samples, _, metrics, _, _ = evaluated
    CONTRACTS["metrics"].conform(metrics)
    assert set(metrics["setting"]) == {"binary", "4class", "3class", "type", "sweep", "threshold"}
    assert set(metrics["detector"]) == {"oracle", "always_faithful", "noisy"}
    main = metrics.filter(pl.col("setting").is_in(["binary", "4class", "3class", "type"]))
    slices = set(main["slice"])
    types = {v[0] for v in PAIRS.values()}
    subtypes = {v[1] for v in PAIRS.values() if v[1]}
    type_injector = {f"hallu_type={v[0]}&injector={v[2]}" for v in PAIRS.values()}
    assert slices == (
        {"all"}
        | {f"hallu_type={t}" for t in types}
        | {f"split={s}" for s in ("test", "valid", "train")}
        | {f"source={s}" for s in ("aihub", "dart", "sec10k")}
        | {"lang=ko", "lang=en"}
        | {f"hallu_subtype={s}" for s in subtypes}
        | type_injector
        | {f"turn_index={k}" for k in (1, 2, 3)}
    )
    fine = main.filter(pl.col("slice").str.contains("subtype|injector|turn_index"))
    assert set(fine["setting"]) == {"binary"}  # the fine-grained slices are binary only
    keys = metrics.select("eval_id", "detector", "setting", "slice", "metric")
    assert keys.unique().height == keys.height
    m = {(r["detector"], r["setting"], r["slice"], r["metric"]): r for r in metrics.iter_rows(named=True)}
    assert m[("oracle", "binary", "all", "f1")]["n"] == samples.height  # the stray detection is not joined
    assert {r["metric"] for r in main.filter(pl.col("setting") == "binary").iter_rows(named=True)} == {
        "accuracy",
        "precision",
        "recall",
        "f1",
        "balanced_accuracy",
        "mcc",
        "miss_rate",
        "roc_auc",
        "pr_auc",
    }
    assert {"accuracy", "macro_f1", "class_accuracy:true_refusal", "f1:false_refusal"} <= {
        r["metric"] for r in main.filter(pl.col("setting") == "4class").iter_rows(named=True)
    }
    assert {
        r["metric"] for r in main.filter((pl.col("setting") == "3class") & (pl.col("slice") == "all")).iter_rows(named=True)
    } == {"accuracy", "macro_f1"} | {
        f"{k}:{c}" for k in ("f1", "class_accuracy") for c in ("faithful_answer", "hallucination", "refusal")
    }
    assert {f"f1:{t}" for t in types} <= set(main.filter(pl.col("setting") == "type")["metric"])
    # a type slice holds its pairs (both sides); the type setting only the hallucinated side
    assert m[("oracle", "binary", "hallu_type=contradictory", "f1")]["n"] == 6
    assert m[("oracle", "binary", "hallu_type=contradictory&injector=rules_a", "recall")]["n"] == 4
    assert m[("oracle", "binary", "hallu_subtype=number_error", "miss_rate")]["value"] == 0.0
    assert m[("oracle", "type", "hallu_type=false_refusal", "macro_f1")]["n"] == 1
    assert m[("oracle", "type", "all", "macro_f1")]["n"] == len(PAIRS)
    assert m[("oracle", "4class", "split=test", "accuracy")]["n"] == 6
    assert m[("oracle", "binary", "turn_index=1", "accuracy")]["n"] == 8
    assert (
        m[("oracle", "binary", "all", "f1")]["dataset"] == "finhallu"
        and m[("oracle", "binary", "all", "f1")]["dataset_version"] == "v1"
    )


def _sklearn_for(df: pl.DataFrame, setting: str) -> dict[str, float]:
    if setting == "binary":
        return sk_binary(
            df["label_binary"].to_numpy().astype(str), df["pred_binary"].to_numpy().astype(str), df["score"].to_numpy()
        )
    if setting in ("4class", "3class"):
        y, p = df["label_4class"].to_numpy().astype(str), df["pred_4class"].to_numpy().astype(str)
        if setting == "3class":
            y, p = (np.where(np.isin(a, ["false_refusal", "true_refusal"]), "refusal", a) for a in (y, p))
            return sk_multi(y, p, ("faithful_answer", "hallucination", "refusal"))
        return sk_multi(y, p, LABEL_4CLASS)
    hs = df.filter(pl.col("hallu_type").is_not_null())
    return sk_multi(
        hs["hallu_type"].to_numpy().astype(str), hs["pred_type"].fill_null("none").to_numpy().astype(str), HALLU_TYPES
    )


def test_evaluate_values_match_sklearn_per_slice(evaluated):
    samples, dets, metrics, _, _ = evaluated
    joined = dets.join(samples, on="sample_id")
    checked, cache = 0, {}
    for r in metrics.filter(pl.col("setting").is_in(["binary", "4class", "3class", "type"])).iter_rows(named=True):
        key = (r["detector"], r["setting"], r["slice"])
        if key not in cache:
            cache[key] = _sklearn_for(_slice_rows(joined.filter(pl.col("detector") == r["detector"]), r["slice"]), r["setting"])
        want = cache[key]
        assert r["value"] == pytest.approx(want[r["metric"]], abs=1e-12), r
        assert r["ci_low"] is not None and r["ci_low"] <= r["ci_high"]
        checked += 1
    assert checked > 500


def test_evaluate_oracle_and_trivial_detector(evaluated):
    _, _, metrics, confusion, _ = evaluated
    oracle = metrics.filter(
        (pl.col("detector") == "oracle")
        & pl.col("setting").is_in(["binary", "4class", "3class", "type"])
        & (pl.col("metric") != "miss_rate")
    )
    assert oracle["value"].to_list() == [1.0] * oracle.height
    assert (oracle["ci_low"] == 1.0).all() and (oracle["ci_high"] == 1.0).all()
    m = {
        (r["setting"], r["slice"], r["metric"]): r["value"]
        for r in metrics.filter(pl.col("detector") == "always_faithful").iter_rows(named=True)
    }
    assert m[("binary", "all", "accuracy")] == 0.5 and m[("binary", "all", "recall")] == 0.0
    assert m[("binary", "all", "f1")] == 0.0 and m[("binary", "all", "balanced_accuracy")] == 0.5
    assert m[("binary", "all", "mcc")] == 0.0 and m[("binary", "all", "roc_auc")] == 0.5
    assert m[("type", "all", "macro_f1")] == 0.0 and m[("type", "all", "accuracy")] == 0.0
    # confusion: slices all and split=..., counts add up to n per detector and setting
    assert set(confusion["slice"]) == {"all", "split=test", "split=valid", "split=train"}
    totals = confusion.filter(pl.col("slice") == "all").group_by("detector", "setting").agg(pl.col("count").sum())
    want = {"binary": 16, "4class": 16, "3class": 16, "type": 8}
    assert {(d, s): c for d, s, c in totals.iter_rows()} == {
        (d, s): want[s] for d in ("oracle", "always_faithful", "noisy") for s in want
    }
    af = confusion.filter((pl.col("detector") == "always_faithful") & (pl.col("setting") == "type"))
    assert set(af["pred_label"]) == {"none"}
    three = confusion.filter((pl.col("detector") == "oracle") & (pl.col("setting") == "3class") & (pl.col("slice") == "all"))
    assert set(three["true_label"]) == {"faithful_answer", "hallucination", "refusal"}


def test_threshold_is_chosen_on_valid_and_applied_to_test(evaluated):
    samples, dets, metrics, _, _ = evaluated
    thr = metrics.filter(pl.col("setting") == "threshold")
    assert set(thr["slice"]) == {"valid->test"}
    noisy = {r["metric"]: r for r in thr.filter(pl.col("detector") == "noisy").iter_rows(named=True)}
    joined = dets.join(samples, on="sample_id").filter(pl.col("detector") == "noisy")
    valid, test = joined.filter(pl.col("split") == "valid"), joined.filter(pl.col("split") == "test")
    grid = thresholds(CFG)
    t = best_threshold(valid["label_binary"].to_numpy().astype(str), valid["score"].to_numpy(), grid)
    assert noisy["threshold"]["value"] == t and noisy["threshold"]["n"] == valid.height
    pred = np.where(test["score"].to_numpy() >= t, POS, "faithful")
    assert noisy["f1"]["value"] == pytest.approx(
        f1_score(test["label_binary"].to_numpy().astype(str), pred, pos_label=POS, zero_division=0)
    )
    assert noisy["f1"]["n"] == test.height and noisy["f1"]["ci_low"] <= noisy["f1"]["ci_high"]
    sweep_rows = metrics.filter((pl.col("setting") == "sweep") & (pl.col("detector") == "oracle") & (pl.col("slice") == "all"))
    assert len(sweep_rows) == 19 * 4 and sweep_rows.filter(pl.col("metric") == "f1@0.50")["value"][0] == 1.0


def test_pairwise_tests(evaluated):
    samples, dets, _, _, tests = evaluated
    CONTRACTS["detector_tests"].conform(tests)
    joined = dets.join(samples, on="sample_id")
    correct = {
        d: (g.sort("sample_id")["label_binary"] == g.sort("sample_id")["pred_binary"]).to_numpy()
        for (d,), g in joined.group_by("detector")
    }
    mc = tests.filter(pl.col("test").str.starts_with("mcnemar") & (pl.col("setting") == "binary") & (pl.col("slice") == "all"))
    assert mc.height == 3
    for r in mc.iter_rows(named=True):
        t = stats.mcnemar(correct[r["detector_a"]], correct[r["detector_b"]])
        assert (r["statistic"], r["p_value"], r["a_only_correct"], r["b_only_correct"]) == (
            t.statistic,
            t.p_value,
            t.a_only,
            t.b_only,
        )
    np.testing.assert_allclose(mc["p_holm"].to_numpy(), stats.holm(mc["p_value"].to_numpy()))
    q = tests.filter((pl.col("test") == "cochran_q") & (pl.col("setting") == "binary") & (pl.col("slice") == "all")).row(
        0, named=True
    )
    want = stats.cochrans_q(np.stack([correct[d] for d in sorted(correct)], axis=1))
    assert (q["statistic"], q["df"], q["p_value"]) == (want.statistic, want.df, want.p_value)
    assert q["detectors"] == sorted(correct)
    hh = tests.filter((pl.col("test") == "helped_hurt") & (pl.col("setting") == "binary") & (pl.col("slice") == "all")).row(
        0, named=True
    )
    assert (hh["detector_a"], hh["detector_b"]) == ("always_faithful", "oracle")
    assert (hh["b_only_correct"], hh["a_only_correct"], hh["net"]) == (8, 0, 8)  # the oracle fixes every hallucination
    assert set(tests["slice"]) == {"all", "split=test"}


def test_evaluate_is_reproducible_and_bootstrap_can_be_off(evaluated):
    samples, dets, metrics, confusion, tests = evaluated
    again = evaluate(samples, dets, CFG, 7, "finhallu", "v1")
    assert again[0].equals(metrics) and again[1].equals(confusion) and again[2].equals(tests)
    # detectors are evaluated on shared resamples: the order they come in does not matter
    shuffled = evaluate(samples, dets.reverse(), CFG, 7, "finhallu", "v1")
    assert shuffled[0].equals(metrics)
    plain, _, _ = evaluate(samples, dets, CFG.model_copy(update={"bootstrap_resamples": 0}), 7, "finhallu", "v1")
    assert plain["ci_low"].is_null().all() and plain["ci_high"].is_null().all()
    assert plain.drop("ci_low", "ci_high").equals(metrics.drop("ci_low", "ci_high"))


# ---- report and artifacts over the evaluated fixture ------------------------------------------------


def test_report_renders_every_section_and_the_comparison(evaluated):
    from finhallu.flows.artifacts import artifact_key, headline_rows, summary_markdown
    from finhallu.stages.report import render, render_comparison

    samples, dets, metrics, confusion, tests = evaluated
    stats = pl.DataFrame(
        {
            "split": ["all", "all", "all", "all", "all", "train", "valid"],
            "metric": [
                "samples",
                "label_generated",
                "label_verified",
                "label_passed_qc",
                "label_dropped_by",
                "coverage_documents",
                "coverage_documents",
            ],
            "slice": [
                "all",
                "contradictory/number_error",
                "contradictory/number_error",
                "contradictory/number_error",
                "contradictory/number_error | hallucinated: number_error",
                "aihub",
                "dart",
            ],
            "value": [16.0, 10.0, 8.0, 8.0, 2.0, 3.0, 1.0],
        }
    )
    html = render(metrics, confusion, stats, "t", {"detector_judge": "offline:rules"}, tests, dets, samples)
    for anchor in (
        "headline",
        "threshold",
        "curves",
        "fourclass",
        "confusion",
        "types",
        "breakdowns",
        "tests",
        "compare",
        "labels",
    ):
        assert f'id="{anchor}"' in html, anchor
    assert '<td>10</td><td>8</td><td>8</td><td class="l">hallucinated: number_error (2)</td>' in html
    assert "Coverage warnings" in html and "split test has no samples (no document is assigned to it)" in html
    assert "split valid has no samples (its documents gave none)" in html
    assert html.count("<polyline") == 3 * 2  # a ROC and a PR curve per detector
    assert "valid-&gt;test" in html and "contradictory / rules_a" in html and "number_error" in html
    assert "always_faithful, noisy, oracle" in html  # the Cochran's Q row
    # comparison: a previous version whose F1 lies outside the current interval is flagged
    previous = metrics.with_columns(
        pl.lit("v0").alias("dataset_version"),
        pl.when(pl.col("detector") == "noisy").then(pl.col("value") - 0.6).otherwise(pl.col("value")).alias("value"),
    )
    cmp = render_comparison(metrics, previous, "t")
    assert "v0" in cmp and 'class="moved"' in cmp and "No earlier dataset version" not in cmp
    assert "No earlier dataset version" in render_comparison(metrics, None, "t")
    rows = headline_rows(metrics)
    assert {r["detector"] for r in rows} == {"oracle", "always_faithful", "noisy"}
    assert next(r for r in rows if r["detector"] == "oracle")["binary_f1"] == 1.0
    md = summary_markdown(metrics, tests, previous, None)
    assert "| oracle | 1.000" in md and "Change since dataset version v0" in md and "helped 8" in md
    assert artifact_key("HaluEval_QA", "detector-metrics") == "halueval-qa-detector-metrics"


@pytest.mark.parametrize("distinct", [True, False])
def test_ranking_aucs_agree_with_sklearn_on_both_product_paths_and_under_weights(distinct):
    """Many distinct scores (the sparse product: over DENSE_GROUP_COLUMNS columns) and a few (the
    dense one); weights as counts equal to the resampled arrays themselves."""
    from finhallu.scoring import DENSE_GROUP_COLUMNS, Ranking

    rng = np.random.default_rng(7)
    n = 600
    y = rng.random(n) < 0.35
    s = rng.random(n) + 0.3 * y
    s = s if distinct else np.round(s, 1)
    ranking = Ranking(s)
    assert (2 * ranking.n_groups > DENSE_GROUP_COLUMNS) is distinct
    roc, pr = ranking.roc_and_pr_auc(y, np.ones(n))
    assert float(roc) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert float(pr) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    picks = rng.integers(0, n, (3, n))
    counts = np.stack([np.bincount(p, minlength=n) for p in picks]).astype(float)
    rocs, prs = ranking.roc_and_pr_auc(y, counts)
    for i, p in enumerate(picks):
        assert rocs[i] == pytest.approx(roc_auc_score(y[p], s[p]), abs=1e-12)
        assert prs[i] == pytest.approx(average_precision_score(y[p], s[p]), abs=1e-12)


def test_pairwise_tests_pair_only_the_samples_both_detectors_scored(evaluated):
    """A detector that skipped samples is compared with each other one on the samples both scored
    (and Cochran's Q on those every detector scored)."""
    samples, dets, _, _, _ = evaluated
    skipped = sorted(samples["sample_id"].to_list())[::3]
    partial_dets = dets.filter(~((pl.col("detector") == "noisy") & pl.col("sample_id").is_in(skipped)))
    _, _, tests = evaluate(samples, partial_dets, CFG, 7, "finhallu", "v1")
    joined = partial_dets.join(samples, on="sample_id")
    ok = {
        d: dict(zip(g["sample_id"].to_list(), (g["label_binary"] == g["pred_binary"]).to_list()))
        for (d,), g in joined.group_by("detector")
    }
    mc = tests.filter(pl.col("test").str.starts_with("mcnemar") & (pl.col("setting") == "binary") & (pl.col("slice") == "all"))
    for r in mc.iter_rows(named=True):
        a, b = ok[r["detector_a"]], ok[r["detector_b"]]
        both = sorted(set(a) & set(b))
        t = stats.mcnemar(np.array([a[s] for s in both]), np.array([b[s] for s in both]))
        assert (r["n"], r["statistic"], r["a_only_correct"], r["b_only_correct"]) == (len(both), t.statistic, t.a_only, t.b_only)
    assert sorted(mc.filter(pl.col("detector_a").eq("noisy") | pl.col("detector_b").eq("noisy"))["n"].unique().to_list()) == [
        samples.height - len(skipped)
    ]
    q = tests.filter((pl.col("test") == "cochran_q") & (pl.col("setting") == "binary") & (pl.col("slice") == "all"))
    assert q["n"].to_list() == [samples.height - len(skipped)]
