"""ingest: raw files -> `documents`, `source_qas`, `facts`, `quarantine`."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl

from finhallu.schemas.rows import Block, DocumentsRow, QuarantineRow
from finhallu.schemas.rules import INSTITUTION_IN_ONE_SPLIT
from finhallu.stages.base import Frames, Stage, StageContext, rows_frame
from finhallu.text.dates import iso_date_or_period
from finhallu.sources import LOADERS, Block as LoadedBlock, LoadedDoc, LoadedFacts, Quarantined, get_loader, resolve_path
from typing import Literal
from pydantic import Field, field_validator, model_validator
from finhallu.schemas.section import Section


class SourceConfig(Section):
    kind: str  # a registered source kind (finhallu/sources/)
    # Files or folders; relative paths resolve against the profile file; `pkg:` = inside finhallu.
    paths: list[str]
    # Splits are assigned by institution (AI-Hub doc_source; company for filings).
    # None = the source's default: AI-Hub holds out 금융감독원 and 한국소비자원 for test.
    test_institutions: list[str] | None = None
    valid_institutions: list[str] = Field(default_factory=list)
    default_split: Literal["train", "valid", "test"] = "train"
    # Institutions in neither list: None = default_split; else a split drawn by a stable hash of the
    # company (CIK / corp_code for filings, else the institution), with these relative shares, so a
    # company never moves between splits as the corpus grows. The lists above also take CIKs/corp_codes.
    split_ratio: dict[Literal["train", "valid", "test"], float] | None = None
    # Keep only documents of these categories (AI-Hub doc_class.class or the document type), as
    # K-FinHallu keeps the finance documents; None = all.
    categories: list[str] | None = None

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        LOADERS.get(kind)  # UnknownPluginError (a ValueError) lists the registered kinds
        return kind

    @model_validator(mode="after")
    def _default_test_split(self) -> "SourceConfig":
        if self.split_ratio is not None and (
            any(v < 0 for v in self.split_ratio.values()) or sum(self.split_ratio.values()) <= 0
        ):
            raise ValueError("split_ratio shares must be non-negative with a positive sum")
        if self.test_institutions is None:
            self.test_institutions = list(LOADERS.get(self.kind).test_institutions)
        return self


class IngestConfig(Section):
    sources: list[SourceConfig]


def _listed(src: SourceConfig) -> list[tuple[Path, str]]:
    """Every path a source entry names, in a stable order, with a location-independent name
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


def source_files(src: SourceConfig) -> list[tuple[Path, str]]:
    """The regular files of a source entry (a FIFO or device matching a pattern would block a read)."""
    return [(f, name) for f, name in _listed(src) if f.is_file()]


def skipped_files(src: SourceConfig) -> list[tuple[Path, str]]:
    """Matching paths that are not regular files (FIFOs, sockets, devices, directories named *.json)."""
    return [(f, name) for f, name in _listed(src) if f.exists() and not f.is_file()]


class SourceVanished(RuntimeError):
    """A listed source file disappeared while ingest ran: its result would be cached under a key
    that includes the file, so the stage fails (nothing published) and a rerun ingests it."""


