"""Knowledge-graph triplets per passage (FinReflectKG): (head, head type, relation, tail, tail type).

Numbers are merged into one VALUE tail, VALUE-UNIT-PERIOD (`391.035bn-USD-FY-2024`). Two
operations: `extract_triplets` and `reflect_triplets` (the critique pass that checks every
triplet against the passage and corrects or drops it). Their rules backends read tables
cell by cell (row label x column period) and sentences that state an amount with a subject
("Net income for 2024 was $218 million", "순이자이익은 1조 2,174억 원으로"). After both,
`ground_in_facts` checks numbers against the XBRL facts: a matching fact verifies a triplet
(and supplies a missing period or table scale), a contradicting one removes it.
"""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal
from typing import Any, TypedDict

from pydantic import BaseModel, Field

from finhallu.llm.operations import operation
from finhallu.text import sentences
from finhallu.stages.seed_qa.facts import FactIndex
from finhallu.stages.seed_qa.tables import caption_text, table_cells
from finhallu.stages.seed_qa.values import _EN_YEAR, DocPeriods, Period, base_value, find_scale, parse_cell, period_in, vup
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import find_numbers
from finhallu.text.words import strip_particle

# The schema (FinReflectKG's entity and relation types, the subset filings' QA needs).
ENTITY_TYPES = (
    "ORG",
    "ORG_REG",
    "ORG_GOV",
    "PERSON",
    "GPE",
    "SEGMENT",
    "PRODUCT",
    "FIN_METRIC",
    "FIN_INSTRUMENT",
    "ECON_IND",
    "RISK_FACTOR",
    "REGULATORY_REQUIREMENT",
    "ACCOUNTING_POLICY",
    "EVENT",
    "CONCEPT",
    "VALUE",
)
RELATION_TYPES = (
    "Has_Value",
    "Increased_By",
    "Decreased_By",
    "Reports",
    "Discloses",
    "Subject_To",
    "Regulated_By",
    "Member_Of",
    "Operates_In",
    "Has_Segment",
    "Depends_On",
    "Impacts",
    "Invests_In",
    "Issues",
    "Partners_With",
    "Guides_On",
)
_GENERIC_EN = re.compile(
    r"^(?:(?:beginning|ending|opening|closing) balances?|balances?,? (?:at )?(?:beginning|end) of "
    r"(?:the )?(?:year|period)|basic|diluted|total|other|net)\s*:?$",
    re.IGNORECASE,
)
_GENERIC_KO = re.compile(r"^(?:기초|기말|반기말|분기말|당기말|전기말)(?:장부금액|잔액|금액)?$")
# Row labels that name no metric by themselves (sub-rows of roll-forward and breakdown tables).
GENERIC_HEADS = {
    "total",
    "totals",
    "other",
    "others",
    "net",
    "subtotal",
    "balance",
    "beginningbalance",
    "endingbalance",
    "additions",
    "disposals",
    "합계",
    "소계",
    "계",
    "기타",
    "총계",
    "기초",
    "기말",
    "증가",
    "감소",
    "취득",
    "처분",
    "상각",
    "대체",
    "환율변동",
    "기타증감",
    "개별취득",
    "사업결합",
    "처분ㆍ폐기ㆍ손상",
    "손상",
}


class TripletItem(BaseModel):
    head: str
    head_type: str
    relation: str
    tail: str
    tail_type: str
    evidence: str = Field("", description="the passage line or sentence stating the triplet, verbatim")
    span: str | None = Field(None, description="for VALUE tails: the figure exactly as the passage states it")
    value: float | None = Field(None, description="for VALUE tails: the value in base units (dollars, won, percent)")
    unit: str | None = None  # USD | KRW | % | %p | bps | count | shares | x
    period: str | None = None  # FY-2024 | H1-2022 | NA
    column: str | None = None  # the table column the figure sits in (as stated), if any


class TripletsOut(BaseModel):
    triplets: list[TripletItem]


class ReflectOut(BaseModel):
    triplets: list[TripletItem]
    issues: list[str]


