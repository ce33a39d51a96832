"""External labelled datasets in the samples layout, one loader module per format, registered by decorator.

A loader reads its format's files and returns sample rows (`external_sample(...)`); `load_external`
turns them into an `external_samples` frame named after the dataset, so any detector runs on it
and its results land in `detections` / `metrics` / `confusion` with the dataset's name and
content hash as its version (`finhallu eval-external`).

Formats: ragtruth, halueval-qa, halueval-dialogue, halueval-general, jsonl, csv. Rows without a
split of their own get a deterministic one from their pair id (60/20/20 train/valid/test), so the
learned detector can fit and choose a threshold without leaking a pair across splits.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import polars as pl

from finhallu.registry import Registry
from finhallu.schemas.contracts import CONTRACTS
from finhallu.taxonomy import HALLU_TYPES, LABEL_4CLASS
from finhallu.ids import stable_id

FORMATS: Registry["Loader"] = Registry("external dataset format", __name__)


@dataclass(frozen=True)
class Loader:
    name: str
    load: Callable[[Path], Iterator[dict]]
    default_dataset: str
    description: str


def register_loader(name: str, dataset: str, description: str = ""):
    def deco(fn):
        FORMATS.add(name, Loader(name, fn, dataset, description or (fn.__doc__ or "").strip().splitlines()[0]), fn.__module__)
        return fn

    return deco


def get_loader(name: str) -> Loader:
    return FORMATS.get(name)


def formats() -> list[str]:
    return FORMATS.names()


# ---- helpers shared by the loaders ----------------------------------------------------------------

_HANGUL = re.compile(r"[가-힣]")


def guess_lang(text: str) -> str:
    letters = re.findall(r"[A-Za-z가-힣]", text or "")
    return "ko" if letters and len(_HANGUL.findall(text)) / len(letters) > 0.3 else "en"


def split_of(pair_id: str) -> str:
    """Deterministic 60/20/20 train/valid/test split by pair (a pair never straddles splits)."""
    bucket = int(hashlib.sha256(pair_id.encode()).hexdigest()[:8], 16) % 10
    return "train" if bucket < 6 else ("valid" if bucket < 8 else "test")


def read_records(path: Path) -> Iterator[dict]:
    """Records of a JSON Lines file, or of a JSON array / object-per-line file named .json."""
    text = path.read_text("utf-8-sig")
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from json.loads(stripped)
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not a JSON record ({exc.msg})") from None


def external_sample(
    *,
    external_id: str,
    pair_id: str,
    query: str,
    response: str,
    passages: list[str],
    label_binary: str,
    label_4class: str | None = None,
    history: list[dict] | None = None,
    hallu_type: str | None = None,
    hallu_subtype: str | None = None,
    split: str | None = None,
    source: str = "external",
    injector: str | None = None,
    lang: str | None = None,
    turn_index: int | None = None,
    answerable: bool | None = None,
) -> dict:
    if label_binary not in ("faithful", "hallucinated"):
        raise ValueError(f"record {external_id}: label {label_binary!r} is not faithful|hallucinated")
    label_4class = label_4class or ("hallucination" if label_binary == "hallucinated" else "faithful_answer")
    if label_4class not in LABEL_4CLASS:
        raise ValueError(f"record {external_id}: 4-class label {label_4class!r} unknown (known: {LABEL_4CLASS})")
    if hallu_type is not None and hallu_type not in HALLU_TYPES:
        raise ValueError(f"record {external_id}: hallu_type {hallu_type!r} unknown (known: {HALLU_TYPES})")
    history = history or []
    return {
        "external_id": str(external_id),
        "pair_id": str(pair_id),
        "dialogue_id": str(pair_id),
        "split": split if split in ("train", "valid", "test") else split_of(str(pair_id)),
        "source": source,
        "institution": source,
        "lang": lang or guess_lang(query + " " + response),
        "turn_index": turn_index if turn_index is not None else len(history) // 2 + 1,
        "history": history,
        "query": query or "",
        "standalone_query": query or "",
        "passages": [{"passage_id": f"{external_id}#p{i}", "text": t, "role": "retrieved"} for i, t in enumerate(passages) if t],
        "response": response or "",
        "answerable": (label_4class != "true_refusal") if answerable is None else bool(answerable),
        "label_binary": label_binary,
        "label_4class": label_4class,
        "hallu_type": hallu_type if label_binary == "hallucinated" else None,
        "hallu_subtype": hallu_subtype if label_binary == "hallucinated" else None,
        "injector": injector if label_binary == "hallucinated" else None,
    }


def load_external(fmt: str, path: str | Path, dataset: str | None = None, limit: int | None = None) -> pl.DataFrame:
    """An `external_samples` frame (contract-conformed, sorted by sample id) from one dataset."""
    loader = get_loader(fmt)
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{fmt}: {path} does not exist")
    name = dataset or loader.default_dataset
    rows, seen = [], set()
    for r in loader.load(path):
        if r["external_id"] in seen:
            raise ValueError(f"{fmt}: record id {r['external_id']!r} occurs twice in {path}")
        seen.add(r["external_id"])
        rows.append({**r, "sample_id": stable_id(name, r["external_id"]), "dataset": name})
        if limit and len(rows) >= limit:
            break
    if not rows:
        raise ValueError(f"{fmt}: no records in {path}")
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return CONTRACTS["external_samples"].conform(frame).sort("sample_id")
