"""The per-stage summary (the run log's INFO line and the `stage-<name>` artifact)."""

import polars as pl

from finhallu.flows.stage_report import summary_line, summary_markdown


def test_stage_summary_names_rows_gate_failures_qc_drops_and_llm_calls():
    qc = pl.DataFrame(
        {
            "injection_id": ["a", "b", "c", "d"],
            "passed": [True, False, False, False],
            "reasons": [
                [],
                ["naturalness 1 < 2"],
                ["hallucinated: number_error: no figure replaced"],
                ["hallucinated: number_error: the new figure is stated", "naturalness 1 < 2"],
            ],
        }
    )
    gate = {
        "injection_qc": [
            {"expectation": "expect_column_values_to_not_be_null", "column_name": "passed", "outcome": "failed"},
            {"expectation": "expect_table_row_count_to_be_between", "column_name": None, "outcome": "passed"},
        ]
    }
    md = summary_markdown(
        "injection_qc",
        {"injections": 4},
        {"injection_qc": qc},
        2.0,
        gate,
        [{"calls": 8, "cache_hits": 3, "failures": 1, "cost_usd": 0.25}],
    )
    assert "4 rows in, 4 out (injection_qc 4) in 2.0 s (2 rows/s); gates FAILED: injection_qc" in md
    assert "| injection_qc | 4 | failed | expect_column_values_to_not_be_null(passed) |" in md
    assert "kept 1 of 4; dropped by hallucinated: number_error (2), naturalness (2)" in md
    assert "LLM: 8 calls, 3 cache hits, 1 failed, $0.2500" in md
    assert summary_line("chunk", {}, {"passages": 10}, 0.0, {"passages": True}).endswith("(0 rows/s); gates passed")


def test_a_stage_memory_watch_counts_what_is_held_at_its_end():
    """No timing: the watch samples on entry and exit, so memory still held at exit is in its peak."""
    import pytest

    from finhallu.flows.rss import RssWatch, resident_bytes

    if resident_bytes() is None:
        pytest.skip("no /proc on this system: the stage summaries leave memory out")
    size = 256 << 20
    with RssWatch(every_s=3600) as watch:  # the sampler thread never wakes: entry and exit samples only
        held = bytearray(size)
        held[::4096] = b"x" * len(range(0, size, 4096))  # touch every page: resident, not just reserved
        inside = watch.line()
    assert watch.start is not None and watch.end is not None and watch.peak is not None
    assert watch.end - watch.start >= size * 0.9
    assert watch.peak >= watch.end
    assert inside is not None and inside.startswith("memory: peak ")
    after = watch.line()
    assert after is not None and f"{watch.end / 2**30:.2f} at the end" in after
    del held
    md = summary_markdown("chunk", {}, {"passages": pl.DataFrame({"a": [1]})}, 1.0, {}, [], None, after)
    assert after in md
