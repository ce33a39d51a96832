"""Significance tests and bootstrap helpers for detector comparisons (FinReflectKG HalluBench style).

- McNemar on paired correctness (exact binomial below `exact_below` discordant pairs, else the
  continuity-corrected chi-square), as statsmodels' `mcnemar` computes them.
- Holm-Bonferroni step-down adjustment (statsmodels `multipletests(method="holm")`).
- Cochran's Q across k detectors on the same samples (statsmodels `cochrans_q`).
- helped / hurt / net between two conditions of one detector (e.g. with vs without extra evidence).
- Stratified bootstrap indices and percentile intervals used by stages/metrics.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class McNemar:
    a_only: int  # samples only A got right
    b_only: int  # samples only B got right
    statistic: float
    p_value: float
    exact: bool


def mcnemar(a_correct, b_correct, exact: bool | None = None, correction: bool = True, exact_below: int = 25) -> McNemar:
    """McNemar's test on two paired boolean correctness vectors.

    exact=None picks the exact binomial test when fewer than `exact_below` pairs disagree.
    exact: statistic = min(b, c), p = min(1, 2 * Binom(n=b+c, 0.5).cdf(min)); chi-square:
    statistic = (|b - c| - 1)^2 / (b + c) (without the -1 when correction=False), p = chi2(1).sf.
    No discordant pair: statistic 0, p = 1 (statsmodels returns nan for the chi-square there).
    """
    a, b = np.asarray(a_correct, bool), np.asarray(b_correct, bool)
    if a.shape != b.shape:
        raise ValueError(f"paired vectors differ in shape: {a.shape} vs {b.shape}")
    a_only, b_only = int(np.sum(a & ~b)), int(np.sum(~a & b))
    n = a_only + b_only
    use_exact = (n < exact_below) if exact is None else exact
    if n == 0:
        return McNemar(a_only, b_only, 0.0, 1.0, use_exact)
    if use_exact:
        stat = float(min(a_only, b_only))
        from scipy import stats as sps  # scipy.stats takes most of a second to import: only when a test runs

        return McNemar(a_only, b_only, stat, float(min(1.0, 2 * sps.binom.cdf(stat, n, 0.5))), True)
    stat = (abs(a_only - b_only) - (1.0 if correction else 0.0)) ** 2 / n
    from scipy import stats as sps

    return McNemar(a_only, b_only, float(stat), float(sps.chi2.sf(stat, 1)), False)


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (same order as given)."""
    p = np.asarray(p_values, float)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


@dataclass(frozen=True)
class CochranQ:
    statistic: float
    df: int
    p_value: float


def cochrans_q(correct) -> CochranQ:
    """Cochran's Q for an (n_samples, k_detectors) 0/1 matrix: do the k detectors' accuracies differ?

    Q = (k-1) (k sum_j C_j^2 - N^2) / (k N - sum_i R_i^2), chi-square with k-1 df. A matrix whose
    rows are all constant (every detector agrees on every sample) carries no evidence: Q = 0, p = 1.
    """
    x = np.asarray(correct, float)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError("Cochran's Q needs an (n_samples, k>=2) matrix")
    k = x.shape[1]
    rows, cols = x.sum(axis=1), x.sum(axis=0)
    denom = k * rows.sum() - np.sum(rows**2)
    if denom == 0:
        return CochranQ(0.0, k - 1, 1.0)
    q = (k - 1) * (k * np.sum(cols**2) - cols.sum() ** 2) / denom
    from scipy import stats as sps

    return CochranQ(float(q), k - 1, float(sps.chi2.sf(q, k - 1)))


@dataclass(frozen=True)
class Impact:
    helped: int  # baseline wrong, condition right
    hurt: int  # baseline right, condition wrong
    net: int
    test: McNemar


def helped_hurt(baseline_correct, condition_correct) -> Impact:
    """What a condition (e.g. extra evidence) changes for one detector, sample by sample."""
    t = mcnemar(baseline_correct, condition_correct)
    return Impact(helped=t.b_only, hurt=t.a_only, net=t.b_only - t.a_only, test=t)


# ---- bootstrap ----------------------------------------------------------------------------------


def stratified_indices(strata: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, n) row indices; each resample draws with replacement within each stratum,
    so every resample keeps the sample's class counts (and every class stays present)."""
    strata = np.asarray(strata)
    groups = [np.flatnonzero(strata == s) for s in np.unique(strata)]
    return np.concatenate([g[rng.integers(0, len(g), size=(resamples, len(g)))] for g in groups], axis=1)


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    a = (1 - confidence) / 2
    return float(np.quantile(values, a)), float(np.quantile(values, 1 - a))


# Cells of index draws held at once while counting: the whole (resamples, n) int64 index matrix and
# its flattened copy were 1.1 GB at 23,500 samples and 2,000 resamples, each stage's peak.
COUNT_CHUNK_CELLS = 1 << 21


def bootstrap_counts(strata: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, n) counts: how often each sample occurs in each stratified resample, in the
    smallest unsigned integer type that holds them (uint8 in practice: a sample is drawn about once
    per resample), so a cache of them for every slice costs an eighth of float64; the metrics
    take them as float weights, whose values are the same.

    The draws are those of `stratified_indices` (each stratum's (resamples, size) block in turn, from
    one generator), counted a block of rows at a time: the generator's stream does not depend on how
    a block is cut, so the counts equal counting the whole index matrix, without ever holding it."""
    strata = np.asarray(strata)
    n = len(strata)
    counts = np.zeros((resamples, n), dtype=np.uint8)
    top = 0
    for s in np.unique(strata):
        members = np.flatnonzero(strata == s)
        size = len(members)
        rows = max(1, COUNT_CHUNK_CELLS // size)
        for r0 in range(0, resamples, rows):
            r1 = min(resamples, r0 + rows)
            local = rng.integers(0, size, size=(r1 - r0, size))  # positions within the stratum
            local += (np.arange(r1 - r0) * size)[:, None]
            block = np.bincount(local.ravel(), minlength=(r1 - r0) * size).reshape(r1 - r0, size)
            top = max(top, int(block.max(initial=0)))
            if top > np.iinfo(counts.dtype).max:  # never seen in practice: widen once, keep going
                counts = counts.astype(np.min_scalar_type(size))
            counts[r0:r1, members] = block
    return counts.astype(np.min_scalar_type(top), copy=False)
