import os
from pathlib import Path

import duckdb
import polars as pl
import pytest

from finhallu.warehouse import Catalog, TableStore, content_hash
from finhallu.warehouse.lock import HomeBusy, HomeLock


def _pub(store, name, df, build="b1"):
    return store.publish(name, df, parents=[], build_id=build, flow_run_id=None, stage="t", gate="passed")


def test_publish_versions_and_dedups(tmp_path):
    store = TableStore(tmp_path)
    a = pl.DataFrame({"k": [1, 2], "v": ["x", "y"]})
    b = pl.DataFrame({"k": [1, 2], "v": ["x", "z"]})
    r1 = _pub(store, "t", a)
    assert r1.version == 1 and store.is_published(r1)
    assert _pub(store, "t", a.clone()) == r1  # identical content re-uses its version
    r2 = _pub(store, "t", b)
    assert r2.version == 2 and r2.content_hash != r1.content_hash
    assert _pub(store, "t", a) == r1  # back to old content: old version, nothing new
    assert [r["version"] for r in store.records("t")] == [1, 2]
    rec = store.record("t", 2)
    assert rec["rows"] == 2 and rec["build_id"] == "b1" and rec["gate"] == "passed"


def test_content_hash_ignores_encoding_but_not_values():
    a = pl.DataFrame({"k": [1, 2]})
    assert content_hash(a) == content_hash(pl.DataFrame({"k": [1, 2]}))
    assert content_hash(a) != content_hash(pl.DataFrame({"k": [2, 1]}))
    assert content_hash(a) != content_hash(pl.DataFrame({"k": [1.0, 2.0]}))


def test_content_hash_is_the_sha256_of_the_tables_arrow_ipc_stream():
    """Hashed as it is written (never held whole), the digest is still that of the whole stream, so
    the versions already published keep matching their content (a rebuild re-uses them)."""
    import hashlib
    import io

    import pyarrow.ipc as ipc

    chunked = pl.concat(
        [pl.DataFrame({"id": [f"s{i}" for i in range(n, n + 3)], "passages": [[{"text": "예금 " * n}]] * 3}) for n in (0, 3, 6)],
        rechunk=False,
    )
    assert chunked.n_chunks() == 3
    table = chunked.to_arrow().replace_schema_metadata(None)
    whole = io.BytesIO()
    with ipc.new_stream(whole, table.schema) as writer:
        for batch in table.combine_chunks().to_batches():
            writer.write_batch(batch)
    assert content_hash(chunked) == hashlib.sha256(whole.getvalue()).hexdigest()
    assert content_hash(chunked) == content_hash(chunked.rechunk()) == content_hash(table)


def test_killed_publish_leaves_nothing_visible(tmp_path):
    store = TableStore(tmp_path)
    cat = Catalog(tmp_path)
    r1 = _pub(store, "t", pl.DataFrame({"k": [1]}))
    store.set_current([r1])
    # What a SIGKILL can leave: a half-written temp dir and a renamed version without its record.
    (tmp_path / "tables" / "t" / ".tmp-dead").mkdir()
    orphan = Path(store.version_url("t", 2))
    orphan.mkdir()
    pl.DataFrame({"k": [999]}).write_parquet(orphan / "part-0.parquet")
    cat.refresh_views()
    con = duckdb.connect(str(cat.db_path), read_only=True)
    assert con.execute("SELECT list(k) FROM t").fetchone()[0] == [1]
    assert con.execute("SELECT list(DISTINCT version) FROM t_all").fetchone()[0] == [1]
    con.close()
    removed = store.sweep()
    assert len(removed) == 2 and not orphan.exists()
    r2 = _pub(store, "t", pl.DataFrame({"k": [2]}))
    assert r2.version == 2 and store.read(r2)["k"].to_list() == [2]


