"""Does a seed's question name the period and the line item its answer is stated for?

A generated seed becomes the faithful answer of a dialogue, so a question about fiscal 2007
answered with a fiscal 2005 figure, or about one table row answered from the next, makes the
faithful side unfaithful. Two checks:

* `question_mismatch`: the question against what the generator knows of its answer (row label,
  period), in the methods;
* `seed_mismatch`: the stage's generic post-check from the seed's clue alone: a table answer's
  row label must be named by the question and its column's period be the one asked; a sentence
  that names years must name the question's.

Either returns the reason ("period_mismatch", "row_mismatch") or None.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from finhallu.stages.seed_qa.tables import _PERIOD_LABEL, _header_like, split_row, table_cells
from finhallu.stages.seed_qa.values import _EN_YEAR as _YEAR
from finhallu.stages.seed_qa.values import DocPeriods, Period, period_in
from finhallu.text.normalize import contains_normalized
from finhallu.text.words import content_word_set

PERIOD_MISMATCH, ROW_MISMATCH = "period_mismatch", "row_mismatch"

_TERM = re.compile(r"제\s?(\d{1,3})\s?기")
_EN_HALF = re.compile(r"\bfirst half\b|\bH1\b|\bsix months\b", re.IGNORECASE)
_EN_QUARTER = re.compile(r"\b([13])Q\b|\bQ([13])\b", re.IGNORECASE)


def named_years(text: str, doc: DocPeriods) -> set[int]:
    """The years a text names: four-digit years and 제N기 terms (resolved by the filing's current term)."""
    years = {int(y) for y in _YEAR.findall(text or "")}
    for m in _TERM.finditer(text or ""):
        p = doc.term_period(int(m.group(1)))
        if p:
            years.add(p.year)
    return years


def asked_period(question: str, doc: DocPeriods, lang: str) -> Period | None:
    """The one period a question asks about ("fiscal 2007", "제54기반기(2022년)"); None if none or several."""
    if lang == "ko" and (p := period_in(question, doc, "ko")):
        return p
    years = named_years(question, doc)
    if len(years) != 1:
        return None
    year = years.pop()
    if re.search(r"상반기|반기", question) or (lang != "ko" and _EN_HALF.search(question)):
        return Period("H1", year)
    q = _EN_QUARTER.search(question) if lang != "ko" else re.search(r"([13])\s?분기", question)
    return Period(f"Q{next(g for g in q.groups() if g)}", year) if q else Period("FY", year)


def label_named(question: str, label: str) -> bool:
    """The question names the line item: verbatim, or every content word of it."""
    if not label:
        return True
    if contains_normalized(question, label):
        return True
    words = content_word_set(label)
    return bool(words) and words <= content_word_set(question)


def question_mismatch(question: str, labels: list[str], period: Period | None, doc: DocPeriods, lang: str) -> str | None:
    """The question asks for another period than the answer's, or does not name its line item
    (every label in `labels`: the row, and a column metric where the column says one)."""
    if period is not None:
        asked = asked_period(question, doc, lang)
        if asked is not None and asked != period:
            return PERIOD_MISMATCH
        years = named_years(question, doc)
        if asked is None and years and period.year not in years:
            return PERIOD_MISMATCH
    if not all(label_named(question, x) for x in labels):
        return ROW_MISMATCH
    return None


def _table_header(text: str, row_start: int) -> str:
    """The header rows of the table holding the row at row_start: its first line and the rows above
    that label columns."""
    above = []
    for line in reversed(text[:row_start].split("\n")[:-1]):
        if not line.startswith("|"):
            break
        above.append(line)
    above.reverse()
    heads = [ln for k, ln in enumerate(above) if k == 0 or _header_like(split_row(ln), DocPeriods(None), "")]
    return "\n".join(heads)


def _table_mismatch(seed: Mapping[str, Any], text: str, doc: DocPeriods) -> str | None:
    lang, question = seed["lang"], seed["question"]
    cells = [c for c in table_cells(text, doc, lang) if c.line_start == seed["clue_start"] and c.amount.raw == seed["answer"]]
    periods = {c.period for c in cells if c.period}
    asked = asked_period(question, doc, lang)
    q_years = named_years(question, doc)
    if periods:
        if (asked and asked not in periods) or (not asked and q_years and not q_years & {p.year for p in periods}):
            return PERIOD_MISMATCH
    else:  # no column period: the years the table's header names, if any, must hold the asked one
        header_years = named_years(_table_header(text, seed["clue_start"]), doc)
        if header_years and q_years and not q_years <= header_years:
            return PERIOD_MISMATCH
    row = split_row(seed["clue_text"])[0]
    labels = {c.label for c in cells} or {row}
    if any(_PERIOD_LABEL.fullmatch(x) for x in labels | {row}):
        return None  # a transposed table: periods down the rows, the column names the metric
    return None if any(label_named(question, x) for x in labels) else ROW_MISMATCH


def seed_mismatch(seed: Mapping[str, Any], text: str, doc: DocPeriods) -> str | None:
    """The generic post-check: the seed's question against its clue (a table row, or a sentence).
    `seed`: a `qa_seeds` row whose clue_text is set (a generated seed's clue_start and lang are too)."""
    if seed["clue_text"].startswith("|"):
        return _table_mismatch(seed, text, doc)
    stated = named_years(seed["clue_text"], doc)
    asked = named_years(seed["question"], doc)
    if stated and asked and not asked <= stated:
        return PERIOD_MISMATCH
    return None
