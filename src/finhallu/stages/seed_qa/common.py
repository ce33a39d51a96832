"""What both seed methods share: a filing's context, its pages, clue location and seed rows."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypedDict

import polars as pl

from finhallu.ids import stable_id
from finhallu.schemas.rows import QaSeedsRow, TripletsRow
from finhallu.stages.seed_qa.alignment import asked_period
from finhallu.stages.seed_qa.facts import FactIndex, document_facts
from finhallu.stages.seed_qa.tables import caption_text, table_lines
from finhallu.stages.seed_qa.triplets import ENTITY_TYPES, RELATION_TYPES, TripletItem, sentence_spans
from finhallu.stages.seed_qa.values import DocPeriods, Period, doc_periods, find_scale


@dataclass
class MethodResult:
    """What a seed method returns for one document: seeds, triplets, funnel counts and per-item samples."""

    seeds: list[QaSeedsRow] = field(default_factory=list)
    triplets: list[TripletsRow] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    samples: dict[str, list[float]] = field(default_factory=dict)

    def merge(self, other: "MethodResult") -> None:
        self.seeds += other.seeds
        self.triplets += other.triplets
        self.counts.update(other.counts)
        for k, v in other.samples.items():
            self.samples.setdefault(k, []).extend(v)


def triplet_row(p: dict, t: TripletItem, fact_id: str | None, by_llm: bool, extractor: str) -> TripletsRow:
    return {
        "triplet_id": f"t-{stable_id(p['passage_id'], t.head, t.relation, t.tail, t.evidence)}",
        "passage_id": p["passage_id"],
        "head": t.head,
        "head_type": t.head_type,
        "relation": t.relation,
        "tail": t.tail,
        "tail_type": t.tail_type,
        "origin": "llm" if by_llm else ("table_rule" if t.evidence.startswith("|") else "text_rule"),
        "span": t.span,
        "value": t.value,
        "unit": t.unit,
        "period": t.period,
        "column": t.column,
        "evidence": t.evidence,
        "evidence_start": p["text"].find(t.evidence) if t.evidence and t.evidence in p["text"] else None,
        "fact_id": fact_id,
        "extractor": extractor,
    }


def natural_key(text: str) -> tuple:
    """ "item1-12" after "item1-2": block ids number their blocks in document order."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text or ""))


@dataclass
class DocContext:
    doc_id: str
    source: str
    company: str
    lang: str
    periods: DocPeriods
    facts: FactIndex
    passages: list[dict]  # in document order
    scale_notes: list[str | None]  # per passage: the scale note that governs its amounts, if any
    stats: Counter = field(default_factory=Counter)

    def op_inputs(self, i: int) -> dict:
        """The document-level inputs every extraction-like operation takes."""
        return {
            "company": self.company,
            "lang": self.lang,
            "fiscal_year": self.periods.year,
            "report_kind": self.periods.kind,
            "current_term": self.periods.term,
            "scale_note": self.scale_notes[i],
        }


def display_company(name: str) -> str:
    """The company as a question names it: "한강금융지주" for "한강금융지주주식회사", "Apple Inc." as is,
    all-caps filer names in title case ("HANRIVER BANCORP, INC." -> "Hanriver Bancorp, Inc.")."""
    n = re.sub(r"\s*(주식회사|\(주\)|㈜)\s*", "", name or "").strip() or name
    if n.isupper() and re.search(r"[A-Z]{3}", n):
        n = " ".join(w if w in ("&", "N.A.") else w[:1] + w[1:].lower() for w in n.split())
    return n


def _scale_notes(passages: list[dict]) -> list[str | None]:
    """A passage's own scale note, else one in the (at most 3) passages before it in its section
    (DART puts "(단위 : 백만원)" in a one-cell table of its own), else the document's only one."""
    own = [(sc.note if (sc := find_scale(caption_text(p["text"]))) else None) for p in passages]
    distinct = {n for n in own if n}
    doc_note = next(iter(distinct)) if len(distinct) == 1 else None
    out = []
    for i, p in enumerate(passages):
        note = own[i]
        # A neighbour's or the document's note only for tables of large amounts (a stock-performance
        # table of "$100 $207" or per-share figures is not "in millions").
        if not note and p["kind"] == "table" and _LARGE_AMOUNT.search(p["text"]):
            for j in range(i - 1, max(-1, i - 4), -1):
                if note or passages[j]["section_path"] != p["section_path"]:
                    break
                note = own[j]
            note = note or doc_note
        out.append(note)
    return out


_LARGE_AMOUNT = re.compile(r"\|\s*\$?\s*\(?\d{1,3}(?:,\d{3})+\)?\s*\|")


def document_contexts(
    documents: pl.DataFrame, passages: pl.DataFrame, facts: pl.DataFrame | None, sources: set[str]
) -> list[DocContext]:
    out = []
    by_doc: dict[str, list[dict]] = {}
    for p in passages.filter(pl.col("source").is_in(list(sources))).iter_rows(named=True):
        by_doc.setdefault(p["doc_id"], []).append(p)
    meta = (
        {d["doc_id"]: d for d in documents.select("doc_id", "title", "published").iter_rows(named=True)}
        if documents.height
        else {}
    )
    for doc_id in sorted(by_doc):
        ps = sorted(by_doc[doc_id], key=lambda p: (natural_key(p["block_id"]), p["chunk_index"]))
        first = ps[0]
        m = meta.get(doc_id, {"title": first["title"], "published": None})
        terms = [p["section_path"] or "" for p in ps] + [p["text"][:400] for p in ps if p["kind"] == "table"]
        periods = doc_periods(m["title"], m["published"], terms, first["source"])
        fx = document_facts(facts, doc_id, first["institution"]) if facts is not None and facts.height else None
        out.append(
            DocContext(
                doc_id,
                first["source"],
                display_company(first["institution"]),
                first["lang"],
                periods,
                FactIndex(fx if fx is not None else pl.DataFrame(), first["lang"]),
                ps,
                _scale_notes(ps),
            )
        )
    return out


