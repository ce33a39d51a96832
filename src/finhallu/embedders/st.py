"""sentence-transformers backend: any model id (found in the local Hugging Face cache) or local path.

Default model: nlpai-lab/KURE-v1 (Korean retrieval, XLM-R/BGE-M3 based, 1024-d). Models load
from local files only (HF_HUB_OFFLINE=1); a missing model raises ModelNotAvailableError with
what is missing and how to provide it. Vectors: `normalize_embeddings=True`, batched; device
`cpu` unless configured (`cuda`, `mps`, `auto`).

Model id: `st:<model>@<revision>` plus `|max=<n>` when max_seq_length is overridden and
`|qp=<prefix>` / `|pp=<prefix>` for query/passage prefixes (percent-quoted). The revision is the
hub commit of the cached snapshot, or `fp-<hash>` of a local folder. Device and batch size are
left out on purpose: they change vectors only by float rounding, and one cache serves them all.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np

from finhallu.embedders import Embedder, ModelNotAvailableError, register_embedder
from finhallu.local_models import KURE_ENV, KURE_REPO, _offline, resolve_model_dir

_lock = threading.Lock()


def _device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


@lru_cache(maxsize=4)
def _load(folder: str, device: str):
    _offline()
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(folder, device=device, local_files_only=True)


@register_embedder("sentence_transformers")
class SentenceTransformerEmbedder(Embedder):
    id_prefix = "st:"
    default_model = KURE_REPO

    def __init__(
        self,
        model: str | None = None,
        device: str = "cpu",
        batch_size: int = 32,
        max_seq_length: int | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
    ):
        self.model_name = model or self.default_model
        self.device = device
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.folder, self.revision = self._resolve()
        self._model = None
        self._dim: int | None = None
        self.model_id = self._make_id()

    # -- identity -------------------------------------------------------------------------------
    def _resolve(self) -> tuple[Path, str]:
        is_kure = self.model_name == KURE_REPO
        what = "KURE-v1 embedding model" if is_kure else "sentence-transformers model"
        return resolve_model_dir(self.model_name, "config.json", KURE_ENV if is_kure else None, what)

    def _id_head(self) -> str:
        return f"{self.id_prefix}{quote(self.model_name, safe='/._-')}@{self.revision}"

    def _make_id(self) -> str:
        parts = [self._id_head()]
        if self.max_seq_length:
            parts.append(f"max={self.max_seq_length}")
        if self.query_prefix:
            parts.append(f"qp={quote(self.query_prefix, safe='')}")
        if self.passage_prefix:
            parts.append(f"pp={quote(self.passage_prefix, safe='')}")
        return "|".join(parts)

    @staticmethod
    def parse_id(model_id: str, prefix: str) -> dict:
        head, *opts = model_id.split("|")
        name, _, revision = head[len(prefix) :].rpartition("@")
        kw: dict = {"model": unquote(name), "revision": revision}
        for opt in opts:
            key, _, val = opt.partition("=")
            if key == "max":
                kw["max_seq_length"] = int(val)
            elif key == "qp":
                kw["query_prefix"] = unquote(val)
            elif key == "pp":
                kw["passage_prefix"] = unquote(val)
            else:
                raise ValueError(f"unknown option {key!r} in model id {model_id!r}")
        return kw

    @classmethod
    def from_config(cls, cfg) -> "SentenceTransformerEmbedder":
        return cls(
            cfg.model,
            device=cfg.device,
            batch_size=cfg.batch_size,
            max_seq_length=cfg.max_seq_length,
            query_prefix=cfg.query_prefix,
            passage_prefix=cfg.passage_prefix,
        )

    @classmethod
    def from_model_id(cls, model_id: str, device: str = "cpu") -> "SentenceTransformerEmbedder":
        kw = cls.parse_id(model_id, cls.id_prefix)
        revision = kw.pop("revision")
        emb = cls(device=device, **kw)
        if emb.revision != revision:
            raise ModelNotAvailableError(
                f"vectors were made by {model_id!r}, but the local copy of {emb.model_name!r} is revision "
                f"{emb.revision!r}; provide revision {revision!r} or re-run the embed stage"
            )
        return emb

    # -- encoding -------------------------------------------------------------------------------
    @property
    def model(self):
        if self._model is None:
            m = _load(str(self.folder), _device(self.device))
            if self.max_seq_length:
                m.max_seq_length = self.max_seq_length
            self._model = m
        return self._model

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._dim is None:
            m = self.model
            get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
            self._dim = int(get())
        return self._dim

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with _lock:  # one model instance is shared per folder/device; keep max_seq_length stable
            if self.max_seq_length:
                self.model.max_seq_length = self.max_seq_length
            vecs = self.model.encode(
                list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        return self._encode([self.passage_prefix + t for t in texts])

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode([self.query_prefix + t for t in texts])


@register_embedder("kure")
class KureEmbedder(SentenceTransformerEmbedder):
    """`backend: kure` = sentence_transformers with nlpai-lab/KURE-v1 (same model ids)."""

    @classmethod
    def claims(cls, model_id: str) -> bool:
        return False  # its ids are sentence_transformers ids

    @classmethod
    def from_config(cls, cfg) -> "SentenceTransformerEmbedder":
        return SentenceTransformerEmbedder(
            cfg.model or KURE_REPO,
            device=cfg.device,
            batch_size=cfg.batch_size,
            max_seq_length=cfg.max_seq_length,
            query_prefix=cfg.query_prefix,
            passage_prefix=cfg.passage_prefix,
        )
