"""`finhallu evaluate` adds an evaluation beside the build's results; `--make-current` replaces them."""

import json

import duckdb

from conftest import run_cli
from finhallu.detectors.baselines import BASELINES


def _detectors(home) -> set[str]:
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        return {d for (d,) in con.execute("SELECT DISTINCT detector FROM metrics").fetchall()}
    finally:
        con.close()


def test_evaluate_is_additive_unless_made_current(demo_build):
    home, _ = demo_build
    before = _detectors(home)
    assert len(before) > 2
    proc = run_cli("evaluate", "--detector", "numeric_grounding", home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["became_current"] is False and _detectors(home) == before
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        version = int(out["tables"]["metrics"].split("@")[1])  # an identical earlier evaluation's version is reused
        ev = con.execute("SELECT DISTINCT detector FROM metrics_all WHERE version = ?", [version]).fetchall()
    finally:
        con.close()
    assert {d for (d,) in ev} - set(BASELINES) == {"numeric_grounding"}
    report = run_cli("report", home=home).stdout.strip()
    assert out["build_id"] not in report  # the build's report, not the evaluation's
    assert run_cli("report", "--eval", out["build_id"], home=home).stdout.strip().endswith(f"{out['build_id']}/index.html")


def test_status_is_a_table_and_builds_record_their_prefect_run(demo_build):
    home, summary = demo_build
    # Other end-to-end tests share this home and add builds of their own: ask for all of them.
    table = run_cli("status", "--last", "1000", home=home)
    assert table.returncode == 0 and summary["build_id"] in table.stdout and "succeeded" in table.stdout
    assert not table.stdout.lstrip().startswith("{")
    records = json.loads(run_cli("status", "--json", "--last", "1000", home=home).stdout)
    build = next(b for b in records["builds"] if b["build_id"] == summary["build_id"])
    assert build["flow_run_id"] and len(build["flow_run_id"]) >= 32  # links the build to its UI page


def test_sql_reads_the_current_tables_and_refuses_writes(demo_build):
    home, _ = demo_build
    out = run_cli("sql", "SELECT split, count(*) AS n FROM samples GROUP BY 1 ORDER BY 1", "--json", home=home)
    assert out.returncode == 0, out.stderr
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        expected = [
            {"split": s, "n": n} for s, n in con.execute("SELECT split, count(*) FROM samples GROUP BY 1 ORDER BY 1").fetchall()
        ]
    finally:
        con.close()
    assert json.loads(out.stdout) == expected
    table = run_cli("sql", "SELECT count(*) AS n FROM samples", home=home).stdout.splitlines()
    assert table[0].strip() == "n" and int(table[2]) == sum(r["n"] for r in expected)
    for bad in ("SELECT nope FROM samples", "CREATE TABLE x AS SELECT 1"):
        proc = run_cli("sql", bad, home=home)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_make_current_replaces_the_plain_views_and_a_full_evaluation_restores_them(demo_build):
    home, _ = demo_build
    before = _detectors(home)
    proc = run_cli("evaluate", "--detector", "numeric_grounding", "--make-current", home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["became_current"] is True
    assert _detectors(home) - set(BASELINES) == {"numeric_grounding"}
    # Every profile detector again (other tests share this home): the build's detect stage is reused.
    proc = run_cli("evaluate", "--make-current", home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _detectors(home) == before


def test_an_unpublished_dataset_version_is_one_line(demo_build):
    home, _ = demo_build
    proc = run_cli("evaluate", "--dataset-version", "7", home=home)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1 and "samples version 7 is not published" in err, err
