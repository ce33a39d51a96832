"""Metric attribution of figures: a figure the evidence states, but as the value of another metric.

"Return on equity was 56.1%" over "…return on equity 13.0%, while the efficiency ratio stood at
56.1%" copies a number the evidence holds, so a presence check passes it. Each evidence figure is
read with its label, within its part of the sentence (periods.part_bounds: between commas, "compared
with" and the like): the words before it since the figure before it ("the efficiency ratio stood
at"), and the words after it when no other figure follows in the part ("earned $466 million in net
income"); in a Markdown table, the row's first cell and the column's header. Names (capitalised words inside a sentence)
say whose figure it is, not which: they are left out. The response figure's topic is the wording
of its own part, or the question's when a short answer gives the figure bare ("56.1%"). Only rates
and amounts are read (a count, a date or an ordinal is no metric's value), and only a topic of a few
words (a long sentence without breaks says too much to be a label).

A response figure is misattributed when every place the evidence states it has a label, none sharing a word
with the topic, while another evidence figure of the same unit (a table's bare figure is not one),
with another value, has a label sharing at least two: the evidence gives the asked metric a
different figure. A label sharing one word, a topic of one word, or no rival proves nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from finhallu.detectors.periods import (
    clause_bounds,
    column_header,
    is_table_row,
    is_year_figure,
    part_bounds,
    part_of,
    table_cells,
)
from finhallu.text.quantities import Quantity, unit_family, quantities
from finhallu.text.words import content_word_set

# words that say what kind of statement it is, not which metric: they tell no figure from another
_GENERIC = frozenset(
    "was were is are be been reported reached stood came rose fell grew up down about around roughly "
    "approximately nearly total year years fiscal end at of its their the bank company million billion "
    "thousand percent per cent according report results filing 억 조 원 백만원 천원 약 기준".split()
)


# a capitalised word that does not open the text or a sentence: a name (acronyms such as ROE stay)
_NAME = re.compile(r"(?<![.!?:|]\s)(?<!^)(?<=\s)[A-Z][a-z][\w&'\-]*")


def _topic_words(text: str) -> frozenset[str]:
    names = content_word_set(" ".join(_NAME.findall(text.strip())))
    return frozenset(w for w in content_word_set(text) if not w[0].isdigit() and w not in _GENERIC and w not in names)


# A metric's value is a rate or an amount; counts, days, ordinals and bare numbers label nothing.
METRIC_UNITS = frozenset({"%", "%p", "bps", "KRW", "USD"})
# A label names a metric in a few words: a longer stretch of wording (a long sentence with no break)
# says many things, and sharing none of them with a figure's label is no evidence.
MAX_TOPIC_WORDS = 6
SHORT_ANSWER_WORDS = 12  # an answer this short answers the question's metric


@dataclass(frozen=True)
class Misattributed:
    raw: str  # the response's figure
    rival: str  # the evidence figure whose label is the topic's
    label: str  # that label


@lru_cache(maxsize=1 << 14)  # a passage is evidence for many responses
def labelled_figures(text: str) -> tuple[tuple[Quantity, frozenset[str], str], ...]:
    """Each figure a text states (years aside) with its label's words and the label as written."""
    figures = [q for q in quantities(text) if not is_year_figure(q.raw)]
    out = []
    for k, q in enumerate(figures):
        left, right = clause_bounds(text, q.start, q.end)
        line = text[left:right]
        if is_table_row(line):
            label = table_cells(line)[0] + " " + column_header(text, q.start)
        else:
            left, right = part_bounds(text, q.start, q.end, (left, right))
            before = max([left] + [p.end for p in figures[:k] if left <= p.end <= q.start])
            label = text[before : q.start]
            if not any(left <= p.start < right for p in figures[k + 1 :]):
                label += " " + text[q.end : right]
        out.append((q, _topic_words(label), " ".join(label.split()).strip(" ,;:|$")))
    return tuple(out)


def misattributed_figures(response: str, evidence: list[str], question: str = "") -> list[Misattributed]:
    """Response figures the evidence states only under labels other than the answer's topic, where
    another figure of the same unit carries the topic's label."""
    places = [place for text in evidence for place in labelled_figures(text)]
    out = []
    # a short answer's bare figure answers the question's metric
    asked = _topic_words(question) if len(content_word_set(response)) <= SHORT_ANSWER_WORDS else frozenset()
    for q in quantities(response):
        if q.unit not in METRIC_UNITS or is_year_figure(q.raw):
            continue
        topic = _topic_words(part_of(response, q.start, q.end).replace(q.raw, " "))
        if len(topic) < 2:
            topic |= asked
        if not 2 <= len(topic) <= MAX_TOPIC_WORDS:
            continue
        own = [ws for e, ws, _ in places if e.same_as(q)]
        # an unlabelled place ("연 3.50%에서 3.25%로") may be of any metric
        if not own or not all(own) or any(ws & topic for ws in own):
            continue
        rivals = [
            (len(ws & topic), e, label)
            for e, ws, label in places
            if unit_family(e.unit) == unit_family(q.unit) and not e.same_as(q) and len(ws & topic) >= 2
        ]
        if rivals:
            _, e, label = max(rivals, key=lambda r: r[0])
            out.append(Misattributed(q.raw.strip(), e.raw.strip(), label))
    return out
