"""BM25 over Kiwi morphemes: the lexical retrieval baseline and the lexical half of `hybrid`.

Terms are content morphemes from Kiwi: common/proper nouns, numerals, verb and adjective stems,
roots, numbers, Hanja, serials and foreign (Latin) words, the latter lowercased with English
stopwords dropped. Particles, endings, suffixes and punctuation never count. Scoring is
bm25s (Lucene variant; k1, b configurable). Results are deterministic: ties break by passage
position.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

from finhallu.text import sentences
from finhallu.embedders import topk
from finhallu.text.words import STOPWORDS

TAGS = ("NNG", "NNP", "NR", "SN", "SL", "SH", "XR", "VV", "VA", "W_SERIAL")
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")
_EDGE_PUNCT = re.compile(r"^[^\w]+|[^\w]+$")


def lexical_id(k1: float = 1.5, b: float = 0.75) -> str:
    import kiwipiepy

    kiwi = ".".join(kiwipiepy.__version__.split(".")[:2])
    return f"bm25-kiwi{kiwi}-k{k1:g}-b{b:g}-v1"


def _keep(form: str, tag: str) -> str | None:
    if not tag.startswith(TAGS):  # VV-R / VV-I / VA-R ... count as VV / VA
        return None
    if tag == "SL":
        w = _EDGE_PUNCT.sub("", form.lower())
        return w if w and w not in STOPWORDS else None
    return form


def morphemes(texts: list[str]) -> list[list[str]]:
    """Content morphemes of each text (Kiwi, batched)."""
    clean = [unicodedata.normalize("NFKC", _PRIVATE_USE.sub("", t or "")) for t in texts]
    with sentences._lock:  # the shared Kiwi instance (sentences.py) is not documented as thread-safe
        analysed = list(sentences.kiwi().tokenize(clean))
    out = []
    for toks in analysed:
        terms = []
        for tok in toks:
            term = _keep(tok.form, tok.tag)
            if term:
                terms.append(term)
        out.append(terms)
    return out


class BM25Index:
    """BM25 over Kiwi content morphemes of a fixed passage list.

    `search(queries, k) -> (positions int64 (n, k), scores float32 (n, k))`; `ids` (optional)
    names the passages, `search_ids` returns [(id, score), ...] per query.
    """

    def __init__(self, texts: list[str], ids: list | None = None, k1: float = 1.5, b: float = 0.75):
        import bm25s

        self.ids = list(ids) if ids is not None else list(range(len(texts)))
        if len(self.ids) != len(texts):
            raise ValueError("ids and texts differ in length")
        self.k1, self.b = k1, b
        self.model_id = lexical_id(k1, b)
        self.n = len(texts)
        docs = morphemes(texts)
        vocab: dict[str, int] = {}
        for d in docs:
            for t in d:
                vocab.setdefault(t, len(vocab))
        self.vocab = vocab
        self.bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        if self.n:
            # bm25s' own tokenized input: id lists + vocabulary (an empty passage gets a dummy token)
            tokenized = bm25s.tokenization.Tokenized(ids=[[vocab[t] for t in d] for d in docs], vocab=dict(vocab))
            self.bm25.index(tokenized, show_progress=False)
        self._matrix = None
        if self.n and self.bm25.nonoccurrence_array is None:
            from scipy import sparse

            sc = self.bm25.scores  # per-term rows of per-passage BM25 contributions (CSR by term)
            self._matrix = sparse.csr_matrix(
                (sc["data"], sc["indices"], sc["indptr"]), shape=(len(sc["indptr"]) - 1, sc["num_docs"]), dtype=np.float32
            )

    def query_terms(self, queries: list[str]) -> list[list[int]]:
        """Vocabulary ids of each query's content morphemes (unknown terms dropped, repeats kept)."""
        return [[self.vocab[t] for t in terms if t in self.vocab] for terms in morphemes(queries)]

    def scores(self, queries: list[str]) -> np.ndarray:
        """BM25 score of every passage for each query: float32 (n_queries, n_passages).

        Equal to bm25s' `get_scores_from_ids` per query (a repeated query term counts again), done
        as one sparse product for the whole batch.
        """
        if not self.n:
            return np.zeros((len(queries), 0), dtype=np.float32)
        terms = self.query_terms(queries)
        if self._matrix is None:  # BM25 variants with a non-occurrence term: bm25s query by query
            out = np.zeros((len(queries), self.n), dtype=np.float32)
            for i, ids in enumerate(terms):
                if ids:
                    out[i] = self.bm25.get_scores_from_ids(ids)
            return out
        from scipy import sparse

        rows = np.repeat(np.arange(len(terms)), [len(t) for t in terms])
        cols = np.fromiter((j for t in terms for j in t), dtype=np.int64, count=len(rows))
        q = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(terms), self._matrix.shape[0]))
        return np.asarray((q @ self._matrix).todense(), dtype=np.float32)

    def search(self, queries: list[str], k: int, batch: int = 512) -> tuple[np.ndarray, np.ndarray]:
        parts = [topk(self.scores(queries[i : i + batch]), k) for i in range(0, len(queries), batch)]
        if not parts:
            return np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def search_ids(self, queries: list[str], k: int) -> list[list[tuple[object, float]]]:
        idx, sc = self.search(queries, k)
        return [[(self.ids[j], float(s)) for j, s in zip(row, srow) if j >= 0] for row, srow in zip(idx, sc)]