_ORG = re.compile(r"㈜|\(주\)|주식회사|\bCo\.|\bLtd\b|\bInc\.|\bCorp\b|\bLLC\b|GmbH|\bS\.A\.|\bB\.V\.|Limited")


def _segment_like(label: str) -> bool:
    return bool(re.search(r"부문|segment|americas|europe|china|japan|asia|region", label, re.IGNORECASE))


def _head_type(label: str) -> str:
    if _ORG.search(label):
        return "ORG"  # an investee or subsidiary row: the column names the metric
    return "SEGMENT" if _segment_like(label) else "FIN_METRIC"


def _value_triplet(
    head: str,
    relation: str,
    amount_raw: str,
    value: Decimal | None,
    unit: str,
    period: Period | None,
    evidence: str,
    column: str | None = None,
) -> TripletItem:
    return TripletItem(
        head=head,
        head_type=_head_type(head),
        relation=relation,
        tail=vup(value, unit, period),
        tail_type="VALUE",
        evidence=evidence,
        span=amount_raw,
        value=float(value) if value is not None else None,
        unit=unit or None,
        period=period.label if period else "NA",
        column=column,
    )


# ---- tables ---------------------------------------------------------------------------


def _table_triplets(text: str, doc: DocPeriods, lang: str, scale) -> list[TripletItem]:
    out = []
    for c in table_cells(text, doc, lang):
        value, unit = base_value(c.amount, scale, c.per_unit)
        out.append(_value_triplet(c.label, "Has_Value", c.amount.raw, value, unit, c.period, c.line, c.column))
    return out


# ---- sentences --------------------------------------------------------------------------

_EN_VERB_LEVEL = re.compile(
    r"\b(?:was|were|is|are|totaled|totaling|totalled|amounted to|reached|represented|"
    r"remained at|of|to|at|equal to)\s+(?:approximately\s+|about\s+|an additional\s+)?$",
    re.IGNORECASE,
)
_EN_VERB_CHANGE = re.compile(
    r"\b(increased|decreased|declined|rose|grew|fell|dropped|improved)\s+(?:by\s+)?"
    r"(?:approximately\s+|about\s+)?$",
    re.IGNORECASE,
)
_EN_CHANGE_WORD = re.compile(r"\b(increased|decreased|declined|rose|grew|fell|dropped)\b", re.IGNORECASE)
_EN_COMPARE = re.compile(r"(?:compared (?:with|to)|from|versus|vs\.?|\((20\d\d):)\s*(?:approximately\s+)?$", re.IGNORECASE)
_EN_OR = re.compile(r",?\s+or\s+(?:approximately\s+)?$")
# Where a subject noun phrase starts: a clause boundary, a verb or a figure before it.
_EN_CUT = re.compile(
    r"(?:[,;:(]|\b(?:while|as|that|which|whereas|had|has|have|with|including|included|include|"
    r"includes|also|reflected|reflects|reflecting|"
    r"because|but|provided|recorded|reported|led by|driven by|increased by|decreased by|offset by|"
    r"was|were|is|are|over|under|than)\b|\bfrom(?=\s+(?:our|the|a|an)\b)|\band(?=\s+(?:total|net|the|our|a|an)\b)|"
    r"\S*\d\S*(?:\s+(?:thousand|million|billion)\b\)?)?)\s*",
    re.IGNORECASE,
)
_EN_APPOSITIVE = re.compile(r",\s*(?:consisting of|including|such as|which|primarily|excluding)\b.*$", re.IGNORECASE)
_EN_DROP_LEAD = re.compile(
    r"^(?:[•·▪◦*\-–—]|the|our|its|their|a|an|of|for|less|plus|and|higher|lower|total of|"
    r"(?:the )?company['’]s)\s+",
    re.IGNORECASE,
)
_EN_NOT_SUBJECT = re.compile(
    r"^(?:in|of|at|on|to|for|from|with|by|due|as|excess|approximately)\b|"
    r"^(?:increase|decrease|change|growth|decline|amount|total)s?$",
    re.IGNORECASE,
)
_EN_DROP_TAIL = re.compile(
    r"\s+(?:for|in|during|at|as of)\s+(?:fiscal\s+)?(?:year\s+)?(?:[A-Z][a-z]+ \d{1,2},\s*)?"
    r"(?:19|20)\d{2}$"
)
_EN_PRONOUN = {
    "we",
    "it",
    "this",
    "they",
    "which",
    "that",
    "these",
    "those",
    "he",
    "she",
    "there",
    "compared",
    "or",
    "and",
    "but",
    "less",
    "plus",
    "by",
    "of",
}
_EN_YEAR_AFTER = r"\b(?:in|for|during|at|as of|through)\s+(?:fiscal\s+)?(?:[A-Z][a-z]+\.?\s+\d{1,2},\s*)?((?:19|20)\d{2})\b"
_EN_PRIOR_WORDS = re.compile(r"^\s*,?\s*(?:a year earlier|in the prior year|the prior year|last year)", re.IGNORECASE)


