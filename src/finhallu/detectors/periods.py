"""Period alignment of figures: a figure the evidence states, but for another year than the answer says.

"Revenue was $5,620 million in fiscal 2023" over a table whose 5,620 sits in the 2022 column is a
wrong figure, although 5,620 occurs in the evidence. For each response figure the evidence states,
the years the answer attaches to it (its own sentence or table row) are compared with the years of
every place the evidence states it: the part of its sentence that names a year (the clause between
commas or a "compared with", else the whole line or sentence), and in a Markdown table the header of
its column. "Net income was $209 million in 2024, up from $178 million in 2023" states 178 for 2023
only. A bare answer ("$178 million") names the question's years. The figure is misplaced only when
every such place names a year and none of them is one the answer names; a place without a year, or
an answer without one, proves nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from finhallu.text.quantities import Quantity, quantities

# 1990-2039, alone or as 2023년 / FY2023 / FY23 is not read (two-digit years are ambiguous)
_YEAR = re.compile(r"(?<![\d.,])(?:FY\s?)?((?:19|20)\d{2})(?:년|년도)?(?![\d,.]\d)")


def years(text: str) -> frozenset[str]:
    return frozenset(m.group(1) for m in _YEAR.finditer(text or ""))


def is_year_figure(raw: str) -> bool:
    return bool(re.fullmatch(r"(?:FY\s?)?(?:19|20)\d{2}(?:년|년도)?", raw.strip()))


def is_table_row(line: str) -> bool:
    """A Markdown row ("| a | b |") or a bare pipe-separated one ("a | b | c")."""
    return line.lstrip().startswith("|") or line.count("|") >= 2


def table_cells(line: str) -> list[str]:
    cells = line.split("|")
    return cells[1:] if line.lstrip().startswith("|") else cells


def clause_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the line, or the sentence within it, around text[start:end] begins and ends."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = line_end if line_end >= 0 else len(text)
    if is_table_row(text[line_start:line_end]):
        return line_start, line_end
    left = max(text.rfind(". ", line_start, start), text.rfind("다. ", line_start, start))
    right = text.find(". ", end, line_end)
    return (left + 1 if left >= 0 else line_start), (right + 1 if right >= 0 else line_end)


# where one figure's part of a sentence ends and another's begins ("X in 2024, compared with Y in 2023");
# a comma inside a number ("1,023") is none
PART_BREAK = re.compile(r"[,;](?=\s)|\b(?:compared (?:with|to)|up from|down from|versus|vs\.|against)\b", re.IGNORECASE)


def part_bounds(text: str, start: int, end: int, clause: tuple[int, int] | None = None) -> tuple[int, int]:
    """Where the stretch of the line or sentence around text[start:end] between part breaks begins
    and ends (`clause`: that line or sentence's bounds, where the caller has them)."""
    left, right = clause or clause_bounds(text, start, end)
    clause_text = text[left:right]
    a, b = start - left, end - left
    part_left = max((m.end() for m in PART_BREAK.finditer(clause_text, 0, a)), default=0)
    part_right = next((m.start() for m in PART_BREAK.finditer(clause_text, b)), len(clause_text))
    return left + part_left, left + part_right


def part_of(text: str, start: int, end: int) -> str:
    left, right = part_bounds(text, start, end)
    return text[left:right]


def place_years(text: str, start: int, end: int) -> frozenset[str]:
    """The years of the place of text[start:end]: its part of the sentence when that names one,
    else its line or sentence."""
    left, right = clause_bounds(text, start, end)
    part_left, part_right = part_bounds(text, start, end, (left, right))
    return years(text[part_left:part_right]) or years(text[left:right])


def column_header(text: str, start: int) -> str:
    """In a Markdown table: the header cell of the column holding position `start` ("" elsewhere,
    and for a cell of the header row itself)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    if not is_table_row(line):
        return ""
    column = len(table_cells(line[: start - line_start])) - 1
    lines = text[:line_start].split("\n")[:-1]
    header = line
    for previous in reversed(lines):  # up to the first line of the table
        if not is_table_row(previous):
            break
        if not re.fullmatch(r"[\s|:\-]*", previous):  # the |---| rule is no header
            header = previous
    cells = table_cells(header)
    return cells[column] if 0 <= column < len(cells) and header is not line else ""


@dataclass(frozen=True)
class Misplaced:
    raw: str  # the response's figure
    said: frozenset[str]  # the years the answer attaches to it
    stated: frozenset[str]  # the years of the places the evidence states it


@lru_cache(maxsize=1 << 14)  # a passage is evidence for many responses
def _places(text: str) -> tuple[tuple[Quantity, frozenset[str]], ...]:
    """Each figure a text states, with the years of its place (its clause, its table column)."""
    return tuple((e, place_years(text, e.start, e.end) | years(column_header(text, e.start))) for e in quantities(text))


def misplaced_figures(response: str, evidence: list[str], question: str = "") -> list[Misplaced]:
    """Response figures the evidence states (at any scale, text/quantities) only for years the answer
    does not name (an answer naming no year names the question's)."""
    places = [place for text in evidence for place in _places(text)]
    out = []
    for q in quantities(response):
        if is_year_figure(q.raw) or q.unit in ("%", "%p", "bps"):  # a rate repeats across years by nature
            continue
        said = place_years(response, q.start, q.end) or years(question)
        found = [p for e, p in places if e.same_as(q)]
        if said and found and all(found) and not any(said & p for p in found):
            out.append(Misplaced(q.raw.strip(), said, frozenset().union(*found)))
    return out
