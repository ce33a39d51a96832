"""Financial-statement tables of filings (10-K HTML): the HTML grid read as the filer laid it out.

EDGAR tables put "$", "%" and ")" in cells of their own and pad with spacer cells, so a row's
values sit at other grid columns than its header's periods. This model:
1. places every cell on the grid by its colspan (rowspans copied down, both clamped);
2. merges currency, percent and closing-parenthesis cells into the value beside them;
3. finds the logical columns from the header rows' spans ("2024" over three grid columns owns
   every value that starts under it), falling back to columns no row fills twice;
4. joins multi-row headers per column ("Years ended" + "September 28, 2024").
The result is a Markdown table whose values sit under their periods, with the unit line
("in millions, except per share amounts") kept as a caption when the table states one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from finhallu.sources.tables import MAX_CELLS, MAX_COLSPAN

_PREFIX = re.compile(r"^[$€£¥₩]$|^\(\s*[$€£¥₩]?$")  # "$", "($", "(" opening a negative value
_SUFFIX = re.compile(r"^(%|\)|%\)|\)%|pts?|bps)$")
_NUMERIC = re.compile(r"^[(\-−–—]?\s*[$€£¥₩]?\s*\(?[\d.,]+\)?\s*%?\)?$|^[—–-]+$")
_YEAR = re.compile(r"^(19|20)\d{2}$")
_UNIT = re.compile(
    r"\([^()]{0,30}?\bin (?:thousands|millions|billions)[^)]*\)"
    r"|\bin (?:thousands|millions|billions)(?:,? except [^.|)]*)?",
    re.IGNORECASE,
)


@dataclass
class Cell:
    text: str
    col: int  # first grid column
    span: int  # grid columns covered

    @property
    def end(self) -> int:
        return self.col + self.span


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip().replace("|", "/")


def place(rows: list[list[tuple[str, int, int]]]) -> list[list[Cell]]:
    """Cells at their grid columns; a rowspan repeats the cell in the rows below (clamped)."""
    out: list[list[Cell]] = [[] for _ in rows]
    taken: list[set[int]] = [set() for _ in rows]
    budget = MAX_CELLS
    for r, cells in enumerate(rows):
        c = 0
        for text, rowspan, colspan in cells:
            while c in taken[r]:
                c += 1
            colspan = min(max(colspan, 1), MAX_COLSPAN)
            rowspan = min(max(rowspan, 1), len(rows) - r)
            budget -= colspan * rowspan
            if budget < 0:
                return out[:r]
            for dr in range(rowspan):
                out[r + dr].append(Cell(_clean(text), c, colspan))
                taken[r + dr].update(range(c, c + colspan))
            c += colspan
    return [sorted(row, key=lambda x: x.col) for row in out]


def merge_symbols(row: list[Cell]) -> list[Cell]:
    """ "$" joins the value to its right, "%" and ")" the value to their left; spacers go."""
    out: list[Cell] = []
    pending: Cell | None = None
    for cell in row:
        t = cell.text
        if not t:
            continue
        if _PREFIX.match(t):
            pending = Cell(t, cell.col, cell.span) if pending is None else Cell(pending.text + t, pending.col, pending.span)
            continue
        if _SUFFIX.match(t) and out and pending is None:
            prev = out[-1]
            out[-1] = Cell(prev.text + t, prev.col, cell.end - prev.col)
            continue
        if pending is not None:
            cell = Cell(pending.text + t, pending.col, cell.end - pending.col)
            pending = None
        out.append(cell)
    if pending is not None:
        out.append(pending)
    return out


def is_value(text: str) -> bool:
    return bool(_NUMERIC.match(text.replace(" ", ""))) and not _YEAR.match(text)


def _header_rows(rows: list[list[Cell]]) -> int:
    """Leading rows holding no value (years are headers, not values); a row with nothing but a
    label just above the first values ("Net sales:") is the body's first group label."""
    n = next((i for i, row in enumerate(rows) if any(is_value(c.text) for c in row[1:])), len(rows))
    while n > 1 and len(rows[n - 1]) == 1 and rows[n - 1][0].col == 0 and not _UNIT.search(rows[n - 1][0].text):
        n -= 1
    return n


