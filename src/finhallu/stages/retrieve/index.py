"""FAISS search indexes for the retrieve stage: exact by default, IVF or HNSW above a size,
persisted by content and grown incrementally.

    build_index(vectors, ids, *, model_id, cfg, cache_dir, meta=None) -> SearchIndex
    SearchIndex.search(queries, k)      -> (scores float32 (m, k'), ids list[list[str]])
    SearchIndex.search_rows(queries, k) -> (scores float32 (m, k'), rows int64 (m, k'))
    exact_search_numpy(vectors, queries, k, ids=None) -> (scores, rows)   (brute-force baseline)
    measure_recall_loss(vectors, queries, k, cfg, *, index=None) -> RecallReport

k' = min(k, ntotal). `rows` index the `vectors` passed to build_index (-1 = no result, only
possible for IVF when the probed lists hold fewer than k' vectors; its score is -inf and the
ids list of that query is shorter).

Canonical ranking. FAISS (or NumPy, for the baseline) only proposes candidates: the top
k + margin by its float32 scores. Every candidate is then rescored in float64 (float32 products
are exact in float64; the sum has a fixed order) and ranked by (-score, id), ids compared as
strings. So results do not depend on BLAS kernels, batch shapes or the order vectors were added
in: an incrementally grown flat index, a loaded one and a fresh one return bit-identical
scores and ids, and so does the NumPy baseline. Whenever the last candidate's float32 score
comes within the float32 error bound of the k-th score (a tie or near-tie may reach beyond the
candidates), the query is searched again with 4x as many candidates, until no candidate beyond
can tie or the whole index was ranked.

Kinds (IndexConfig): `index_kind` auto -> IndexFlatIP below `ann_threshold` passages,
`ann_kind` (ivf | hnsw) at or above it; flat | ivf | hnsw force a kind.
  ivf:  IndexIVFFlat (inner product, spherical k-means seeded with `index_seed`,
        nlist = `ivf_nlist` or round(4*sqrt(n)) capped at n/39), `ivf_nprobe` lists searched.
        Vectors are assigned to their nearest centroid canonically (float64 near-tie check,
        lowest centroid wins), so the lists do not depend on how vectors were batched.
  hnsw: IndexHNSWFlat (inner product, `hnsw_m`, `hnsw_ef_construction`, level generator
        seeded with `index_seed`), built single-threaded so the graph is reproducible;
        `hnsw_ef_search` (at least k') at query time.

Persistence (when cache_dir is given): cache_dir/index/<model id>/<content hash[:16]>/ holds
index.faiss and manifest.json. The content hash covers the model id, the build recipe (kind and
the parameters that shape a from-scratch build; not nprobe/efSearch, which are read from the
config at every call) and every (id, vector) pair in id order, so the same passages in any order
load the same index. A later call with the same content loads it (checked: manifest, its hash,
and the index file's sha256; anything corrupt or missing is rebuilt and replaced, never an error).
If a saved index with the same model id and recipe holds a strict subset of the ids with the same
vector for every shared id (a blake2b-64 hash per vector is kept in the manifest), only the new
vectors are added and the result is saved under the new content hash. A removed or changed id
means no saved index is a subset: full rebuild. An IVF index is retrained from scratch once it
would hold more than `ivf_retrain_growth` times the vectors its centroids were trained on.

Incremental vs full rebuild:
  flat: identical results (scores and ids, bit for bit).
  ivf:  identical to an index built with the same trained centroids; a from-scratch rebuild
        retrains the centroids on all vectors, so its results differ within the IVF's recall loss.
  hnsw: the graph depends on insertion order; results differ from a rebuild within the recall
        loss (tests require >= 0.95 top-10 overlap between the two and >= 0.9 recall each).
  So for ann kinds the output may depend on which indexes the cache already held; flat never does.

Writes are atomic (temporary folder + rename). When two processes save the same content, the
second rename fails; the loser keeps the winner's copy if it is valid and replaces it otherwise.

faiss-cpu 1.15 bundles OpenBLAS 0.3.15, which does not recognize Sapphire/Emerald Rapids CPUs
and falls back to its SSE3 ("Prescott") kernels, making flat search about 4x slower. Importing
this module before anything else imports faiss selects the SkylakeX kernels where the CPU has
AVX-512 (an explicit OPENBLAS_CORETYPE always wins; the variable is restored after the import).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import platform
import re
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from typing import Literal

from pydantic import Field

from finhallu.schemas.section import Section

log = logging.getLogger("finhallu.index")


def _prefer_fast_openblas() -> str | None:
    """Set OPENBLAS_CORETYPE for faiss's OpenBLAS if it would misdetect this CPU; returns the
    previous value marker so the caller can restore the environment after importing faiss."""
    if "faiss" in sys.modules or "OPENBLAS_CORETYPE" in os.environ:
        return None
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags: set[str] = set()
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return None
    if {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
        return "SkylakeX"
    return None


_BLAS_HINT = _prefer_fast_openblas()
import faiss  # noqa: E402  (after the OpenBLAS core hint)
from faiss.contrib.ivf_tools import add_preassigned  # noqa: E402


class IndexConfig(Section):
    """The FAISS index settings of the retrieve stage. `auto`: exact IndexFlatIP below `ann_threshold`
    passages, `ann_kind` at or above it; `flat`/`ivf`/`hnsw` force a kind at any size."""

    index_kind: Literal["auto", "flat", "ivf", "hnsw"] = "auto"
    ann_kind: Literal["ivf", "hnsw"] = "ivf"
    ann_threshold: int = Field(200_000, ge=1)
    ivf_nlist: int | None = Field(None, ge=1)  # None: about 4*sqrt(n), at most n/39
    ivf_nprobe: int = Field(32, ge=1)
    # An incrementally grown IVF keeps its trained centroids until it holds this many times
    # the vectors they were trained on; then it is retrained from scratch.
    ivf_retrain_growth: float = Field(2.0, ge=1.0)
    hnsw_m: int = Field(32, ge=2)
    hnsw_ef_construction: int = Field(80, ge=1)
    hnsw_ef_search: int = Field(128, ge=1)
    index_seed: int = 1234  # k-means (IVF) and level generator (HNSW) seed


if _BLAS_HINT is not None:
    os.environ.pop("OPENBLAS_CORETYPE", None)  # only faiss's OpenBLAS needed it; keep children clean

FORMAT = 1
INDEX_FILE = "index.faiss"
MANIFEST_FILE = "manifest.json"
KINDS = ("flat", "ivf", "hnsw")
_IVF_NITER = 10  # FAISS's default for IVF training
_IVF_MAX_POINTS_PER_CENTROID = 128  # training sample: at most 128 * nlist vectors (seeded)
_CHUNK_ELEMS = 1 << 20  # elements per temporary array in search (8 MiB of float64)
_STALE_AFTER_S = 3600.0


def blas_core_hint() -> str | None:
    """The OpenBLAS core type this module asked faiss to use (None: left to OpenBLAS)."""
    return _BLAS_HINT


# --------------------------------------------------------------------------- configuration


def _cfg(cfg: Any) -> Any:
    return IndexConfig() if cfg is None else cfg


def resolve_kind(n: int, cfg: Any = None) -> str:
    """The index kind build_index uses for n vectors under cfg."""
    cfg = _cfg(cfg)
    kind = cfg.index_kind
    if kind == "auto":
        kind = cfg.ann_kind if n >= cfg.ann_threshold else "flat"
    if kind not in KINDS:
        raise ValueError(f"unknown index kind {kind!r}")
    return kind


def ivf_nlist(n: int, cfg: Any = None) -> int:
    cfg = _cfg(cfg)
    if cfg.ivf_nlist:
        return max(1, min(int(cfg.ivf_nlist), n))
    return max(1, min(round(4 * math.sqrt(n)), n // 39))


def _recipe(kind: str, dim: int, cfg: Any) -> dict:
    """What shapes a from-scratch build (enters the content hash); search-time knobs do not."""
    r: dict[str, Any] = {"kind": kind, "dim": dim, "metric": "inner_product"}
    if kind == "ivf":
        r.update(
            nlist=cfg.ivf_nlist or "round(4*sqrt(n)) <= n/39",
            seed=cfg.index_seed,
            niter=_IVF_NITER,
            max_points_per_centroid=_IVF_MAX_POINTS_PER_CENTROID,
            spherical=True,
        )
    elif kind == "hnsw":
        r.update(M=cfg.hnsw_m, ef_construction=cfg.hnsw_ef_construction, seed=cfg.index_seed)
    return r


def _search_params(kind: str, cfg: Any) -> dict:
    if kind == "ivf":
        return {"nprobe": int(cfg.ivf_nprobe)}
    if kind == "hnsw":
        return {"ef_search": int(cfg.hnsw_ef_search)}
    return {}


# --------------------------------------------------------------------------- hashing


def _as_matrix(a: Any, name: str = "vectors") -> np.ndarray:
    x = np.asarray(a)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {x.shape}")
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.size and not np.isfinite(x).all():
        raise ValueError(f"{name} contain NaN or infinite values")
    return x


def vector_hashes(x: np.ndarray) -> list[str]:
    """blake2b-64 of each row's float32 bytes."""
    return [hashlib.blake2b(row.tobytes(), digest_size=8).hexdigest() for row in x]


