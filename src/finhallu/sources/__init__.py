"""Source loaders, one module each, registered by decorator.

A loader turns one input file into documents (with structure-preserving blocks and any QA
triplets the source ships) and quarantine records for whatever in the file is unusable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable, Iterator

from finhallu.registry import Registry

LOADERS: Registry["Loader"] = Registry("source kind", __name__)


@dataclass
class Block:
    block_id: str
    section_path: str
    kind: str  # text | table
    text: str
    role: str | None = None  # filings: section role (sources/roles.py); None where a source has none


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
    category: str | None = None  # the source's own topic class (AI-Hub doc_class.class, e.g. 금융)


@dataclass
class LoadedFacts:
    """Numeric/text facts from XBRL (companyfacts JSON, instances): rows of the `facts` table."""

    source: str
    source_path: str
    rows: list[dict]


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
    load: Callable[[Path], Iterator[LoadedDoc | LoadedFacts | Quarantined]]
    # Institutions held out for the test split when a profile's source entry names none.
    test_institutions: tuple[str, ...] = ()
    langs: tuple[str, ...] = ()  # the languages of its documents (a build preloads what they need)


def register_source(name: str, patterns: tuple[str, ...], test_institutions: tuple[str, ...] = (), langs: tuple[str, ...] = ()):
    def deco(fn):
        LOADERS.add(name, Loader(name, patterns, fn, test_institutions, langs), fn.__module__)
        return fn

    return deco


def get_loader(name: str) -> Loader:
    return LOADERS.get(name)


def resolve_path(spec: str, base_dir: Path) -> Path:
    """A source path from a profile: `pkg:` = inside the finhallu package, else relative to `base_dir`."""
    if spec.startswith("pkg:"):
        return Path(str(resources.files("finhallu").joinpath(spec[4:])))
    p = Path(spec).expanduser()
    return p if p.is_absolute() else (base_dir / p).resolve()
