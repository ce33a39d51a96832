"""Financial quantities: a number with its sign, unit, scale and stated precision, in base units.

Filings state one figure many ways: "4조 1,500억 원" in a sentence, "4,150,000" in a table whose
note says "(단위 : 백만원)", "$3.0 billion" beside "2,987" under "(In millions)". Every stage
that asks "does this text state that value?" (hard-negative filtering, the label verifier, the
numeric detectors) reads numbers through here, so they agree on what counts as the same value.

- Scale notes: "(단위 : 백만원)", "(단위: 천원, %)", "($ in millions)", "(In thousands, except per
  share data)". A note scales the bare amounts after it (to the next note).
- Signs: "(2,722)", "$(2,722)", "△2,128", "-5.1%".
- Precision: a stated figure is exact to half its last digit ("$3.0 billion" = 3.0e9 ± 0.05e9),
  so a rounded restatement of a table value matches and a changed one does not.
- Dates: `impossible_dates` finds calendar dates that cannot exist ("6월 31일", "February 30").
"""

from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Iterable

from finhallu.text.numbers import scan_numbers

# ---- scale notes ------------------------------------------------------------------------

_EN_SCALE = re.compile(r"\bin\s+(thousands|millions|billions)\b", re.IGNORECASE)
_KO_SCALE = re.compile(r"단위\s*[:：]?\s*([^)\n|]*)")
_EN_MULT = {"thousands": 10**3, "millions": 10**6, "billions": 10**9}
# Longest first: "백만원" before "원".
_KO_MULT = [
    ("조원", 10**12, "KRW"),
    ("억원", 10**8, "KRW"),
    ("백만원", 10**6, "KRW"),
    ("천원", 10**3, "KRW"),
    ("원", 1, "KRW"),
    ("백만달러", 10**6, "USD"),
    ("천달러", 10**3, "USD"),
    ("달러", 1, "USD"),
    ("천주", 10**3, "shares"),
    ("주", 1, "shares"),
]


@dataclass(frozen=True)
class Scale:
    multiplier: Decimal  # what a bare amount is multiplied by to reach base units
    currency: str | None  # USD | KRW | shares | count | None (a note that names no amount unit, "(단위 : %)")
    note: str  # the note as stated


def _scale_of(m: re.Match, korean: bool) -> Scale:
    if korean:
        body = m.group(1).replace(" ", "")
        for word, mult, unit in _KO_MULT:
            if word in body:
                return Scale(Decimal(mult), unit, m.group(0).strip())
        counted = re.match(r"(개사|개|명|건|회)", body)
        return Scale(Decimal(1), "count" if counted else None, m.group(0).strip())
    return Scale(Decimal(_EN_MULT[m.group(1).lower()]), "USD", m.group(0).strip())


def scale_notes(text: str) -> list[tuple[int, Scale]]:
    """Every scale note in text with the offset where it ends, in order."""
    found = [(m.end(), _scale_of(m, True)) for m in _KO_SCALE.finditer(text or "")]
    found += [(m.end(), _scale_of(m, False)) for m in _EN_SCALE.finditer(text or "")]
    return sorted(found, key=lambda x: x[0])


def find_scale(text: str) -> Scale | None:
    """The first scale note in text (Korean notes first, as tables state them)."""
    m = _KO_SCALE.search(text or "")
    if m:
        return _scale_of(m, True)
    m = _EN_SCALE.search(text or "")
    return _scale_of(m, False) if m else None


# ---- quantities ---------------------------------------------------------------------------

_KO_PIECE = {"조": 10**12, "억": 10**8, "천만": 10**7, "백만": 10**6, "십만": 10**5, "만": 10**4, "천": 10**3}
_EN_WORD = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_RATIO_UNITS = {
    "%": "%",
    "퍼센트": "%",
    "percent": "%",
    "%p": "%p",
    "percentage point": "%p",
    "percentage points": "%p",
    "bp": "bps",
    "bps": "bps",
    "basis point": "bps",
    "basis points": "bps",
}
_COUNT_UNITS = {"명": "count", "건": "count", "개": "count", "개사": "count", "주": "shares"}


