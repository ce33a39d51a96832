"""Triplet-grounded QA (FinReflectKG HalluBench) for filings.

Per page: triplets (extract + reflect, then checked against XBRL facts); pages with fewer than
`min_triplets_per_page` are skipped; 5-7 value triplets are sampled; `generate_triplet_qa`
writes a question naming the company and the period, the answer exactly as the passage states
it, the supporting triplet and the supporting lines (their starting words, located in the
passage here); the `judge_seed_qa` Keep/Drop judge filters ("when in doubt, drop").
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any, Literal, Mapping

from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.llm.parallel import map_items
from finhallu.llm.router import LLMRouter
from finhallu.schemas.rows import TripletsRow
from finhallu.stages.seed_qa.alignment import question_mismatch
from finhallu.stages.seed_qa.common import (
    MISMATCH_REASONS,
    SCHEMA_INPUTS,
    DocContext,
    MethodResult,
    line_spans,
    locate_line,
    pages,
    period_text,
    seed_row,
    starting_words,
    triplet_row,
    xbrl_mismatch,
)
from finhallu.stages.seed_qa.triplets import TripletItem, _period_of, ground_in_facts
from finhallu.stages.seed_qa.values import parse_cell
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import find_numbers
from finhallu.text.words import content_word_set, content_words, particle

METHOD = "triplet_qa"


class TripletQAOut(BaseModel):
    question: str
    answer: str
    supporting_triplet: str
    supporting_lines: list[str]  # the starting words of each supporting line, as in the passage


class KeepDropOut(BaseModel):
    decision: Literal["Keep", "Drop"]
    reason: str


_PERIOD_WORDS = re.compile(
    r"제\s?\d+\s?기\s?(반기말|반기|\d분기말|\d분기|말)?|\(?\d{4}\s?년?\)?|\d{4}년\s?\d{1,2}월\s?말?|(당|전|전전)(반기|분기|기)말?|"
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|"
    r"Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?\b(\s+\d{1,2},?)?|\b(years?|fiscal years?|twelve months|months) ended\b|"
    r"\bfiscal( year)?\b|\bas of\b|\bAmount\b|금\s?액|\(?\$?s?\s*in (thousands|millions|billions)[^)]*\)?",
    re.IGNORECASE,
)


def column_metric(t: TripletItem) -> str:
    """What a column says beyond its period ("% of total", "비중"); "" for a bare period column."""
    col = re.sub(r"\(\s*\)", "", _PERIOD_WORDS.sub("", t.column or "")).strip(" ,")
    if col.count("(") != col.count(")"):
        col = col.replace("(", " ").replace(")", " ").strip()
    col = re.sub(r"^\((.*)\)$", r"\1", re.sub(r"\s+", " ", col))
    return "" if re.fullmatch(r"[\d\s.,/~()-]*", col) else col


def metric_labels(t: TripletItem) -> list[str]:
    """What a question must name for the triplet's figure to be its answer: the row, and the
    column's metric where the column says more than the period."""
    col = column_metric(t)
    return [t.head, col] if col and col.lower() not in t.head.lower() else [t.head]


def triplet_mismatch(question: str, t: TripletItem, doc: DocContext, fact_id: str | None) -> str | None:
    """Why a question is not asking for this triplet's figure: another period, another line item,
    or (where the filing has XBRL facts) facts that put the figure elsewhere; None if it is."""
    return question_mismatch(question, metric_labels(t), _period_of(t), doc.periods, doc.lang) or xbrl_mismatch(
        doc, t, fact_id, question
    )


def askable(t: TripletItem) -> bool:
    """A value triplet names what it measures: an investee row ("삼성전기㈜") needs its column's metric."""
    return t.tail_type == "VALUE" and bool(t.span) and (t.head_type != "ORG" or bool(column_metric(t)))


def _metric(t: TripletItem, lang: str) -> str:
    """The metric as a question names it: the row label, plus the column when it says more than the period."""
    head = t.head
    col = column_metric(t)
    if t.head_type == "ORG" and col:
        return f"{t.head}의 {col}" if lang == "ko" else f"{col[0].lower() + col[1:]} of {t.head}"
    if col and col.lower() not in head.lower():
        head = f"{head}의 {col}" if lang == "ko" else f"{head} ({col.replace('(', '').replace(')', '')})"
    return head


