"""Table passages (Markdown, as chunking keeps them) -> cells with row label, column, period.

Real filings' tables are layout tables: 10-K rows often carry fewer cells than the header
("| Americas | $167,045 | 3 | $162,560 | (4) | $169,658 |" under "| | 2024 | | Change | | 2023 |
..."), DART tables repeat or add header rows mid-table ("| | 2022년 1월~6월 | ..."). A row is
aligned to the header positionally when the widths agree, else by its non-empty cells in
order; a row that fits neither keeps its amounts without a column (XBRL facts may still
place them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from finhallu.stages.seed_qa.values import Amount, DocPeriods, Period, parse_cell, period_in

_CHANGE_COL = re.compile(r"change|변동|증감|차이|growth", re.IGNORECASE)
# Ratio rows and columns: a bare number there is a percentage. "%" counts in a column header only
# (a row label's "3.50% Notes Due 2050" names a bond, not a ratio).
_RATIO = re.compile(r"(비율|비중|[률율])(?=\(|\s|$)|ratio|margin|yield|percent|\brate\)?$", re.IGNORECASE)
_RATIO_COL = re.compile(_RATIO.pattern + r"|%", re.IGNORECASE)
_SHARES = re.compile(r"주식\s?수|주식의\s?수|보유\s?주식|\bshares\b", re.IGNORECASE)
_PER_UNIT = re.compile(r"per (common )?share|per-share|주당|\(단위\s*[:：]\s*원\)", re.IGNORECASE)
_LABEL_NOISE = re.compile(r"^[\s\[\]ㆍ·•\-–—*]+|[\s\[\]:：*]+$|\s*\(\*?\d\)$|\s*\(\*\d?\)$")
_HEADER_WORDS = {"구분", "구 분", "과목", "항목", "", "december 31,", "year ended december 31,"}


@dataclass(frozen=True)
class TableCell:
    label: str  # the row label, cleaned of bullets and footnote marks
    column: str  # the column header as stated (header rows combined)
    amount: Amount
    period: Period | None
    line: str  # the row's own line in the passage, verbatim
    line_start: int  # offset of that line in the passage
    ratio: bool  # the row or column holds ratios (a bare number there is a percentage)
    per_unit: bool  # per-share (or per-unit) figures: the table's scale does not apply


def split_row(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _is_separator(line: str) -> bool:
    return set(line.replace("|", "").split()) <= {"---"}


def clean_label(text: str) -> str:
    prev = None
    t = text
    while prev != t:
        prev, t = t, _LABEL_NOISE.sub("", t).strip()
    return t


def table_lines(text: str) -> list[tuple[int, str]]:
    """(offset, line) of every Markdown table line of a passage."""
    out, pos = [], 0
    for line in text.split("\n"):
        if line.startswith("|"):
            out.append((pos, line))
        pos += len(line) + 1
    return out


def caption_text(text: str) -> str:
    """Where a passage states its scale: prose lines, a table's header row and one-cell rows
    ("| (단위 : 백만원) |") - never a row label ("기본주당순이익(단위 : 원)" is that row's unit only)."""
    out, first = [], True
    for line in text.split("\n"):
        if not line.startswith("|"):
            out.append(line)
        elif first or len(split_row(line)) == 1:
            out.append(line)
        if line.startswith("|") and not _is_separator(line):
            first = False
    return "\n".join(out)


def _header_like(cells: list[str], doc: DocPeriods, lang: str) -> bool:
    """A row that labels columns: no label (or the header's own label) and no amounts but years."""
    if cells[0].replace(" ", "").lower() not in {w.replace(" ", "") for w in _HEADER_WORDS}:
        return False
    rest = [c for c in cells[1:] if c]
    return bool(rest) and all(parse_cell(c) is None for c in rest)


# A row label that is only a period ("제12기말", "Fiscal 2024", "2023년 12월말"): the table is transposed.
_PERIOD_LABEL = re.compile(
    r"\s*(?:제\s?\d+\s?기\s?(?:반기말|반기|\d분기말|\d분기|말)?|(?:fiscal\s+|FY\s?)?(?:19|20)\d{2}(?:\s?년)?"
    r"(?:\s?\d{1,2}\s?월\s?말?)?|(?:당|전|전전)(?:반기|분기|기)말?)\s*",
    re.IGNORECASE,
)
_SHARE_COL = re.compile(r"%|비중|구성비|ratio|share", re.IGNORECASE)


def _column_periods(cols: list[str], doc: DocPeriods, lang: str) -> list[Period | None]:
    """Each column's period; a share column ("% of total", "비중") takes the period column left of it."""
    out: list[Period | None] = []
    for col in cols:
        p = period_in(col, doc, lang) if col else None
        if p is None and col and _SHARE_COL.search(col) and out and out[-1] is not None:
            p = out[-1]
        out.append(p)
    return out


def combine_header(top: list[str], sub: list[str]) -> list[str]:
    """A sub-header row under the top header, column by column. A top cell spans the empty cells
    right of it (a merged cell: "| 구 분 | 당반기 |  | 전반기 |  |" over "| 구 분 | 3 개 월 | 누 적 | 3 개 월 |
    누 적 |"), so a sub-header under an empty top cell takes the spanning one: "당반기 누 적", not a
    "누 적" of no period."""
    out, span = [], ""
    for k, (h, c) in enumerate(zip(top, sub)):
        span = (h or span) if k > 0 else ""  # the label column spans nothing
        base = h or (span if c else "")
        out.append(f"{base} {c}".strip() if c and c not in base else base)
    return out


def table_cells(text: str, doc: DocPeriods, lang: str) -> list[TableCell]:
    lines = table_lines(text)
    if len(lines) < 2:
        return []
    top = header = split_row(lines[0][1])
    out: list[TableCell] = []
    for start, line in lines[1:]:
        if _is_separator(line):
            continue
        cells = split_row(line)
        if _header_like(cells, doc, lang):
            # a header row below the first: combine it with the top header, column by column
            if len(cells) == len(top):
                header = combine_header(top, cells)
            continue
        label = clean_label(cells[0])
        if not label or parse_cell(label) is not None or not re.search(r"[A-Za-z가-힣]", label):
            continue
        values, cols = cells[1:], header[1:]
        if len(values) == len(cols):
            pairs = list(zip(cols, values))
        else:
            ne_v, ne_c = [v for v in values if v], [c for c in cols if c]
            pairs = list(zip(ne_c, ne_v)) if len(ne_v) == len(ne_c) else [("", v) for v in ne_v]
        label_period = period_in(label, doc, lang) if _PERIOD_LABEL.fullmatch(label) else None
        col_periods = _column_periods([c for c, _ in pairs], doc, lang)
        for (col, raw), col_period in zip(pairs, col_periods):
            amount = parse_cell(raw)
            if amount is None or (col and _CHANGE_COL.search(col)):
                continue
            period = col_period
            metric, column = label, col
            if label_period and not period and col:  # transposed: periods down the rows, metrics across
                period, metric = label_period, clean_label(col)
            ratio = bool(_RATIO.search(metric) or _RATIO_COL.search(col))
            per_unit = bool(_PER_UNIT.search(metric) or _PER_UNIT.search(col))
            if ratio and amount.unit == "":
                amount = Amount(amount.raw, amount.number, "%")
            elif amount.unit == "" and (_SHARES.search(col) or _SHARES.search(metric)):
                amount = Amount(amount.raw, amount.number, "shares")
            out.append(TableCell(metric, column, amount, period, line, start, ratio, per_unit))
    return out
