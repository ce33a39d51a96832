"""HTML-ish tables (AI-Hub contexts, 10-K HTML, DART TABLE) -> Markdown with the header row kept."""

from __future__ import annotations

import re


def _clean_cell(text: str) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    return text.replace("|", "/")


# HTML caps colspan at 1000 and rowspan at 65534; a span never reaches past the table's own
# rows, and no table grows past MAX_CELLS (a 70-byte table must not cost gigabytes).
MAX_COLSPAN = 1000
MAX_CELLS = 250_000


def span(value) -> int:
    """A rowspan/colspan attribute as a count >= 1: "3", " 2 ", "2px" and junk ("abc" -> 1) alike."""
    m = re.match(r"\s*(\d{1,9})", str(value)) if value is not None else None
    return max(int(m.group(1)), 1) if m else 1


def grid_to_markdown(rows: list[list[tuple[str, int, int]]]) -> str:
    """rows of (text, rowspan, colspan) cells -> Markdown table; spans are expanded by repetition,
    clamped to the rows that exist and to MAX_COLSPAN; rows past MAX_CELLS cells are dropped.

    The first non-empty row is the header (tables in these sources rarely mark <th>).
    """
    grid: list[list[str]] = []
    pending: dict[tuple[int, int], str] = {}
    budget = MAX_CELLS  # cells written, spans' copies included
    for r, cells in enumerate(rows):
        line: list[str] = []
        c = 0
        for text, rowspan, colspan in cells:
            while (r, c) in pending:
                line.append(pending.pop((r, c)))
                c += 1
            rowspan = min(max(rowspan, 1), len(rows) - r)
            colspan = min(max(colspan, 1), MAX_COLSPAN)
            budget -= rowspan * colspan
            if budget < 0:
                break
            for k in range(colspan):
                line.append(_clean_cell(text) if k == 0 else "")
                for dr in range(1, rowspan):
                    pending[(r + dr, c)] = _clean_cell(text)
                c += 1
        if budget < 0:
            break  # the rest of an oversized table is dropped, never expanded
        while (r, c) in pending:
            line.append(pending.pop((r, c)))
            c += 1
        grid.append(line)
    grid = [row for row in grid if any(cell for cell in row)]
    if not grid:
        return ""
    width = max(len(row) for row in grid)
    # Drop columns empty in every row (layout spacer cells in 10-K tables).
    keep = [j for j in range(width) if any(j < len(row) and row[j] for row in grid)]
    grid = [[row[j] if j < len(row) else "" for j in keep] for row in grid]
    header, body = grid[0], grid[1:]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(out)


def parse_markdown_table(md: str) -> tuple[list[str], list[list[str]]]:
    lines = [ln for ln in md.strip().splitlines() if ln.startswith("|")]
    if len(lines) < 2:
        return [], []
    split = lambda ln: [c.strip() for c in ln.strip().strip("|").split("|")]  # noqa: E731
    header = split(lines[0])
    body = (
        [split(ln) for ln in lines[2:]] if set(lines[1].replace("|", "").split()) <= {"---"} else [split(ln) for ln in lines[1:]]
    )
    return header, body