def inputs_fingerprint(cfg: IngestConfig) -> str:
    """Content hash of every raw input file: the ingest stage's cache key covers the data itself."""
    h = hashlib.sha256()
    for src in cfg.sources:
        for f, name in source_files(src):
            h.update(name.encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _load_file(kind: str, f: Path) -> list:
    """What a loader yields for one file; an exception keeps the items yielded before it (the
    records already read are good) and adds a quarantine row saying where reading stopped."""
    items: list = []
    try:
        for item in get_loader(kind).load(f):
            items.append(item)
    except Exception as exc:  # a loader bug on one file must not sink the run
        if not f.exists():
            raise SourceVanished(f"source file {f} disappeared during ingest; rerun the build") from exc
        done = sum(isinstance(i, LoadedDoc) for i in items)
        where = f"after {done} document(s)" if done else None
        items.append(Quarantined(kind, str(f), where, None, f"{type(exc).__name__}: {exc}"))
    return items


def company_key(doc: LoadedDoc) -> str:
    """The filer's stable id (CIK in sec10k-<cik>-<year>, corp_code in dart-<corp>-...) or, for
    other sources, the institution: names change across years, ids do not."""
    parts = doc.doc_id.split("-")
    if doc.source in ("sec10k", "edgar_corpus", "dart") and len(parts) > 2 and parts[1].isdigit():
        return parts[1]
    return doc.institution


def _split(src: SourceConfig, doc: LoadedDoc) -> str:
    names = {doc.institution, company_key(doc)}
    if names & set(src.test_institutions or []):
        return "test"
    if names & set(src.valid_institutions):
        return "valid"
    if src.split_ratio:
        u = int.from_bytes(hashlib.sha256(f"split|{company_key(doc)}".encode()).digest()[:8], "big") / 2**64
        total, acc = sum(src.split_ratio.values()), 0.0
        for split in ("train", "valid", "test"):
            acc += src.split_ratio.get(split, 0.0) / total
            if u < acc:
                return split
        return "test"
    return src.default_split


def _kept(src: SourceConfig, doc: LoadedDoc) -> bool:
    return src.categories is None or bool({doc.category, doc.doc_type} & set(src.categories))


def _skipped_rows(cfg: IngestConfig) -> list[QuarantineRow]:
    """Quarantine rows for the matching paths that are not regular files (never read)."""
    return [
        {
            "source": src.kind,
            "path": name,
            "record_id": None,
            "field": None,
            "stage": "ingest",
            "error": "not a regular file (FIFO, socket, device or directory): skipped",
        }
        for src in cfg.sources
        for f, name in skipped_files(src)
    ]


def _duplicate_row(doc: LoadedDoc) -> QuarantineRow:
    return {
        "source": doc.source,
        "path": doc.source_path,
        "record_id": doc.doc_id,
        "field": "doc_id",
        "error": "duplicate doc_id (first occurrence kept)",
        "stage": "ingest",
    }


def _document_row(src: SourceConfig, doc: LoadedDoc, path: str) -> DocumentsRow:
    """A `documents` row; `path` is the source path under its location-independent name."""
    return {
        "doc_id": doc.doc_id,
        "source": doc.source,
        "institution": doc.institution,
        "lang": doc.lang,
        "title": doc.title,
        "doc_type": doc.doc_type,
        "published": iso_date_or_period(doc.published),
        "source_path": path,
        "split": _split(src, doc),
        "blocks": [_block(b) for b in doc.blocks],
    }


def _block(b: LoadedBlock) -> Block:
    """A document block as `documents.blocks` holds it: the loader's block fields, in their order."""
    return {"block_id": b.block_id, "section_path": b.section_path, "kind": b.kind, "text": b.text, "role": b.role}


def _unusable_qa_rows(doc: LoadedDoc, path: str) -> list[QuarantineRow]:
    """Quarantine rows for the document's QAs whose clue (or, without a clue, answer) is not in
    the context: they stay in source_qas, flagged, but are not used as seeds."""
    rows: list[QuarantineRow] = []
    for qa in doc.qas:
        if "clue_not_in_context" in qa["flags"] or ("answer_not_in_context" in qa["flags"] and not qa["clue_text"]):
            field = "answer.clue_text" if "clue_not_in_context" in qa["flags"] else "answer.text"
            rows.append(
                {
                    "source": doc.source,
                    "path": path,
                    "record_id": qa["qa_id"],
                    "field": field,
                    "stage": "ingest",
                    "error": f"{field} does not occur in its cleaned context; the QA is not used as a seed",
                }
            )
    return rows


def run(inputs: Frames, ctx: StageContext[IngestConfig]) -> Frames:
    cfg = ctx.config
    docs: list[DocumentsRow] = []
    qas: list[dict] = []
    facts: dict[str, dict] = {}
    filtered: dict[str, int] = {}  # documents left out by `categories`, per source
    loaded: set[str] = set()  # source kinds that gave a document
    seen: set[str] = set()
    files = [(src, f, name) for src in cfg.sources for f, name in source_files(src)]
    quarantine = _skipped_rows(cfg)
    for n, (src, f, name) in enumerate(files):
        for item in _load_file(src.kind, f):
            if isinstance(item, Quarantined):
                item.path = item.path.replace(str(f), name)
                quarantine.append(_quarantined_row(item))
                continue
            if isinstance(item, LoadedFacts):
                for row in item.rows:
                    facts.setdefault(row["fact_id"], {**row, "source_path": row["source_path"].replace(str(f), name)})
                continue
            assert isinstance(item, LoadedDoc)
            if not _kept(src, item):
                filtered[src.kind] = filtered.get(src.kind, 0) + 1
                continue
            if item.doc_id in seen:
                quarantine.append(_duplicate_row(item))
                continue
            seen.add(item.doc_id)
            loaded.add(src.kind)
            path = item.source_path.replace(str(f), name)
            docs.append(_document_row(src, item, path))
            qas.extend(item.qas)  # kept (flagged) in source_qas, and reported in quarantine
            quarantine += _unusable_qa_rows(item, path)
        ctx.progress(n + 1, len(files))
    for kind, n in sorted(filtered.items()):
        print(f"ingest: {n} {kind} document(s) left out by the source's `categories`")
    for kind in sorted({s.kind for s in cfg.sources} - loaded - set(filtered) - {"xbrl"}):
        print(f"warning: ingest: source {kind} yielded no document (see the quarantine table)")
    documents = pl.DataFrame(docs).sort("doc_id") if docs else pl.DataFrame()
    return {
        "documents": documents,
        "source_qas": pl.DataFrame(qas, infer_schema_length=None).sort("qa_id") if qas else _empty("source_qas"),
        "facts": rows_frame(list(facts.values()), "fact_id"),
        "quarantine": pl.DataFrame(quarantine).sort("path", "record_id", nulls_last=True) if quarantine else _empty("quarantine"),
    }


def _quarantined_row(item: Quarantined) -> QuarantineRow:
    """A loader's quarantine record as a row: its fields in their order, then the stage."""
    return {
        "source": item.source,
        "path": item.path,
        "record_id": item.record_id,
        "field": item.field,
        "error": item.error,
        "stage": "ingest",
    }


def _empty(name: str) -> pl.DataFrame:
    from finhallu.schemas.contracts import CONTRACTS

    return pl.DataFrame(schema=CONTRACTS[name].schema)


STAGE = Stage(
    "ingest",
    run,
    IngestConfig,
    inputs=(),
    outputs=("documents", "source_qas", "facts", "quarantine"),
    description="raw files -> documents",
    rules={"documents": (INSTITUTION_IN_ONE_SPLIT,)},
)