def _en_period_after(right: str, doc: DocPeriods, anywhere: bool = False) -> Period | None:
    """The period a figure's own phrase names: "$218 million for 2024", "3.94 billion a year earlier"."""
    m = (re.search if anywhere else re.match)((r"" if anywhere else r"^\s*,?\s*") + _EN_YEAR_AFTER, right)
    if m:
        return Period("FY", int(m.group(1)))
    if _EN_PRIOR_WORDS.match(right) and doc.year:
        return Period("FY", doc.year - 1)
    return None


_EN_COUNT_NOUN = re.compile(
    r"^\s+((?:full-time(?: equivalent)? |full-service |active )?(?:employees|branches|offices|"
    r"locations|stores|customers|countries|banking centers))\b",
    re.IGNORECASE,
)
_EN_NOT_AMOUNT = re.compile(r"(?:Item|Rule|Section|Note|Exhibit|Part|No\.|Form|page|pages)\s*$", re.IGNORECASE)


def _en_subject(left: str) -> str | None:
    """The noun phrase a clause's amount belongs to: the words before its verb, back to a boundary."""
    np_ = _EN_DROP_TAIL.sub("", _EN_APPOSITIVE.sub("", left.rstrip(" ,;")))
    cuts = list(_EN_CUT.finditer(np_))
    if cuts:
        np_ = np_[cuts[-1].end() :]
    prev = None
    while prev != np_:
        prev, np_ = np_, _EN_DROP_LEAD.sub("", np_).strip(" ,;")
    words = np_.split()
    if (
        not words
        or len(words) > 7
        or words[0].lower() in _EN_PRONOUN
        or not re.search(r"[a-z]{2}", np_)
        or _EN_NOT_SUBJECT.match(np_)
    ):
        return None
    return np_[0].upper() + np_[1:]


_EN_BARE_YEAR = re.compile(r"(?:19|20)\d{2}")
# A year a sentence compares with: "compared with $217 million for 2023", "(2023: $31 million)".
_EN_COMPARED_YEAR = re.compile(
    r"(?:compared (?:with|to)|versus|vs\.?)\s+(?:\S+\s+){0,6}?(?:fiscal\s+)?"
    r"((?:19|20)\d{2})\b|\(((?:19|20)\d{2}):",
    re.IGNORECASE,
)


def _en_sentence_period(sent: str, numbers: list, doc: DocPeriods) -> Period | None:
    """The period of a sentence's figures whose own phrase names none.

    A year named before the first figure ("In fiscal 2005, ... net income of $927,000", "As of
    December 31, 2024, ...") dates them; the year itself is no figure. Without one, the filing's
    own period, unless the sentence names another year than the prior one it compares with
    ("... in fiscal 1996 by a subsidiary", "... compared to fiscal 2011" in a fiscal-2013 filing):
    then which period a figure is for is not stated, and none is given.
    """
    first = next((n for n in numbers if not (_EN_BARE_YEAR.fullmatch(n.raw) and not n.unit)), None)
    lead = period_in(sent[: first.start] if first else sent, doc, "en")
    if lead or doc.year is None:
        return lead or doc.current
    others = {int(y) for y in _EN_YEAR.findall(sent)} - {doc.year}
    compared = {int(a or b) for a, b in _EN_COMPARED_YEAR.findall(sent)}
    if others and not (others == {doc.year - 1} and others <= compared):
        return None
    return doc.current


