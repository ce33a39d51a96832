from finhallu.coverage import coverage_warnings, warnings_from_stats


def test_empty_split_and_silent_source_are_named():
    docs = [("train", "aihub", 20), ("test", "aihub", 5), ("train", "sec10k", 4), ("valid", "dart", 1)]
    samples = [("train", "aihub", 100), ("test", "aihub", 30)]
    w = coverage_warnings(samples, docs)
    assert "split valid has no samples (its documents gave none)" in w
    assert "source sec10k has documents but no samples" in w and "source dart has documents but no samples" in w
    assert not any("train" in x or "test" in x for x in w)
    assert coverage_warnings(samples + [("valid", "sec10k", 2), ("valid", "dart", 2)], docs) == []
    assert coverage_warnings(samples, docs[:2]) == ["split valid has no samples (no document is assigned to it)"]


def test_warnings_read_from_dataset_stats_rows():
    rows = [
        {"split": s, "metric": "coverage_documents", "slice": src, "value": n}
        for s, src, n in [("train", "aihub", 20), ("test", "aihub", 5), ("valid", "dart", 1)]
    ]
    rows += [
        {"split": "train", "metric": "coverage_samples", "slice": "aihub", "value": 100.0},
        {"split": "test", "metric": "coverage_samples", "slice": "aihub", "value": 30.0},
        {"split": "all", "metric": "samples", "slice": "all", "value": 130.0},
    ]
    assert warnings_from_stats(rows) == [
        "split valid has no samples (its documents gave none)",
        "source dart has documents but no samples",
    ]
