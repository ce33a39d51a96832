"""Homes stored at a URL (warehouse/storage.py): tables and catalog records on an S3-compatible
server on loopback (moto's, speaking the S3 wire protocol to s3fs/botocore), the rest in a local
state folder. The build on such a home is in test_dask.py (the Dask build writes to one)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from finhallu.warehouse import Catalog, TableStore, connect_readonly
from finhallu.warehouse.storage import POINTER, StorageError, resolve_home
from conftest import run_cli


@pytest.fixture
def s3_env(s3_server, monkeypatch, tmp_path):
    for key, value in s3_server.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("FINHALLU_STATE_DIR", str(tmp_path / "state"))
    return s3_server


def _s3():
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    return fs


def _pub(store: TableStore, name: str, df: pl.DataFrame):
    return store.publish(name, df, parents=[], build_id="b1", flow_run_id=None, stage="s", gate="passed")


def test_a_url_home_keeps_tables_and_records_at_the_url(s3_env, tmp_path, monkeypatch):
    home = resolve_home("s3://unit-bucket/homes/h1", check="create")  # creates the bucket
    assert home.is_relative_to(tmp_path / "state")
    assert json.loads((home / POINTER).read_text())["url"] == "s3://unit-bucket/homes/h1"

    store = TableStore(home)
    r1 = _pub(store, "t", pl.DataFrame({"k": [1, 2]}))
    assert r1.path == "s3://unit-bucket/homes/h1/tables/t/version=1"
    assert _pub(store, "t", pl.DataFrame({"k": [1, 2]})) == r1, "identical content re-uses its version"
    r2 = _pub(store, "t", pl.DataFrame({"k": [3]}))
    assert r2.version == 2 and store.read(r2)["k"].to_list() == [3]
    wide = _pub(store, "w", pl.DataFrame({"k": [1], "text": ["긴 본문"], "n": [2]}))
    assert store.read(wide, without=("text",)).columns == ["k", "n"], "a column left unread at a URL too"
    store.set_current([r2])
    catalog = Catalog(home)
    catalog.record_build({"build_id": "b1", "status": "succeeded", "started_at": "2026-01-01T00:00:00"})

    fs = _s3()
    keys = set(fs.find("unit-bucket/homes/h1"))
    assert {
        "unit-bucket/homes/h1/tables/t/version=1/part-0.parquet",
        "unit-bucket/homes/h1/tables/t/version=2/part-0.parquet",
        "unit-bucket/homes/h1/catalog/table_versions/t@2.json",
        "unit-bucket/homes/h1/catalog/current.json",
        "unit-bucket/homes/h1/catalog/builds/b1.jsonl",
    } <= keys
    assert not (home / "tables").exists() and not (home / "catalog").exists(), "nothing of the tables on the local disk"

    # A killed publish on an object store leaves a version's file without its record: the views never
    # show it and the next sweep removes it.
    fs.pipe_file("unit-bucket/homes/h1/tables/t/version=3/part-0.parquet", b"not parquet at all")
    catalog.refresh_views()
    con = connect_readonly(home)
    assert con.execute("SELECT list(k) FROM t").fetchone()[0] == [3]
    assert con.execute("SELECT list(DISTINCT version ORDER BY version) FROM t_all").fetchone()[0] == [1, 2]
    assert con.execute("SELECT count(*) FROM builds").fetchone()[0] == 1
    con.close()
    assert store.sweep() == ["s3://unit-bucket/homes/h1/tables/t/version=3"]
    assert not _s3().exists("unit-bucket/homes/h1/tables/t/version=3/part-0.parquet")

    # Another machine (a new state folder) reads the same home: its catalog is written from the records.
    monkeypatch.setenv("FINHALLU_STATE_DIR", str(tmp_path / "elsewhere"))
    other = resolve_home("s3://unit-bucket/homes/h1/")
    assert other != home and not (other / "warehouse.duckdb").exists()
    con = connect_readonly(other)
    assert con.execute("SELECT list(k) FROM t").fetchone()[0] == [3]
    assert con.execute("SELECT list(build_id) FROM builds").fetchone()[0] == ["b1"]
    con.close()
    assert TableStore(other).current_ref("t") == r2


def test_a_state_folder_serves_one_url(s3_env):
    resolve_home("s3://unit-bucket/a b")
    with pytest.raises(StorageError, match="belongs to s3://unit-bucket/a b, not s3://unit-bucket/a_b"):
        resolve_home("s3://unit-bucket/a_b")


def test_a_stage_is_given_its_inputs_without_the_columns_it_declares_unread(tmp_path):
    from finhallu.schemas.contracts import CONTRACTS
    from finhallu.stages.pipeline import STAGES

    store = TableStore(tmp_path)
    ref = _pub(store, "t", pl.DataFrame({"k": [1, 2], "text": ["a", "b"], "n": [3, 4]}))
    assert store.read(ref, without=("text", "absent")).columns == ["k", "n"]
    assert store.read(ref).columns == ["k", "text", "n"]
    declared = [(s.name, t, c) for s in STAGES for t, cols in s.unread.items() for c in cols]
    assert ("metrics", "samples", "passages") in declared and ("report", "samples", "passages") in declared
    for stage, table, column in declared:  # a misspelt column would be read after all
        stage_inputs = next(s.inputs for s in STAGES if s.name == stage)
        assert table in stage_inputs and column in CONTRACTS[table].columns, (stage, table, column)
        keys = {*CONTRACTS[table].key, *CONTRACTS[table].parents}
        assert column not in keys, f"{stage} needs {table}.{column} to check references"


def test_an_input_a_stage_handed_back_is_read_again_for_its_gates(tmp_path):
    """detect hands back `samples` once it holds them as rows (their memory goes while it works);
    its outputs' gates still see them, read again: only the ids its outputs reference where no
    rule of the stage reads neighbours, else without the stage's unread columns."""
    from finhallu.flows.stage_task import inputs_for_gates
    from finhallu.schemas.contracts import CONTRACTS
    from finhallu.schemas.rules import Rule
    from finhallu.stages.base import OwnedFrames, Stage, hand_back

    catalog = Catalog(tmp_path)
    columns = CONTRACTS["samples"].columns
    samples = pl.DataFrame(
        [pl.Series(c, ["s1", "s2"] if c == "sample_id" else [None, None], dtype=t) for c, t in columns.items()]
    )
    ref = _pub(catalog.store, "samples", samples)
    detect_like = Stage("d", lambda f, c: {}, object, inputs=("samples",), outputs=("detections",))  # type: ignore[arg-type]
    frames = OwnedFrames(samples=catalog.store.read(ref))
    kept = frames["samples"]
    assert inputs_for_gates(catalog, detect_like, {"samples": ref}, frames)["samples"] is kept  # not read twice
    mine = {"samples": kept}  # frames a caller keeps: handing back leaves them as they are
    assert hand_back(mine, "samples") is kept and "samples" in mine
    assert hand_back(frames, "samples") is kept and "samples" not in frames
    again = inputs_for_gates(catalog, detect_like, {"samples": ref}, frames)["samples"]
    assert again.equals(samples.select("sample_id"))  # what detections reference
    rule = Rule("r", "checks a neighbour", lambda df, nb: df)  # type: ignore[call-arg]
    ruled = Stage(
        "d",
        lambda f, c: {},
        object,
        inputs=("samples",),
        outputs=("detections",),  # type: ignore[arg-type]
        unread={"samples": ("passages",)},
        rules={"detections": (rule,)},
    )
    assert inputs_for_gates(catalog, ruled, {"samples": ref}, frames)["samples"].equals(samples.drop("passages"))


def test_local_paths_and_file_urls_stay_local_homes(tmp_path):
    assert resolve_home(f"file://{tmp_path}/h") == tmp_path / "h"
    assert resolve_home(tmp_path / "h") == tmp_path / "h"
    assert TableStore(tmp_path / "h").storage.remote is False


def test_an_unusable_home_url_is_one_line_before_any_work(tmp_path):
    proc = run_cli("build", "--profile", "demo", home="nosuch://bucket/x", env={"FINHALLU_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert "cannot use nosuch://bucket/x: Protocol not known: nosuch" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_reading_a_missing_url_home_creates_nothing(s3_env):
    # A command that only reads (sql) on a mistyped bucket: one line, and no bucket appears.
    with pytest.raises(StorageError, match="cannot use s3://no-such-bucket/h: FileNotFoundError: nothing there"):
        resolve_home("s3://no-such-bucket/h", check="read")
    assert not _s3().exists("no-such-bucket")
    resolve_home("s3://made-by-a-build/h", check="create")
    assert _s3().exists("made-by-a-build")
