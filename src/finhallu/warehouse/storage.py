"""Where a home keeps its published tables and catalog records: in its own folder, or at any
fsspec URL (`--home s3://bucket/prefix`).

A home is always a local folder as well: the run database, the stages' cache records, the LLM
and embedding caches, the build lock, reports, exports and the DuckDB catalog file need a local
disk. `--home URL` makes that folder a state folder under `$FINHALLU_STATE_DIR` (default
`~/.cache/finhallu/homes/<protocol>/<bucket>/<prefix>`) whose `storage.json` names the URL; the
tables (`tables/`) and the catalog records (`catalog/`: table versions, current versions, builds,
data-quality results, LLM calls) go to the URL. A new machine pointed at the same URL sees every
published version (its catalog file is rebuilt from the records there); its stage cache starts
empty, and the stages it reruns publish nothing new where the content is unchanged.

Credentials and endpoints come from the filesystem's own configuration (for S3: the AWS
environment variables or profile, `AWS_ENDPOINT_URL` for an S3-compatible server), never from a
file of ours. One build at a time writes a home: the lock is the state folder's, so two machines
must not build into the same URL at once.

Object stores have no rename: a table file is written under its final key and becomes visible
only when its upload completes (S3 PUT and multipart completion are atomic). The version's
manifest record, written after it, stays the commit point, as on a local disk.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Iterable, Protocol

import polars as pl

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import duckdb

POINTER = "storage.json"
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")


class StorageError(ValueError):
    """A home URL that cannot be used (unknown protocol, missing package, unreachable): one line."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a small file so that readers see the old or the new content, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class Storage(Protocol):
    """Paths are relative to the storage root, with '/' separators."""

    remote: bool

    def url(self, rel: str) -> str: ...
    def exists(self, rel: str) -> bool: ...
    def read_bytes(self, rel: str) -> bytes: ...
    def write_bytes(self, rel: str, data: bytes) -> None: ...
    def names(self, rel: str, pattern: str = "*") -> list[str]: ...
    def folders(self, rel: str) -> list[str]: ...
    def remove_tree(self, rel: str) -> None: ...
    def write_parquet(self, rel: str, table: pa.Table) -> None: ...
    def register(self, con: "duckdb.DuckDBPyConnection") -> None: ...


class LocalStorage:
    """The home's own folder: temp file, fsync, rename — readers never see a partial file."""

    remote = False

    def __init__(self, root: Path):
        self.root = Path(root)

    def _p(self, rel: str) -> Path:
        return self.root / rel

    def url(self, rel: str) -> str:
        return str(self._p(rel))

    def exists(self, rel: str) -> bool:
        return self._p(rel).exists()

    def read_bytes(self, rel: str) -> bytes:
        return self._p(rel).read_bytes()

    def write_bytes(self, rel: str, data: bytes) -> None:
        atomic_write_bytes(self._p(rel), data)

    def names(self, rel: str, pattern: str = "*") -> list[str]:
        folder = self._p(rel)
        return sorted(p.name for p in folder.glob(pattern)) if folder.is_dir() else []

    def folders(self, rel: str) -> list[str]:
        folder = self._p(rel)
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    def remove_tree(self, rel: str) -> None:
        shutil.rmtree(self._p(rel), ignore_errors=True)

    def write_parquet(self, rel: str, table: pa.Table) -> None:
        """`rel` is `<dir>/<file>`: the file is written in a sibling temp folder, which is renamed to
        `<dir>` (the whole version appears at once; a killed write leaves only a `.tmp-` folder)."""
        final = self._p(rel).parent
        parent = final.parent
        parent.mkdir(parents=True, exist_ok=True)
        if final.exists():  # orphan of a killed publish with this number
            shutil.rmtree(final)
        tmp = parent / f".tmp-{uuid.uuid4().hex}"
        tmp.mkdir()
        with open(tmp / Path(rel).name, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(tmp)
        os.rename(tmp, final)
        _fsync_dir(parent)

    def register(self, con: "duckdb.DuckDBPyConnection") -> None:
        return None


class FsspecStorage:
    """Any fsspec filesystem (s3://, gs://, az://, memory://): one object per file."""

    remote = True

    def __init__(self, url: str):
        import fsspec

        self.base = url.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.base)
        self.root = self.root.rstrip("/")

    def _p(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def url(self, rel: str) -> str:
        return f"{self.base}/{rel}" if rel else self.base

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self._p(rel)))

    def read_bytes(self, rel: str) -> bytes:
        return bytes(self.fs.cat_file(self._p(rel)))

    def write_bytes(self, rel: str, data: bytes) -> None:
        self.fs.pipe_file(self._p(rel), data)  # one PUT: readers get the old object or the new one

    def _listing(self, rel: str) -> list[dict]:
        self.fs.invalidate_cache(self._p(rel))  # another process may have written since
        try:
            return list(self.fs.ls(self._p(rel), detail=True))
        except FileNotFoundError:
            return []

    def names(self, rel: str, pattern: str = "*") -> list[str]:
        names = (e["name"].rstrip("/").rsplit("/", 1)[-1] for e in self._listing(rel))
        return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))

    def folders(self, rel: str) -> list[str]:
        return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in self._listing(rel) if e.get("type") == "directory")

    def remove_tree(self, rel: str) -> None:
        try:
            self.fs.rm(self._p(rel), recursive=True)
        except FileNotFoundError:
            pass

    def write_parquet(self, rel: str, table: pa.Table) -> None:
        # No rename on an object store: the object appears when its upload completes, and an upload
        # cut short leaves nothing readable. The manifest record written afterwards commits it.
        with self.fs.open(self._p(rel), "wb") as fh:
            pq.write_table(table, fh, compression="zstd")

    def register(self, con: "duckdb.DuckDBPyConnection") -> None:
        import duckdb

        duckdb.register_filesystem(self.fs, connection=con)

    def check(self, create: bool) -> None:
        """Reach the URL now (creating its bucket or folder when `create` and the filesystem allows):
        a wrong endpoint, key or bucket is one line before any work, not a traceback later."""
        try:
            if create:
                self.fs.makedirs(self.root, exist_ok=True)
            elif not self.fs.exists(self.root):
                raise FileNotFoundError("nothing there (build first)")
        except Exception as exc:  # noqa: BLE001 - every backend raises its own errors
            raise StorageError(f"cannot use {self.base}: {type(exc).__name__}: {' '.join(str(exc).split())}") from None