@dataclass(frozen=True)
class Quantity:
    raw: str
    start: int
    end: int
    value: Decimal  # in base units (won, dollars, percent points), sign applied
    unit: str  # KRW | USD | % | %p | bps | count | shares | "" (a bare number)
    precision: Decimal  # half the stated last digit, at most 2 % of the value, in base units
    scaled: bool  # a scale note multiplied it
    stated: Decimal  # the number as written, sign applied, before any scale note

    def same_as(self, other: "Quantity") -> bool:
        """The same figure, allowing for either side's rounding. Units must agree, except that a bare
        number may stand for an amount (tables state money bare)."""
        if not compatible(self.unit, other.unit):
            return False
        if abs(self.value - other.value) <= max(self.precision, other.precision):
            return True
        # "217,700" or "$3.45" (per share) restated from a table under "(in millions)" is the figure as written
        return self.stated == other.stated and (self.scaled or other.scaled)


def unit_family(unit: str) -> str:
    return "money" if unit in ("KRW", "USD") else unit


@lru_cache(maxsize=256)  # a handful of units, asked of every pair of figures compared
def compatible(a: str, b: str) -> bool:
    """Units that can state one figure: equal families, or a bare number beside an amount or a count."""
    if unit_family(a) == unit_family(b):
        return True
    return (not a and unit_family(b) in ("money", "count", "shares")) or (
        not b and unit_family(a) in ("money", "count", "shares")
    )


def _last_digit(raw_number: str) -> Decimal:
    """Half the place value of the last stated digit of "4,150,000" (0.5) or "3.05" (0.005)."""
    digits = raw_number.replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return Decimal(5) * Decimal(10) ** -(decimals + 1)


def _stated_grain(raw: str) -> Decimal:
    """Half a unit of the smallest stated piece: "4조 1,500억" -> 0.5 억; "$3.0 billion" -> 0.05e9."""
    pieces = re.findall(r"(\d[\d,]*(?:\.\d+)?)\s*(조|억|천만|백만|십만|만|천)?", raw)
    num, unit = pieces[-1] if pieces else (raw, "")
    mult = Decimal(_KO_PIECE.get(unit, 1))
    word = re.search(r"(thousand|million|billion|trillion)", raw, re.IGNORECASE)
    if word:
        mult = Decimal(_EN_WORD[word.group(1).lower()])
    return _last_digit(num) * mult


def _unit_at(text: str, start: int, end: int, unit_after: str) -> str:
    before = text[max(0, start - 4) : start]
    if "$" in before or re.match(r"\s?(달러|dollars?|USD)", text[end : end + 9], re.IGNORECASE):
        return "USD"
    if "₩" in before or unit_after == "원" or re.match(r"\s?원", text[end : end + 3]):
        return "KRW"
    low = unit_after.lower()
    if low in _RATIO_UNITS:
        return _RATIO_UNITS[low]
    return _COUNT_UNITS.get(unit_after, low)  # other units (년, 개월, 월, 일, 세, 회, 배) stand as written


def _negative(text: str, start: int, end: int) -> bool:
    """ "(2,722)", "$(2,722)", "△2,128" or "-5.1" (a minus not joining a range like "3-5")."""
    before = re.sub(r"[\s$₩]", "", text[max(0, start - 4) : start])
    if before.endswith(("△", "▽")):
        return True
    if before.endswith("(") and text[end : end + 2].lstrip().startswith(")"):
        return True
    return before.endswith(("-", "−")) and not re.search(r"\d\s*[-−]$", text[max(0, start - 3) : start])


def _is_year(raw: str, value: Decimal) -> bool:
    return "," not in raw and "." not in raw and value == value.to_integral_value() and 1900 <= value <= 2100


