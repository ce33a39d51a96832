"""Page furniture of paginated filings: page numbers, table-of-contents back-links and running
headers/footers, removed before sentences are split; a sentence broken by a page is re-joined."""

from __future__ import annotations

import re
from collections import Counter

_PAGE_NUMBER = re.compile(r"^(?:page\s+)?[-–—]?\s*(?:[A-Z]{1,2}\s?-\s?)?(?:\d{1,3}|[ivxlc]{1,6})\s*[-–—]?$", re.IGNORECASE)
_BACK_LINK = re.compile(
    r"^(?:\[?\s*)?(?:back to |return to |go to )?(?:top|table of contents|index to (?:consolidated )?"
    r"financial statements|contents)(?:\s*\]?)$",
    re.IGNORECASE,
)
_CONTINUED = re.compile(r"^\(?\s*(?:continued|cont'?d\.?)\s*\)?$", re.IGNORECASE)
# A running footer naming the filing and the page: "Apple Inc. | 2024 Form 10-K | 20".
_FORM_FOOTER = re.compile(r"^[^|\n]{0,60}\|?\s*(?:\d{4}\s+)?Form\s+10-?K(?:405)?\s*\|\s*\d{1,3}$", re.IGNORECASE)
# A short line repeated this often in one filing is a running header or footer.
RUNNING_MIN_REPEATS = 5
RUNNING_MAX_CHARS = 80


def is_furniture(text: str) -> bool:
    t = text.strip()
    return bool(_PAGE_NUMBER.match(t) or _BACK_LINK.match(t) or _CONTINUED.match(t) or _FORM_FOOTER.match(t))


_PAGED = re.compile(r"\D\s*\d{1,3}$")  # ends with a page-like number
# Numbered headings repeat with new numbers too ("ITEM 7", "Note 12"): never footers.
_HEADING = re.compile(r"^(?:item|note|part|section|schedule|exhibit|article|table|figure|step|chapter|제)\b", re.IGNORECASE)


def _shape(text: str) -> str:
    """A line with its numbers blanked: a footer repeats with a new page number on every page."""
    return re.sub(r"\d+", "#", text.strip())


def _running(blocks: list[tuple[str, str]]) -> tuple[set[str], set[str]]:
    """(running lines repeated verbatim, shapes of running lines that differ only by their numbers:
    page-numbered footers, none of which is a title worth keeping)."""
    short = [t.strip() for kind, t in blocks if kind == "text" and len(t.strip()) <= RUNNING_MAX_CHARS]
    exact = {t for t, n in Counter(short).items() if n >= RUNNING_MIN_REPEATS and not t.endswith((".", ":"))}
    variants: dict[str, set[str]] = {}
    for t in short:
        if _PAGED.search(t) and not _HEADING.match(t):
            variants.setdefault(_shape(t), set()).add(t)
    numbered = {shape for shape, forms in variants.items() if len(forms) >= RUNNING_MIN_REPEATS}
    return exact, numbered


def strip_furniture(blocks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Drop furniture blocks (running headers keep their first occurrence: it may be a title) and
    join a text block cut mid-sentence with the text that continues it after the page break."""
    (running, numbered), seen = _running(blocks), set()
    out: list[tuple[str, str]] = []
    cut = False  # the last kept text block was cut by furniture mid-sentence
    for kind, text in blocks:
        t = text.strip()
        if kind == "text" and (is_furniture(t) or (t in running and t in seen) or _shape(t) in numbered):
            cut = cut or bool(out and out[-1][0] == "text" and not out[-1][1].rstrip().endswith(_SENTENCE_END))
            continue
        seen.add(t)
        if cut and kind == "text" and out and out[-1][0] == "text" and t[:1].islower():
            out[-1] = ("text", out[-1][1].rstrip() + " " + t)
        else:
            out.append((kind, text))
        cut = False
    return out


_SENTENCE_END = (".", "!", "?", ":", ";", '"', "”", ")")
