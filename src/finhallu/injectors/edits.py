"""Minimal edits shared by injectors: change one number, swap one lexicon entry (fixing particles)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import random
import re
from decimal import Decimal
from typing import Callable

from finhallu.text.numbers import NumberSpan, number_keys
from finhallu.text.words import fix_particle

_NUM_TOKEN = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_FACTORS = [Decimal(x) for x in ("0.5", "0.6", "0.75", "0.8", "1.2", "1.25", "1.5", "2", "3")]


def _format_like(template: str, value: Decimal) -> str:
    decimals = len(template.split(".")[1]) if "." in template else 0
    q = value.quantize(Decimal(1).scaleb(-decimals)) if decimals else value.to_integral_value()
    s = f"{q:,.{decimals}f}" if "," in template else f"{q:.{decimals}f}"
    return s


def _decimals(token: str) -> int:
    return len(token.split(".")[1]) if "." in token else 0


def is_year(token: str) -> bool:
    """A whole figure that reads as a calendar year (1990-2100): it moves by years, never by a factor."""
    return _decimals(token) == 0 and 1990 <= Decimal(token.replace(",", "")) <= 2100


def draw_move(tokens: list[str], unit: str, rng: random.Random) -> tuple[str, Decimal]:
    """One change for figures of one unit: a year or small count moves by an offset that keeps all of
    them positive, any other figure by a factor. Applied alike to every figure of a sentence with that
    unit (injectors/fabricate.perturb_figures), it keeps their order and equalities."""
    values = [Decimal(t.replace(",", "")) for t in tokens]
    whole = all(_decimals(t) == 0 for t in tokens)
    if unit in ("년",) or all(is_year(t) for t in tokens):
        return "offset", Decimal(rng.choice([d for d in (-3, -2, -1, 1, 2) if min(values) + d > 0] or [1, 2]))
    if whole and all(v <= 12 for v in values):
        return "offset", Decimal(rng.choice([d for d in (-2, -1, 1, 2, 3) if min(values) + d >= 1]))
    # a share stays a share (70% of the monthly payment never becomes 105%)
    factors = [f for f in _FACTORS if unit != "%" or max(values) > 100 or max(values) * f < 100]
    return "factor", rng.choice(factors or _FACTORS[:4])


def apply_move(token: str, move: tuple[str, Decimal], rng: random.Random) -> str:
    """The token changed by `move`, formatted like the original (its decimals, its thousands commas,
    the round-number grain of a whole figure >= 10)."""
    kind, amount = move
    v = Decimal(token.replace(",", ""))
    decimals = _decimals(token)
    step = Decimal(1).scaleb(-decimals) if decimals else Decimal(1)
    new = v + amount if kind == "offset" else v * amount
    if kind == "factor" and decimals == 0 and v >= 10:  # keep the original's round-number grain
        step = Decimal(10) ** (len(str(int(v))) - len(str(int(v)).rstrip("0")))
        new = (new / step).to_integral_value() * step
    if new == v or new <= 0:
        # rounding to the grain undid the change: step by whole grains (1,000 -> 3,000, not 1,003)
        new = v + step * rng.choice([2, 3, 5])
    return _format_like(token, new)


def perturb_token(token: str, unit: str, rng: random.Random, move: tuple[str, Decimal] | None = None) -> str:
    """A plausible wrong value for one numeric token, formatted like the original (`move`: a change
    drawn for several figures at once, see draw_move)."""
    return apply_move(token, move or draw_move([token], unit, rng), rng)


def number_token(text: str, span: NumberSpan) -> str | None:
    m = _NUM_TOKEN.search(text[span.start : span.number_end])
    return m.group(0) if m else None


def change_number(
    text: str,
    span: NumberSpan,
    forbidden: AbstractSet[str],
    rng: random.Random,
    tries: int = 8,
    move: tuple[str, Decimal] | None = None,
) -> str | None:
    """Replace the first numeric token of span with a value whose key is not in `forbidden`."""
    raw = text[span.start : span.number_end]
    m = _NUM_TOKEN.search(raw)
    if not m:
        return None
    for _ in range(tries):
        new_tok = perturb_token(m.group(0), span.unit, rng, move)
        new_raw = raw[: m.start()] + new_tok + raw[m.end() :]
        candidate = text[: span.start] + new_raw + text[span.number_end :]
        new_keys = number_keys(candidate[span.start : span.start + len(new_raw) + (span.end - span.number_end)])
        if (
            new_keys
            and not (new_keys & forbidden)
            and not impossible_date(candidate, text)
            and not malformed_numeral(candidate, text)
        ):
            return candidate
    return None


_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_EN_MONTHS = (
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
)
_KO_DATE = re.compile(r"(?:(\d{4})\s?년\s?)?(?<![\d.,])(\d{1,2})\s?월\s?(\d{1,2})\s?일")
_KO_MONTH = re.compile(r"(?<![\d.,])(\d{1,3})\s?월(?!\s?(?:세|급|간|말|초|분))")
_EN_DATE = re.compile(r"\b(" + "|".join(_EN_MONTHS) + r")\s+(\d{1,2})\b", re.IGNORECASE)


def _day_ok(year: int | None, month: int, day: int) -> bool:
    if not 1 <= month <= 12 or not 1 <= day <= _DAYS[month - 1]:
        return False
    leap = year is None or (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0))
    return not (month == 2 and day == 29 and not leap)


def _bad_dates(text: str) -> int:
    bad = sum(
        not _day_ok(int(m.group(1)) if m.group(1) else None, int(m.group(2)), int(m.group(3))) for m in _KO_DATE.finditer(text)
    )
    bad += sum(not 1 <= int(m.group(1)) <= 12 for m in _KO_MONTH.finditer(text))
    return bad + sum(
        not _day_ok(None, _EN_MONTHS.index(m.group(1).lower()) + 1, int(m.group(2))) for m in _EN_DATE.finditer(text)
    )


def impossible_date(text: str, original: str = "") -> bool:
    """Whether text holds a date no calendar has ("6월 31일", "13월", "2월 30일", "June 31"), more of
    them than `original`."""
    return _bad_dates(text or "") > _bad_dates(original or "")


# Korean writes 2만 7천, 1억 2천만: a 천/백/십 place takes one digit ("27천", "12천만", "0천" are malformed;
# "2,700백만원" is an accounting unit and stays)
_MALFORMED = re.compile(r"(?<![\d.,])(?:\d{2,}|\d{1,3}(?:,\d{3})+|0)(?:\.\d+)?\s?(?:천|백(?!만)|십(?!만))")


def malformed_numeral(text: str, original: str = "") -> bool:
    """Whether text holds a malformed Korean numeral (more of them than `original`, which an edit
    leaves alone: a table in 천원 units writes "1,234천원")."""
    return len(_MALFORMED.findall(text or "")) > len(_MALFORMED.findall(original or ""))


# 초과 is a 하다 verb (초과하면); 이하/이상/미만 are nouns that take the copula (이하이면): the conjugation is
# rewritten with the swap, and an object particle before it dropped ("1억 원을 초과하면" -> "1억 원 이하이면").
_BOUND_NOUNS = ("이하", "이상", "미만")
_HADA_TO_COPULA = [
    ("하더라도", "이더라도"),
    ("하거나", "이거나"),
    ("합니다", "입니다"),
    ("하면", "이면"),
    ("하는", "인"),
    ("하고", "이고"),
    ("한", "인"),
    ("할", "일"),
]
_HADA = re.compile(r"^(?:하|한|할|함|합|해|했|햇)")


def _conjugate(text: str, start: int, end: int, old: str, repl: str) -> tuple[str, str] | None:
    """(text before the swap, text after it) fitted to the new word; None when it cannot be fitted."""
    before, rest = text[:start], text[end:]
    if repl not in _BOUND_NOUNS or not _HADA.match(rest):
        return before, rest
    if old != "초과":
        return None  # "이상하게" (strange) is no bound
    ending = next(((a, b) for a, b in _HADA_TO_COPULA if rest.startswith(a)), None)
    if ending is None:
        return None
    m = re.search(r"([가-힣0-9%])(을|를) $", before)
    if m:
        before = before[: m.end(1)] + " "
    return before, ending[1] + rest[len(ending[0]) :]


def duplicated_by_edit(text: str, start: int, end: int, window: int = 12) -> bool:
    """The swapped-in word also stands right beside the edit ("전세나 월세" -> "월세나 월세",
    "순증가(감소)" -> "순증가(증가)"): a duplicated span, still true and broken."""
    word = text[start:end].lower()
    near = (text[max(0, start - window) : start] + " " + text[end : end + window]).lower()
    return bool(word.strip()) and word in near


def _candidates(text: str, pairs: list[tuple[str, str]], lang: str, skip: set[str] | None):
    found = []
    for old, new in pairs:
        if skip and old in skip:
            continue
        pattern = (r"\b" + re.escape(old) + r"\b") if lang == "en" else re.escape(old)
        for m in re.finditer(pattern, text, re.IGNORECASE if lang == "en" else 0):
            # Korean: never split a longer word (가능 inside 불가능)
            if lang == "ko" and old == "가능" and text[max(0, m.start() - 1) : m.start()] == "불":
                continue
            found.append((m, old, new))
    taken: set[int] = set()
    for m, old, new in sorted(found, key=lambda f: f[0].start()):  # stable: longer entries first at one place
        if m.start() not in taken:
            taken.add(m.start())
            yield m, old, new


def swap_first(
    text: str,
    pairs: list[tuple[str, str]],
    lang: str,
    skip: set[str] | None = None,
    accept: Callable[[str, int, int], bool] | None = None,
) -> tuple[str, str, str] | None:
    """Swap the first lexicon entry found in text whose swap reads well (no duplicated span, a
    conjugation that fits) and that `accept(new_text, start, end)` takes; returns (new_text, old, new)."""
    for m, old, new in _candidates(text, pairs, lang, skip):
        repl = new if lang == "ko" or not m.group(0)[0].isupper() else new[0].upper() + new[1:]
        fitted = _conjugate(text, m.start(), m.end(), old, repl) if lang == "ko" else (text[: m.start()], text[m.end() :])
        if fitted is None:
            continue
        before, rest = fitted
        if lang == "ko" and rest == text[m.end() :]:
            rest = fix_particle(repl, rest)
        out = before + repl + rest
        start, end = len(before), len(before) + len(repl)
        if duplicated_by_edit(out, start, end) or (accept is not None and not accept(out, start, end)):
            continue
        return out, m.group(0), repl
    return None
