"""ingest: raw files -> `documents`, `source_qas`, `facts`, `quarantine`."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl

from finhallu.config import IngestConfig, SourceConfig, resolve_path
from finhallu.tasks.base import Frames, StageContext, rows_frame
from finhallu.tasks.sources import LoadedDoc, LoadedFacts, Quarantined, get_loader


def source_files(src: SourceConfig) -> list[tuple[Path, str]]:
    """Every file a source entry names, in a stable order, with a location-independent name
    (`<configured path>/<relative path>`), so tables do not change when the checkout moves."""
    loader = get_loader(src.kind)
    files: dict[Path, str] = {}
    for spec in src.paths:
        p = resolve_path(spec, Path.cwd())
        if p.is_dir():
            for pattern in loader.patterns:
                for f in p.rglob(pattern):
                    files.setdefault(f, f"{spec.rstrip('/')}/{f.relative_to(p).as_posix()}")
        elif p.exists():
            files.setdefault(p, spec)
        else:
            raise FileNotFoundError(f"source {src.kind}: path {p} does not exist")
    return sorted(files.items())


def inputs_fingerprint(cfg: IngestConfig) -> str:
    """Content hash of every raw input file: the ingest stage's cache key covers the data itself."""
    h = hashlib.sha256()
    for src in cfg.sources:
        for f, name in source_files(src):
            h.update(name.encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _split(src: SourceConfig, institution: str) -> str:
    if institution in src.test_institutions:
        return "test"
    if institution in src.valid_institutions:
        return "valid"
    return src.default_split


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: IngestConfig = ctx.config
    docs, qas, quarantine, facts = [], [], [], {}
    seen: set[str] = set()
    files = [(src, f, name) for src in cfg.sources for f, name in source_files(src)]
    for n, (src, f, name) in enumerate(files):
        loader = get_loader(src.kind)
        try:
            items = list(loader.load(f))
        except Exception as exc:  # a loader bug on one file must not sink the run
            items = [Quarantined(src.kind, str(f), None, None, f"{type(exc).__name__}: {exc}")]
        for item in items:
            if isinstance(item, Quarantined):
                item.path = item.path.replace(str(f), name)
                quarantine.append({**item.__dict__, "stage": "ingest"})
                continue
            if isinstance(item, LoadedFacts):
                for row in item.rows:
                    facts.setdefault(row["fact_id"], {**row, "source_path": row["source_path"].replace(str(f), name)})
                continue
            assert isinstance(item, LoadedDoc)
            if item.doc_id in seen:
                quarantine.append({"source": item.source, "path": item.source_path, "record_id": item.doc_id,
                                   "field": "doc_id", "error": "duplicate doc_id (first occurrence kept)", "stage": "ingest"})
                continue
            seen.add(item.doc_id)
            docs.append({
                "doc_id": item.doc_id, "source": item.source, "institution": item.institution, "lang": item.lang,
                "title": item.title, "doc_type": item.doc_type, "published": item.published,
                "source_path": item.source_path.replace(str(f), name), "split": _split(src, item.institution),
                "blocks": [b.__dict__ for b in item.blocks],
            })
            qas.extend(item.qas)
            for qa in item.qas:  # kept (flagged) in source_qas, and reported in quarantine
                if "clue_not_in_context" in qa["flags"] or ("answer_not_in_context" in qa["flags"] and not qa["clue_text"]):
                    field = "answer.clue_text" if "clue_not_in_context" in qa["flags"] else "answer.text"
                    quarantine.append({"source": item.source, "path": item.source_path.replace(str(f), name),
                                       "record_id": qa["qa_id"], "field": field, "stage": "ingest",
                                       "error": f"{field} does not occur in its cleaned context; the QA is not used as a seed"})
        ctx.progress(n + 1, len(files))
    documents = pl.DataFrame(docs).sort("doc_id") if docs else pl.DataFrame()
    return {
        "documents": documents,
        "source_qas": pl.DataFrame(qas, infer_schema_length=None).sort("qa_id") if qas else _empty("source_qas"),
        "facts": rows_frame(list(facts.values()), "fact_id"),
        "quarantine": pl.DataFrame(quarantine).sort("path", "record_id", nulls_last=True) if quarantine else _empty("quarantine"),
    }


def _empty(name: str) -> pl.DataFrame:
    from finhallu.schemas.contracts import CONTRACTS

    return pl.DataFrame(schema=CONTRACTS[name].schema)
