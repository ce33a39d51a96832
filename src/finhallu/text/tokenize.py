"""Token counting for passage sizing, by a named backend recorded with every passages version.

  approx     (default, offline) approximates an XLM-R SentencePiece vocabulary (KURE-v1 is
             XLM-R based): Hangul runs cost about one piece per 1.5 syllables, Latin words one
             per 4 letters, digits one per 3. Recorded as `approx-xlmr-v1`.
  kure       KURE-v1's own tokenizer.json (`tokenizers`), from $FINHALLU_KURE_PATH or the local
             Hugging Face cache (nlpai-lab/KURE-v1); never downloaded; a clear error when absent.
             Recorded as `kure-v1:<sha256[:12] of tokenizer.json>`.
  hf:<path>  any local tokenizer.json (or a folder holding one). Recorded as `hf:<sha256[:12]>`.

Counts are of the text's own tokens (no special tokens, truncation and padding disabled), so a
limit is never silently capped by a tokenizer's configured max length.

`TOKENIZERS[spec]` (and `get_tokenizer(spec)`) -> Tokenizer(name, count).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

_TOKEN = re.compile(r"[가-힣]+|[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9가-힣]")


def approx_count(text: str) -> int:
    n = 0
    for tok in _TOKEN.findall(text or ""):
        c = tok[0]
        if "가" <= c <= "힣":
            n += max(1, math.ceil(len(tok) / 1.5))
        elif c.isalpha():
            n += max(1, math.ceil(len(tok) / 4))
        elif c.isdigit():
            n += max(1, math.ceil(len(tok) / 3))
        else:
            n += 1
    return n


class Tokenizer(NamedTuple):
    name: str  # recorded in passages.tokenizer
    count: Callable[[str], int]


@lru_cache(maxsize=8)
def _hf_tokenizer(path: str, label: str) -> Tokenizer:
    from tokenizers import Tokenizer as HFTokenizer

    raw = Path(path).read_bytes()
    tok = HFTokenizer.from_str(raw.decode("utf-8"))
    tok.no_truncation()
    tok.no_padding()

    def count(text: str) -> int:
        return len(tok.encode(text or "", add_special_tokens=False).ids) if text else 0

    return Tokenizer(f"{label}:{hashlib.sha256(raw).hexdigest()[:12]}", count)


def hf_tokenizer(path: str | Path, label: str = "hf") -> Tokenizer:
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise FileNotFoundError(f"tokenizer {str(path)!r}: no tokenizer.json there")
    return _hf_tokenizer(str(p.resolve()), label)


def kure_tokenizer() -> Tokenizer:
    from finhallu.local_models import KURE_ENV, KURE_REPO, resolve_model_dir

    folder, _rev = resolve_model_dir(KURE_REPO, "tokenizer.json", KURE_ENV, "KURE-v1 tokenizer")
    return hf_tokenizer(folder / "tokenizer.json", "kure-v1")


def get_tokenizer(spec: str) -> Tokenizer:
    """`approx`, `kure` or `hf:<path>` -> Tokenizer(name, count); missing files raise FileNotFoundError."""
    if spec == "approx":
        return Tokenizer("approx-xlmr-v1", approx_count)
    if spec == "kure":
        return kure_tokenizer()
    if spec.startswith("hf:") and len(spec) > 3:
        return hf_tokenizer(spec[3:])
    raise KeyError(f"unknown tokenizer {spec!r} (approx, kure, hf:<path to tokenizer.json>)")


class _Tokenizers(Mapping):
    """`TOKENIZERS[spec]` resolves any spec get_tokenizer accepts; iterating lists the fixed names."""

    def __getitem__(self, spec: str) -> Tokenizer:
        return get_tokenizer(spec)

    def __iter__(self) -> Iterator[str]:
        return iter(("approx", "kure"))

    def __len__(self) -> int:
        return 2

    def __contains__(self, spec: object) -> bool:
        return isinstance(spec, str) and (spec in ("approx", "kure") or spec.startswith("hf:"))


TOKENIZERS: Mapping[str, Tokenizer] = _Tokenizers()
