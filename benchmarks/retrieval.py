"""Retrieval quality per backend: recall@1/5/10 and MRR of the gold passage for standalone questions.

Corpora: (a) the bundled demo corpus (AI-Hub-style Korean, SEC 10-K English, DART Korean) and
(b) the real AI-Hub MRC fixture in ../shared/data/aihub-mrc (or $FINHALLU_FIXTURES/aihub-mrc).
Passages and seeds come from the pure stage functions (ingest -> chunk -> seed_qa) with default
configs; every answerable seed's question is searched over the whole corpus (all splits) by
exact scoring of every passage (NumPy). A passage whose text equals the gold passage's text
counts as the gold passage (the demo has a few verbatim duplicate blocks). Ties rank by
passage position.

Backends: hashing v2 (the offline default) and v1 (its predecessor), minilm (packaged all-MiniLM-L6-v2; English only),
kure (nlpai-lab/KURE-v1, only where present locally), BM25 over Kiwi morphemes, and hybrids.
At the end, benchmarks/mining.py's main() runs if that file exists.

    .venv/bin/python benchmarks/retrieval.py
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from finhallu.config import load_config
from finhallu.stages.chunk import ChunkConfig
from finhallu.embedders import EmbedConfig
from finhallu.stages.ingest import IngestConfig, SourceConfig
from finhallu.stages.seed_qa import SeedQAConfig
from finhallu.stages import chunk as chunking
from finhallu.stages import ingest
from finhallu.stages import seed_qa
from finhallu.stages.base import StageContext
from finhallu.embedders import ModelNotAvailableError, embedder_from_config
from finhallu.stages.embed import embed_texts
from finhallu.embedders.bm25 import BM25Index

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("FINHALLU_FIXTURES", ROOT.parent / "shared" / "data"))

BACKENDS: list[tuple[str, dict | None]] = [  # label, EmbedConfig overrides (None = BM25 alone)
    ("hashing v2 (default)", {"backend": "hashing"}),
    ("hashing v1", {"backend": "hashing", "hashing_version": 1}),
    ("minilm", {"backend": "minilm"}),
    ("kure", {"backend": "kure"}),
    ("bm25-kiwi", None),
    ("hybrid hashing+bm25 sum", {"backend": "hybrid", "dense": "hashing", "fusion": "sum"}),
    ("hybrid hashing+bm25 rrf", {"backend": "hybrid", "dense": "hashing", "fusion": "rrf"}),
    ("hybrid minilm+bm25 sum", {"backend": "hybrid", "dense": "minilm", "fusion": "sum"}),
    ("hybrid kure+bm25 sum", {"backend": "hybrid", "dense": "kure", "fusion": "sum"}),
]


def build_corpus(icfg: IngestConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    out = ingest.run({}, StageContext(stage="ingest", config=icfg, seed=1))
    passages = chunking.run({"documents": out["documents"]}, StageContext(stage="chunk", config=ChunkConfig(), seed=1))
    passages = passages["passages"]
    seeds = seed_qa.run(
        {"passages": passages, "source_qas": out["source_qas"]}, StageContext(stage="seed_qa", config=SeedQAConfig(), seed=1)
    )["qa_seeds"]
    return passages, seeds.filter(pl.col("answerable"))


def gold_ranks(scores: np.ndarray, gold_group: np.ndarray, group: np.ndarray) -> np.ndarray:
    """1-based rank of the first passage in the gold text group, per query (stable tie order)."""
    order = np.argsort(-scores, axis=1, kind="stable")
    hit = group[order] == gold_group[:, None]
    return hit.argmax(axis=1) + 1


def metrics(ranks: np.ndarray) -> dict:
    return {
        "n": len(ranks),
        "R@1": float(np.mean(ranks <= 1)),
        "R@5": float(np.mean(ranks <= 5)),
        "R@10": float(np.mean(ranks <= 10)),
        "MRR": float(np.mean(1.0 / ranks)),
    }


def score_backend(label: str, over: dict | None, texts: list[str], queries: list[str]) -> tuple[np.ndarray, float, str]:
    t0 = time.perf_counter()
    if over is None:
        index = BM25Index(texts)
        return index.scores(queries), time.perf_counter() - t0, index.model_id
    emb = embedder_from_config(EmbedConfig(**over))
    vecs, _ = embed_texts(emb, texts)
    index = emb.build_index(texts, vecs)
    return index.scores(queries), time.perf_counter() - t0, emb.model_id


def run_corpus(name: str, icfg: IngestConfig, rows: list[dict], skipped: dict[str, str]) -> None:
    passages, seeds = build_corpus(icfg)
    texts = passages["text"].to_list()
    group_of: dict[str, int] = {}
    group = np.array([group_of.setdefault(t, len(group_of)) for t in texts])
    pos = {pid: i for i, pid in enumerate(passages["passage_id"].to_list())}
    seeds = seeds.filter(pl.col("passage_id").is_in(list(pos)))
    gold_group = group[[pos[p] for p in seeds["passage_id"].to_list()]]
    queries = seeds["question"].to_list()
    langs = np.array(seeds["lang"].to_list())
    print(
        f"{name}: {len(texts)} passages ({len(group_of)} distinct texts), {len(queries)} answerable standalone "
        f"questions ({', '.join(f'{lang} {int((langs == lang).sum())}' for lang in sorted(set(langs)))})"
    )
    for label, over in BACKENDS:
        try:
            scores, secs, model_id = score_backend(label, over, texts, queries)
        except ModelNotAvailableError as exc:
            skipped[label] = str(exc).split(". ")[0]
            continue
        ranks = gold_ranks(scores, gold_group, group)
        slices = [("all", np.ones(len(ranks), bool))]
        if len(set(langs)) > 1:
            slices += [(lang, langs == lang) for lang in sorted(set(langs))]
        for sl, mask in slices:
            rows.append(
                {
                    "corpus": name,
                    "slice": sl,
                    "backend": label,
                    **metrics(ranks[mask]),
                    "secs": secs if sl == "all" else None,
                    "model_id": model_id,
                }
            )


def print_table(rows: list[dict]) -> None:
    head = f"{'corpus':<14}{'slice':<6}{'backend':<26}{'n':>5}{'R@1':>7}{'R@5':>7}{'R@10':>7}{'MRR':>7}{'secs':>7}"
    print(head)
    print("-" * len(head))
    last = None
    for r in rows:
        if last and (r["corpus"], r["slice"]) != last:
            print()
        last = (r["corpus"], r["slice"])
        secs = f"{r['secs']:7.2f}" if r["secs"] is not None else f"{'':>7}"
        print(
            f"{r['corpus']:<14}{r['slice']:<6}{r['backend']:<26}{r['n']:5d}{r['R@1']:7.3f}{r['R@5']:7.3f}"
            f"{r['R@10']:7.3f}{r['MRR']:7.3f}{secs}"
        )


def run_mining() -> None:
    path = Path(__file__).with_name("mining.py")
    if not path.exists():
        return
    spec = importlib.util.spec_from_file_location("benchmarks_mining", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    if callable(getattr(mod, "main", None)):
        print("\n== mining throughput (benchmarks/mining.py) ==")
        mod.main()


def main() -> None:
    rows: list[dict] = []
    skipped: dict[str, str] = {}
    corpora = [("demo", load_config("demo").ingest)]
    aihub = FIXTURES / "aihub-mrc"
    if aihub.exists():
        corpora.append(("aihub-real", IngestConfig(sources=[SourceConfig(kind="aihub", paths=[str(aihub)])])))
    else:
        print(f"aihub-real: fixture not found at {aihub} (set FINHALLU_FIXTURES); skipped")
    for name, icfg in corpora:
        run_corpus(name, icfg, rows, skipped)
    print()
    print_table(rows)
    for label, why in skipped.items():
        print(f"skipped {label}: {why}")
    ids = {r["backend"]: r["model_id"] for r in rows}
    print("\nmodel ids:")
    for label, mid in ids.items():
        print(f"  {label:<26}{mid}")
    run_mining()


if __name__ == "__main__":
    main()