_EN = {
    "amount": [
        "What was {c}'s {m} for {p}?",
        "According to {c}'s Form 10-K for {p}, what was the {m}?",
        "How much did {c} report as {m} for {p}?",
    ],
    "percent": [
        "What was {c}'s {m} for {p}?",
        "According to {c}'s Form 10-K for {p}, what was the {m}?",
        "What {m} did {c} report for {p}?",
    ],
    "count": ["How many {m} did {c} have in {p}?", "According to {c}'s Form 10-K for {p}, how many {m} were there?"],
    "change": [
        "By how much did {c}'s {m} {verb} in {p}?",
        "According to {c}'s Form 10-K for {p}, by how much did the {m} {verb}?",
    ],
    "change_pct": [
        "By what percentage did {c}'s {m} {verb} in {p}?",
        "According to {c}'s Form 10-K for {p}, by what percentage did the {m} {verb}?",
    ],
}
_KO = {
    "amount": [
        "{c}의 {p} {m}{eun} 얼마인가요?",
        "{c}{ga} 공시한 {p} {m}{eun} 얼마입니까?",
        "{p} 기준 {c}의 {m}{eun} 얼마였나요?",
    ],
    "percent": ["{c}의 {p} {m}{eun} 몇 %인가요?", "{p} 기준 {c}의 {m}{eun} 몇 퍼센트였나요?"],
    "count": ["{c}의 {p} {m}{eun} 얼마인가요?", "{p} 기준 {c}의 {m}{eun} 몇 개였나요?"],
    "change": ["{c}의 {p} {m}{eun} 전기 대비 얼마나 {verb}했나요?", "{p}에 {c}의 {m}{eun} 얼마나 {verb}했습니까?"],
    "change_pct": ["{c}의 {p} {m}{eun} 전기 대비 몇 % {verb}했나요?", "{p}에 {c}의 {m}{eun} 몇 퍼센트 {verb}했습니까?"],
}


def topic_particle(word: str, pair: str = "은/는") -> str:
    """은/는 after the word's last syllable, a trailing "(...)" aside ignored."""
    return particle(re.sub(r"\s*\([^)]*\)$", "", word) or word, pair)


def question_kind(t: TripletItem) -> str:
    pct = t.unit in ("%", "%p", "bps")
    if t.relation in ("Increased_By", "Decreased_By"):
        return "change_pct" if pct else "change"
    return "percent" if pct else ("count" if t.unit == "count" else "amount")


@operation("generate_triplet_qa", TripletQAOut)
def generate_triplet_qa(passage: str, company: str, period_text: str, triplet: dict, lang: str, rng_seed: int) -> TripletQAOut:
    """Rules backend: a question template per relation and unit, phrasing chosen by seed."""
    t = TripletItem.model_validate(triplet)
    rng = random.Random(rng_seed)
    kind = question_kind(t)
    m = _metric(t, lang)
    if lang == "ko":
        verb = "증가" if t.relation == "Increased_By" else "감소"
        q = rng.choice(_KO[kind]).format(
            c=company, p=period_text, m=m, eun=topic_particle(m), ga=topic_particle(company, "이/가"), verb=verb
        )
    else:
        verb = "increase" if t.relation == "Increased_By" else "decrease"
        q = rng.choice(_EN[kind]).format(c=company, p=period_text, m=m, verb=verb)
    return TripletQAOut(
        question=re.sub(r"\s+", " ", q).strip(),
        answer=t.span or t.tail,
        supporting_triplet=f"{t.head} | {t.relation} | {t.tail}",
        supporting_lines=[starting_words(t.evidence)],
    )


_TEMPLATE_WORDS = {
    "what",
    "was",
    "how",
    "much",
    "many",
    "did",
    "report",
    "according",
    "form",
    "10-k",
    "fiscal",
    "percentage",
    "by",
    "have",
    "were",
    "there",
    "increase",
    "decrease",
    "얼마",
    "얼마인가요",
    "얼마입니까",
    "얼마였나요",
    "공시한",
    "기준",
    "퍼센트",
    "전기",
    "대비",
    "얼마나",
    "증가했나요",
    "감소했나요",
    "증가했습니까",
    "감소했습니까",
    "몇",
    "개였나요",
    "퍼센트였나요",
    "company",
    "report",
}


def _company_key(company: str) -> str:
    words = [
        w
        for w in re.split(r"[\s,]+", re.sub(r"\(?주식회사\)?|\(주\)", "", company))
        if w and w.lower().strip(".") not in {"inc", "corp", "corporation", "co", "company", "ltd", "plc", "llc", "the"}
    ]
    return " ".join(words[:2])


