"""The comparison form of text shared by every stage that compares evidence: numbers, units, spacing."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Sequence

from finhallu.text.numbers import canon_unit, format_decimal, scan_numbers

_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")


@lru_cache(maxsize=65536)  # passages are compared against many clues: normalize each once
def normalize(text: str) -> str:
    """Canonical comparison form: NFKC, lowercase, numbers as plain digits, no whitespace/punctuation noise."""
    if not text:
        return ""
    t = unicodedata.normalize("NFKC", _PRIVATE_USE.sub("", text)).lower()
    parts, last = [], 0
    for span in scan_numbers(t):
        parts.append(t[last : span.start])
        parts.append(format_decimal(span.value) + canon_unit(span.unit))
        last = span.end
    parts.append(t[last:])
    t = "".join(parts)
    t = re.sub(r"[\s\u00a0]+", "", t)
    return re.sub(r"[\"'`“”‘’·,]", "", t)


def contains_normalized(haystack: str | Sequence[str] | None, needle: str | None) -> bool:
    """Needle in haystack after normalization; a number never matches inside a longer number
    ("5%" is not in "15%", "2개월" not in "12개월"). A haystack of several texts (a turn's passages)
    reads as their join, each text normalized on its own (memoised per text: a passage recurs in
    many turns' contexts) and kept apart by a line break, which no normalized text holds: neither a
    figure nor a phrase is read across two texts."""
    if not haystack or not needle:
        return False
    return in_normalized(normalize(haystack) if isinstance(haystack, str) else normalized_join(haystack), needle)


def normalized_join(texts: Sequence[str]) -> str:
    """Several texts as `contains_normalized` reads them: each normalized, joined by line breaks
    (made once where many needles are looked for in the same texts)."""
    return "\n".join(normalize(t) for t in texts)


def in_normalized(normalized: str, needle: str | None) -> bool:
    """`contains_normalized` of a haystack already normalized (`normalize` or `normalized_join`)."""
    if not normalized or not needle:
        return False
    n = normalize(needle).rstrip(".")
    if not n:
        return False
    if not (n[0].isdigit() or n[-1].isdigit()):
        return n in normalized
    return _figure_pattern(n).search(normalized) is not None


@lru_cache(maxsize=65536)  # a clue or answer is looked for in many passages
def _figure_pattern(n: str) -> re.Pattern:
    """A normalized needle that starts or ends with a digit, not matched after a digit nor after a
    decimal point ("2.5%" holds no "5%"; a sentence-ending "." is fine), nor before a digit."""
    return re.compile(("(?<!\\d)(?<!\\d\\.)" if n[0].isdigit() else "") + re.escape(n) + ("(?!\\d)" if n[-1].isdigit() else ""))
