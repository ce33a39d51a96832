"""Parse + chunk throughput per source (MB/s of raw input, passages/s), on the real fixtures
in ../shared/data (or $FINHALLU_FIXTURES) and on the bundled demo corpus.

    .venv/bin/python benchmarks/ingest.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path


from finhallu.stages.chunk import ChunkConfig
from finhallu.stages.ingest import IngestConfig, SourceConfig
from finhallu.stages import chunk as chunking
from finhallu.stages import ingest
from finhallu.stages.base import StageContext

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("FINHALLU_FIXTURES", ROOT.parent / "shared" / "data"))

CASES = [
    ("aihub (real sample)", "aihub", [FIXTURES / "aihub-mrc"]),
    ("sec10k html (real)", "sec10k", [FIXTURES / "sec10k" / "html"]),
    ("dart xml (real)", "dart", [FIXTURES / "dart" / "document-xml"]),
    ("aihub (demo)", "aihub", ["pkg:demo/aihub"]),
    ("sec10k (demo)", "sec10k", ["pkg:demo/sec10k"]),
    ("dart (demo)", "dart", ["pkg:demo/dart"]),
]


def run_case(kind: str, paths: list) -> tuple[float, int, float, float, int]:
    cfg = IngestConfig(sources=[SourceConfig(kind=kind, paths=[str(p) for p in paths])])
    files = ingest.source_files(cfg.sources[0])
    size = sum(f.stat().st_size for f, _ in files)
    t0 = time.perf_counter()
    out = ingest.run({}, StageContext(stage="ingest", config=cfg, seed=1))
    t1 = time.perf_counter()
    passages = chunking.run({"documents": out["documents"]}, StageContext(stage="chunk", config=ChunkConfig(), seed=1))[
        "passages"
    ]
    t2 = time.perf_counter()
    return size / 1e6, out["documents"].height, t1 - t0, t2 - t1, passages.height


_SYMBOL_ONLY = {"$", "%", ")", "%)", "($"}


def table_quality(documents) -> tuple[int, int, int, int]:
    """(tables, with a symbol-only cell, with a value column under an empty header, with either):
    the two symptoms of columns shifted off their periods."""
    from finhallu.sources.filing_tables import is_value
    from finhallu.sources.tables import parse_markdown_table

    tables = symbols = unlabelled = shifted = 0
    for blocks in documents["blocks"].to_list():
        for b in blocks:
            if b["kind"] != "table":
                continue
            header, body = parse_markdown_table("\n".join(ln for ln in b["text"].splitlines() if ln.startswith("|")))
            if not header:
                continue
            tables += 1
            sym = any(c.strip() in _SYMBOL_ONLY for row in body for c in row)
            unl = any(j >= len(header) or (not header[j] and is_value(row[j])) for row in body for j in range(1, len(row)))
            symbols, unlabelled, shifted = symbols + sym, unlabelled + unl, shifted + (sym or unl)
    return tables, symbols, unlabelled, shifted


def main() -> None:
    # Warm the lazy parts once (Kiwi, lxml) so per-source numbers measure throughput, not start-up.
    from finhallu.text.sentences import split_korean

    t = time.perf_counter()
    split_korean("워밍업 문장입니다.")
    print(f"Kiwi load: {time.perf_counter() - t:.2f} s (once per process, only when Korean text needs splitting)")
    print(f"{'source':<22}{'MB':>8}{'docs':>6}{'parse s':>9}{'chunk s':>9}{'MB/s':>9}{'passages':>10}{'passages/s':>12}")
    for label, kind, paths in CASES:
        if not all(str(p).startswith("pkg:") or Path(p).exists() for p in paths):
            print(f"{label:<22} (fixtures not found under {FIXTURES})")
            continue
        mb, docs, parse_s, chunk_s, n = run_case(kind, paths)
        total = parse_s + chunk_s
        print(f"{label:<22}{mb:8.2f}{docs:6d}{parse_s:9.3f}{chunk_s:9.3f}{mb / total:9.2f}{n:10d}{n / total:12.0f}")
        if kind == "sec10k":
            cfg = IngestConfig(sources=[SourceConfig(kind=kind, paths=[str(p) for p in paths])])
            docs_df = ingest.run({}, StageContext(stage="ingest", config=cfg, seed=1))["documents"]
            tables, symbols, unlabelled, shifted = table_quality(docs_df)
            print(
                f"{'':<22}tables {tables}: {symbols} with a symbol-only cell, {unlabelled} with a value outside "
                f"a headed column; {shifted} ({shifted / max(tables, 1):.0%}) show a shift"
            )


if __name__ == "__main__":
    main()