@operation("judge_seed_qa", KeepDropOut)
def judge_seed_qa(
    passage: str,
    question: str,
    answer: str,
    supporting_line: str | None,
    company: str,
    period_text: str,
    scale_note: str | None,
    lang: str,
) -> KeepDropOut:
    """Rules backend of the Keep/Drop judge; when in doubt, drop."""

    def drop(reason: str) -> KeepDropOut:
        return KeepDropOut(decision="Drop", reason=reason)

    if not supporting_line or supporting_line not in {line for _, line in line_spans(passage, lang)}:
        return drop("supporting line not found in the passage")
    if not answer or not contains_normalized(supporting_line, answer):
        return drop("answer not stated in the supporting line")
    if not contains_normalized(question, _company_key(company)):
        return drop("question does not name the company")
    years = re.findall(r"(?:19|20)\d{2}", period_text or "")
    if not years or not all(y in question for y in years):  # an LLM may write "FY2024" for "fiscal 2024"
        return drop("question does not name the period")
    context = supporting_line
    if supporting_line.startswith("|"):  # a table row: its column headers belong to its evidence
        context = passage.split("\n| ---", 1)[0] + "\n" + supporting_line
    skip = content_word_set(company) | content_word_set(period_text) | _TEMPLATE_WORDS
    asked = [w for w in content_words(question) if w not in skip and not w[0].isdigit()]
    have = content_word_set(context)
    if asked and sum(w in have for w in asked) / len(asked) < 0.5:
        return drop("question not grounded in the supporting line")
    amount = parse_cell(answer)
    if (
        supporting_line.startswith("|")
        and amount
        and amount.unit in ("", "USD", "KRW")
        and not scale_note
        and amount.number == amount.number.to_integral_value()
        and not re.search(r"%|비율|비중|ratio|margin|rate|per share|주당", question, re.IGNORECASE)
    ):
        return drop("the amount's scale is stated nowhere in the context")
    if len({n.value for n in find_numbers(answer)}) > 1:
        return drop("answer holds several figures")
    return KeepDropOut(decision="Keep", reason="answer, line, company and period check out")


def run_document(doc: DocContext, cfg, llm: LLMRouter, rng: random.Random, roles: dict[str, str]) -> MethodResult:
    """cfg: TripletQAConfig; roles: extractor, generator, judge."""
    counts: Counter = Counter({f"qa_dropped_{why}": 0 for why in MISMATCH_REASONS})
    result = MethodResult(counts=counts)
    extractor = roles["extractor"]
    origin_llm = llm.role_config(extractor)["provider"] != "offline"
    all_pages = pages(doc, cfg.page_tokens)
    counts["pages"] += len(all_pages)
    order = list(range(len(all_pages)))
    rng.shuffle(order)
    used, tried = 0, 0
    limit = min(len(order), 3 * cfg.max_pages_per_document)
    while used < cfg.max_pages_per_document and tried < limit:
        # The pages the sequential walk would read next for sure (each one is read unless enough
        # pages were used before it), all their passages extracted and reviewed together, then
        # their questions together (see llm.parallel); bookkeeping and RNG draws in page order.
        batch = order[tried : tried + min(cfg.max_pages_per_document - used, limit - tried)]
        tried += len(batch)
        cells = [i for pi in batch for i in all_pages[pi]]
        reviewed = dict(zip(cells, map_items(lambda i: _extract_and_reflect(doc, i, llm, extractor), cells, llm, (extractor,))))
        questions: list[tuple[int, TripletsRow, int]] = []
        for pi in batch:
            counts["pages_extracted"] += 1
            page_triplets = _page_triplets(doc, all_pages[pi], reviewed, counts, result, origin_llm, llm.backend(extractor))
            if len(page_triplets) < cfg.min_triplets_per_page:
                continue
            used += 1
            counts["pages_used"] += 1
            askable_rows = [(i, r) for i, r in page_triplets if askable(_triplet_item(r))]
            k = min(len(askable_rows), rng.randint(cfg.sample_min, cfg.sample_max))
            questions += [(i, row, rng.randrange(2**31)) for i, row in rng.sample(askable_rows, k)]
        counts["qa_sampled"] += len(questions)
        for qa_result in map_items(
            lambda it: _qa_for_triplet(doc, *it, llm, roles), questions, llm, (roles["generator"], roles["judge"])
        ):
            result.merge(qa_result)
    return result


