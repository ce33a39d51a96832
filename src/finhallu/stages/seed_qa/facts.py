"""XBRL facts of a filing's company as numeric ground truth for its triplets.

A stated amount matches a fact when the amount at the table's scale equals the fact's value
within the rounding the statement implies (383,285 "in millions" = 383,285,000,000 +- 0.5M),
at the cell's period when the cell has one (else the fact supplies it). Labels rarely agree
("Total net sales" vs "Revenue from contract with customer"), so a value with four or more
significant digits identifies its fact by itself; shorter values also need the labels to agree.
A triplet contradicts the facts when facts of its label and period exist and none has its value.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

import polars as pl

from finhallu.stages.seed_qa.values import Period
from finhallu.text.normalize import normalize
from finhallu.text.numbers import significant_digits
from finhallu.text.words import content_words

_HANGUL = re.compile("[가-힣]")


@dataclass(frozen=True)
class Fact:
    fact_id: str
    label: str
    value: Decimal
    unit: str
    period: Period | None
    n_dims: int


def label_similarity(a: str, b: str) -> float:
    """Character-bigram Dice for Korean labels, content-word Jaccard (light stemming) for English."""
    if _HANGUL.search(a or "") or _HANGUL.search(b or ""):
        x, y = (re.sub(r"[^가-힣a-z0-9]", "", normalize(t or "")) for t in (a, b))
        bx, by = {x[i : i + 2] for i in range(len(x) - 1)}, {y[i : i + 2] for i in range(len(y) - 1)}
        return 2 * len(bx & by) / (len(bx) + len(by)) if bx and by else 0.0
    wa, wb = ({w.rstrip("s") for w in content_words(t or "")} for t in (a, b))
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def _label_key(label: str) -> str:
    """Labels that name the same line item alike: no spacing, punctuation or footnote marks."""
    return re.sub(r"[^가-힣a-z0-9]", "", normalize(label or ""))


def _fact_period(start: str | None, end: str | None, instant: bool) -> Period | None:
    try:
        e = date.fromisoformat((end or "")[:10])
    except ValueError:
        return None
    if instant or not start:
        return Period("FY", e.year)
    try:
        days = (e - date.fromisoformat(start[:10])).days
    except ValueError:
        return None
    if days >= 300:
        return Period("FY", e.year)
    if 170 <= days <= 190 and e.month == 6:
        return Period("H1", e.year)
    return None  # quarters and odd stubs: no fiscal-year period to compare with


def document_facts(facts: pl.DataFrame, doc_id: str, institution: str) -> pl.DataFrame:
    """The facts of a filing's company: its id (CIK, DART corp code) in the doc id, or its name."""
    if facts.height == 0:
        return facts
    tokens = set(re.split(r"[-_]", doc_id))
    inst = normalize(institution)
    by_id = facts.filter(pl.col("entity_id").is_in(list(tokens)))
    if by_id.height:
        return by_id
    names = [
        e
        for e in facts["entity"].unique().to_list()
        if e and len(normalize(e)) >= 2 and (normalize(e) in inst or inst in normalize(e))
    ]
    return facts.filter(pl.col("entity").is_in(names))


class FactIndex:
    def __init__(self, facts: pl.DataFrame, lang: str):
        self.lang = lang
        rows: list[Fact] = []
        if facts.height == 0 or "numeric_value" not in facts.columns:
            facts = pl.DataFrame(
                schema={
                    c: pl.String
                    for c in ("fact_id", "label", "label_en", "concept", "unit", "dimensions", "period_start", "period_end")
                }
                | {"numeric_value": pl.Float64, "instant": pl.Boolean}
            )
        for r in facts.filter(pl.col("numeric_value").is_not_null()).sort("fact_id").iter_rows(named=True):
            label = (r["label"] if lang == "ko" else (r["label_en"] or r["label"])) or r["concept"]
            dims = r["dimensions"] or "{}"
            n_dims = 0 if dims in ("{}", "") else dims.count(":") // 2 or 1
            rows.append(
                Fact(
                    r["fact_id"],
                    label,
                    Decimal(repr(r["numeric_value"])),
                    r["unit"] or "",
                    _fact_period(r["period_start"], r["period_end"], bool(r["instant"])),
                    n_dims,
                )
            )
        self.facts = sorted(rows, key=lambda f: (abs(f.value), f.fact_id))
        self._keys = [abs(f.value) for f in self.facts]
        self._by_label: dict[tuple[str, Period | None], list[Fact]] = {}
        for f in self.facts:
            self._by_label.setdefault((_label_key(f.label), f.period), []).append(f)

    def __len__(self) -> int:
        return len(self.facts)

    def get(self, fact_id: str | None) -> Fact | None:
        if not hasattr(self, "_by_id"):
            self._by_id = {f.fact_id: f for f in self.facts}
        return self._by_id.get(fact_id) if fact_id else None

    def _near(self, target: Decimal, tol: Decimal) -> list[Fact]:
        lo = bisect.bisect_left(self._keys, abs(target) - tol)
        hi = bisect.bisect_right(self._keys, abs(target) + tol)
        return self.facts[lo:hi]

    def match(
        self, number: Decimal, unit: str, scales: list[Decimal], period: Period | None, label: str
    ) -> tuple[Fact, Decimal] | None:
        """(fact, scale) whose value the stated number is, or None. Ratios compare as fractions."""
        if not self.facts or number == 0:
            return None
        strong = significant_digits(number) >= 4
        best = None
        want: tuple[str, ...]  # the fact units a figure of this unit may be
        for scale in scales:
            if unit in ("%", "%p"):
                target, tol, want = number / 100, Decimal("0.00005"), ("pure",)
            else:
                exponent = number.as_tuple().exponent
                assert isinstance(exponent, int)  # stated numbers are finite (NaN/Infinity have a letter here)
                exp = -exponent if exponent < 0 else 0
                target, tol = number * scale, scale / Decimal(2) / (Decimal(10) ** exp)
                want = ("USD", "KRW", "shares", "USD/shares", "KRW/shares", "")
            for f in self._near(target, tol):
                if f.unit not in want and not (unit == "shares" and f.unit == "shares"):
                    continue
                if period and f.period and f.period != period:
                    continue
                sim = label_similarity(label, f.label)
                if not strong and sim < 0.5:
                    continue
                key = (sim, -f.n_dims, f.period is not None)
                if best is None or key > best[0]:
                    best = (key, f, scale)
            if best:
                break
        return (best[1], best[2]) if best else None

    def contradicts(self, label: str, period: Period | None, value: Decimal, unit: str) -> Fact | None:
        """A fact of this label and period when facts of it exist and none states this value."""
        if period is None or unit not in ("USD", "KRW"):
            return None
        same = self._by_label.get((_label_key(label), period), [])
        if not same:
            return None
        tol = max(abs(value) * Decimal("0.0005"), Decimal(1))
        if any(abs(abs(f.value) - abs(value)) <= tol for f in same):
            return None
        return min(same, key=lambda f: (f.n_dims, f.fact_id))