def _prior(p: Period | None) -> Period | None:
    return Period(p.kind, p.year - 1) if p else None


def _en_sentence_triplets(sent: str, doc: DocPeriods) -> list[TripletItem]:
    out: list[TripletItem] = []
    asides: list[bool] = []
    numbers = find_numbers(sent)
    default = _en_sentence_period(sent, numbers, doc)
    for n in numbers:
        start, end = n.start, n.end
        dollar = start > 0 and sent[start - 1] == "$"
        raw_start = start - 1 if dollar else start
        left, right = sent[:raw_start], sent[end:]
        if _EN_NOT_AMOUNT.search(left) or re.match(r"^[-/]\d", right):
            continue
        raw = sent[raw_start:end]
        own = _en_period_after(right, doc) or default
        if dollar:
            unit = "USD"
        elif n.unit in ("%", "percent"):
            unit = "%"
        elif n.unit in ("bp", "bps", "basis points", "basis point"):
            unit = "bps"
        elif n.unit.startswith("percentage point"):
            unit = "%p"
        else:
            m = _EN_COUNT_NOUN.match(right)
            if m and "." not in n.raw and not _EN_NOT_AMOUNT.search(left):
                head = m.group(1)
                out.append(_value_triplet(head[0].upper() + head[1:], "Has_Value", raw, n.value, "count", own, sent))
                asides.append(False)
            continue
        prev = out[-1] if out else None
        # An aside ("..., or 0.29% of average loans of $12.76 billion,") is never what a comparison refers to.
        same_unit = next((t for t, aside in zip(reversed(out), reversed(asides)) if t.unit == unit and not aside), None)
        relation, head, period = None, None, own
        cmp_ = _EN_COMPARE.search(left)
        if cmp_ and same_unit:
            # "... compared with $217 million for 2023", "from $3.94 billion a year earlier", "(2023: $31 million)"
            relation, head = same_unit.relation, same_unit.head
            period = (Period("FY", int(cmp_.group(1))) if cmp_.group(1) else _en_period_after(right[:45], doc, True)) or (
                _prior(_period_of(same_unit)) if _period_of(same_unit) else None
            )
        elif _EN_OR.search(left) and prev and prev.relation != "Has_Value":
            relation, head, period = prev.relation, prev.head, _period_of(prev)  # "$18 million, or 3.0%,"
        elif _EN_OR.search(left) and same_unit:
            relation, head = same_unit.relation, same_unit.head  # "compared with $63 million, or 22.5%, in 2023"
            period = _en_period_after(right, doc) or (_period_of(prev) if prev else own)
        else:
            ch = _EN_VERB_CHANGE.search(left)
            lv = _EN_VERB_LEVEL.search(left)
            if ch:
                relation = "Increased_By" if ch.group(1).lower() in ("increased", "rose", "grew", "improved") else "Decreased_By"
                head = _en_subject(left[: ch.start()])
            elif lv:
                relation = "Has_Value"
                word = lv.group(0).strip().split()[0].lower()
                before = left[: lv.start()]
                changes = list(_EN_CHANGE_WORD.finditer(before))
                if word in ("to", "at") and changes and prev and prev.relation != "Has_Value":
                    head = prev.head  # "... increased $18 million, or 3.0%, to $614 million"
                elif word in ("to", "at"):  # "Interest expense increased to $448 million"
                    head = _en_subject(before[: changes[-1].start()]) if changes else None
                else:
                    head = _en_subject(before)
        if not head or not relation:
            continue
        out.append(_value_triplet(head, relation, raw, n.value, unit, period or own, sent))
        asides.append(bool(re.match(r"\s*or\b", left.rsplit(",", 1)[-1])) and not cmp_)
    return out


def _period_of(t: TripletItem) -> Period | None:
    if not t.period or t.period == "NA":
        return None
    kind, year = t.period.split("-")
    return Period(kind, int(year))


