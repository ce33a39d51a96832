"""Calendar dates as sources write them -> ISO 8601 ("20210402", "January 26, 2025", "2025.01.26",
"2021년 4월 2일" -> "2021-04-02"; a period "20220101-20220630" -> "2022-01-01/2022-06-30")."""

from __future__ import annotations

import re
from datetime import date

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"]
    )
}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9

_NUMERIC = re.compile(r"^(\d{4})[-./]?(\d{1,2})[-./]?(\d{1,2})\.?$")
_KOREAN = re.compile(r"^(\d{4})\s*년\s*(\d{1,2})\s*월\s*(\d{1,2})\s*일$")
_WORDS = re.compile(r"^([A-Za-z]{3,9})\.?\s+(\d{1,2}),?\s*(\d{4})$")
_WORDS_DMY = re.compile(r"^(\d{1,2})\s+([A-Za-z]{3,9})\.?,?\s+(\d{4})$")
_RANGE = re.compile(r"^(\d{8}|\d{4}-\d{2}-\d{2})\s*[-/~]\s*(\d{8}|\d{4}-\d{2}-\d{2})$")


def _valid(y: int, m: int, d: int) -> str | None:
    try:
        return date(y, m, d).isoformat()
    except ValueError:
        return None


def iso_date(text: str | None) -> str | None:
    """One calendar date in ISO form; None when the text is not one (or not a real day)."""
    t = (text or "").strip()
    if m := _NUMERIC.match(t) or _KOREAN.match(t):
        return _valid(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if (m := _WORDS.match(t)) and m.group(1).lower() in _MONTHS:
        return _valid(int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2)))
    if (m := _WORDS_DMY.match(t)) and m.group(2).lower() in _MONTHS:
        return _valid(int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)))
    return None


def iso_date_or_period(text: str | None) -> str | None:
    """A date, or a period as an ISO interval "start/end"; None when neither can be read."""
    t = (text or "").strip()
    if m := _RANGE.match(t):
        start, end = iso_date(m.group(1)), iso_date(m.group(2))
        return f"{start}/{end}" if start and end else None
    return iso_date(t)