def _page_triplets(
    doc: DocContext, cells: list[int], reviewed: dict, counts: Counter, result: MethodResult, origin_llm: bool, extractor: str
) -> list[tuple[int, TripletsRow]]:
    """A page's reviewed triplets grounded in the XBRL facts (added to `result.triplets`), with the funnel counts."""
    page_triplets: list[tuple[int, TripletsRow]] = []
    for i in cells:
        p = doc.passages[i]
        if reviewed[i] is None:  # a call failed for good (recorded in llm_calls): the passage gives no triplets
            counts["llm_failures"] += 1
            continue
        extracted, reflected = reviewed[i]
        grounded, contradicted = ground_in_facts(reflected.triplets, doc.facts, bool(doc.scale_notes[i]))
        # a reflection may also add or rewrite triplets: every candidate it saw counts as extracted
        seen = {(t.head, t.relation, t.tail, t.evidence) for t in extracted}
        counts["triplets_extracted"] += len(seen | {(t.head, t.relation, t.tail, t.evidence) for t in reflected.triplets})
        counts["triplets_reflected"] += len(reflected.triplets)
        counts["triplets_contradicted_by_xbrl"] += contradicted
        counts["triplets_kept"] += len(grounded)
        counts["triplets_fact_verified"] += sum(r["fact_id"] is not None for r in grounded)
        for r in grounded:
            row = triplet_row(p, r["t"], r["fact_id"], origin_llm, extractor)
            result.triplets.append(row)
            page_triplets.append((i, row))
    return page_triplets


def _extract_and_reflect(doc: DocContext, i: int, llm: LLMRouter, extractor: str):
    """The passage's triplets as extracted and as the reflection kept them; None if a call failed."""
    p = doc.passages[i]
    out = llm.call(extractor, "extract_triplets", passage=p["text"], **doc.op_inputs(i), **SCHEMA_INPUTS)
    if out is None:
        return None
    reflected = llm.call(
        extractor,
        "reflect_triplets",
        passage=p["text"],
        triplets=[t.model_dump() for t in out.triplets],
        lang=doc.lang,
        **SCHEMA_INPUTS,
    )
    return None if reflected is None else (out.triplets, reflected)


def _triplet_item(row: Mapping[str, Any]) -> TripletItem:
    """A `triplets` row as the TripletItem it was made from."""
    return TripletItem.model_validate({k: row[k] for k in TripletItem.model_fields})


def _qa_for_triplet(
    doc: DocContext, i: int, row: TripletsRow, rng_seed: int, llm: LLMRouter, roles: dict[str, str]
) -> MethodResult:
    """A question on one triplet, generated and judged: the seed (if kept) and its funnel counts."""
    result = MethodResult(counts=Counter())
    counts = result.counts
    p = doc.passages[i]
    t = _triplet_item(row)
    ptext = period_text(t, doc)
    qa = llm.call(
        roles["generator"],
        "generate_triplet_qa",
        passage=p["text"],
        company=doc.company,
        period_text=ptext,
        triplet=t.model_dump(),
        lang=doc.lang,
        rng_seed=rng_seed,
    )
    if qa is None:
        counts["llm_failures"] += 1
        return result
    counts["qa_generated"] += 1
    located = locate_line(p["text"], doc.lang, qa.supporting_lines[0]) if qa.supporting_lines else None
    if located is None:
        counts["qa_dropped_clue_not_located"] += 1
        return result
    counts["qa_clue_located"] += 1
    clue_start, clue = located
    verdict = llm.call(
        roles["judge"],
        "judge_seed_qa",
        passage=p["text"],
        question=qa.question,
        answer=qa.answer,
        supporting_line=clue,
        company=doc.company,
        period_text=ptext,
        scale_note=doc.scale_notes[i],
        lang=doc.lang,
    )
    if verdict is None or verdict.decision != "Keep":  # no verdict: when in doubt, drop
        counts["qa_dropped_by_judge"] += 1
        return result
    why = triplet_mismatch(qa.question, t, doc, row["fact_id"])
    if why:  # the question asks for another period or line item than the answer's, or XBRL facts say so
        counts[f"qa_dropped_{why}"] += 1
        return result
    counts["qa_kept"] += 1
    result.seeds.append(
        seed_row(
            p,
            method=METHOD,
            question=qa.question,
            answer=qa.answer,
            clue=clue,
            clue_start=clue_start,
            qa_kind="table" if clue.startswith("|") else "span",
            origin_id=row["triplet_id"],
            generator=llm.backend(roles["generator"]),
            triplet_ids=[row["triplet_id"]],
            fact_id=row["fact_id"],
            answer_value=row["value"] if qa.answer == t.span else None,
            answer_unit=row["unit"],
            period=row["period"],
        )
    )
    return result
