import dataclasses
import json

import great_expectations.expectations as gxe
import polars as pl
import pytest

from finhallu.config import load_config
from finhallu.flows.stage_task import execute_stage
from finhallu.schemas import gate as gate_mod
from finhallu.schemas.contracts import CONTRACTS
from finhallu.schemas.gate import GateFailed, run_gate
from finhallu.stages.pipeline import table_rules
from finhallu.schemas.rules import Rule
from finhallu.stages import pipeline
from finhallu.warehouse import Catalog


def _docs(ids, splits=None, institutions=None):
    n = len(ids)
    return pl.DataFrame(
        {
            "doc_id": ids,
            "source": ["aihub"] * n,
            "institution": institutions or ["기관A"] * n,
            "lang": ["ko"] * n,
            "title": ["t"] * n,
            "doc_type": ["x"] * n,
            "published": [None] * n,
            "source_path": ["p"] * n,
            "split": splits or ["train"] * n,
            "blocks": [[{"block_id": "b", "section_path": "s", "kind": "text", "text": "본문"}]] * n,
        }
    )


def test_valid_table_passes():
    df = CONTRACTS["documents"].conform(_docs(["d1", "d2"]))
    res = run_gate("documents", df, {})
    assert res.ok, res.message()
    assert {r["outcome"] for r in res.rows} == {"passed"}


def test_duplicate_key_and_bad_label_fail_with_offending_rows():
    df = CONTRACTS["documents"].conform(_docs(["d1", "d1", "d3"], splits=["train", "train", "holdout"]))
    res = run_gate("documents", df, {})
    assert not res.ok
    failed = {r["expectation"]: r for r in res.failed}
    assert "expect_column_values_to_be_unique" in failed
    assert "d1" in failed["expect_column_values_to_be_unique"]["sample"]
    assert "holdout" in failed["expect_column_values_to_be_in_set"]["sample"]
    msg = res.message()
    assert "documents" in msg and "expect_column_values_to_be_unique" in msg and "d1" in msg


def test_types_are_judged_on_the_schema_and_a_nested_column_by_its_nulls():
    """The contract suite reads the column list and types off the dtypes (a frame of no rows) and a
    List column's values only for being null: the outcomes are those of the whole frame."""
    df = CONTRACTS["documents"].conform(_docs(["d1", "d2", "d3"]))
    gappy = df.with_columns(pl.when(pl.col("doc_id") == "d2").then(None).otherwise(pl.col("blocks")).alias("blocks"))
    res = run_gate("documents", gappy, {})
    [row] = res.failed
    assert (row["expectation"], row["column_name"], row["unexpected_count"]) == (
        "expect_column_values_to_not_be_null",
        "blocks",
        1,
    )
    assert "d2" in row["sample"]
    types = [r for r in res.rows if r["expectation"] == "expect_column_values_to_be_of_type"]
    assert {r["column_name"] for r in types} >= {"blocks", "doc_id"} and all(r["outcome"] == "passed" for r in types)
    # a frame that skipped its contract: the wrong types fail, each once, from the schema alone
    wrong = gappy.with_columns(pl.col("blocks").cast(pl.List(pl.Struct({"text": pl.String}))).list.len().alias("blocks"))
    wrong_types = {r["column_name"] for r in run_gate("documents", wrong, {}).failed if "of_type" in r["expectation"]}
    assert wrong_types == {"blocks"}


def test_stage_rule_institution_in_two_splits_fails():
    df = CONTRACTS["documents"].conform(_docs(["d1", "d2"], splits=["train", "test"]))
    res = run_gate("documents", df, {}, table_rules("documents"))
    assert any(r["expectation"].startswith("institution_in_one_split") for r in res.failed)


def test_referential_integrity_against_parent():
    passages = pl.DataFrame(
        {"passage_id": ["p1", "p3"], "model": ["m", "m"], "dim": [2, 2], "vector": [[0.1, 0.2], [0.3, 0.4]]},
        schema_overrides={"vector": pl.List(pl.Float32)},
    )
    parents = {"passages": pl.DataFrame({"passage_id": ["p2", "p3"]})}
    res = run_gate("embeddings", CONTRACTS["embeddings"].conform(passages), parents)
    (bad,) = [r for r in res.failed if "references passages.passage_id" in (r["detail"] or "")]
    # reported under the referencing column, with the offending row only
    assert bad["column_name"] == "passage_id" and bad["unexpected_count"] == 1
    assert '"p1"' in bad["sample"] and '"p3"' not in bad["sample"]
    ok = run_gate(
        "embeddings", CONTRACTS["embeddings"].conform(passages), {"passages": pl.DataFrame({"passage_id": ["p1", "p3"]})}
    )
    assert ok.ok and any("references passages.passage_id" in (r["detail"] or "") for r in ok.rows)


def test_reference_that_cannot_be_checked_is_an_error_not_a_pass():
    passages = pl.DataFrame(
        {"passage_id": ["p1"], "model": ["m"], "dim": [2], "vector": [[0.1, 0.2]]},
        schema_overrides={"vector": pl.List(pl.Float32)},
    )
    parents = {"passages": pl.DataFrame({"passage_id": [1]})}  # keys of another type than the column
    res = run_gate("embeddings", CONTRACTS["embeddings"].conform(passages), parents)
    assert res.outcome == "error" and any(r["expectation"] == "references" for r in res.errored)


def test_expectation_that_raises_is_an_error_not_bad_data():
    df = pl.DataFrame({"a": [1, 2]})
    rows = gate_mod._validate(df, [gxe.ExpectColumnValuesToBeUnique(column="no_such_column")], "t", [])
    assert rows[0]["outcome"] == "error" and rows[0]["detail"]


def test_rule_that_crashes_is_an_error(monkeypatch):
    def boom(df, nb):
        raise KeyError("neighbour table missing")

    res = run_gate("documents", CONTRACTS["documents"].conform(_docs(["d1"])), {}, (Rule("boom", "crashes", boom),))
    assert res.outcome == "error" and "neighbour table missing" in res.errored[0]["detail"]


def test_failed_gate_publishes_nothing_and_keeps_previous_version(tmp_path, monkeypatch):
    cfg = load_config("demo")
    home = str(tmp_path)
    refs = execute_stage("ingest", {}, cfg, home, "build-1")
    store = Catalog(tmp_path).store
    store.set_current(list(refs.values()))
    good = execute_stage("chunk", {"documents": refs["documents"]}, cfg, home, "build-1")
    store.set_current(list(good.values()))
    before = store.current()

    stage = pipeline.STAGES_BY_NAME["chunk"]
    real = stage.run

    def duplicated(inputs, ctx):
        out = real(inputs, ctx)["passages"]
        return {"passages": pl.concat([out, out.head(3)])}  # duplicate keys

    monkeypatch.setitem(pipeline.STAGES_BY_NAME, "chunk", dataclasses.replace(stage, run=duplicated))
    with pytest.raises(GateFailed) as err:
        execute_stage("chunk", {"documents": refs["documents"]}, cfg, home, "build-2")
    assert "passages" in str(err.value) and "expect_column_values_to_be_unique" in str(err.value)
    assert [r["version"] for r in store.records("passages")] == [good["passages"].version]
    assert store.current() == before
    dq = [
        json.loads(x) for x in (tmp_path / "catalog" / "dq_results" / "build-2__chunk__passages.jsonl").read_text().splitlines()
    ]
    assert any(r["outcome"] == "failed" and r["expectation"] == "expect_column_values_to_be_unique" for r in dq)
