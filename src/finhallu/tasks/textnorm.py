"""Text normalization shared by every stage that compares evidence: numbers, units, spacing.

"1억 원", "100,000,000원" and "1억원" normalize alike; so do "5천만원" and "5,000만 원",
"16.2 %" and "16.2%", "$1.2 billion" and "$1,200 million".
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from decimal import Decimal, InvalidOperation

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_KUNIT = r"천만|백만|십만|조|억|만|천"
_EUNIT = r"thousand|million|billion|trillion"
_KMULT = {"조": 10**12, "억": 10**8, "천만": 10**7, "백만": 10**6, "십만": 10**5, "만": 10**4, "천": 10**3}
_EMULT = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}

# A chain like "1억 5천만", "3조 2,000억", "5,000만", or a plain number, with optional English scale.
NUMBER_RE = re.compile(
    rf"(?<![\d.,])(?:{_NUM})\s?(?:{_KUNIT})(?:\s?(?:{_NUM})\s?(?:{_KUNIT}))*(?!\d)"
    rf"|(?<![\d.,])(?:{_NUM})(?:\s(?:{_EUNIT})\b)?",
    re.IGNORECASE,
)
UNIT_RE = re.compile(r"\s?(%p|%|퍼센트|bp|bps|원|달러|개월|년|월|일|세|명|건|회|배|주|시간|분|억|percent|percentage points?|basis points?)",
                     re.IGNORECASE)
_PIECE_RE = re.compile(rf"({_NUM})\s?({_KUNIT})?", re.IGNORECASE)
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")


@dataclass(frozen=True)
class NumberSpan:
    start: int
    end: int  # end of number (and unit, if any)
    raw: str
    value: Decimal
    unit: str
    number_end: int  # end of the numeric part, before the unit


def parse_number(raw: str) -> Decimal | None:
    """Value of a number expression matched by NUMBER_RE."""
    s = raw.strip()
    m = re.search(rf"\s({_EUNIT})$", s, re.IGNORECASE)
    if m:
        base = parse_number(s[: m.start()])
        return None if base is None else base * _EMULT[m.group(1).lower()]
    total = Decimal(0)
    for num, unit in _PIECE_RE.findall(s):
        try:
            val = Decimal(num.replace(",", ""))
        except InvalidOperation:
            return None
        total += val * (_KMULT[unit] if unit else 1)
    return total


def format_decimal(v: Decimal) -> str:
    if v == v.to_integral_value():
        return str(int(v))
    return format(v.normalize(), "f")


def find_numbers(text: str) -> list[NumberSpan]:
    out = []
    for m in NUMBER_RE.finditer(text):
        value = parse_number(m.group(0))
        if value is None:
            continue
        unit_m = UNIT_RE.match(text, m.end())
        unit = unit_m.group(1) if unit_m else ""
        end = unit_m.end() if unit_m else m.end()
        out.append(NumberSpan(m.start(), end, text[m.start():end], value, unit.lower(), m.end()))
    return out


def _canon_unit(unit: str) -> str:
    u = unit.lower()
    return {"퍼센트": "%", "percent": "%", "bps": "bp", "basis point": "bp", "basis points": "bp"}.get(u, u)


@lru_cache(maxsize=65536)  # passages are compared against many clues: normalize each once
def normalize(text: str) -> str:
    """Canonical comparison form: NFKC, lowercase, numbers as plain digits, no whitespace/punctuation noise."""
    if not text:
        return ""
    t = unicodedata.normalize("NFKC", _PRIVATE_USE.sub("", text)).lower()
    parts, last = [], 0
    for span in find_numbers(t):
        parts.append(t[last:span.start])
        parts.append(format_decimal(span.value) + _canon_unit(span.unit))
        last = span.end
    parts.append(t[last:])
    t = "".join(parts)
    t = re.sub(r"[\s\u00a0]+", "", t)
    return re.sub(r"[\"'`“”‘’·,]", "", t)


def contains_normalized(haystack: str | None, needle: str | None) -> bool:
    """Needle in haystack after normalization; a number never matches inside a longer number
    ("5%" is not in "15%", "2개월" not in "12개월")."""
    if not haystack or not needle:
        return False
    n = normalize(needle).rstrip(".")
    if not n:
        return False
    h = normalize(haystack)
    if not (n[0].isdigit() or n[-1].isdigit()):
        return n in h
    # not after a digit, nor after a decimal point ("2.5%" holds no "5%"); a sentence-ending "." is fine
    pattern = ("(?<!\\d)(?<!\\d\\.)" if n[0].isdigit() else "") + re.escape(n) + ("(?!\\d)" if n[-1].isdigit() else "")
    return re.search(pattern, h) is not None


def number_keys(text: str) -> set[str]:
    """Normalized value+unit keys of every number in text (for grounding checks)."""
    return {format_decimal(s.value) + _canon_unit(s.unit) for s in find_numbers(unicodedata.normalize("NFKC", text or ""))}


# ---- sentences and words --------------------------------------------------------------------


def split_sentences(text: str) -> list[str]:
    """Rule-based splitter: sentence-final punctuation followed by space, and line breaks."""
    pieces = re.split(r"(?<=[.?!])\s+(?=\S)|\n+", text or "")
    return [p.strip() for p in pieces if p and p.strip()]


_PARTICLES = sorted(
    ["은", "는", "이", "가", "을", "를", "의", "에", "에서", "에게", "께", "으로", "로", "와", "과", "도", "만", "까지",
     "부터", "보다", "이나", "나", "이며", "며", "이고", "고", "으로는", "로는", "에는", "에서는", "이란", "란", "입니다",
     "이다", "인가요", "인가", "인지", "일까요", "나요", "까요", "가요", "요"],
    key=len, reverse=True,
)
_WORD_RE = re.compile(r"[0-9]+(?:[.,][0-9]+)*%?|[a-z]+(?:'[a-z]+)?|[가-힣]+")
STOPWORDS = {"the", "a", "an", "of", "to", "in", "and", "or", "for", "on", "by", "is", "are", "was", "were", "be",
             "with", "as", "at", "that", "this", "it", "its", "what", "which", "how", "did", "does", "do",
             "및", "등", "수", "것", "있습니다", "합니다", "있는", "하는", "대한", "경우", "때", "얼마", "무엇", "어떻게", "몇"}


_PARTICLE_SET = frozenset(_PARTICLES)


def is_particle(word: str) -> bool:
    return word in _PARTICLE_SET


def strip_particle(word: str) -> str:
    for p in _PARTICLES:
        if len(word) > len(p) + 1 and word.endswith(p):
            return word[: -len(p)]
    return word


def content_words(text: str) -> list[str]:
    t = unicodedata.normalize("NFKC", text or "").lower()
    out = []
    for w in _WORD_RE.findall(t):
        w = strip_particle(w) if w[0] >= "가" else w.replace(",", "")
        if len(w) >= 2 and w not in STOPWORDS and w not in _PARTICLE_SET:
            out.append(w)
    return out


def jaccard(a: str, b: str) -> float:
    """Jaccard overlap of two texts' content words."""
    x, y = set(content_words(a)), set(content_words(b))
    return len(x & y) / len(x | y) if x | y else 0.0


def has_final_consonant(word: str) -> bool:
    """Whether a Korean word ends in a batchim (to pick 은/는, 이/가, 을/를); digits read aloud."""
    if not word:
        return False
    ch = word[-1]
    if "가" <= ch <= "힣":
        return (ord(ch) - 0xAC00) % 28 != 0
    return ch in "0136781lmnLMN"  # 영,일,삼,육,칠,팔 / l m n sounds


def particle(word: str, pair: str) -> str:
    """particle('예금', '은/는') -> '은'."""
    with_batchim, without = pair.split("/")
    return with_batchim if has_final_consonant(word) else without