def _lp(s: str) -> bytes:
    b = s.encode("utf-8")
    return str(len(b)).encode() + b":" + b


def content_hash(model_id: str, recipe: dict, ids: list[str], vhashes: list[str]) -> str:
    """sha256 of (format, model id, recipe, sorted (id, vector hash) pairs): order-independent."""
    h = hashlib.sha256()
    h.update(_lp(json.dumps({"format": FORMAT, "model_id": model_id, "recipe": recipe}, sort_keys=True)))
    for i in sorted(range(len(ids)), key=ids.__getitem__):
        h.update(_lp(ids[i]) + _lp(vhashes[i]))
    return h.hexdigest()


def ids_hash(ids: list[str]) -> str:
    h = hashlib.sha256()
    for i in sorted(ids):
        h.update(_lp(i))
    return h.hexdigest()


def _safe_name(model_id: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._")[:100]
    return name or "model"


def _tiebreak_ranks(ids: list[str]) -> np.ndarray:
    """rank[p] = position of ids[p] in sorted (string) order: the tie-break key."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(ids), dtype=np.int64)
    return rank


# --------------------------------------------------------------------------- canonical top-k


def _tie_tolerance(dim: int) -> float:
    """Bound on |float32 dot - exact| for unit vectors (per unit of |q|*|x|), with room to spare."""
    return max(1e-4, 2.0 * dim * 2.0**-24)


def _exact_scores(q: np.ndarray, vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """float64 q[i] . vectors[rows[i, j]] for every (i, j). Each product of float32 values is
    exact in float64 and each sum runs over the d products in the same fixed (pairwise) order,
    so a pair's score never depends on the batch it is computed in. Memory stays bounded."""
    m, kk = rows.shape
    d = q.shape[1]
    out = np.empty((m, kk), dtype=np.float64)
    if m == 0 or kk == 0:
        return out
    per = max(1, _CHUNK_ELEMS // max(kk * d, 1))  # queries per chunk
    if per > 1 or kk * d <= _CHUNK_ELEMS:
        for b in range(0, m, per):
            v = vectors[rows[b : b + per]].astype(np.float64)
            v *= q[b : b + per, None, :].astype(np.float64)
            out[b : b + per] = v.sum(axis=-1)
        return out
    cols = max(1, _CHUNK_ELEMS // max(d, 1))  # very wide candidate lists (tie expansion): split them
    for i in range(m):
        qi = q[i].astype(np.float64)
        for c in range(0, kk, cols):
            v = vectors[rows[i, c : c + cols]].astype(np.float64)
            v *= qi
            out[i, c : c + cols] = v.sum(axis=-1)
    return out


RawSearch = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def _canonical_search(
    raw: RawSearch, q: np.ndarray, k: int, n: int, vectors: np.ndarray, rows: np.ndarray | None, tiebreak: np.ndarray, vmax: float
) -> tuple[np.ndarray, np.ndarray]:
    """raw(q, kk) -> (float32 scores, positions; -1 = none) proposes candidates; they are rescored
    exactly and ranked by (-score, tiebreak[position]). Returns (scores (m,k), positions (m,k))."""
    m = len(q)
    k = min(k, n)
    out_s = np.full((m, k), -np.inf, dtype=np.float32)
    out_p = np.full((m, k), -1, dtype=np.int64)
    if m == 0 or k <= 0:
        return out_s, out_p
    qnorm = np.linalg.norm(q, axis=1).astype(np.float64)
    tol = _tie_tolerance(q.shape[1]) * max(vmax, 1e-30)
    kk = min(n, k + max(2, k // 4))
    todo = np.arange(m)
    while len(todo):
        again_parts = []
        step = max(1, _CHUNK_ELEMS // kk)  # bounds the (queries x candidates) arrays
        for b in range(0, len(todo), step):
            part = todo[b : b + step]
            qs = q[part]
            D, I = raw(qs, kk)
            valid = I >= 0
            pos = np.where(valid, I, 0)
            exact = _exact_scores(qs, vectors, pos if rows is None else rows[pos])
            exact[~valid] = -np.inf
            tb = np.where(valid, tiebreak[pos], np.iinfo(np.int64).max)
            order = np.lexsort((tb, -exact), axis=-1)[:, :k]
            top_exact = np.take_along_axis(exact, order, axis=1)
            out_s[part] = top_exact.astype(np.float32)
            out_p[part] = np.where(np.take_along_axis(valid, order, axis=1), np.take_along_axis(I, order, axis=1), -1)
            if kk < n:
                # A vector beyond the candidates scores at most the lowest candidate score (+ float32
                # error): search again wider wherever that could still tie with or beat the k-th
                # score. (Raw results need not be sorted: NumPy's argpartition output is not.)
                floor = np.where(valid, D, np.inf).min(axis=1).astype(np.float64)
                again = valid.all(axis=1) & (floor >= top_exact[:, -1] - tol * qnorm[part])
                again_parts.append(part[again])
        if kk >= n or not again_parts:
            break
        todo = np.concatenate(again_parts)
        kk = min(n, kk * 4)
    return out_s, out_p


def exact_search_numpy(
    vectors: Any, queries: Any, k: int, ids: list[str] | None = None, batch: int = 2048
) -> tuple[np.ndarray, np.ndarray]:
    """The NumPy brute-force baseline: float32 matrix product + argpartition per query batch,
    then the same canonical ranking as SearchIndex (ties: smaller id; ids default to row order).
    Returns (scores float32 (m, k'), rows int64 (m, k'))."""
    x = _as_matrix(vectors)
    q = _as_matrix(queries, "queries")
    n = len(x)
    if q.shape[1] != x.shape[1]:
        raise ValueError(f"queries have dimension {q.shape[1]}, vectors {x.shape[1]}")
    tiebreak = _tiebreak_ranks(list(ids)) if ids is not None else np.arange(n, dtype=np.int64)
    xt = x.T

    def raw(qs: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
        D = np.empty((len(qs), kk), dtype=np.float32)
        I = np.empty((len(qs), kk), dtype=np.int64)
        for b in range(0, len(qs), batch):
            S = qs[b : b + batch] @ xt
            if kk < n:
                part = np.argpartition(S, n - kk, axis=1)[:, n - kk :]
            else:
                part = np.broadcast_to(np.arange(n, dtype=np.int64), S.shape)
            D[b : b + batch] = np.take_along_axis(S, part, axis=1)
            I[b : b + batch] = part
        return D, I

    vmax = float(np.linalg.norm(x, axis=1).max()) if n else 0.0
    return _canonical_search(raw, q, k, n, x, None, tiebreak, vmax)


# --------------------------------------------------------------------------- the index


@contextlib.contextmanager
def _faiss_threads(n: int) -> Iterator[None]:
    prev = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(prev)


@dataclass(eq=False)
class SearchIndex:
    """A FAISS index plus what canonical search needs: ids in index order, the row of each
    indexed vector in `vectors` (the matrix given to build_index), and the kind's parameters."""

    index: Any
    kind: str
    ids: list[str]  # ids in index (insertion) order
    rows: np.ndarray  # index position -> row of `vectors`
    vectors: np.ndarray
    params: dict = field(default_factory=dict)  # build parameters (nlist, trained_n, M, ...)
    search_params: dict = field(default_factory=dict)  # nprobe / ef_search; may be changed
    model_id: str = ""
    content_hash: str = ""
    origin: str = "built"  # built | loaded | incremental
    path: Path | None = None
    _tiebreak: np.ndarray = field(init=False, repr=False)
    _vmax: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._tiebreak = _tiebreak_ranks(self.ids)
        self._vmax = float(np.linalg.norm(self.vectors, axis=1).max()) if len(self.vectors) else 0.0

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    def _raw(self, q: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
        params = None
        if self.kind == "ivf":
            nprobe = int(min(self.search_params.get("nprobe", 32), self.index.nlist))
            params = faiss.SearchParametersIVF(nprobe=nprobe)  # type: ignore[call-arg]  # SWIG keyword init; the stubs omit it
        elif self.kind == "hnsw":
            ef_search = int(max(self.search_params.get("ef_search", 128), kk))
            params = faiss.SearchParametersHNSW(efSearch=ef_search)  # type: ignore[attr-defined]  # in faiss, not its stubs
        return self.index.search(q, kk, params=params)

    def _search_positions(self, queries: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = _as_matrix(queries, "queries")
        if q.shape[1] != self.dim:
            raise ValueError(f"queries have dimension {q.shape[1]}, the index {self.dim}")
        return _canonical_search(self._raw, q, k, self.ntotal, self.vectors, self.rows, self._tiebreak, self._vmax)

    def search_rows(self, queries: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores float32 (m, k'), rows int64 (m, k') into the build_index `vectors`; -1 = none)."""
        s, p = self._search_positions(queries, k)
        return s, np.where(p >= 0, self.rows[np.maximum(p, 0)], -1)

    def search(self, queries: Any, k: int) -> tuple[np.ndarray, list[list[str]]]:
        """(scores float32 (m, k'), ids per query, best first; ties: smaller id first)."""
        s, p = self._search_positions(queries, k)
        ids = self.ids
        return s, [[ids[j] for j in row if j >= 0] for row in p.tolist()]

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "ntotal": self.ntotal,
            "dim": self.dim,
            "params": dict(self.params),
            "search_params": dict(self.search_params),
            "model_id": self.model_id,
            "content_hash": self.content_hash,
            "origin": self.origin,
            "path": str(self.path) if self.path else None,
            "faiss_version": faiss.__version__,
        }


# --------------------------------------------------------------------------- building


def _ivf_assign(ivf: Any, x: np.ndarray) -> np.ndarray:
    """Nearest centroid per vector, canonical: near-ties (within float32 error) are settled in
    float64 and go to the lowest centroid id, so assignment never depends on batching."""
    nlist = int(ivf.nlist)
    C = ivf.quantizer.reconstruct_n(0, nlist)
    cmax = float(np.linalg.norm(C, axis=1).max()) if nlist else 0.0
    tol = _tie_tolerance(x.shape[1]) * max(cmax, 1e-30)
    xnorm = np.linalg.norm(x, axis=1)
    out = np.empty(len(x), dtype=np.int64)
    ct = C.T
    for b in range(0, len(x), 4096):
        xb = x[b : b + 4096]
        S = xb @ ct
        best = S.argmax(axis=1)
        s1 = S[np.arange(len(xb)), best]
        near = S >= (s1 - tol * xnorm[b : b + 4096])[:, None]
        for r in np.flatnonzero(near.sum(axis=1) > 1):
            cand = np.flatnonzero(near[r])
            ex = (C[cand].astype(np.float64) * xb[r].astype(np.float64)).sum(axis=-1)
            best[r] = cand[int(np.argmax(ex))]
        out[b : b + len(xb)] = best
    return out


def _ivf_add(ivf: Any, x: np.ndarray) -> None:
    if len(x):
        add_preassigned(ivf, np.ascontiguousarray(x, dtype=np.float32), _ivf_assign(ivf, x))


def _new_index(kind: str, x: np.ndarray, cfg: Any) -> tuple[Any, dict]:
    """A from-scratch index over x (insertion order = row order) and its build parameters."""
    n, d = x.shape
    if kind == "flat":
        flat = faiss.IndexFlatIP(d)
        flat.add(x)
        return flat, {}
    if kind == "ivf":
        nlist = ivf_nlist(n, cfg)
        ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
        ivf.cp.seed = int(cfg.index_seed)
        ivf.cp.niter = _IVF_NITER
        ivf.cp.spherical = True
        ivf.cp.max_points_per_centroid = _IVF_MAX_POINTS_PER_CENTROID
        ivf.train(x)  # FAISS subsamples (seeded) above max_points_per_centroid * nlist
        _ivf_add(ivf, x)
        return ivf, {"nlist": nlist, "trained_n": n, "seed": int(cfg.index_seed), "niter": _IVF_NITER}
    if kind == "hnsw":
        hnsw = faiss.IndexHNSWFlat(d, int(cfg.hnsw_m), faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = int(cfg.hnsw_ef_construction)
        hnsw.hnsw.efSearch = int(cfg.hnsw_ef_search)
        _hnsw_add(hnsw, x, int(cfg.index_seed))
        return hnsw, {"M": int(cfg.hnsw_m), "ef_construction": int(cfg.hnsw_ef_construction), "seed": int(cfg.index_seed)}
    raise ValueError(f"unknown index kind {kind!r}")


def _hnsw_add(index: Any, x: np.ndarray, seed: int) -> None:
    # The level generator is not serialized: reseed from (seed, ntotal) so a given base grows the same way.
    index.hnsw.rng = faiss.RandomGenerator(int((seed * 1_000_003 + index.ntotal) % 2**31))  # type: ignore[attr-defined]  # in faiss, not its stubs
    with _faiss_threads(1):  # parallel insertion makes the graph depend on thread timing
        index.add(x)


def _add(kind: str, index: Any, x: np.ndarray, params: dict) -> None:
    if not len(x):
        return
    if kind == "flat":
        index.add(x)
    elif kind == "ivf":
        _ivf_add(index, x)
    else:
        _hnsw_add(index, x, int(params.get("seed", 0)))


# --------------------------------------------------------------------------- persistence


def _fsync_write(path: Path, data: bytes | memoryview) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _read_manifest(folder: Path) -> dict | None:
    try:
        man = json.loads((folder / MANIFEST_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        return None
    ids, vh = man.get("ids"), man.get("vector_hashes")
    if not (isinstance(ids, list) and isinstance(vh, list) and len(ids) == len(vh) == man.get("n")):
        return None
    if not all(isinstance(i, str) for i in ids) or not all(isinstance(h, str) for h in vh):
        return None
    return man


def _load(folder: Path, expect_hash: str | None = None) -> tuple[Any, dict] | None:
    """(index, manifest) if the folder holds a complete, uncorrupted index; None otherwise."""
    if not (folder / MANIFEST_FILE).exists() and not (folder / INDEX_FILE).exists():
        return None
    try:
        man = _read_manifest(folder)
        if man is None:
            raise ValueError("manifest unreadable or incomplete")
        chash = man.get("content_hash")
        if expect_hash is not None and chash != expect_hash:
            raise ValueError("manifest is for other content")
        if content_hash(man["model_id"], man["recipe"], man["ids"], man["vector_hashes"]) != chash:
            raise ValueError("manifest does not match its content hash")
        if man["kind"] != man["recipe"].get("kind") or man["kind"] not in KINDS:
            raise ValueError("manifest kind inconsistent")
        blob = (folder / INDEX_FILE).read_bytes()
        if hashlib.sha256(blob).hexdigest() != man.get("index_sha256"):
            raise ValueError("index file does not match the manifest's sha256")
        index = faiss.deserialize_index(np.frombuffer(blob, dtype=np.uint8))
        if index.ntotal != man["n"] or index.d != man["dim"]:
            raise ValueError("index size differs from the manifest")
        return index, man
    except Exception as e:  # noqa: BLE001 - a bad cache entry is rebuilt, never fatal
        log.warning("ignoring index cache entry %s: %s", folder, e)
        return None


def _sweep(root: Path) -> None:
    """Remove temporary and stale folders left by crashed writers (older than an hour)."""
    now = time.time()
    for p in root.iterdir():
        if p.name.startswith((".tmp-", ".stale-")):
            with contextlib.suppress(OSError):
                if now - p.stat().st_mtime > _STALE_AFTER_S:
                    shutil.rmtree(p, ignore_errors=True)


def _move_aside(target: Path) -> None:
    stale = target.parent / f".stale-{target.name}-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(target, stale)
    except FileNotFoundError:
        return
    shutil.rmtree(stale, ignore_errors=True)


def _save(target: Path, index: Any, manifest: dict) -> bool:
    """Write index + manifest atomically to target. True if ours is the copy now there; False if
    another writer's valid copy of the same content won the rename race (it is kept)."""
    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    _sweep(root)
    tmp = root / f".tmp-{target.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        blob = faiss.serialize_index(index)
        # a uint8 array supports the buffer protocol; numpy's stubs do not declare it
        manifest = dict(manifest, index_sha256=hashlib.sha256(blob).hexdigest(), index_bytes=int(blob.nbytes))  # type: ignore[arg-type]
        _fsync_write(tmp / INDEX_FILE, memoryview(blob))  # type: ignore[arg-type]
        _fsync_write(tmp / MANIFEST_FILE, json.dumps(manifest, ensure_ascii=False, indent=1).encode("utf-8"))
        for _ in range(5):
            try:
                os.rename(tmp, target)  # atomic; fails if target exists and is not empty
                return True
            except OSError:
                if _load(target, manifest["content_hash"]) is not None:
                    return False  # a concurrent writer stored the same content first
                _move_aside(target)  # corrupt or partial: replace it
        raise OSError(f"could not store index at {target}")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _find_base(
    root: Path, model_id: str, recipe: dict, vh_of: dict[str, str], n: int, cfg: Any, skip: str
) -> tuple[Any, dict] | None:
    """The largest saved index (same model and recipe) whose ids are a strict subset of ours with
    identical vectors; None if there is none (e.g. an id was removed or its vector changed)."""
    if not root.is_dir():
        return None
    cands = []
    for folder in sorted(root.iterdir()):
        if folder.name.startswith(".") or folder.name == skip or not folder.is_dir():
            continue
        man = _read_manifest(folder)
        if man is None or man.get("model_id") != model_id or man.get("recipe") != recipe or man["n"] >= n:
            continue
        if any(vh_of.get(i) != h for i, h in zip(man["ids"], man["vector_hashes"])):
            continue
        if recipe["kind"] == "ivf":
            trained = (man.get("params") or {}).get("trained_n") or 0
            if n > cfg.ivf_retrain_growth * trained:
                continue  # grown too far past the data its centroids were trained on
        cands.append((-man["n"], folder.name, folder))
    for _, _, folder in sorted(cands):
        got = _load(folder)
        if got is not None:
            return got
    return None


def _check_ids(ids: list[str], n: int) -> None:
    if len(ids) != n:
        raise ValueError(f"{len(ids)} ids for {n} vectors")
    if not all(isinstance(i, str) for i in ids):
        raise TypeError("ids must be strings")
    if len(set(ids)) != n:
        raise ValueError("ids must be unique")
    if n == 0:
        raise ValueError("cannot index zero vectors")


def _grown_or_new(
    kind: str, x: np.ndarray, ids: list[str], base: tuple[Any, dict] | None, cfg: Any
) -> tuple[Any, dict, list[str], str, str | None]:
    """(index, params, ids in index order, origin, base content hash): the saved `base` grown by
    the vectors it lacks (appended in row order), or without one an index built from scratch."""
    if base is None:
        index, params = _new_index(kind, x, cfg)
        return index, params, ids, "built", None
    index, man = base
    have = set(man["ids"])
    new_rows = np.array([r for r, i in enumerate(ids) if i not in have], dtype=np.int64)
    params = dict(man.get("params") or {})
    _add(kind, index, x[new_rows], params)
    return index, params, list(man["ids"]) + [ids[r] for r in new_rows], "incremental", man["content_hash"]


def _stored(target: Path, index: Any, manifest: dict) -> Path | None:
    """Where the index is saved now (target, also when another writer's copy won); None if it could not be."""
    try:
        _save(target, index, manifest)
    except OSError as e:  # an unwritable cache costs a rebuild next time, never this result
        log.warning("could not save index to %s: %s", target, e)
        return None
    return target


def build_index(
    vectors: Any, ids: list[str], *, model_id: str, cfg: Any = None, cache_dir: Path | str | None = None, meta: dict | None = None
) -> SearchIndex:
    """An index over `vectors` (float32 (n, d), L2-normalized) labelled by `ids` (unique str).

    cfg: IndexConfig (or any object with its fields, e.g. RetrieveConfig); None = defaults. With cache_dir,
    the index is loaded if this exact content was saved before, grown from a saved subset, or
    built and saved (see the module docstring). `meta` (e.g. passages version, split) is stored
    in a newly written manifest only.
    """
    cfg = _cfg(cfg)
    x = _as_matrix(vectors)
    ids = list(ids)
    n, d = x.shape
    _check_ids(ids, n)
    kind = resolve_kind(n, cfg)
    recipe = _recipe(kind, d, cfg)
    sparams = _search_params(kind, cfg)

    if cache_dir is None:
        index, params = _new_index(kind, x, cfg)
        return SearchIndex(index, kind, ids, np.arange(n, dtype=np.int64), x, params, sparams, model_id, "", "built")

    vh = vector_hashes(x)
    chash = content_hash(model_id, recipe, ids, vh)
    root = Path(cache_dir) / "index" / _safe_name(model_id)
    target = root / chash[:16]
    pos = {i: r for r, i in enumerate(ids)}

    got = _load(target, chash)
    if got is not None:
        index, man = got
        rows = np.fromiter((pos[i] for i in man["ids"]), dtype=np.int64, count=n)
        return SearchIndex(
            index, kind, list(man["ids"]), rows, x, dict(man.get("params") or {}), sparams, model_id, chash, "loaded", target
        )

    base = _find_base(root, model_id, recipe, dict(zip(ids, vh)), n, cfg, skip=target.name)
    index, params, order, origin, base_hash = _grown_or_new(kind, x, ids, base, cfg)
    rows = np.fromiter((pos[i] for i in order), dtype=np.int64, count=n)
    manifest = {
        "format": FORMAT,
        "model_id": model_id,
        "kind": kind,
        "recipe": recipe,
        "params": params,
        "search_params_at_build": sparams,
        "n": n,
        "dim": d,
        "content_hash": chash,
        "ids_hash": ids_hash(ids),
        "origin": origin,
        "base": base_hash,
        "faiss_version": faiss.__version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "meta": meta or {},
        "ids": order,
        "vector_hashes": [vh[r] for r in rows.tolist()],
    }
    path = _stored(target, index, manifest)
    return SearchIndex(index, kind, order, rows, x, params, sparams, model_id, chash, origin, path)


# --------------------------------------------------------------------------- recall


@dataclass
class RecallReport:
    kind: str
    k: int
    recall: float  # mean |ANN top-k ∩ exact top-k| / k over the queries
    n: int
    queries: int
    params: dict
    search_params: dict
    build_s: float
    search_s: float
    exact_s: float

    @property
    def loss(self) -> float:
        return 1.0 - self.recall

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "k": self.k,
            "recall": self.recall,
            "recall_loss": self.loss,
            "n": self.n,
            "queries": self.queries,
            "params": self.params,
            "search_params": self.search_params,
            "build_s": self.build_s,
            "search_s": self.search_s,
            "exact_s": self.exact_s,
        }


def recall_at_k(approx_rows: np.ndarray, exact_rows: np.ndarray) -> float:
    """Mean share of each query's exact top-k rows found in its approximate top-k (-1 = none)."""
    if exact_rows.size == 0:
        return 1.0
    hit = (approx_rows[:, :, None] == exact_rows[:, None, :]) & (exact_rows[:, None, :] >= 0)
    found = hit.any(axis=1).sum(axis=1)
    return float(np.mean(found / np.maximum((exact_rows >= 0).sum(axis=1), 1)))


def measure_recall_loss(
    vectors: Any,
    queries: Any,
    k: int = 10,
    cfg: Any = None,
    *,
    index: SearchIndex | None = None,
    exact_rows: np.ndarray | None = None,
) -> RecallReport:
    """recall@k of an ANN index against exact search over the same vectors.

    index=None: builds the ANN kind cfg would use above its threshold (cfg.index_kind if it is
    ivf/hnsw, else cfg.ann_kind), without caching. index=a SearchIndex (e.g. the one the stage
    built): measures that one; `vectors` may then be None. A flat index reports recall 1.0.
    exact_rows: the exact top-k rows (into `vectors` / the index's vectors) if already known,
    e.g. from a flat SearchIndex.search_rows; otherwise computed here with IndexFlatIP.
    """
    cfg = _cfg(cfg)
    q = _as_matrix(queries, "queries")
    build_s = 0.0
    if index is None:
        x = _as_matrix(vectors)
        kind = cfg.index_kind if cfg.index_kind in ("ivf", "hnsw") else cfg.ann_kind
        t = time.perf_counter()
        ann, params = _new_index(kind, x, cfg)
        build_s = time.perf_counter() - t
        ids = [f"{i:012d}" for i in range(len(x))]
        index = SearchIndex(ann, kind, ids, np.arange(len(x), dtype=np.int64), x, params, _search_params(kind, cfg))
    t = time.perf_counter()
    _, approx = index.search_rows(q, k)
    search_s = time.perf_counter() - t
    exact_s = 0.0
    if exact_rows is None:
        exact_index = SearchIndex(
            _new_index("flat", index.vectors[index.rows], cfg)[0], "flat", index.ids, index.rows, index.vectors
        )
        t = time.perf_counter()
        _, exact = exact_index.search_rows(q, k)
        exact_s = time.perf_counter() - t
    else:
        exact = np.asarray(exact_rows, dtype=np.int64)
        if exact.shape != approx.shape:
            raise ValueError(f"exact_rows has shape {exact.shape}, expected {approx.shape}")
    return RecallReport(
        index.kind,
        min(k, index.ntotal),
        recall_at_k(approx, exact),
        index.ntotal,
        len(q),
        dict(index.params),
        dict(index.search_params),
        build_s,
        search_s,
        exact_s,
    )