def storage_of(home: Path) -> Storage:
    """The storage of a home folder: the URL its `storage.json` names, or the folder itself."""
    pointer = Path(home) / POINTER
    if pointer.exists():
        return FsspecStorage(json.loads(pointer.read_text("utf-8"))["url"])
    return LocalStorage(Path(home))


def is_url(value: str) -> bool:
    m = _URL.match(value)
    return m is not None and m.group(1).lower() != "file"


def resolve_home(value: str | Path, check: str | None = None) -> Path:
    """The local folder of a home given as a path, a file:// URL or any fsspec URL (whose state
    folder is created with its `storage.json`). `check` ("read" or "create") reaches the URL first."""
    text = str(value)
    m = _URL.match(text)
    if not m:
        return Path(text).expanduser().resolve()
    protocol, rest = m.group(1).lower(), m.group(2)
    if protocol == "file":
        return Path(rest).expanduser().resolve()
    url = f"{protocol}://{rest.rstrip('/')}"
    import fsspec

    try:
        fsspec.get_filesystem_class(protocol)
    except (ValueError, ImportError) as exc:
        raise StorageError(f"cannot use {url}: {' '.join(str(exc).split())}") from None
    storage = FsspecStorage(url)
    if check:
        storage.check(create=check == "create")
    state_root = Path(os.environ.get("FINHALLU_STATE_DIR") or Path.home() / ".cache" / "finhallu" / "homes")
    safe = [re.sub(r"[^\w.-]", "_", part) for part in rest.strip("/").split("/") if part not in ("", ".", "..")]
    state = (state_root / protocol).joinpath(*safe).resolve()
    pointer = state / POINTER
    if pointer.exists():
        known = json.loads(pointer.read_text("utf-8"))["url"]
        if known != url:
            raise StorageError(f"the state folder {state} belongs to {known}, not {url}; set FINHALLU_STATE_DIR")
    else:
        atomic_write_bytes(pointer, json.dumps({"url": url}).encode("utf-8"))
    return state


def read_parquet(url: str, without: Collection[str] = ()) -> pl.DataFrame:
    """A Parquet file by local path or fsspec URL; `without`: columns not to read (never loaded)."""
    if not is_url(url):  # the footer is read for the column names only when some are left out
        return pl.read_parquet(url, columns=_kept(pl.read_parquet_schema(url), without) if without else None)
    import fsspec

    with fsspec.open(url, "rb") as fh:
        columns = _kept(pq.read_schema(fh).names, without) if without else None
        fh.seek(0)
        return pl.read_parquet(fh, columns=columns)


def _kept(names: Iterable[str], without: Collection[str]) -> list[str]:
    return [n for n in names if n not in without]
