"""Page furniture of paginated filings: page numbers, table-of-contents back-links and running
headers/footers, removed before sentences are split; a sentence broken by a page is re-joined."""

from __future__ import annotations

import re
from collections import Counter

_PAGE_NUMBER = re.compile(r"^(?:page\s+)?[-–—]?\s*(?:[A-Z]{1,2}\s?-\s?)?(?:\d{1,3}|[ivxlc]{1,6})\s*[-–—]?$", re.IGNORECASE)
_BACK_LINK = re.compile(r"^(?:\[?\s*)?(?:back to |return to |go to )?(?:top|table of contents|index to (?:consolidated )?"
                        r"financial statements|contents)(?:\s*\]?)$", re.IGNORECASE)
_CONTINUED = re.compile(r"^\(?\s*(?:continued|cont'?d\.?)\s*\)?$", re.IGNORECASE)
# A short line repeated this often in one filing is a running header or footer.
RUNNING_MIN_REPEATS = 5
RUNNING_MAX_CHARS = 80


def is_furniture(text: str) -> bool:
    t = text.strip()
    return bool(_PAGE_NUMBER.match(t) or _BACK_LINK.match(t) or _CONTINUED.match(t))


def _running(blocks: list[tuple[str, str]]) -> set[str]:
    counts = Counter(t.strip() for kind, t in blocks if kind == "text" and len(t.strip()) <= RUNNING_MAX_CHARS)
    return {t for t, n in counts.items() if n >= RUNNING_MIN_REPEATS and not t.endswith((".", ":"))}


def strip_furniture(blocks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Drop furniture blocks (running headers keep their first occurrence: it may be a title) and
    join a text block cut mid-sentence with the text that continues it after the page break."""
    running, seen = _running(blocks), set()
    out: list[tuple[str, str]] = []
    cut = False  # the last kept text block was cut by furniture mid-sentence
    for kind, text in blocks:
        t = text.strip()
        if kind == "text" and (is_furniture(t) or (t in running and t in seen)):
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
