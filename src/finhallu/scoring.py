"""Classification scores: binary metrics (with ROC/PR-AUC from a ranking), multiclass metrics, and the
threshold sweep, each over optional per-sample weights so a bootstrap scores every resample at once.
The metrics stage reports them; detectors that fit a threshold on a split choose it with them.
"""

from __future__ import annotations

import numpy as np

POS = "hallucinated"


def _div(a, b) -> np.ndarray:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape), where=b > 0)


def positive(a) -> np.ndarray:
    a = np.asarray(a)
    return a if a.dtype == bool else a == POS


def _weights(w, n: int) -> np.ndarray:
    return np.ones(n) if w is None else np.asarray(w, dtype=float)


# Every metric takes the n labelled samples (1-D y, p, s) and optional weights w of shape (..., n):
# how often each sample occurs. w=None scores the sample itself; a (resamples, n) matrix of
# bootstrap counts scores every resample at once, without materializing the resampled arrays.
def binary_metrics(y, p, s=None, w=None) -> dict[str, np.ndarray]:
    """sklearn's definitions (zero_division=0; MCC 0 when undefined). With scores `s` (higher =
    more likely hallucinated) also ROC-AUC and PR-AUC (average precision), when y holds both classes."""
    yb, pb = positive(y), positive(p)
    w = _weights(w, len(yb))
    return _ranked(_from_counts(w @ (yb & pb), w @ (~yb & pb), w @ (yb & ~pb), w @ (~yb & ~pb)), yb, s, w)


def binary_metrics_many(y, ps: list, scores: list, w=None) -> list[dict[str, np.ndarray]]:
    """`binary_metrics(y, p, s, w)` for each (p, s) of several predictions on the same samples (the
    detectors of one slice), their confusion counts in one product with the weights: the same
    values, as the weights are counts and the products exact."""
    yb = positive(y)
    w = _weights(w, len(yb))
    pb = np.stack([positive(p) for p in ps], axis=-1)  # (n, predictions)
    yc = yb[:, None]
    both = _from_counts(w @ (yc & pb), w @ (~yc & pb), w @ (yc & ~pb), w @ (~yc & ~pb))
    return [_ranked({k: v[..., i] for k, v in both.items()}, yb, s, w) for i, s in enumerate(scores)]


def _ranked(out: dict[str, np.ndarray], yb: np.ndarray, s, w: np.ndarray) -> dict[str, np.ndarray]:
    """`out` with ROC-AUC and PR-AUC of the scores `s`, when there are scores and y holds both classes."""
    if s is not None and np.any(yb) and not np.all(yb):
        out["roc_auc"], out["pr_auc"] = Ranking(np.asarray(s, float)).roc_and_pr_auc(yb, w)
    return out


def _from_counts(tp, fp, fn, tn) -> dict[str, np.ndarray]:
    """The threshold metrics from (weighted) confusion counts, elementwise over any shape."""
    rec, spec = _div(tp, tp + fn), _div(tn, tn + fp)
    # Balanced accuracy is the mean recall over the classes present in y (sklearn's definition):
    # a slice holding one class only is scored by that class's recall, not halved by an absent one.
    has_pos, has_neg = (tp + fn > 0).astype(float), (tn + fp > 0).astype(float)
    mcc_den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return {
        "accuracy": _div(tp + tn, tp + tn + fp + fn),
        "precision": _div(tp, tp + fp),
        "recall": rec,
        "f1": _div(2 * tp, 2 * tp + fp + fn),
        "balanced_accuracy": _div(rec * has_pos + spec * has_neg, has_pos + has_neg),
        "mcc": _div(tp * tn - fp * fn, mcc_den),
        "miss_rate": (1.0 - rec) * has_pos,
    }


# Up to this many (tie group, class) columns the weights' product with the samples' indicator is a
# dense BLAS product (a rule detector's scores take a few values); beyond, a sparse one.
DENSE_GROUP_COLUMNS = 256


