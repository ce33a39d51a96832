"""Numbers as filings state them: scale notes, cell amounts, periods, VALUE-UNIT-PERIOD keys.

FinReflectKG merges every number with its unit and period into one tail entity
(`0.7bn-USD-FY-2024`, `21.5%-FY-2022`, `50-bps-NA`), so triplets about the same figure
compare equal whatever the wording. Amounts keep the text as the filing states it; the
value in base units (dollars, won) comes from the table's scale note ("($ in millions)",
"(단위 : 백만원)").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from finhallu.text.numbers import format_decimal
from finhallu.text.quantities import Scale, find_scale  # noqa: F401

# ---- scale notes ------------------------------------------------------------------------

# Scale notes are read by the shared number module (Scale, find_scale re-exported for the seed modules).


# ---- amounts in table cells and sentences -----------------------------------------------

_CELL = re.compile(
    r"^(?P<neg1>[△▽(\-−–]\s*)?(?P<cur>\$|US\$|₩)?\s*(?P<neg2>\(\s*|-\s*)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s*(?P<close>\))?\s*"
    r"(?P<unit>%p|%|bps|bp|원|개사|개|명|건|주|배|x)?\s*(?P<close2>\))?$",
    re.IGNORECASE,
)
_YEAR = re.compile(r"^(19|20)\d{2}$")


@dataclass(frozen=True)
class Amount:
    raw: str  # as stated
    number: Decimal  # the stated number with its sign (391035, -156, 11.7)
    unit: str  # USD | KRW | % | %p | bps | count | shares | x | "" (bare: the table's scale applies)


def parse_cell(cell: str) -> Amount | None:
    """A table cell holding exactly one amount ("$391,035", "(156)", "△2,128,473", "11.70", "24.1%")."""
    text = (cell or "").strip()
    m = _CELL.match(text)
    if not m or _YEAR.match(text):
        return None
    try:
        number = Decimal(m.group("num").replace(",", ""))
    except InvalidOperation:
        return None
    negative = bool(m.group("neg1") or m.group("neg2")) or (text.startswith("(") and text.endswith(")"))
    unit = (m.group("unit") or "").lower()
    unit = {
        "bp": "bps",
        "개": "count",
        "개사": "count",
        "명": "count",
        "건": "count",
        "주": "shares",
        "원": "KRW",
        "배": "x",
    }.get(unit, unit)
    if m.group("cur"):
        unit = "KRW" if m.group("cur") == "₩" else "USD"
    return Amount(text, -number if negative else number, unit)


def base_value(amount: Amount, scale: Scale | None, per_unit_row: bool) -> tuple[Decimal | None, str]:
    """(value in base units, unit) of a cell amount; None when the scale of a money amount is unknown.

    Ratios, per-share figures and counts with their own unit never take the table's scale.
    """
    if amount.unit in ("%", "%p", "bps", "x"):
        return amount.number, amount.unit
    if per_unit_row:
        return amount.number, amount.unit or (scale.currency if scale and scale.currency in ("USD", "KRW") else "")
    if amount.unit == "count":
        return amount.number, "count"
    if amount.unit == "shares":  # share counts scale only with a share note ("in thousands", "(단위 : 천주)")
        mult = scale.multiplier if scale and scale.currency in ("shares", "USD") and not scale.note.count("원") else 1
        return amount.number * mult, "shares"
    if scale is None:
        return None, amount.unit or ""
    unit = amount.unit if amount.unit in ("USD", "KRW") else (scale.currency or "")
    if amount.unit == "KRW" and amount.raw.rstrip().endswith("원") and scale.multiplier != 1:
        return amount.number, "KRW"  # "3,251원" in a 백만원 table is stated in won
    return amount.number * scale.multiplier, unit


# ---- periods --------------------------------------------------------------------------


@dataclass(frozen=True)
class Period:
    kind: str  # FY | H1 | Q1 | Q2 | Q3
    year: int

    @property
    def label(self) -> str:
        return f"{self.kind}-{self.year}"

    def text(self, lang: str) -> str:
        if lang == "ko":
            return {"FY": f"{self.year}년", "H1": f"{self.year}년 상반기"}.get(self.kind, f"{self.year}년 {self.kind[1]}분기")
        return {"FY": f"fiscal {self.year}", "H1": f"the first half of {self.year}"}.get(
            self.kind, f"the {self.kind[1]}Q of {self.year}"
        )


@dataclass(frozen=True)
class DocPeriods:
    """A filing's own period: its fiscal year, the report kind (FY/H1/Q1/Q3) and, for DART,
    the number of its current business term (제N기), so "제53기" or "전기말" resolve to a year."""

    year: int | None
    kind: str = "FY"
    term: int | None = None

    @property
    def current(self) -> Period | None:
        return Period(self.kind, self.year) if self.year else None

    def term_period(self, n: int) -> Period | None:
        """제N기: the current term is the report's own period (a half-year in a 반기보고서), earlier
        terms are whole fiscal years."""
        if not (self.year and self.term) or n > self.term:
            return None
        year = self.year - (self.term - n)
        return Period(self.kind if n == self.term else "FY", year)


_TERM = re.compile(r"제\s?(\d{1,3})\s?기")
_KO_PART = re.compile(r"\s?(반기말?|[13]\s?분기말?)")
_KO_QUARTER_ONLY = re.compile(r"(?<!\d)3\s?개\s?월")  # "3개월", "3 개 월": a quarter
_KO_RANGE = re.compile(r"(\d{4})\s?년\s?(\d{1,2})\s?월\s?[~\-]\s?(?:(\d{4})\s?년\s?)?(\d{1,2})\s?월")
_KO_MONTH = re.compile(r"(\d{4})\s?년\s?(\d{1,2})\s?월\s?말?|(\d{4})\.(\d{2})\.(\d{2})")
_KO_YEAR = re.compile(r"((?:19|20)\d{2})\s?년(?!\s?\d{1,2}\s?월)(\s?(?:상반기|반기))?")
_KO_REL = [("당반기", 0), ("당분기", 0), ("당기", 0), ("전반기", -1), ("전분기", -1), ("전기", -1), ("전전기", -2)]
# "당기손익-공정가치금융자산", "당기순이익", "전기전자": line items and words, not the current or prior period.
_KO_REL_NOT = r"(?!\s?(?:손익|순이익|순손익|순손실|법인세|이익|손실|전자|차))"
# "fiscal 2005, our" names 2005, as does a header's "September 28,2024"; "$12,2019" is no year.
_EN_YEAR = re.compile(r"(?:(?<![\d,.$])|(?<=[A-Za-z]\s\d,)|(?<=[A-Za-z]\s\d\d,))((?:19|20)\d{2})(?!\d|,\d)")
_EN_PRIOR = re.compile(r"\b(a year earlier|prior[- ]year|previous year|year[- ]ago)\b", re.IGNORECASE)
_EN_QUARTER = re.compile(r"\b(three|six|nine) months\b|\bquarter\b|\bQ[1-4]\b", re.IGNORECASE)


def _month_period(year: int, month: int, doc: DocPeriods) -> Period:
    if month == 12 or (doc.kind == "FY" and doc.year == year):
        return Period("FY", year)
    return Period({6: "H1", 3: "Q1", 9: "Q3"}.get(month, "FY"), year)


def period_in(text: str, doc: DocPeriods, lang: str) -> Period | None:
    """The one period a header or sentence names; None when it names none or several."""
    t = text or ""
    found: set[Period] = set()
    if lang == "ko":
        if _KO_QUARTER_ONLY.search(t):
            return None  # "3개월": a quarter's own figure inside a half-year report
        for m in _TERM.finditer(t):
            p = doc.term_period(int(m.group(1)))
            part = _KO_PART.match(t, m.end())
            if p and part:  # "제53기 반기": the same part of an earlier term, not its whole year
                p = Period({"반기": "H1", "1분기": "Q1", "3분기": "Q3"}.get(re.sub(r"\s|말", "", part.group(1)), "FY"), p.year)
            if p:
                found.add(p)
        for m in _KO_RANGE.finditer(t):
            y0, m0, m1 = int(m.group(1)), int(m.group(2)), int(m.group(4))
            found.add(Period("FY", y0) if (m0, m1) == (1, 12) else _month_period(int(m.group(3) or y0), m1, doc))
        if not found:
            for m in _KO_MONTH.finditer(t):
                if m.group(1):
                    found.add(_month_period(int(m.group(1)), int(m.group(2)), doc))
                else:
                    found.add(_month_period(int(m.group(3)), int(m.group(4)), doc))
        if not found:  # "2024년", "2022년 상반기"
            for m in _KO_YEAR.finditer(t):
                found.add(Period("H1" if m.group(2) else "FY", int(m.group(1))))
        if not found and doc.current:
            for word, delta in sorted(_KO_REL, key=lambda x: -len(x[0])):
                if re.search(word + _KO_REL_NOT, t):
                    if delta == 0:
                        found.add(doc.current)
                    elif word.startswith("전기") or word.startswith("전전기"):
                        found.add(Period("FY", doc.current.year + delta))
                    else:
                        found.add(Period(doc.kind, doc.current.year + delta))
                    break
    else:
        if _EN_QUARTER.search(t):
            return None
        years = {int(y) for y in _EN_YEAR.findall(t)}
        found |= {Period("FY", y) for y in years}
        if not found and _EN_PRIOR.search(t) and doc.year:
            found.add(Period("FY", doc.year - 1))
    return found.pop() if len(found) == 1 else None


def doc_periods(title: str, published: str | None, term_texts: list[str], source: str) -> DocPeriods:
    """Fiscal year and kind of a filing from its title ("... FY2024", "(1997)") or its published
    period ("20220101-20220630", "2022-01-01/2022-06-30", "December 31, 2024"); DART's current term from its 제N기 headers."""
    year = None
    m = re.search(r"FY\s?(\d{4})|\((\d{4})\)", title or "")
    if m:
        year = int(m.group(1) or m.group(2))
    kind = "FY"
    pub = published or ""
    # "20220101-20220630" as DART writes it, "2022-01-01/2022-06-30" as the documents table stores it
    m2 = re.search(r"(\d{4})-?(\d{2})-?(\d{2})\s*[-/]\s*(\d{4})-?(\d{2})-?(\d{2})$", pub)
    if m2:
        year = year or int(m2.group(4))
        months = (int(m2.group(4)) - int(m2.group(1))) * 12 + int(m2.group(5)) - int(m2.group(2)) + 1
        kind = {3: "Q1", 6: "H1", 9: "Q3"}.get(months, "FY") if months < 12 else "FY"
    elif year is None:
        m3 = re.search(r"(19|20)\d{2}", pub)
        year = int(m3.group(0)) if m3 else None
    if "반기" in (title or "") and kind == "FY":
        kind = "H1"
    term = None
    if source == "dart":
        terms = [int(x) for t in term_texts for x in re.findall(r"제\s?(\d{1,3})\s?기", t)]
        term = max(terms) if terms else None
    return DocPeriods(year, kind, term)


# ---- VALUE-UNIT-PERIOD ------------------------------------------------------------------

_SHORT = [(Decimal(10**12), "tn"), (Decimal(10**9), "bn"), (Decimal(10**6), "m")]


def vup(value: Decimal | None, unit: str, period: Period | None) -> str:
    """FinReflectKG's merged number entity: `0.7bn-USD-FY-2024`, `21.5%-FY-2022`, `50-bps-NA`."""
    p = period.label if period else "NA"
    if value is None:
        return f"NA-{unit or 'NA'}-{p}"
    if unit in ("%", "%p"):
        return f"{format_decimal(value)}{unit}-{p}"
    v, suffix = value, ""
    if unit in ("USD", "KRW"):
        for size, name in _SHORT:
            if abs(value) >= size:
                v, suffix = value / size, name
                break
    return f"{format_decimal(v)}{suffix}-{unit or 'NA'}-{p}"
