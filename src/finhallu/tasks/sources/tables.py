"""HTML-ish tables (AI-Hub contexts, 10-K HTML, DART TABLE) -> Markdown with the header row kept."""

from __future__ import annotations

import re


def _clean_cell(text: str) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    return text.replace("|", "/")


def grid_to_markdown(rows: list[list[tuple[str, int, int]]]) -> str:
    """rows of (text, rowspan, colspan) cells -> Markdown table; spans are expanded by repetition.

    The first non-empty row is the header (tables in these sources rarely mark <th>).
    """
    grid: list[list[str]] = []
    pending: dict[tuple[int, int], str] = {}
    for r, cells in enumerate(rows):
        line: list[str] = []
        c = 0
        for text, rowspan, colspan in cells:
            while (r, c) in pending:
                line.append(pending.pop((r, c)))
                c += 1
            for k in range(max(colspan, 1)):
                line.append(_clean_cell(text) if k == 0 else "")
                for dr in range(1, max(rowspan, 1)):
                    pending[(r + dr, c)] = _clean_cell(text)
                c += 1
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
    body = [split(ln) for ln in lines[2:]] if set(lines[1].replace("|", "").split()) <= {"---"} else [split(ln) for ln in lines[1:]]
    return header, body
