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
