"""stats: McNemar, Holm, Cochran's Q and helped/hurt against statsmodels on randomized cases,
and the stratified bootstrap counts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import cochrans_q as sm_cochrans_q
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests

from finhallu import stats


def _paired(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    a = rng.random(n) < rng.uniform(0.2, 0.9)
    flip = rng.random(n) < rng.uniform(0.0, 0.4)
    return a, np.where(flip, ~a, a)


def _table(a, b):
    # statsmodels' layout: rows = A correct/wrong, columns = B correct/wrong
    return np.array([[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]])


@pytest.mark.parametrize("seed", range(30))
def test_mcnemar_matches_statsmodels(seed):
    a, b = _paired(seed)
    table = _table(a, b)
    if table[0, 1] + table[1, 0] == 0:
        assert stats.mcnemar(a, b).p_value == 1.0
        return
    for exact in (True, False):
        for correction in (True, False):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = sm_mcnemar(table, exact=exact, correction=correction)
            got = stats.mcnemar(a, b, exact=exact, correction=correction)
            assert got.statistic == pytest.approx(float(want.statistic), rel=1e-12, abs=1e-12)
            assert got.p_value == pytest.approx(float(want.pvalue), rel=1e-9, abs=1e-12)
            assert (got.a_only, got.b_only) == (table[0, 1], table[1, 0])
    auto = stats.mcnemar(a, b)
    assert auto.exact == (table[0, 1] + table[1, 0] < 25)


def test_mcnemar_without_disagreement_and_bad_shapes():
    a = np.array([True, False, True])
    t = stats.mcnemar(a, a)
    assert (t.statistic, t.p_value, t.a_only, t.b_only) == (0.0, 1.0, 0, 0)
    with pytest.raises(ValueError):
        stats.mcnemar(a, a[:2])


@pytest.mark.parametrize("seed", range(20))
def test_holm_matches_statsmodels(seed):
    rng = np.random.default_rng(seed)
    p = rng.random(int(rng.integers(1, 30))) ** rng.uniform(0.5, 4)
    if seed % 4 == 0:
        p[: len(p) // 2] = p[0]  # ties
    np.testing.assert_allclose(stats.holm(p), multipletests(p, method="holm")[1], rtol=1e-12, atol=1e-15)
    assert stats.holm([]).size == 0


@pytest.mark.parametrize("seed", range(25))
def test_cochrans_q_matches_statsmodels(seed):
    rng = np.random.default_rng(1000 + seed)
    n, k = int(rng.integers(5, 300)), int(rng.integers(2, 8))
    base = rng.random(n) < 0.6
    x = np.stack([np.where(rng.random(n) < rng.uniform(0.05, 0.5), ~base, base) for _ in range(k)], axis=1).astype(int)
    want = sm_cochrans_q(x)
    got = stats.cochrans_q(x)
    assert got.df == want.df == k - 1
    assert got.statistic == pytest.approx(float(want.statistic), rel=1e-10)
    assert got.p_value == pytest.approx(float(want.pvalue), rel=1e-8, abs=1e-14)


def test_cochrans_q_with_two_detectors_is_mcnemar_without_correction():
    a, b = _paired(7)
    q = stats.cochrans_q(np.stack([a, b], axis=1))
    m = stats.mcnemar(a, b, exact=False, correction=False)
    assert q.statistic == pytest.approx(m.statistic) and q.p_value == pytest.approx(m.p_value)


def test_cochrans_q_constant_rows_and_shape_errors():
    assert stats.cochrans_q(np.ones((6, 3))) == stats.CochranQ(0.0, 2, 1.0)
    with pytest.raises(ValueError):
        stats.cochrans_q(np.ones((6, 1)))


def test_helped_hurt_counts_changes_from_baseline_to_condition():
    base = np.array([1, 1, 0, 0, 0, 1, 0], bool)
    cond = np.array([1, 0, 1, 1, 0, 1, 1], bool)
    imp = stats.helped_hurt(base, cond)
    assert (imp.helped, imp.hurt, imp.net) == (3, 1, 2)
    assert imp.test.p_value == stats.mcnemar(base, cond).p_value


def test_bootstrap_counts_equal_counting_the_whole_index_matrix(monkeypatch):
    """Counting block by block (bounded memory) draws what `stratified_indices` draws, whatever the cut."""
    strata = np.random.default_rng(1).choice(["a", "b", "c", "d"], size=997, p=[0.5, 0.3, 0.15, 0.05])

    def counted(resamples: int, seed: int) -> np.ndarray:
        idx = stats.stratified_indices(strata, resamples, np.random.default_rng(seed))
        flat = (np.arange(resamples)[:, None] * len(strata) + idx).ravel()
        return np.bincount(flat, minlength=resamples * len(strata)).reshape(resamples, len(strata))

    for cells in (1, 7, 1000, 1 << 21):  # a row per block, blocks of odd sizes, everything at once
        monkeypatch.setattr(stats, "COUNT_CHUNK_CELLS", cells)
        np.testing.assert_array_equal(stats.bootstrap_counts(strata, 301, np.random.default_rng(9)), counted(301, 9))


def test_bootstrap_counts_keep_each_stratum_size_and_are_seeded():
    strata = np.array(["a"] * 7 + ["b"] * 3 + ["c"] * 1)
    c = stats.bootstrap_counts(strata, 500, np.random.default_rng(3))
    assert c.shape == (500, 11)
    np.testing.assert_array_equal(c[:, :7].sum(axis=1), 7)
    np.testing.assert_array_equal(c[:, 7:10].sum(axis=1), 3)
    np.testing.assert_array_equal(c[:, 10], 1)
    assert (c[:, :7] != 1).any()  # really resampled
    np.testing.assert_array_equal(c, stats.bootstrap_counts(strata, 500, np.random.default_rng(3)))
    # Stored as small integers (the metrics stage caches one matrix per slice and strata): a sample
    # is drawn about once per resample, far below uint8's 255.
    assert c.dtype == np.uint8
    big = stats.bootstrap_counts(np.array(["a"] * 300), 2000, np.random.default_rng(0))
    assert big.dtype == np.uint8 and big.max() < 20
    assert stats.bootstrap_counts(np.zeros(1), 3, np.random.default_rng(0)).dtype == np.uint8
    lo, hi = stats.percentile_interval(np.arange(101.0), 0.9)
    assert (lo, hi) == pytest.approx((5.0, 95.0))