def pages(doc: DocContext, page_tokens: int) -> list[list[int]]:
    """Consecutive passages of one section up to a printed page's worth of tokens (FinReflectKG
    works per page; a chunk is often a paragraph or a table, less than a page)."""
    out: list[list[int]] = []
    cur: list[int] = []
    used = 0
    for i, p in enumerate(doc.passages):
        same = cur and doc.passages[cur[-1]]["section_path"] == p["section_path"]
        if cur and (not same or used + p["token_count"] > page_tokens):
            out.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += p["token_count"]
    if cur:
        out.append(cur)
    return out


def line_spans(text: str, lang: str) -> list[tuple[int, str]]:
    """Every supporting-line candidate of a passage: table rows and prose sentences, verbatim."""
    return sorted(table_lines(text) + sentence_spans(text, lang))


def _words(text: str) -> list[str]:
    return re.sub(r"[|]", " ", text).split()


def starting_words(line: str, n: int = 8) -> str:
    return " ".join(_words(line)[:n])


def locate_line(text: str, lang: str, start_words: str) -> tuple[int, str] | None:
    """The passage line (table row or sentence) that begins with these words (FinReflectKG's
    supporting lines are given by their starting words); None if none or several differ."""
    want = _words(start_words)
    if not want:
        return None
    hits = [(at, line) for at, line in line_spans(text, lang) if _words(line)[: len(want)] == want]
    return hits[0] if hits and len({line for _, line in hits}) == 1 else None


def period_text(t: TripletItem, doc: DocContext) -> str:
    """How a question names a triplet's period: the column header as the filing states it when it
    names the term ("제12기말"), with the year; else "fiscal 2024" / "2024년"."""
    if not t.period or t.period == "NA":
        return ""
    kind, year = t.period.split("-")
    p = Period(kind, int(year))
    if doc.lang == "ko":
        m = re.search(r"제\s?\d+\s?기\s?(?:반기말|반기|\d분기말|\d분기|말)?", t.column or "")
        return f"{m.group(0).replace(' ', '')}({p.year}년)" if m else p.text("ko")
    return p.text("en")


XBRL_CONTRADICTED, XBRL_OTHER_PERIOD = "contradicted_by_xbrl", "xbrl_fact_of_other_period"
# Why a generated question is not asking for its answer (counted per method in seed_qa_stats).
MISMATCH_REASONS = ("period_mismatch", "row_mismatch", XBRL_CONTRADICTED, XBRL_OTHER_PERIOD)


def xbrl_mismatch(doc: DocContext, t: TripletItem, fact_id: str | None, question: str) -> str | None:
    """Cross-check a seed's (line item, asked period, value) with the filing's XBRL facts: the fact
    that verifies the figure must be of the asked period, and facts of the line item for the asked
    period must not state another value (FactIndex.contradicts). None where the facts say nothing
    against it, or the filing has none. (The same figure as a fact of another period is no
    contradiction: balances repeat, a beginning balance is the prior year's end.)"""
    if not len(doc.facts) or t.value is None or not t.period or t.period == "NA":
        return None
    kind, year = t.period.split("-")
    asked = asked_period(question, doc.periods, doc.lang) or Period(kind, int(year))
    fact = doc.facts.get(fact_id)
    if fact is not None:
        return XBRL_OTHER_PERIOD if fact.period is not None and fact.period != asked else None
    if doc.facts.contradicts(t.head, asked, Decimal(repr(t.value)), t.unit or ""):
        return XBRL_CONTRADICTED
    return None


def seed_row(
    p: dict,
    *,
    method: str,
    question: str,
    answer: str,
    clue: str,
    clue_start: int,
    qa_kind: str,
    origin_id: str,
    generator: str,
    triplet_ids: list[str],
    fact_id: str | None,
    answer_value: float | None,
    answer_unit: str | None,
    period: str | None,
) -> QaSeedsRow:
    k = clue.find(answer)
    return {
        "seed_id": f"s-{stable_id(method, origin_id)}",
        "passage_id": p["passage_id"],
        "doc_id": p["doc_id"],
        "source": p["source"],
        "institution": p["institution"],
        "lang": p["lang"],
        "split": p["split"],
        "question": question,
        "answer": answer,
        "clue_text": clue,
        "clue_start": clue_start,
        "answer_start": clue_start + k if k >= 0 else None,
        "qa_kind": qa_kind,
        "answerable": True,
        "method": method,
        "origin_id": origin_id,
        "generator": generator,
        "triplet_ids": triplet_ids,
        "fact_id": fact_id,
        "answer_value": answer_value,
        "answer_unit": answer_unit,
        "period": period,
    }


class SchemaInputs(TypedDict):
    """The triplet schema the extraction operations read (keyword arguments of their calls)."""

    entity_types: list[str]
    relation_types: list[str]


SCHEMA_INPUTS: SchemaInputs = {"entity_types": list(ENTITY_TYPES), "relation_types": list(RELATION_TYPES)}