_KO_TOPIC = re.compile(r"([가-힣A-Za-z0-9()·\-]+)(은|는|이|가)(?=\s)")
_KO_CLAUSE = re.compile(r",\s|(?:며|고|으나|지만|면서|는데)\s")
_KO_NOT_HEAD = {
    "연결",
    "기준",
    "현재",
    "말",
    "당사",
    "당기",
    "전기",
    "이는",
    "그",
    "이",
    "해당",
    "이러한",
    "결과",
    "중",
    "및",
    "등",
    "내",
    "외",
    "약",
    "총",
}
_KO_UP = re.compile(r"^\s*(?:\([^)]*\))?\s*(?:포인트\s*)?(증가|늘|상승|확대|개선|성장)")
_KO_DOWN = re.compile(r"^\s*(?:\([^)]*\))?\s*(?:포인트\s*)?(감소|줄|하락|축소|낮아|악화)")
_KO_PRIOR = re.compile(r"전기(?:의|\s?말)?\s*(?:\(\s*)?$|전년(?:도)?(?:의|\s?말)?\s*(?:\(\s*)?$")


def _ko_head(clause: str) -> str | None:
    """The last topic/subject-marked noun of a clause ("대출채권 총액은" -> "대출채권 총액")."""
    found = list(_KO_TOPIC.finditer(clause))
    if not found:
        return None
    m = found[-1]
    head = m.group(1)
    if head in _KO_NOT_HEAD or re.fullmatch(r"제?\d+기?", head):
        return None
    before = clause[: m.start()].split()
    if before:
        w = before[-1]
        if (
            len(w) >= 2
            and re.fullmatch(r"[가-힣A-Za-z()]+", w)
            and w not in _KO_NOT_HEAD
            and strip_particle(w) == w
            and not re.search(r"기$|말$|의$|에$|로$|를$|을$", w)
        ):
            head = f"{w} {head}"
    return head


_KO_COMPARISON = re.compile(r"전(?:기|년도?)\s?(?:말|의)?\s*(?:\S+\s*){0,2}?(?:대비|보다)")


def _ko_sentence_triplets(sent: str, doc: DocPeriods) -> list[TripletItem]:
    out: list[TripletItem] = []
    prev_end = -1
    for n in find_numbers(sent):
        raw_end = n.end
        unit = n.unit
        if unit == "%" and sent[raw_end : raw_end + 3] == "포인트":
            raw_end, unit = raw_end + 3, "%p"
        unit_name = {"원": "KRW", "%": "%", "퍼센트": "%", "%p": "%p", "bp": "bps", "bps": "bps"}.get(unit)
        if unit_name is None:
            continue
        raw = sent[n.start : raw_end]
        left, right = sent[: n.start], sent[raw_end:]
        bounds = list(_KO_CLAUSE.finditer(left))
        clause_start = bounds[-1].end() if bounds else 0
        clause = left[clause_start:]
        prev = out[-1] if out and prev_end > clause_start else None  # a figure earlier in this clause
        relation = "Increased_By" if _KO_UP.match(right) else ("Decreased_By" if _KO_DOWN.match(right) else "Has_Value")
        prior = bool(_KO_PRIOR.search(left))
        head = prev.head if prev and (prior or re.search(r"(대비|\(|보다)\s*$", left)) else None
        head = head or _ko_head(clause) or (prev.head if prev else None)
        if head is None:
            continue
        if (
            relation == "Has_Value"
            and prev
            and prev.head == head
            and left.rstrip().endswith("(")
            and prev.relation != "Has_Value"
        ):
            relation = prev.relation  # "90억 원(2.2%) 증가": the rate of the same change
        period: Period | None
        if prior and relation == "Has_Value" and doc.current:
            period = (
                Period("FY", doc.current.year - 1)
                if doc.kind == "FY" or "말" in left[-4:]
                else Period(doc.kind, doc.current.year - 1)
            )
        else:  # a change happens in the period the clause names, not in the one it is compared with
            period = period_in(_KO_COMPARISON.sub("", clause), doc, "ko") or doc.current
        out.append(_value_triplet(head, relation, raw, n.value, unit_name, period, sent))
        prev_end = raw_end
    return out