class Ranking:
    """Samples cut into tie groups (equal scores), groups by descending score: ROC-AUC and average
    precision for any weights without re-sorting."""

    def __init__(self, s: np.ndarray):
        order = np.argsort(-s, kind="stable")
        ss = s[order]
        starts = np.concatenate([[True], ss[1:] != ss[:-1]]) if len(ss) else np.zeros(0, bool)
        self.n_groups = int(starts.sum())
        self.group = np.empty(len(s), dtype=np.int64)  # each sample's tie group
        self.group[order] = np.cumsum(starts) - 1

    def _per_group(self, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positive weight, negative weight) of each tie group: one product of the weights with each
        sample's (group, class) indicator, exact as the weights are counts. Permuting the (resamples,
        n) bootstrap matrix and summing runs of it (np.add.reduceat) was 3-10x slower."""
        g, n = self.n_groups, len(self.group)
        column = self.group + g * y.astype(np.int64)
        if 2 * g <= DENSE_GROUP_COLUMNS:
            member = np.zeros((n, 2 * g))
            member[np.arange(n), column] = 1.0
            both = w @ member
        else:
            from scipy import sparse

            both = np.asarray(w @ sparse.csr_matrix((np.ones(n), (np.arange(n), column)), shape=(n, 2 * g)))
        return both[..., g:], both[..., :g]

    def roc_and_pr_auc(self, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """ROC-AUC: P(score of a positive > score of a negative) + half the ties (= sklearn's
        roc_auc_score). PR-AUC: sklearn's average_precision_score, each positive contributing the
        precision at the end of its tie group (everything scored at least as high is predicted
        positive there). Both from the weights summed per tie group, so after one pass over the
        (resamples, n) bootstrap matrix the work is per group (a rule detector's scores take a few
        values): the metrics stage's largest cost."""
        pos, neg = self._per_group(y, w)
        cum_neg, cum_pos = np.cumsum(neg, axis=-1), np.cumsum(pos, axis=-1)
        n_pos, n_neg = cum_pos[..., -1], cum_neg[..., -1]
        # a positive of group g beats the negatives of every later group and ties with its own
        wins = np.sum(pos * ((n_neg[..., None] - cum_neg) + 0.5 * neg), axis=-1)
        precision_at_end = _div(cum_pos, cum_pos + cum_neg)  # weights are counts: the sums are exact
        return _div(wins, n_pos * n_neg), _div(np.sum(pos * precision_at_end, axis=-1), n_pos)


def multiclass_metrics(y, p, labels: tuple = (), w=None) -> dict[str, np.ndarray]:
    """Accuracy and macro F1 over the labels present in y or p (sklearn's f1_score(average='macro'));
    per label of `labels` present in y: F1 (`f1:<label>`) and class accuracy = recall (`class_accuracy:<label>`)."""
    y, p = np.asarray(y), np.asarray(p)
    names, codes = np.unique(np.concatenate([y, p]), return_inverse=True)
    return multiclass_from_codes(codes[: len(y)], codes[len(y) :], names, labels, w)


def multiclass_from_codes(y: np.ndarray, p: np.ndarray, names, labels: tuple = (), w=None) -> dict[str, np.ndarray]:
    """multiclass_metrics on integer codes into `names`, through (weighted) confusion matrices."""
    k = len(names)
    w = _weights(w, len(y))
    cm = (w @ np.eye(k * k)[y * k + p]).reshape(w.shape[:-1] + (k, k))
    tp = np.diagonal(cm, axis1=-2, axis2=-1)
    true_n, pred_n = cm.sum(axis=-1), cm.sum(axis=-2)
    f1 = _div(2 * tp, true_n + pred_n)
    present = (true_n + pred_n) > 0
    out = {
        "accuracy": _div(tp.sum(axis=-1), true_n.sum(axis=-1)),
        "macro_f1": _div((f1 * present).sum(axis=-1), present.sum(axis=-1)),
    }
    index = {str(n): i for i, n in enumerate(names)}
    for lab in labels:
        i = index.get(lab)
        if i is not None and np.any(true_n[..., i] > 0):
            out[f"f1:{lab}"] = f1[..., i]
            out[f"class_accuracy:{lab}"] = _div(tp[..., i], true_n[..., i])
    return out


def sweep(y: np.ndarray, s: np.ndarray, grid: np.ndarray) -> dict[str, np.ndarray]:
    """Binary metrics of `score >= t` for every t of the grid: {metric: (len(grid),)}."""
    per_t = [binary_metrics(y, s >= t) for t in grid]
    return {k: np.array([float(m[k]) for m in per_t]) for k in ("f1", "precision", "recall", "accuracy")}


def best_threshold(y: np.ndarray, s: np.ndarray, grid: np.ndarray, metric: str = "f1") -> float:
    """The grid threshold maximizing `metric`; ties go to the threshold nearest 0.5 (then the lower)."""
    values = sweep(y, s, grid)[metric]
    best = np.flatnonzero(np.isclose(values, values.max()))
    return float(grid[min(best, key=lambda i: (abs(grid[i] - 0.5), grid[i]))])
