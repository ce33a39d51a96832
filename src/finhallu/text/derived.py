"""Figures an answer computes from the evidence instead of copying them.

Analysts' answers restate and compute: "1,469,502" in a table whose "(in thousands)" note was cut
off comes back as "$1,469,502,000"; a margin or a growth rate is the quotient of two figures the
evidence states ("0.66", "12.4%"), a total or a change their sum or difference. A checker that
only looks a figure up calls every such answer ungrounded.

Both readings are accepted only where chance cannot produce them:
- a restatement at another scale (x 10^3, 10^6, 10^9) keeps at least four significant digits of
  the evidence figure (or writes its very digits, three or more), which no unrelated number
  matches by accident;
- a derivation uses the few evidence figures the answer is about (those it states itself, and
  those in the wording around the figure), and the derived figure must be stated to 1 % or
  better ("66%", "0.66", "12.4%", never "7%"), so a changed figure is not grounded by one of the
  hundreds of quotients a table's numbers give.
"""

from __future__ import annotations

import re
from decimal import Decimal
from itertools import permutations
from typing import Iterable

from finhallu.text.numbers import significant_digits
from finhallu.text.quantities import Quantity, compatible

_SCALES = (Decimal(10) ** 3, Decimal(10) ** 6, Decimal(10) ** 9)
_HUNDRED = Decimal(100)
MAX_RELATIVE_PRECISION = Decimal("0.01")


_SCALE_WORD = re.compile(r"[조억만천]|thousand|million|billion|trillion", re.IGNORECASE)


def _names_scale(q: Quantity) -> bool:
    return q.scaled or bool(_SCALE_WORD.search(q.raw))


def _digits(raw: str) -> str:
    return re.sub(r"[^\d.]", "", raw).lstrip("0.")


def restated_at_scale(q: Quantity, evidence: Iterable[Quantity]) -> Quantity | None:
    """The evidence figure q states at another scale, digits kept: a bare or same-unit amount of at
    least four significant digits, times (or divided by) a thousand, a million or a billion; or one
    written with q's own digits (three significant or more) where one side names no scale ("5,620"
    in a table whose note was cut off, "$5,620 million" in the answer)."""
    if not q.value:
        return None
    for e in evidence:
        if not e.value or not compatible(e.unit, q.unit):
            continue
        if (
            _digits(e.raw)
            and _digits(e.raw) == _digits(q.raw)
            and significant_digits(Decimal(_digits(e.raw))) >= 3
            and _names_scale(e) != _names_scale(q)
        ):  # "$1,250 million" vs "$1,250 billion" is a changed figure
            return e
        if significant_digits(e.stated) < 4:
            continue
        for m in _SCALES:
            if abs(abs(e.stated) * m - abs(q.value)) <= q.precision or abs(abs(e.value) - abs(q.stated) * m) <= e.precision:
                return e
    return None


def _candidates(a: Quantity, b: Quantity, unit: str) -> list[tuple[str, Decimal]]:
    """What q may be computed as from a and b, by q's unit: amounts add and subtract, ratios divide."""
    out: list[tuple[str, Decimal]] = []
    if unit in ("%", "%p") and a.unit == b.unit == "%":
        out.append(("percentage-point change", a.value - b.value))
    if b.value and unit in ("%", ""):
        ratio = a.value / b.value
        if unit == "%":
            out += [("share", ratio * _HUNDRED), ("change", (ratio - 1) * _HUNDRED)]
        else:
            out.append(("ratio", ratio))
    if unit not in ("%", "%p") and compatible(a.unit, b.unit) and compatible(a.unit, unit) and compatible(b.unit, unit):
        out += [("sum", a.value + b.value), ("difference", a.value - b.value)]
    return out


def derivation(q: Quantity, operands: list[Quantity]) -> str | None:
    """How q follows from two of `operands` ("ratio of 1,469,502 to 2,213,556"), or None. q must be
    stated to 1 % or better of its value; signs are not compared (a decline is stated unsigned)."""
    if not q.value or q.precision > abs(q.value) * MAX_RELATIVE_PRECISION:
        return None
    target = abs(q.value)
    for a, b in permutations(operands, 2):
        if a.value == b.value:
            continue
        for name, value in _candidates(a, b, q.unit):
            if abs(abs(value) - target) <= q.precision:
                return f"{name} of {a.raw.strip()} and {b.raw.strip()}"
    return None
