"""Shortcut checks of a built benchmark (DESIGN "Benchmark validity"): can a label be told without
the evidence, or from a surface trick?

- response-only classifier: character 2-4-gram TF-IDF + logistic regression, cross-validated with
  folds grouped by pair, on pairs whose two responses differ; accuracy, and recall per type;
- length-only: the best length threshold (either direction) of the training folds, on held-out folds;
- verbatim copy: "hallucinated when some response sentence is not a verbatim substring of the
  context" (whitespace normalised), over every sample; accuracy, and recall per type;
- near copy: the same rule where a sentence counts as copied when one contiguous run of the context
  makes up >= 80 % of it (an opener such as "자료에 따르면" or one changed ending does not hide a copy);
- turn depth: per type, the share of hallucinated samples at turn >= 2.

Target (issue "no shortcut"): each accuracy <= 0.60 and each per-type recall <= 0.65. assemble
writes them to `dataset_stats` (metrics `fingerprint_*` and `shortcut_*`); benchmarks/validity.py
prints them for any home.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import cast

import numpy as np
import polars as pl

from finhallu.stages.base import shared_rows
from finhallu.text.sentences import split_sentences

TARGET_ACCURACY = 0.60
TARGET_TYPE_RECALL = 0.65


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


_squash_passage = lru_cache(maxsize=1 << 14)(_squash)  # a passage is in many samples' contexts


def _context(passages: list[str]) -> str:
    """The passages' text with every whitespace run one space: `_squash` of their join, each passage
    squashed once."""
    return " ".join(s for s in map(_squash_passage, passages) if s)


def not_verbatim(response: str, passages: list[str]) -> bool:
    """Some sentence of the response is not copied verbatim from the passages."""
    context = _context(passages)
    sents = [_squash(s) for s in split_sentences(response or "")]
    return any(s and s not in context for s in sents)


NEAR_COPY_SHARE = 0.8


def copied_share(sentence: str, context: str) -> float:
    """The longest run of the sentence found verbatim in the context, as a share of the sentence.

    The longest common substring (what difflib's find_longest_match gives without junk), found by
    substring search: from each start, the run is only tried one longer than the best so far, so at
    most 2 x len(sentence) searches of the context, each in C. 25x faster than difflib on the
    benchmark's sentences (~5,000-character contexts), the same values."""
    if not sentence:
        return 1.0
    best = 0
    for i in range(len(sentence)):
        if len(sentence) - i <= best:
            break
        while i + best < len(sentence) and sentence[i : i + best + 1] in context:
            best += 1
    return best / len(sentence)


def not_near_copy(response: str, passages: list[str]) -> bool:
    """Some sentence of the response is not (nearly) copied from one place of the passages."""
    context = _context(passages)
    return any(copied_share(_squash(s), context) < NEAR_COPY_SHARE for s in split_sentences(response or "") if s.strip())


def _per_type_recall(df: pl.DataFrame, pred: np.ndarray) -> dict[str, float]:
    out = {}
    types = df["hallu_type"].to_list()
    for t in sorted({t for t in types if t}):
        idx = [i for i, x in enumerate(types) if x == t]
        out[t] = float(pred[idx].mean()) if idx else 0.0
    return out


def _length_accuracy(lengths: np.ndarray, y: np.ndarray, splits) -> float:
    correct = 0
    for train, test in splits:
        best = (0.0, 0.0, 1)
        for thr in np.unique(lengths[train]):
            for sign in (1, -1):
                acc = ((sign * (lengths[train] - thr) > 0).astype(int) == y[train]).mean()
                if acc > best[0]:
                    best = (acc, thr, sign)
        _, thr, sign = best
        correct += int(((sign * (lengths[test] - thr) > 0).astype(int) == y[test]).sum())
    return correct / len(y)


def fingerprint_scores(samples: pl.DataFrame, folds: int, seed: int) -> list[tuple[str, str, float]]:
    """(metric, slice, value) of the response-only classifier and the length-only threshold."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold, cross_val_predict

    differing = samples.group_by("pair_id").agg(pl.col("response").n_unique().alias("k")).filter(pl.col("k") == 2)["pair_id"]
    df = samples.filter(pl.col("pair_id").is_in(differing.to_list())).sort("sample_id")
    n_pairs = df["pair_id"].n_unique()
    out = [("fingerprint_pairs", "all", float(n_pairs))]
    if n_pairs < max(4, folds):
        return out
    y = (df["label_binary"] == "hallucinated").to_numpy().astype(int)
    groups = df["pair_id"].to_numpy()
    texts = df["response"].to_list()
    cv = GroupKFold(n_splits=min(folds, n_pairs))
    x = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=1, sublinear_tf=True).fit_transform(texts)
    pred = cross_val_predict(LogisticRegression(max_iter=2000, C=1.0, random_state=seed), x, y, cv=cv, groups=groups)
    out.append(("fingerprint_tfidf_lr_accuracy", "all", float((pred == y).mean())))
    out += [("fingerprint_tfidf_lr_recall", t, r) for t, r in _per_type_recall(df, pred).items()]
    lengths = np.array([len(t) for t in texts], dtype=float)
    out.append(("fingerprint_length_accuracy", "all", _length_accuracy(lengths, y, list(cv.split(lengths, y, groups)))))
    return out


def _mean(col: pl.Series) -> float:
    """A numeric column's mean as a float (polars types a reduction as any Python value)."""
    return float(cast(float, col.mean()))


def shortcut_scores(samples: pl.DataFrame) -> list[tuple[str, str, float]]:
    """(metric, slice, value) of the verbatim-copy rule and the turn depth per type."""
    if samples.height == 0:
        return []
    y = (samples["label_binary"] == "hallucinated").to_numpy()
    # each passage's text one string however many samples show it (a copy per cell: 0.35 GB at 3,060 documents)
    contexts = [
        r["passages"] for r in shared_rows(samples.select(pl.col("passages").list.eval(pl.element().struct.field("text"))))
    ]
    responses = samples["response"].to_list()
    pred = np.array([not_verbatim(r, ps) for r, ps in zip(responses, contexts)])
    out = [("shortcut_verbatim_copy_accuracy", "all", float((pred == y).mean()))]
    out += [("shortcut_verbatim_copy_recall", t, r) for t, r in _per_type_recall(samples, pred.astype(int)).items()]
    near = np.array([not_near_copy(r, ps) for r, ps in zip(responses, contexts)])
    out.append(("shortcut_near_copy_accuracy", "all", float((near == y).mean())))
    hallu = samples.filter(pl.col("hallu_type").is_not_null())
    for (t,), g in sorted(hallu.group_by("hallu_type"), key=lambda kv: kv[0]):
        out.append(("shortcut_turn2plus_share", t, _mean(g["turn_index"] >= 2)))
    out.append(("shortcut_mean_turn", "all", _mean(samples["turn_index"])))
    return out


def failing(stats: list[dict]) -> list[str]:
    """The shortcut measures of `dataset_stats` rows that pass their target, said in one line each."""
    bad = []
    for r in stats:
        m, v = r["metric"], r["value"]
        if r["split"] != "all":
            continue
        if m.endswith("_accuracy") and m.startswith(("fingerprint_", "shortcut_")) and v > TARGET_ACCURACY:
            bad.append(f"{m} {v:.3f} > {TARGET_ACCURACY}")
        elif m == "fingerprint_tfidf_lr_recall" and v > TARGET_TYPE_RECALL:
            bad.append(f"{m} [{r['slice']}] {v:.3f} > {TARGET_TYPE_RECALL}")
    return bad
