"""Period alignment of figures: a figure the evidence states, but for another year than the answer says.

"Revenue was $5,620 million in fiscal 2023" over a table whose 5,620 sits in the 2022 column is a
wrong figure, although 5,620 occurs in the evidence. For each response figure the evidence states,
the years the answer attaches to it (its own sentence or table row) are compared with the years of
every place the evidence states it: its line or sentence, and in a Markdown table the header of its
column. The figure is misplaced only when every such place names a year and none of them is one the
answer names; a place without a year, or a response sentence without one, proves nothing.
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


def _is_year(raw: str) -> bool:
    return bool(re.fullmatch(r"(?:FY\s?)?(?:19|20)\d{2}(?:년|년도)?", raw.strip()))


def _clause(text: str, start: int, end: int) -> str:
    """The line, or the sentence within it, around text[start:end]."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    if line.lstrip().startswith("|"):
        return line
    left = max(line.rfind(". ", 0, start - line_start), line.rfind("다. ", 0, start - line_start))
    right = line.find(". ", end - line_start)
    return line[left + 1 if left >= 0 else 0 : right + 1 if right >= 0 else len(line)]


def _column_years(text: str, start: int) -> frozenset[str]:
    """In a Markdown table: the years in the header of the column holding position `start`."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    if not line.lstrip().startswith("|"):
        return frozenset()
    column = line[: start - line_start].count("|") - 1
    lines = text[:line_start].split("\n")[:-1]
    header = line
    for previous in reversed(lines):  # up to the first line of the table
        if not previous.lstrip().startswith("|"):
            break
        if not re.fullmatch(r"[\s|:\-]*", previous):  # the |---| rule is no header
            header = previous
    cells = header.split("|")[1:]
    return years(cells[column]) if 0 <= column < len(cells) and header is not line else frozenset()


@dataclass(frozen=True)
class Misplaced:
    raw: str  # the response's figure
    said: frozenset[str]  # the years the answer attaches to it
    stated: frozenset[str]  # the years of the places the evidence states it


@lru_cache(maxsize=1 << 14)  # a passage is evidence for many responses
def _places(text: str) -> tuple[tuple[Quantity, frozenset[str]], ...]:
    """Each figure a text states, with the years of its place (its clause, its table column)."""
    return tuple((e, years(_clause(text, e.start, e.end)) | _column_years(text, e.start)) for e in quantities(text))


def misplaced_figures(response: str, evidence: list[str]) -> list[Misplaced]:
    """Response figures the evidence states (at any scale, text/quantities) only for years the answer
    does not name."""
    places = [place for text in evidence for place in _places(text)]
    out = []
    for q in quantities(response):
        if _is_year(q.raw) or q.unit in ("%", "%p", "bps"):  # a rate repeats across years by nature
            continue
        said = years(_clause(response, q.start, q.end))
        found = [p for e, p in places if e.same_as(q)]
        if said and found and all(found) and not any(said & p for p in found):
            out.append(Misplaced(q.raw.strip(), said, frozenset().union(*found)))
    return out
