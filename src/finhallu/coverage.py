"""What a build left empty: a split without samples, a source whose documents gave none.

An empty test split silently drops the learned detector and makes thresholds be tuned and applied
on the same data; a source with no samples means the benchmark does not cover it. assemble
records the counts in `dataset_stats` (coverage_documents / coverage_samples, slice = source);
the build's console summary, its --json summary and the report list the warnings read from them.
"""

from __future__ import annotations

SPLITS = ("train", "valid", "test")


def coverage_warnings(samples: list[tuple[str, str, int]], documents: list[tuple[str, str, int]]) -> list[str]:
    """samples: (split, source, count); documents: (split, source, count)."""
    out = []
    by_split: dict[str, int] = {}
    by_source: dict[str, int] = {}
    for split, source, n in samples:
        by_split[split] = by_split.get(split, 0) + n
        by_source[source] = by_source.get(source, 0) + n
    doc_splits = {split for split, _, n in documents if n}
    for split in SPLITS:
        if not by_split.get(split):
            had = "its documents gave none" if split in doc_splits else "no document is assigned to it"
            out.append(f"split {split} has no samples ({had})")
    for source in sorted({src for _, src, n in documents if n}):
        if not by_source.get(source):
            out.append(f"source {source} has documents but no samples")
    return out


def warnings_from_stats(stats: list[dict]) -> list[str]:
    """coverage_warnings over the coverage_* rows of `dataset_stats` (split, metric, slice, value)."""

    def counts(metric: str) -> list[tuple[str, str, int]]:
        return [(r["split"], r["slice"], int(r["value"])) for r in stats if r["metric"] == metric]

    return coverage_warnings(counts("coverage_samples"), counts("coverage_documents"))