def test_views_latest_and_all_versions_readonly(tmp_path):
    store = TableStore(tmp_path)
    cat = Catalog(tmp_path)
    r1 = _pub(store, "t", pl.DataFrame({"k": [1]}))
    r2 = _pub(store, "t", pl.DataFrame({"k": [2, 3]}))
    store.set_current([r2])
    cat.refresh_views()
    reader = duckdb.connect(str(cat.db_path), read_only=True)  # an analyst holding the file open
    assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    assert reader.execute("SELECT version, count(*) FROM t_all GROUP BY 1 ORDER BY 1").fetchall() == [(1, 1), (2, 2)]
    assert reader.execute("SELECT name, version FROM table_versions ORDER BY 2").fetchall() == [("t", 1), ("t", 2)]
    assert reader.execute("SELECT count(*) FROM dq_results").fetchone()[0] == 0
    # A publish while the analyst's connection is open must not block or break either side.
    store.set_current([r1])
    cat.refresh_views()
    assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 2  # old snapshot stays readable
    reader.close()
    fresh = duckdb.connect(str(cat.db_path), read_only=True)
    assert fresh.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    with pytest.raises(duckdb.Error):
        fresh.execute("CREATE TABLE x (a INT)")
    fresh.close()


def test_home_lock_refuses_second_holder(tmp_path):
    with HomeLock(tmp_path, {"build_id": "first"}):
        with pytest.raises(HomeBusy, match="another build is running.*first"):
            with HomeLock(tmp_path, {"build_id": "second"}, wait_s=0.2):
                pass
    with HomeLock(tmp_path, {"build_id": "third"}):
        assert Path(tmp_path, ".build.lock").exists() and os.getpid() > 0


def test_a_moved_home_is_repointed_on_connect(tmp_path):
    from finhallu.warehouse import connect_readonly

    home = tmp_path / "home"
    store = TableStore(home)
    cat = Catalog(home)
    store.set_current([_pub(store, "t", pl.DataFrame({"k": [1, 2]}))])
    cat.record_build({"build_id": "b1", "status": "succeeded"})
    cat.refresh_views()
    moved = tmp_path / "moved"
    home.rename(moved)
    stale = duckdb.connect(str(moved / "warehouse.duckdb"), read_only=True)
    with pytest.raises(duckdb.Error):  # the views still name the old home
        stale.execute("SELECT count(*) FROM t").fetchone()
    stale.close()
    con = connect_readonly(moved)
    try:
        assert con.execute("SELECT sum(k) FROM t").fetchone()[0] == 3
        assert con.execute("SELECT count(*) FROM t_all").fetchone()[0] == 2
        assert con.execute("SELECT status FROM builds").fetchone()[0] == "succeeded"
    finally:
        con.close()
    # and from now on plain duckdb opens it too
    plain = duckdb.connect(str(moved / "warehouse.duckdb"), read_only=True)
    assert plain.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    plain.close()


def test_recover_marks_dead_builds_and_sweeps_dead_writers_temp_files(tmp_path):
    import subprocess
    import sys

    cat = Catalog(tmp_path)
    cat.record_build({"build_id": "b-killed", "status": "running", "started_at": "2026-01-01T00:00:00Z"})
    cat.record_build({"build_id": "b-done", "status": "succeeded", "started_at": "2026-01-01T01:00:00Z"})
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)  # that process has exited
    dead = tmp_path / f".warehouse.{dead_pid}.{'a' * 32}.duckdb"
    legacy = tmp_path / f".warehouse.{'b' * 32}.duckdb"  # written before temp names carried a pid
    live = tmp_path / f".warehouse.{os.getpid()}.{'c' * 32}.duckdb"  # a refresh in flight
    for f in (dead, legacy, live):
        f.write_bytes(b"x")
    out = cat.recover()
    assert out["interrupted"] == ["b-killed"]
    status = {b["build_id"]: b["status"] for b in cat.builds()}
    assert status == {"b-killed": "interrupted", "b-done": "succeeded"}
    assert not dead.exists() and not legacy.exists() and live.exists()


def test_tables_without_a_current_version_show_their_newest(tmp_path):
    store = TableStore(tmp_path)
    cat = Catalog(tmp_path)
    _pub(store, "documents", pl.DataFrame({"k": [1]}))
    _pub(store, "documents", pl.DataFrame({"k": [2]}))  # `finhallu stage ingest` twice: no current yet
    r = _pub(store, "passages", pl.DataFrame({"p": [7]}))
    store.set_current([r])
    _pub(store, "passages", pl.DataFrame({"p": [8]}))  # newer, but a full build has not made it current
    cat.refresh_views()
    con = duckdb.connect(str(cat.db_path), read_only=True)
    assert con.execute("SELECT k FROM documents").fetchall() == [(2,)]
    assert con.execute("SELECT p FROM passages").fetchall() == [(7,)]
    con.close()
