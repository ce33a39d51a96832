"""Offline builds at growing corpus sizes: per-stage seconds and rows/s, peak memory, and an
incremental rebuild after adding about 1 % new documents (issue "paper scale and beyond").

Each size is the demo profile over an AI-Hub corpus of N documents (the demo's AI-Hub documents
copied until there are N, each copy with its own ids and text: `paper_scale.write_corpus`) and the
demo's two filings. Sizes are multiples of the demo's 34 AI-Hub documents: 1x, 4x, 16x, ~90x
(3,000 documents, the paper's order; slow on 2 cores, so not in the default list).

Per size it prints: cold build wall time and peak RSS of the build process (the Prefect API server,
a separate warm process, is not counted), each stage's seconds and output rows/s, the time per
document against the smallest size (a stage whose time per document grows is superlinear), then a
rebuild after ~1 % more documents (its share of the cold time, and the share of each rewritten
table's rows the cold build already had) and an unchanged rebuild.

    .venv/bin/python benchmarks/scale.py [--sizes 1,4,16] [--keep DIR]

Targets (2 cores): 3,000 documents cold <= 4 min, peak RSS <= 2 GB, time per document within 1.5x
from 544 to 3,000 documents; +1 % documents <= 15 % of cold; unchanged <= 10 s.
Local vs Dask time: `benchmarks/dask_runner.py` on a home this script kept (`--keep`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from paper_scale import write_corpus  # noqa: E402

from finhallu.stages.pipeline import STAGES  # noqa: E402

DEMO_AIHUB_DOCS = 34


def build(profile: Path, home: Path, *extra: str) -> tuple[float, int, dict]:
    """(wall seconds, peak RSS in bytes of the build process, its JSON summary); `extra`: more
    `finhallu build` arguments."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    cmd = [sys.executable, "-m", "finhallu.cli", "build", "--profile", str(profile), "--json", "--home", str(home), *extra]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)  # this process's own rusage: ru_maxrss in KiB on Linux
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"build failed ({proc.returncode}):\n{err.read()[-3000:]}")
        summary = json.loads(next(ln for ln in out.read().splitlines()[::-1] if ln.startswith("{")))
    rss = usage.ru_maxrss * 1024
    return wall, rss, summary


def stage_stats(home: Path, build_id: str) -> dict[str, tuple[float, int]]:
    """{stage: (seconds, rows written)} of one build, from the home's Prefect API and table catalog."""
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        flow_run = con.execute("SELECT flow_run_id FROM builds WHERE build_id = ?", [build_id]).fetchone()[0]
        rows = dict(
            con.execute("SELECT stage, sum(rows) FROM table_versions WHERE build_id = ? GROUP BY stage", [build_id]).fetchall()
        )
    finally:
        con.close()
    api = json.loads((home / "prefect" / "api.json").read_text())["url"]
    runs = httpx.post(f"{api}/task_runs/filter", json={"task_runs": {"flow_run_id": {"any_": [flow_run]}}}, timeout=30).json()
    return {r["name"]: (r["total_run_time"], int(rows.get(r["name"]) or 0)) for r in runs}


def rows_kept(home: Path, before: str, after: str) -> dict[str, float]:
    """Per table the build `after` wrote, the share of its rows (whole rows, every column) that the
    table already had as of build `before`: how much of the previous benchmark a rebuild kept."""
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        written = con.execute("SELECT name, version FROM table_versions WHERE build_id = ?", [after]).fetchall()
        kept = {}
        for name, version in written:
            prev = con.execute(
                "SELECT max(version) FROM table_versions WHERE name = ? AND version < ? AND created_at <= "
                "(SELECT max(created_at) FROM table_versions WHERE build_id = ?)",
                [name, version, before],
            ).fetchone()[0]
            if prev is None:
                continue
            new, old = (f"read_parquet('{home / 'tables' / name / f'version={v}'}/*.parquet')" for v in (version, prev))
            # every row carries its table version: compared without it
            cols = [c[0] for c in con.execute(f"DESCRIBE SELECT * FROM {new}").fetchall()]
            rows = "SELECT * EXCLUDE (version)" if "version" in cols else "SELECT *"
            n_new, n_same = con.execute(
                f"SELECT (SELECT count(*) FROM {new}), (SELECT count(*) FROM ({rows} FROM {new} INTERSECT ALL {rows} FROM {old}))"
            ).fetchone()
            kept[name] = n_same / n_new if n_new else 1.0
    finally:
        con.close()
    return kept


def profile_for(tmp: Path, corpus: Path) -> Path:
    demo = yaml.safe_load((ROOT / "src" / "finhallu" / "profiles" / "demo.yaml").read_text("utf-8"))
    sources = [({**s, "paths": [str(corpus)]} if s["kind"] == "aihub" else s) for s in demo["ingest"]["sources"]]
    path = tmp / f"scale-{corpus.name}.yaml"
    path.write_text(yaml.safe_dump({"extends": "demo", "ingest": {"sources": sources}}), "utf-8")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16", help="multiples of the demo's 34 AI-Hub documents (90: ~3,000)")
    ap.add_argument("--keep", type=Path, help="keep corpora and homes here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="finhallu-scale-") as tmp_name:
        tmp = args.keep or Path(tmp_name)
        tmp.mkdir(parents=True, exist_ok=True)
        base: dict[str, float] = {}
        for k in sizes:
            n = k * DEMO_AIHUB_DOCS
            corpus = tmp / f"aihub-{n}"
            write_corpus(corpus, n)
            home = tmp / f"home-{n}"
            wall, rss, summary = build(profile_for(tmp, corpus), home)
            stats = stage_stats(home, summary["build_id"])
            print(f"== {n} AI-Hub documents (+2 filings): cold build {wall:.0f} s, peak RSS {rss / 2**30:.2f} GB")
            print(f"   {'stage':<14} {'s':>7} {'rows':>8} {'rows/s':>9} {'s/doc vs first':>15}")
            for stage, (sec, rows) in sorted(stats.items(), key=lambda kv: [s.name for s in STAGES].index(kv[0])):
                per_doc = sec / n
                growth = f"{per_doc / base[stage]:.2f}x" if stage in base and base[stage] > 0 else "-"
                base.setdefault(stage, per_doc)
                print(f"   {stage:<14} {sec:>7.1f} {rows:>8} {rows / sec if sec else 0:>9.0f} {growth:>15}")
            # About 1 % more documents: the next copies of the demo's documents, new ids and text.
            extra = max(1, round(n * 0.01))
            write_corpus(corpus, n + extra)
            inc_wall, _, inc = build(profile_for(tmp, corpus), home)
            print(f"   +{extra} documents ({extra / n:.1%}): {inc_wall:.0f} s = {inc_wall / wall:.0%} of cold; ran {inc['ran']}")
            inc_stats = stage_stats(home, inc["build_id"])
            print(
                "   its stages, s (cold): "
                + ", ".join(
                    f"{st} {sec:.1f} ({stats[st][0]:.1f})"
                    for st, (sec, _) in sorted(inc_stats.items(), key=lambda kv: -kv[1][0])
                    if st in stats and sec >= 0.5
                )
            )
            kept = rows_kept(home, summary["build_id"], inc["build_id"])
            print("   rows kept from the cold build: " + ", ".join(f"{t} {f:.1%}" for t, f in sorted(kept.items())))
            same_wall, _, same = build(profile_for(tmp, corpus), home)
            print(f"   unchanged rebuild: {same_wall:.1f} s; ran {same['ran']}")


if __name__ == "__main__":
    main()