_EN_REGULATOR = re.compile(
    r"subject to (?:supervision|regulation|examination)(?: and (?:regulation|supervision|"
    r"examination))? by (?:the )?([A-Z][A-Za-z .&’'-]+?)(?:\s*\(|,| and |\.)"
)
_EN_MEMBER = re.compile(r"\ba member of (?:the )?([A-Z][A-Za-z .&’'-]+?)(?: whose|,|\.| and )")


def _relation_triplets(sent: str, company: str) -> list[TripletItem]:
    out = []
    for rx, relation, tail_type in ((_EN_REGULATOR, "Subject_To", "ORG_REG"), (_EN_MEMBER, "Member_Of", "ORG_REG")):
        for m in rx.finditer(sent):
            out.append(
                TripletItem(
                    head=company, head_type="ORG", relation=relation, tail=m.group(1).strip(), tail_type=tail_type, evidence=sent
                )
            )
    return out


def sentence_spans(text: str, lang: str) -> list[tuple[int, str]]:
    """(offset, sentence) of the prose lines of a passage, each sentence verbatim."""
    out, pos = [], 0
    for line in text.split("\n"):
        if not line.startswith("|") and line.strip():
            at = pos
            for s in sentences.split(line, lang):
                k = text.find(s, at)
                if k >= 0:
                    out.append((k, s))
                    at = k + len(s)
        pos += len(line) + 1
    return out


@operation("extract_triplets", TripletsOut)
def extract_triplets(
    passage: str,
    company: str,
    lang: str,
    fiscal_year: int | None,
    report_kind: str,
    current_term: int | None,
    scale_note: str | None,
    entity_types: list[str],
    relation_types: list[str],
) -> TripletsOut:
    """Rules backend: every table cell (row label, column period) and every sentence that states
    an amount with its subject becomes a value triplet; regulator/membership sentences relation triplets."""
    doc = DocPeriods(fiscal_year, report_kind, current_term)
    scale = find_scale(caption_text(passage)) or find_scale(scale_note or "")
    found = _table_triplets(passage, doc, lang, scale)
    for _, sent in sentence_spans(passage, lang):
        found += _ko_sentence_triplets(sent, doc) if lang == "ko" else _en_sentence_triplets(sent, doc)
        if lang == "en":
            found += _relation_triplets(sent, company)
    return TripletsOut(triplets=found)


@operation("reflect_triplets", ReflectOut)
def reflect_triplets(
    passage: str, triplets: list[dict], lang: str, entity_types: list[str], relation_types: list[str]
) -> ReflectOut:
    """Rules backend of the critique pass: every triplet must be stated by the passage (evidence
    verbatim, head and figure in it), typed by the schema, and unambiguous; tails are re-normalized."""
    issues: list[str] = []
    kept: list[TripletItem] = []
    for t in (TripletItem.model_validate(x) for x in triplets):
        why = None
        if t.evidence not in passage:
            why = "evidence not in passage"
        elif (
            not contains_normalized(t.evidence, t.head)
            and not (t.column and contains_normalized(t.evidence, t.column))
            and not contains_normalized(passage, t.head)
        ):
            why = "head not stated"
        elif t.relation not in relation_types:
            why = f"relation {t.relation} not in schema"
        elif t.head_type not in entity_types or t.tail_type not in entity_types:
            why = "entity type not in schema"
        elif (
            re.sub(r"\s", "", t.head).lower() in GENERIC_HEADS
            or _GENERIC_EN.match(t.head)
            or _GENERIC_KO.match(re.sub(r"\s", "", t.head))
            or len(t.head.strip()) < 2
        ):
            why = "generic head"
        elif t.tail_type == "VALUE" and (not t.span or t.span not in t.evidence):
            why = "figure not in evidence"
        if why:
            issues.append(f"drop {t.head} | {t.relation} | {t.tail}: {why}")
            continue
        if t.tail_type == "VALUE":
            tail = vup(Decimal(repr(t.value)) if t.value is not None else None, t.unit or "", _period_of(t))
            if tail != t.tail:
                issues.append(f"fix tail {t.tail} -> {tail}")
                t = t.model_copy(update={"tail": tail})
        kept.append(t)
    # The same head, relation, period and column stated with different figures: ambiguous, drop all.
    groups = Counter((t.head, t.relation, t.period, t.column, t.unit) for t in kept if t.tail_type == "VALUE")
    values: dict[tuple, set] = {}
    for t in kept:
        if t.tail_type == "VALUE":
            values.setdefault((t.head, t.relation, t.period, t.column, t.unit), set()).add(t.span)
    out, seen = [], set()
    for t in kept:
        key = (t.head, t.relation, t.period, t.column, t.unit)
        if t.tail_type == "VALUE" and groups[key] > 1 and len(values[key]) > 1:
            issues.append(f"drop {t.head} | {t.relation} | {t.tail}: conflicting figures for one key")
            continue
        ident = (t.head, t.relation, t.tail, t.evidence)
        if ident in seen:
            continue
        seen.add(ident)
        out.append(t)
    return ReflectOut(triplets=out, issues=issues)


