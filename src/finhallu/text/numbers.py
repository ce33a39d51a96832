"""Numbers in financial text: matching, parsing and comparison keys.

"1억 원", "100,000,000원" and "1억원" have one key; so do "5천만원" and "5,000만 원",
"16.2 %" and "16.2%", "$1.2 billion" and "$1,200 million".
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_KUNIT = r"천만|백만|십만|조|억|만|천|백|십"
_EUNIT = r"thousand|million|billion|trillion"
_SMALL = {"천": 10**3, "백": 10**2, "십": 10}  # digits within a 만-group
_BIG = {"조": 10**12, "억": 10**8, "만": 10**4}  # multiply the group before them
_EMULT = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}

# A chain like "1억 5천만", "3조 2,000억", "5,000만", or a plain number, with optional English scale.
# The leading (?=\d) lets the engine skip to digits instead of trying both branches at every
# character (half the scan time; the same matches).
NUMBER_RE = re.compile(
    rf"(?=\d)(?<![\d.,])(?:{_NUM})\s?(?:{_KUNIT})(?:\s?(?:{_NUM})\s?(?:{_KUNIT}))*(?!\d)"
    rf"|(?=\d)(?<![\d.,])(?:{_NUM})(?:\s(?:{_EUNIT})\b)?",
    re.IGNORECASE,
)
UNIT_RE = re.compile(
    r"\s?(%p|%|퍼센트|bp|bps|원|달러|개월|년|월|일|세|명|건|회|배|주|시간|분|억|percent|percentage points?|basis points?)",
    re.IGNORECASE,
)
_PIECE_RE = re.compile(rf"({_NUM})\s?({_KUNIT})?", re.IGNORECASE)
_ESCALE_SUFFIX_RE = re.compile(rf"\s({_EUNIT})$", re.IGNORECASE)


@dataclass(frozen=True)
class NumberSpan:
    start: int
    end: int  # end of number (and unit, if any)
    raw: str
    value: Decimal
    unit: str
    number_end: int  # end of the numeric part, before the unit


@lru_cache(maxsize=1 << 14)  # the same figures ("2023", "1억") recur across every text a stage scans
def parse_number(raw: str) -> Decimal | None:
    """Value of a number expression matched by NUMBER_RE."""
    s = raw.strip()
    m = _ESCALE_SUFFIX_RE.search(s)
    if m:
        base = parse_number(s[: m.start()])
        return None if base is None else base * _EMULT[m.group(1).lower()]
    # Korean numerals group by 만: "5천5백만" is (5천 + 5백) x 만, "1억 6천5백만" 1억 + 6,500만.
    total, group = Decimal(0), Decimal(0)
    for num, unit in _PIECE_RE.findall(s):
        try:
            val = Decimal(num.replace(",", ""))
        except InvalidOperation:
            return None
        if unit in _SMALL:
            group += val * _SMALL[unit]
        elif unit[:1] in _SMALL:  # 천만/백만/십만
            total += (group + val * _SMALL[unit[0]]) * _BIG["만"]
            group = Decimal(0)
        elif unit:
            total += (group + val) * _BIG[unit]
            group = Decimal(0)
        else:
            group += val
    return total + group


def significant_digits(value: Decimal) -> int:
    """Digits of a figure without leading or trailing zeros: 4,150,000 -> 3, 0.66 -> 2, 100.5 -> 4."""
    digits = str(abs(value).normalize()).replace(".", "").lstrip("0")
    return len(digits.split("E")[0].rstrip("0"))


def format_decimal(v: Decimal) -> str:
    if v == v.to_integral_value():
        return str(int(v))
    return format(v.normalize(), "f")


def find_numbers(text: str) -> list[NumberSpan]:
    return list(_find_numbers(text))


def scan_numbers(text: str) -> tuple[NumberSpan, ...]:
    """Every number of the text, not memoised: for callers whose own result is memoised (normalize,
    number_keys, quantities) and so scan a text once; their texts are often whole evidence (the
    passages joined), whose hundreds of spans would crowd out the passages' own in the memo."""
    out = []
    for m in NUMBER_RE.finditer(text):
        value = parse_number(m.group(0))
        if value is None:
            continue
        unit_m = UNIT_RE.match(text, m.end())
        unit = unit_m.group(1) if unit_m else ""
        end = unit_m.end() if unit_m else m.end()
        out.append(NumberSpan(m.start(), end, text[m.start() : end], value, unit.lower(), m.end()))
    return tuple(out)


# the same passage or response is scanned by many checks; spans are frozen
_find_numbers = lru_cache(maxsize=1 << 15)(scan_numbers)


def canon_unit(unit: str) -> str:
    u = unit.lower()
    return {"퍼센트": "%", "percent": "%", "bps": "bp", "basis point": "bp", "basis points": "bp"}.get(u, u)


@lru_cache(maxsize=1 << 12)  # checks ask it of the same evidence (the passages joined) per candidate
def number_keys(text: str) -> frozenset[str]:
    """Normalized value+unit keys of every number in text (for grounding checks)."""
    return frozenset(
        format_decimal(s.value) + canon_unit(s.unit) for s in scan_numbers(unicodedata.normalize("NFKC", text or ""))
    )


def number_keys_in(texts: Iterable[str]) -> frozenset[str]:
    """`number_keys` of several texts (a turn's passages, its history): each text's keys memoised on
    their own, so a passage in many turns' contexts is scanned once, and no figure is read across
    two texts ("...1억" ending one passage and "5천만..." opening the next are two figures)."""
    out: frozenset[str] = frozenset()
    for text in texts:
        out |= number_keys(text)
    return out