def quantities(text: str) -> list[Quantity]:
    """Every number in text as a quantity in base units. A bare amount (no currency, ratio or count
    unit, no 억/million word, not a year) after a scale note takes the note's multiplier."""
    return list(_quantities(text or ""))


@lru_cache(maxsize=1 << 15)  # passages are checked against many responses (detectors, verifier)
def _quantities(text: str) -> tuple[Quantity, ...]:
    notes = scale_notes(text)
    out = []
    for span in scan_numbers(text):
        number_raw = text[span.start : span.number_end]
        unit = _unit_at(text, span.start, span.number_end, span.unit)
        value, grain = span.value, _stated_grain(number_raw)
        explicit = bool(re.search(r"[조억만천]|thousand|million|billion|trillion", number_raw, re.IGNORECASE))
        note = next((s for pos, s in reversed(notes) if pos <= span.start), None)
        scaled, stated = False, value
        if (
            note
            and not explicit
            and unit in ("", "USD", "KRW")
            and not _is_year(number_raw, value)
            and note.currency not in (None, "count")
            and not (unit == "KRW" and span.unit == "원")
        ):
            value, grain, scaled = value * note.multiplier, grain * note.multiplier, True
            unit = unit or (note.currency if note.currency in ("KRW", "USD") else "")
        # "1억" is a round figure, not "0.5억 to 1.5억": rounding never spans more than 2 %
        grain = min(grain, abs(value) * Decimal("0.02")) if value else grain
        if _negative(text, span.start, span.number_end):
            value, stated = -value, -stated
        out.append(Quantity(text[span.start : span.end], span.start, span.end, value, unit, grain, scaled, stated))
    return tuple(out)


def states_value_in(texts: Iterable[str], q: Quantity) -> bool:
    """`states_value` of any one of several texts (a turn's passages, its history): each read with
    its own scale notes (a "단위: 백만원" line scales its own table, not the next passage)."""
    return any(states_value(t, q) for t in texts)


def states_value(text: str, q: Quantity, ignore_sign: bool = True, unknown_scale: bool = False) -> bool:
    """Whether text states q's figure anywhere (scale notes, rounding and, by default, the sign of
    a parenthesised table amount are taken into account).

    unknown_scale: a bare amount in a text without a scale note may be in thousands or millions
    (a table cut from its note): count those readings too. Use it where a false "stated" is the
    safe error (is this passage free of the answer?), never to accept a claim.
    """
    for other in quantities(text):
        if ignore_sign and q.value >= 0 > other.value:
            other = replace(other, value=-other.value, stated=-other.stated)
        if other.same_as(q):
            return True
        if unknown_scale and not other.scaled and not other.unit and abs(other.value) >= 100 and compatible("", q.unit):
            if any(abs(other.value * m - q.value) <= max(q.precision, other.precision * m) for m in (1000, 1000000)):
                return True
    return False


# ---- dates -------------------------------------------------------------------------------

_DAYS = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}
_MONTHS = {
    m: i
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        start=1,
    )
}
_KO_DATE = re.compile(r"(?<!\d)(\d{1,2})\s*월\s*(\d{1,2})\s*일")
_EN_DATE = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})\b", re.IGNORECASE)


def impossible_dates(text: str) -> list[str]:
    """Calendar dates that cannot exist ("6월 31일", "13월 2일", "February 30")."""
    bad = []
    for m in _KO_DATE.finditer(text or ""):
        month, day = int(m.group(1)), int(m.group(2))
        if not (1 <= month <= 12 and 1 <= day <= _DAYS[month]):
            bad.append(m.group(0))
    for m in _EN_DATE.finditer(text or ""):
        month, day = _MONTHS[m.group(1).lower()], int(m.group(2))
        if not 1 <= day <= _DAYS[month]:
            bad.append(m.group(0))
    return bad