# ---- XBRL grounding ---------------------------------------------------------------------

_SCALES = [Decimal(10**6), Decimal(10**3), Decimal(1), Decimal(10**9), Decimal(10**8)]


class GroundedTriplet(TypedDict):
    t: TripletItem
    fact_id: str | None  # the XBRL fact that verifies the triplet's figure


def ground_in_facts(triplets: list[TripletItem], facts: FactIndex, scale_known: bool) -> tuple[list[GroundedTriplet], int]:
    """Verify value triplets against XBRL facts. Returns (rows with fact_id, number contradicted).

    A table whose scale note was not found takes the scale its matched cells agree on.
    """
    rows: list[GroundedTriplet] = [{"t": t, "fact_id": None} for t in triplets]
    if not len(facts):
        return rows, 0
    inferred: Counter = Counter()
    for r in rows:
        t = r["t"]
        if t.tail_type != "VALUE" or t.unit in ("count",) or not t.span:
            continue
        amount = parse_cell(t.span) if t.evidence.startswith("|") else None
        stated = amount.number if amount else None
        if stated is None:
            nums = find_numbers(t.span)
            if not nums:
                continue
            stated = nums[0].value
        if t.value is not None and stated != 0 and t.unit not in ("%", "%p", "bps"):
            scales = [Decimal(repr(t.value)) / stated]
        elif t.unit in ("%", "%p", "bps"):
            scales = [Decimal(1)]
        else:
            scales = _SCALES
        m = facts.match(abs(stated), t.unit or "", scales, _period_of(t), t.head)
        if m is None:
            continue
        fact, scale = m
        r["fact_id"] = fact.fact_id
        update: dict[str, Any] = {}
        if t.period in (None, "NA") and fact.period:
            update["period"] = fact.period.label
        if t.value is None:
            update["value"] = float(stated * scale)
            update["unit"] = "USD" if fact.unit.startswith("USD") else ("KRW" if fact.unit.startswith("KRW") else t.unit)
            inferred[(t.evidence.startswith("|"), scale, update["unit"])] += 1
        if update:
            t = t.model_copy(update=update)
            r["t"] = t.model_copy(
                update={"tail": vup(Decimal(repr(t.value)) if t.value is not None else None, t.unit or "", _period_of(t))}
            )
    # Table cells left without a scale take the one their fact-matched neighbours agree on.
    table_votes = [(k, v) for k, v in inferred.items() if k[0]]
    if table_votes and not scale_known:
        (_, scale, unit), _ = max(table_votes, key=lambda kv: (kv[1], kv[0][1]))
        for r in rows:
            t = r["t"]
            if t.value is None and t.evidence.startswith("|") and t.span and (a := parse_cell(t.span)):
                value = a.number * scale
                r["t"] = t.model_copy(update={"value": float(value), "unit": unit, "tail": vup(value, unit, _period_of(t))})
    contradicted = 0
    kept = []
    for r in rows:
        t = r["t"]
        if (
            r["fact_id"] is None
            and t.value is not None
            and facts.contradicts(t.head, _period_of(t), Decimal(repr(t.value)), t.unit or "")
        ):
            contradicted += 1
            continue
        kept.append(r)
    return kept, contradicted
