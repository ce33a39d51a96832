"""Source loaders, one module each, registered by decorator.

A loader turns one input file into documents (with structure-preserving blocks and any QA
triplets the source ships) and quarantine records for whatever in the file is unusable.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

LOADERS: dict[str, "Loader"] = {}


@dataclass
class Block:
    block_id: str
    section_path: str
    kind: str  # text | table
    text: str


@dataclass
class LoadedDoc:
    doc_id: str
    source: str
    institution: str
    lang: str
    title: str
    doc_type: str
    published: str | None
    source_path: str
    blocks: list[Block]
    qas: list[dict] = field(default_factory=list)  # source_qas rows (offsets into block text)


@dataclass
class Quarantined:
    source: str
    path: str
    record_id: str | None
    field: str | None
    error: str


@dataclass(frozen=True)
class Loader:
    name: str
    patterns: tuple[str, ...]  # glob patterns of files this loader reads inside a folder
    load: Callable[[Path], Iterator[LoadedDoc | Quarantined]]


def register_source(name: str, patterns: tuple[str, ...]):
    def deco(fn):
        LOADERS[name] = Loader(name, patterns, fn)
        return fn

    return deco


def get_loader(name: str) -> Loader:
    # Import on a miss, not only when nothing is registered: importing one loader module directly
    # (e.g. `from finhallu.tasks.sources import sec10k`) must not hide the others.
    if name not in LOADERS:
        for mod in pkgutil.iter_modules(__path__):
            if not mod.name.startswith("_") and mod.name != "tables":
                importlib.import_module(f"{__name__}.{mod.name}")
    if name not in LOADERS:
        raise KeyError(f"unknown source {name!r}; registered: {sorted(LOADERS)}")
    return LOADERS[name]
