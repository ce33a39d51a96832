"""Acceptance rules: what a sample must be, checked against its evidence, history and pair.

One rule per label leaf (faithful answer, true refusal, each hallucination subtype, False
Acceptance, False Refusal), registered with the sentence the README documents. A rule returns
the reasons it rejects a sample (none: accepted). Rules read the response, the evidence and the
paired response; they never ask how the response was made.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

from finhallu.registry import Registry
from finhallu.labelcheck.evidence import (
    FRAMING,
    changed_spans,
    coverage,
    derivable,
    holds_clue,
    identifying,
    is_refusal,
    may_state_answer,
    money_or_ratio,
    new_sentences,
    states_answer,
    unsupported_figures,
)
from finhallu.text.normalize import contains_normalized, normalize
from finhallu.text.quantities import quantities, states_value, states_value_in
from finhallu.text.sentences import split_sentences
from finhallu.text.words import strip_particle


@dataclass(frozen=True)
class Case:
    response: str
    paired: str  # the other side of the pair (the faithful response for a hallucination; "" for a faithful one)
    evidence: list[str]
    history: str
    question: str
    answer: str | None
    clue: str | None
    lang: str

    @cached_property
    def context(self) -> str:
        return "\n".join(self.evidence)

    @cached_property
    def sources(self) -> str:
        """Everything a faithful response may draw on."""
        return "\n".join([self.context, self.history, self.question])

    @property
    def source_texts(self) -> list[str]:
        """The sources one by one (figures are read within one of them, each text's own memo)."""
        return [*self.evidence, self.history, self.question]

    @property
    def checkable_answer(self) -> bool:
        return identifying(self.answer)


@dataclass(frozen=True)
class AcceptanceRule:
    label: str
    rule: str  # the rule in one sentence (README)
    check: Callable[[Case], list[str]]


# One rule per label leaf, registered by `@acceptance` in any module of this package (a new
# subtype's rule can sit in a module of its own), never shared with the injectors' code.
RULES: Registry[AcceptanceRule] = Registry("acceptance rule", "finhallu.labelcheck")


def acceptance(label: str, rule: str):
    def deco(fn):
        RULES.add(label, AcceptanceRule(label, rule, fn), fn.__module__)
        return fn

    return deco


def _answers(c: Case) -> bool:
    return not c.checkable_answer or states_answer(c.response, c.answer)


def _fewer(a: str, b: str) -> list:
    """Figures of a that b states fewer times (a value changed once may still occur elsewhere)."""
    qa, qb = quantities(a), quantities(b)
    return [q for q in qa if sum(q.same_as(x) for x in qb) < sum(q.same_as(x) for x in qa)]


def _figure_changes(c: Case):
    """(figures the pair states that the response dropped, figures the response added)."""
    return _fewer(c.paired, c.response), _fewer(c.response, c.paired)


def _short_swaps(c: Case, max_words: int) -> list[tuple[str, str]] | None:
    spans = changed_spans(c.paired, c.response)
    if not spans or len(spans) > 2 or any(len(a.split()) > max_words or len(b.split()) > max_words or not b for a, b in spans):
        return None
    return spans


def _edited_sentences_unsupported(c: Case) -> bool:
    changed = new_sentences(c.paired, c.response)
    return bool(changed) and not any(contains_normalized(c.context, s) for s in changed)


@acceptance(
    "faithful_answer",
    "answers the asked question (states the answer, at any scale or rounding), is no "
    "refusal, states no figure the context, history or question lacks, and every sentence "
    "is mostly made of words the sources use",
)
def _faithful(c: Case) -> list[str]:
    out = []
    if is_refusal(c.response):
        out.append("a refusal, not an answer")
    if not _answers(c):
        out.append("does not state the asked answer")
    bad = unsupported_figures(c.response, c.source_texts)
    if bad:
        out.append(f"figures not in the sources: {[q.raw for q in bad][:3]}")
    weak = [s for s in split_sentences(c.response) if coverage(s, c.sources) < 0.5]
    if weak:
        out.append(f"sentence not supported by the sources: {weak[0][:60]!r}")
    return out + _wrong_period(c) + _wrong_row(c)


_YEAR = re.compile(r"(?<!\d)(19\d{2}|20\d{2})(?!\d)")


def _wrong_period(c: Case) -> list[str]:
    """The question names a year; the response states another year and not the asked one, or its
    figure comes from an evidence line that names only other years."""
    asked = set(_YEAR.findall(c.question))
    if not asked:
        return []
    said = set(_YEAR.findall(c.response))
    if said and not said & asked:
        return [f"answers for {sorted(said)} although {sorted(asked)} was asked"]
    if said & asked:
        return []
    for q in money_or_ratio(c.response):
        years = [_nearest_year(ln, q) for ln in re.split(r"(?<=[.!?])\s+|\n", c.context) if "|" not in ln]
        years = [y for y in years if y != ""]
        if years and None not in years:
            known = {y for y in years if y is not None}
            if not known & asked:
                return [f"{q.raw} is stated for {sorted(known)}, not {sorted(asked)}"]
    return []


def _nearest_year(line: str, q) -> str | None:
    """The year written nearest to where a sentence states q ("" when it does not state q; None
    when it states q without a year)."""
    spots = [(x.start, x.end) for x in quantities(line) if x.same_as(q)]
    if not spots:
        return ""
    at, end = spots[0]

    def distance(m: re.Match) -> int:  # a year across a clause break belongs to another figure
        between = line[end : m.start()] if m.start() >= end else line[m.end() : at]
        return abs(m.start() - at) + (1000 if re.search(r"[,;]| and |및|이며|이고", between) else 0)

    years = [(distance(m), m.group(1)) for m in _YEAR.finditer(line)]
    return min(years)[1] if years else None


def _row_label(line: str) -> str:
    cells = [x.strip() for x in line.strip().strip("|").split("|")]
    return cells[0] if cells else ""


def _cells(row: str) -> str:
    """A table row without its label (the label may hold numbers of its own: "Tier 1")."""
    return "|".join(row.strip().strip("|").split("|")[1:])


def _wrong_row(c: Case) -> list[str]:
    """A table figure taken from another row than the one the question names."""
    rows = [ln for ln in c.context.splitlines() if ln.count("|") >= 2]
    asked = [r for r in rows if _row_label(r) and normalize(_row_label(r)) in normalize(c.question)]
    if not asked:
        return []
    found = []
    for q in money_or_ratio(c.response):
        if q.unit in ("%", "%p", "bps"):
            continue  # rates recur across rows
        holding = [r for r in rows if states_value(_cells(r), q, unknown_scale=True)]
        if any(r in asked for r in holding):
            return []  # the asked row's figure is stated (other sentences may add more)
        if holding and len(re.sub(r"\D", "", q.raw).strip("0")) >= 3:  # round figures ("$4 million") pin no row
            found.append(f"{q.raw} is the row {_row_label(holding[0])!r}, not {_row_label(asked[0])!r}")
    return found[:1]


@acceptance(
    "true_refusal", "a refusal over a context that holds neither the answer (at any plausible scale) nor most of the clue"
)
def _true_refusal(c: Case) -> list[str]:
    out = [] if is_refusal(c.response) else ["not a refusal"]
    if may_state_answer(c.context, c.answer, c.clue):
        out.append("the context holds the answer: refusing is a false refusal")
    return out


@acceptance("false_refusal", "a refusal although the context states the answer or the clue")
def _false_refusal(c: Case) -> list[str]:
    out = [] if is_refusal(c.response) else ["not a refusal"]
    clue = c.clue or ""
    holds = (c.checkable_answer and states_answer(c.context, c.answer)) or (bool(clue) and holds_clue(c.context, clue))
    if not holds:
        out.append("the context does not hold the answer: refusing is right")
    return out


@acceptance(
    "false_acceptance",
    "an answer (no refusal) over a context in which no passage states the answer, at "
    "any plausible table scale, nor most of the clue",
)
def _false_acceptance(c: Case) -> list[str]:
    out = ["a refusal, not an acceptance"] if is_refusal(c.response) else []
    if may_state_answer(c.context, c.answer, c.clue):
        out.append("the context answers the question (after unit and scale normalisation)")
    return out


@acceptance(
    "number_error",
    "a figure of the faithful response is replaced by another of the same kind (amount, "
    "ratio, date) that neither the context nor the history states",
)
def _number_error(c: Case) -> list[str]:
    removed, added = _figure_changes(c)
    if not added or not removed:
        return ["no figure of the faithful response was replaced"]
    families = {("money" if q.unit in ("KRW", "USD") else q.unit) for q in removed}
    same_kind = [q for q in added if ("money" if q.unit in ("KRW", "USD") else q.unit) in families or not q.unit]
    if not same_kind:
        return ["the new figure is not the same kind of quantity"]
    stated = [q.raw for q in same_kind if states_value_in(c.source_texts, q)]
    return [f"the new figure is stated by the sources: {stated[:2]}"] if stated else []


@acceptance(
    "inconsistency",
    "something the assistant said earlier in the dialogue (a figure or a term) is now "
    "stated differently, and the new form is not in the history",
)
def _inconsistency(c: Case) -> list[str]:
    if not c.history.strip():
        return ["no history to contradict"]
    removed, added = _figure_changes(c)
    if any(states_value(c.history, q) for q in removed) and any(not states_value(c.history, q) for q in added):
        return []
    said = normalize(c.history)  # substrings: Korean endings vary between turns (가맹점에 / 가맹점은)
    for old, new in changed_spans(c.paired, c.response):
        gone, came = _words(old) - _words(new), _words(new) - _words(old)
        if gone and all(w in said for w in gone) and came and not all(w in said for w in came):
            return []
    return ["does not restate anything from the history differently"]


def _words(text: str) -> set[str]:
    """Every word of text, particles stripped (also 있습니다/없습니다, which content words leave out)."""
    return {strip_particle(w) for w in re.findall(r"[가-힣]+|[a-z]+|\d[\d,.]*", normalize(text)) if w}


# Direction and bound words: a modifier change swaps one end of an axis for the other.
_AXES = [
    ("증가", "감소"),
    ("늘", "줄"),
    ("상승", "하락"),
    ("인상", "인하"),
    ("확대", "축소"),
    ("이상", "이하|미만"),
    ("초과", "이하|미만"),
    ("최대", "최소"),
    ("높", "낮"),
    ("가능", "불가능"),
    ("있", "없"),
    ("포함", "제외"),
    ("허용", "금지"),
    ("완화", "강화"),
    ("면제", "부과"),
    ("의무", "선택"),
    ("우대", "가산"),
    ("흑자", "적자"),
    ("increas", "decreas"),
    ("higher", "lower"),
    ("more", "less|fewer"),
    ("above", "below"),
    ("at least", "at most"),
    ("rose|rise", "fell|fall|declin"),
    ("grew|grow", "declin|shrank"),
    ("gain", "loss"),
    ("improv", "deteriorat|worsen"),
    ("includ", "exclud"),
    ("profit", "loss"),
    ("up", "down"),
]


def _flips(old: str, new: str) -> bool:
    o, n = old.lower(), new.lower()
    for a, b in _AXES:
        for x, y in ((a, b), (b, a)):
            if re.search(x, o) and not re.search(x, n) and re.search(y, n) and not re.search(y, o):
                return True
    return False


@acceptance(
    "modifier_change",
    "one short phrase is swapped for its opposite on a direction or bound axis (increase/"
    "decrease, 이상/미만, 가능/불가능), no figure changes, and the context does not state "
    "the edited sentence",
)
def _modifier_change(c: Case) -> list[str]:
    spans = _short_swaps(c, 3)
    if spans is None:
        return ["not a short phrase swap"]
    out = [] if any(_flips(a, b) for a, b in spans) else [f"no direction or bound flipped: {spans[:2]}"]
    if _figure_changes(c)[1]:
        out.append("figures changed too")
    if not _edited_sentences_unsupported(c):
        out.append("the context still states the edited sentence")
    return out


def _term_swap(c: Case, max_words: int) -> list[str]:
    spans = _short_swaps(c, max_words)
    if spans is None:
        return ["not a short phrase swap"]
    out = []
    if _figure_changes(c)[1]:
        out.append("figures changed too")
    if any(re.search(r"\d", a + b) for a, b in spans):
        out.append("the swap touches digits")
    if not _edited_sentences_unsupported(c):
        out.append("the context still states the edited sentence")
    return out


@acceptance(
    "financial_term_misunderstanding",
    "one financial term is replaced by a different term, no figure changes, and the context does not state the edited sentence",
)
def _term(c: Case) -> list[str]:
    out = _term_swap(c, 4)
    spans = changed_spans(c.paired, c.response)
    if not out and all(_flips(a, b) for a, b in spans):
        out.append("a direction flip, not a term swap")
    return out


@acceptance(
    "entity_error",
    "one named entity (organisation, product, term) is replaced by another, no figure or "
    "digit changes, and the context does not state the edited sentence",
)
def _entity(c: Case) -> list[str]:
    return _term_swap(c, 4)


def _added_unsupported(c: Case) -> list[str]:
    return [
        s for s in new_sentences(c.paired, c.response) if unsupported_figures(s, c.source_texts) or coverage(s, c.sources) < 0.5
    ]


@acceptance(
    "fabricated_detail",
    "still answers the question, and adds a specific detail (a figure, date, condition "
    "or institution) that the context and history do not support",
)
def _fabricated(c: Case) -> list[str]:
    out = [] if _answers(c) else ["no longer states the answer"]
    return out + ([] if _added_unsupported(c) else ["adds nothing the sources lack"])


_OPINION = re.compile(
    r"(추천|권해|권할|유리|불리|걱정|안심|안전|합리적|바람직|괜찮|좋은 선택|훌륭|현명|생각합니다|판단됩니다|보입니다|"
    r"좋습니다|바랍니다|"
    r"개인적으로|솔직히|제 생각|저라면|in my (view|opinion)|i (think|believe|would)|frankly|honestly|wise|sensible|"
    r"safest|recommend|attractive|excellent|reassur|little reason|good (choice|idea|sign))",
    re.IGNORECASE,
)


@acceptance(
    "subjective_opinion",
    "still answers the question, and adds a judgement, recommendation or reassurance that the context does not state",
)
def _opinion(c: Case) -> list[str]:
    out = [] if _answers(c) else ["no longer states the answer"]
    added = [s for s in new_sentences(c.paired, c.response) if _OPINION.search(s) and not contains_normalized(c.context, s)]
    return out + ([] if added else ["adds no opinion the context lacks"])


def _near(context: str, at: int) -> str:
    """What introduces a figure in the context: the 40 characters before it and, in a table, the
    header row of its block (the column's condition)."""
    before = context[max(0, at - 40) : at]
    line_start = context.rfind("\n", 0, at) + 1
    if "|" in context[line_start:at]:
        block = context[:line_start].split("\n\n")[-1]
        header = next((ln for ln in block.splitlines() if ln.count("|") >= 2), "")
        before += " " + header
    return normalize(before)


def _names_other_condition(c: Case) -> bool:
    """A figure of the response that the context states, introduced by words that the context
    uses just before that figure (or as its column header) and the question does not use
    ("제2금융권에서는 50%"). Words are compared whole: 규제지역 is not asked by 비규제지역."""
    asked = {strip_particle(w) for w in re.findall(r"[가-힣A-Za-z]{2,}", c.question + " " + (c.answer or ""))}
    context_figures = quantities(c.context)
    for q in money_or_ratio(c.response):
        if c.answer and states_value(c.answer, q):
            continue
        near = " ".join(_near(c.context, x.start) for x in context_figures if x.same_as(q))
        words = {strip_particle(w) for w in re.findall(r"[가-힣A-Za-z]{2,}", c.response[max(0, q.start - 30) : q.start])}
        if any(not FRAMING.match(w) and w not in asked and normalize(w) in near for w in words):
            return True
    return False


@acceptance(
    "condition_not_satisfied",
    "does not state the asked value; states instead the value the context gives for another condition, and names that condition",
)
def _condition(c: Case) -> list[str]:
    out = ["still states the asked answer"] if c.checkable_answer and states_answer(c.response, c.answer) else []
    if not _names_other_condition(c):
        out.append("states no value of another condition named as such")
    values = [q.value for q in money_or_ratio(c.response)]
    if len(values) != len(set(values)) and len(set(q.value for q in money_or_ratio(c.paired))) == len(money_or_ratio(c.paired)):
        out.append("the same value is stated for two conditions")
    return out


def _not_an_answer(c: Case) -> list[str]:
    out = ["a refusal"] if is_refusal(c.response) else []
    if c.checkable_answer and states_answer(c.response, c.answer):
        out.append("states the asked answer")
    elif c.answer and derivable(c.answer, c.response):
        out.append("the asked answer follows from the figures it states")
    return out


@acceptance(
    "question_misunderstanding",
    "answers a different question about the same evidence: its statements are "
    "supported, but it neither states nor lets one derive the asked answer",
)
def _misunderstanding(c: Case) -> list[str]:
    out = _not_an_answer(c)
    weak = [s for s in split_sentences(c.response) if coverage(s, c.sources) < 0.5]
    return out + ([f"not a supported statement: {weak[0][:60]!r}"] if weak else [])


@acceptance(
    "off_topic_drift",
    "drifts off the question: it neither states nor lets one derive the asked answer, and says little of the clue",
)
def _drift(c: Case) -> list[str]:
    out = _not_an_answer(c)
    if c.clue and coverage(c.clue, c.response) >= 0.6:
        out.append("restates the clue")
    return out