def _nearest(bands: list[tuple[int, int]], col: int, reach: int = 2) -> int | None:
    """The band holding a grid column, else the nearest within `reach` columns (a header cell one
    column beside its right-aligned value); None when none is near or two are equally near."""
    dist = [0 if a <= col < b else min(abs(col - a), abs(col - (b - 1))) for a, b in bands]
    best = min(dist, default=None)
    if best is None or best > reach or dist.count(best) > 1:
        return None
    return dist.index(best)


def _bands_from_header(header: list[list[Cell]], values: list[list[Cell]], label_end: int) -> list[tuple[int, int]] | None:
    """Column bands from the deepest header row that places every value in a band of its own.
    Bands are widened to the values they own, so a value's column decides its band."""
    for row in reversed(header):  # the deepest header row is the most specific (periods)
        bands = [(c.col, c.end) for c in row if c.text and c.col >= label_end and not _UNIT.fullmatch(c.text)]
        if not bands:
            continue
        owned: list[list[int]] = [[a, b] for a, b in bands]
        ok = True
        for vrow in values:
            hits = [_nearest(bands, c.col) for c in vrow]
            if None in hits or len(set(hits)) < len(hits):
                ok = False
                break
            for c, k in zip(vrow, hits):
                assert k is not None  # rows with a value outside every band were rejected above
                owned[k] = [min(owned[k][0], c.col), max(owned[k][1], c.col + 1)]
        if ok and all(owned[k][1] <= owned[k + 1][0] for k in range(len(owned) - 1)):
            return [(a, b) for a, b in owned]
    return None


def _bands_from_occupancy(rows: list[list[Cell]], label_end: int) -> list[tuple[int, int]]:
    """Adjacent grid columns merge while no row fills both (value columns never share a row)."""
    cols = sorted({c.col for row in rows for c in row if c.col >= label_end and c.text})
    bands: list[list[int]] = []
    for col in cols:
        if bands and not any(
            any(bands[-1][0] <= c.col < bands[-1][1] for c in row) and any(c.col == col for c in row if c.text) for row in rows
        ):
            bands[-1][1] = col + 1
        else:
            bands.append([col, col + 1])
    return [(a, b) for a, b in bands]


def _label_end(rows: list[list[Cell]]) -> int:
    """Grid columns of the row-label column: the first cell's extent in body rows."""
    ends = [row[0].end for row in rows if row and row[0].col == 0 and row[0].text and not is_value(row[0].text)]
    return min(ends) if ends else 1


def to_markdown(rows: list[list[tuple[str, int, int]]]) -> tuple[str, str]:
    """(markdown, unit caption) of one HTML table; ("", "") when it holds nothing."""
    placed = [merge_symbols(r) for r in place(rows)]
    placed = [r for r in placed if r]
    if not placed:
        return "", ""
    unit = next((m.group(0) for r in placed for c in r for m in [_UNIT.search(c.text)] if m), "")
    n_head = _header_rows(placed)
    header, body = placed[:n_head], placed[n_head:]
    label_end = _label_end(body or placed)
    value_rows = [[c for c in r if c.col >= label_end] for r in body]
    bands = _bands_from_header(header, value_rows, label_end) if header else None
    if bands is None:
        bands = _bands_from_occupancy(value_rows + [[c for c in r if c.col >= label_end] for r in header], label_end)
    titles = [
        " ".join(c.text for r in header for c in r if c.text and c.col < b and c.end > a and not _UNIT.fullmatch(c.text)).strip()
        for a, b in bands
    ]
    label_title = " ".join(c.text for r in header for c in r if c.col < label_end and c.text and not _UNIT.search(c.text))
    lines = [[label_title] + titles]
    for row in body:
        label = " ".join(c.text for c in row if c.col < label_end)
        values = [" ".join(c.text for c in row if c.col >= label_end and a <= c.col < b) for a, b in bands]
        if label or any(values):
            lines.append([label] + values)
    keep = [j for j in range(len(lines[0])) if j == 0 or any(line[j] for line in lines)]
    lines = [[line[j] for j in keep] for line in lines]
    md = ["| " + " | ".join(lines[0]) + " |", "|" + "|".join(" --- " for _ in lines[0]) + "|"]
    md += ["| " + " | ".join(line) + " |" for line in lines[1:]]
    return "\n".join(md), unit
