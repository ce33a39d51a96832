"""Multi-LLM QA with staged validation (FinDartBench) for filings.

Per sampled chunk, several question generators (`generate_questions`, each a role with its own
style and seed) propose (question type, question, draft answer); candidates are deduplicated
(dedup.py); every representative gets an answer from several answer generators
(`answer_question`) and the answers pass three stages: binary factuality against the chunk
(`check_factuality`: the figure, its unit and its period), listwise quality scoring
(`score_answers_listwise`, keep scores >= tau) and top-2 consensus (the two best agree). A
question with at least two agreeing survivors becomes a seed; its answer is the figure as the
chunk states it and its clue the line holding it.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from decimal import Decimal
from itertools import combinations

import numpy as np
from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.llm.parallel import map_items, shared_result
from finhallu.llm.router import LLMRouter
from finhallu.ids import stable_id
from finhallu.schemas.rows import QaSeedsRow
from finhallu.stages.seed_qa.alignment import label_named
from finhallu.stages.seed_qa.common import MISMATCH_REASONS, SCHEMA_INPUTS, DocContext, MethodResult, seed_row
from finhallu.stages.seed_qa.dedup import _metric_tokens, deduplicate, question_signature
from finhallu.stages.seed_qa.triplet_qa import (
    _metric,
    askable,
    column_metric,
    metric_labels,
    question_kind,
    topic_particle,
    triplet_mismatch,
)
from finhallu.stages.seed_qa.triplets import TripletItem, extract_triplets, ground_in_facts, reflect_triplets
from finhallu.stages.seed_qa.values import DocPeriods, Period, find_scale, period_in
from finhallu.text.numbers import find_numbers
from finhallu.text.words import jaccard

METHOD = "multi_llm_qa"


class QuestionCandidate(BaseModel):
    question_type: str  # numeric | ratio | change
    question: str
    draft_answer: str


class QuestionsOut(BaseModel):
    questions: list[QuestionCandidate]


class AnswerOut(BaseModel):
    answer: str  # the answer as the generator writes it
    span: str  # the figure exactly as the chunk states it ("" when the generator found none)
    evidence: str  # the chunk line stating it, verbatim


class FactualityOut(BaseModel):
    factual: bool
    reason: str


class ScoresOut(BaseModel):
    scores: list[float]  # one 1-5 quality score per answer, in order


# ---- what a chunk states (the rules generators read it like the triplet extractor) ----------


@shared_result(maxsize=512)  # generators, answerers and the validators (in flight together) read the same chunk
def chunk_facts(
    chunk: str,
    company: str,
    lang: str,
    fiscal_year: int | None,
    report_kind: str,
    current_term: int | None,
    scale_note: str | None,
) -> tuple[TripletItem, ...]:
    """Value triplets of a chunk with a known value and period: what a rules generator can ask about."""
    found = extract_triplets(
        passage=chunk,
        company=company,
        lang=lang,
        fiscal_year=fiscal_year,
        report_kind=report_kind,
        current_term=current_term,
        scale_note=scale_note,
        **SCHEMA_INPUTS,
    ).triplets
    kept = reflect_triplets(passage=chunk, triplets=[t.model_dump() for t in found], lang=lang, **SCHEMA_INPUTS)
    return tuple(t for t in kept.triplets if askable(t) and t.value is not None and t.period not in (None, "NA"))


def _period_of(t: TripletItem) -> Period:
    assert t.period is not None  # chunk_facts keeps only triplets with a period
    kind, year = t.period.split("-")
    return Period(kind, int(year))


def _period_words(t: TripletItem, lang: str) -> str:
    if lang == "ko":  # as common.period_text: the column's term as stated, with the period's year
        m = re.search(r"제\s?\d+\s?기\s?(?:반기말|반기|\d분기말|\d분기|말)?", t.column or "")
        p = _period_of(t)
        return f"{m.group(0).replace(' ', '')}({p.year}년)" if m else p.text("ko")
    return _period_of(t).text("en")


# Question styles: each generator configuration phrases its questions its own way.
_Q_STYLES = {
    "formal": {
        "ko": {
            "numeric": "{c}의 {p} {m}{eun} 얼마입니까?",
            "ratio": "{c}의 {p} {m}{eun} 몇 퍼센트입니까?",
            "change": "{c}의 {p} {m}{eun} 전기 대비 얼마나 {verb}하였습니까?",
        },
        "en": {
            "numeric": "What was {c}'s {m} for {p}?",
            "ratio": "What was {c}'s {m} for {p}?",
            "change": "By how much did {c}'s {m} {verb} in {p}?",
        },
    },
    "colloquial": {
        "ko": {
            "numeric": "{p} 기준 {c} {m} 규모가 어떻게 되나요?",
            "ratio": "{p}에 {c}의 {m}{eun} 몇 %였나요?",
            "change": "{c}의 {m}{eun} {p}에 얼마나 {verb_c}나요?",
        },
        "en": {
            "numeric": "How much {m} did {c} report for {p}?",
            "ratio": "What {m} did {c} report for {p}?",
            "change": "How much did the {m} of {c} {verb} during {p}?",
        },
    },
    "analyst": {
        "ko": {
            "numeric": "{c} {p} {m} 수치를 알려주세요.",
            "ratio": "{c} {p} {m} 비율을 알려주세요.",
            "change": "{c} {p} {m} 증감 규모를 알려주세요.",
        },
        "en": {
            "numeric": "Tell me {c}'s {m} figure for {p}.",
            "ratio": "Tell me {c}'s {m} for {p}.",
            "change": "Tell me how much {c}'s {m} changed in {p}.",
        },
    },
}


def _qtype(t: TripletItem) -> str:
    kind = question_kind(t)
    return "change" if kind.startswith("change") else ("ratio" if kind == "percent" else "numeric")


def stated_with_unit(t: TripletItem, scale_note: str | None, lang: str) -> str:
    """The figure with the unit the context gives it: "3,492,500백만원", "$3,610 million", "11.70%"."""
    span = t.span or ""
    if t.unit in ("%", "%p") and "%" not in span:
        return span + ("%포인트" if t.unit == "%p" and lang == "ko" else "%")
    if re.search(r"[%원$]|million|billion|bps|basis", span) or t.unit not in ("USD", "KRW"):
        return span
    scale = find_scale(scale_note or "")
    if lang == "ko":
        stated_unit = re.search(r"(조원|억원|백만원|천원|원)", (scale.note if scale else "").replace(" ", ""))
        return span + (stated_unit[1] if stated_unit else "원")
    word = {10**3: " thousand", 10**6: " million", 10**9: " billion"}.get(int(scale.multiplier), "") if scale else ""
    return ("$" + span if "$" not in span else span) + word


@operation("generate_questions", QuestionsOut)
def generate_questions(
    chunk: str,
    company: str,
    lang: str,
    fiscal_year: int | None,
    report_kind: str,
    current_term: int | None,
    scale_note: str | None,
    style: str,
    n: int,
    rng_seed: int,
) -> QuestionsOut:
    """Rules backend: pick n stated figures of the chunk (seeded) and ask for each in the style's phrasing."""
    facts = chunk_facts(chunk, company, lang, fiscal_year, report_kind, current_term, scale_note)
    rng = random.Random(rng_seed)
    picked = rng.sample(list(facts), min(n, len(facts)))
    templates = _Q_STYLES.get(style, _Q_STYLES["formal"])[lang]
    out = []
    for t in picked:
        qtype = _qtype(t)
        m = _metric(t, lang)
        up = t.relation == "Increased_By"
        q = templates[qtype].format(
            c=company,
            p=_period_words(t, lang),
            m=m,
            eun=topic_particle(m),
            verb=("증가" if up else "감소") if lang == "ko" else ("increase" if up else "decrease"),
            verb_c="늘었" if up else "줄었",
        )
        out.append(
            QuestionCandidate(
                question_type=qtype, question=re.sub(r"\s+", " ", q).strip(), draft_answer=stated_with_unit(t, scale_note, lang)
            )
        )
    return QuestionsOut(questions=out)


def _asked_kind(question: str) -> str:
    return question_signature(question, "")[2]


def _score_fact(t: TripletItem, question: str, q_words: frozenset[str], q_period: Period | None, style: str) -> float:
    """How well a stated figure answers the question. Its line item must be named in full (the
    question's words tokenized as the row's: "기타포괄손익-공정가치금융자산의 취득" is no
    "장기금융상품의 취득", though both end in 취득); the overlap then ranks the rows."""
    head = set(_metric_tokens(t.head))
    have = head | set(_metric_tokens(column_metric(t)))
    if not q_words or not head or not (head <= q_words or all(label_named(question, x) for x in metric_labels(t))):
        return 0.0
    hit = len(q_words & have)
    if hit / len(q_words) < 0.5:
        return 0.0
    overlap = hit / len(q_words | have)
    score = overlap + (0.5 if _qtype(t) == ("numeric" if _asked_kind(question) == "amount" else _asked_kind(question)) else -1.0)
    if style != "terse" and q_period is not None:  # the terse generator reads no periods: it errs on them
        score += 1.0 if _period_of(t) == q_period else -2.0
    if style == "table_first":
        score += 0.1 * t.evidence.startswith("|")
    elif style == "sentence_first":
        score += 0.1 * (not t.evidence.startswith("|"))
    return score


@operation("answer_question", AnswerOut)
def answer_question(
    chunk: str,
    question: str,
    company: str,
    lang: str,
    fiscal_year: int | None,
    report_kind: str,
    current_term: int | None,
    scale_note: str | None,
    style: str,
) -> AnswerOut:
    """Rules backend: the chunk's stated figure that best matches the question's metric words, kind
    and period, written in the style's form (a sentence naming metric and period, or the bare figure)."""
    doc = DocPeriods(fiscal_year, report_kind, current_term)
    q_words = question_signature(question, company)[0]
    q_period = period_in(question, doc, lang)
    facts = chunk_facts(chunk, company, lang, fiscal_year, report_kind, current_term, scale_note)
    scored = sorted(
        ((_score_fact(t, question, q_words, q_period, style), k) for k, t in enumerate(facts)), key=lambda x: (-x[0], x[1])
    )
    if not scored or scored[0][0] <= 0:
        refusal = "제공된 자료에서 해당 수치를 찾을 수 없습니다." if lang == "ko" else "The chunk does not state this figure."
        return AnswerOut(answer=refusal, span="", evidence="")
    t = facts[scored[0][1]]
    stated = stated_with_unit(t, scale_note, lang)
    m = _metric(t, lang)
    p = _period_words(t, lang)
    if style == "terse":
        answer = stated
    elif lang == "ko":
        answer = (
            f"{p} 기준 {m}{topic_particle(m)} {stated}입니다."
            if style == "table_first"
            else f"{company}의 {p} {m}{topic_particle(m)} {stated}입니다."
        )
    else:
        answer = f"The {m} was {stated} for {p}." if style == "table_first" else f"{company} reported {m} of {stated} for {p}."
    return AnswerOut(answer=answer, span=t.span or "", evidence=t.evidence)


def _values(text: str) -> set[Decimal]:
    return {n.value for n in find_numbers(text)}


def answer_figures(answer: str, question: str) -> frozenset[Decimal]:
    """The figures an answer gives: its numbers in base units, less those it repeats from the
    question (the period "제12기말(2024년)" is no answer)."""
    return frozenset(_values(answer) - _values(question))


@operation("check_factuality", FactualityOut)
def check_factuality(
    chunk: str,
    question: str,
    answer: str,
    span: str,
    evidence: str,
    company: str,
    lang: str,
    fiscal_year: int | None,
    report_kind: str,
    current_term: int | None,
    scale_note: str | None,
) -> FactualityOut:
    """Rules backend of stage 1: the answer's figure is stated in the chunk, in the line given, for
    the metric, unit and period the question asks about."""
    if not span or not evidence:
        return FactualityOut(factual=False, reason="no figure given")
    if evidence not in chunk or span not in evidence:
        return FactualityOut(factual=False, reason="figure not stated in the chunk")
    facts = [
        t
        for t in chunk_facts(chunk, company, lang, fiscal_year, report_kind, current_term, scale_note)
        if t.evidence == evidence and t.span == span
    ]
    if not facts:
        return FactualityOut(factual=False, reason="the line states no such figure")
    t = facts[0]
    stated = stated_with_unit(t, scale_note, lang)
    if not (answer_figures(answer, question) & _values(stated)):
        return FactualityOut(factual=False, reason="number or unit differs from the chunk")
    q_period = period_in(question, DocPeriods(fiscal_year, report_kind, current_term), lang)
    if q_period is not None and all(_period_of(x) != q_period for x in facts):
        return FactualityOut(factual=False, reason=f"period differs: asked {q_period.label}, stated {t.period}")
    if not any(all(label_named(question, x) for x in metric_labels(f)) for f in facts):
        return FactualityOut(factual=False, reason=f"line item differs: the figure is {t.head}'s")
    asked = _asked_kind(question)
    if (asked == "ratio") != (t.unit in ("%", "%p", "bps")) and asked != "change":
        return FactualityOut(factual=False, reason="unit differs from what the question asks")
    return FactualityOut(factual=True, reason="figure, unit and period match the chunk")


_KO_SENTENCE_END = re.compile(r"(니다|세요|어요|아요|해요|이에요|예요)[.!]?$")
_EN_SENTENCE = re.compile(r"\b(was|were|is|are|reported|totaled|amounted)\b.*[.!]$", re.IGNORECASE)
_UNIT = re.compile(r"[%원$]|million|billion|포인트|bps|basis points", re.IGNORECASE)


@operation("score_answers_listwise", ScoresOut)
def score_answers_listwise(question: str, answers: list[str], lang: str) -> ScoresOut:
    """Rules backend of stage 2 (1-5 per answer, read as a list): a complete, polite sentence that
    restates what was asked with the unit scores high; a bare figure or a fragment low."""
    scores = []
    for a in answers:
        s = 3.0
        text = a.strip()
        complete = bool(_KO_SENTENCE_END.search(text)) if lang == "ko" else bool(_EN_SENTENCE.search(text))
        s += 1.0 if complete else -1.0
        s += 0.5 if _UNIT.search(text) else -0.5
        s += 0.5 if jaccard(question, text) >= 0.2 else 0.0
        if lang == "ko" and re.search(r"[A-Za-z]{4,}", re.sub(r"\([^)]*\)", "", text)):
            s -= 0.5  # untranslated English in a Korean answer
        if len(text) > 300 or len(text) < 2:
            s -= 1.0
        scores.append(max(1.0, min(5.0, s)))
    # listwise: identical answers share a score, so no generator wins a tie by repetition
    return ScoresOut(scores=scores)


def answers_agree(a: str, b: str, question: str = "") -> bool:
    va, vb = answer_figures(a, question), answer_figures(b, question)
    if va or vb:
        return bool(va & vb)
    return jaccard(a, b) >= 0.5


# ---- the method -----------------------------------------------------------------------------


def run_document(doc: DocContext, cfg, llm: LLMRouter, rng: random.Random, roles: dict, encoder) -> MethodResult:
    """cfg: MultiLLMQAConfig; roles: judge, grouper; encoder: embedder for deduplication."""
    counts: Counter = Counter({f"questions_dropped_{why}": 0 for why in MISMATCH_REASONS})
    result = MethodResult(
        counts=counts,
        samples={
            "numeric_disagreement_before": [],
            "numeric_disagreement_after": [],
            "cluster_sizes": [],
            "jaccard_candidates": [],
            "jaccard_final": [],
        },
    )
    chunks = [i for i, p in enumerate(doc.passages) if len(find_numbers(p["text"])) >= cfg.min_chunk_numbers]
    counts["chunks"] += len(doc.passages)
    counts["chunks_with_figures"] += len(chunks)
    chunks = _sample_chunks(doc, chunks, cfg, rng, counts)
    counts["chunks_sampled"] += len(chunks)
    cands: list[dict] = []
    asks = [(i, g_rank, g) for i in chunks for g_rank, g in enumerate(cfg.question_generators)]

    def ask(item):
        i, _, g = item
        p = doc.passages[i]
        return llm.call(
            g.role,
            "generate_questions",
            chunk=p["text"],
            **doc.op_inputs(i),
            style=g.style,
            n=cfg.questions_per_generator,
            rng_seed=int(stable_id(g.seed, p["passage_id"], length=8), 16),
        )

    # Every (chunk, generator) together, then every kept question's validation (see llm.parallel).
    for (i, g_rank, g), out in zip(asks, map_items(ask, asks, llm, {g.role for g in cfg.question_generators})):
        if out is None:  # failed for good (recorded in llm_calls): this generator adds nothing here
            counts["llm_failures"] += 1
            continue
        for q in out.questions:
            cands.append({"i": i, "generator": f"{g.role}:{g.style}", "rank": (g_rank, len(q.question)), **q.model_dump()})
            counts[f"questions_generated_by_{g.role}"] += 1
    counts["questions_generated"] += len(cands)
    if not cands:
        return result
    questions = [c["question"] for c in cands]
    dd = deduplicate(
        questions,
        encoder.encode(questions),
        [c["rank"] + (k,) for k, c in enumerate(cands)],
        llm,
        roles["grouper"],
        doc.company,
        doc.lang,
        cfg.cluster_threshold,
        cfg.near_duplicate_threshold,
    )
    counts["questions_after_grouping"] += len(dd.groups)
    counts["questions_after_cosine_filter"] += len(dd.kept)
    result.samples["cluster_sizes"] += [float(len(g)) for g in dd.groups]
    result.samples["jaccard_candidates"] += _pairwise_jaccard(questions)
    final_questions = []

    def validate(k: int):
        own_counts: Counter = Counter()
        own_samples: dict[str, list[float]] = {key: [] for key in result.samples}
        return _validate(doc, cands[k], cfg, llm, roles, own_counts, own_samples), own_counts, own_samples

    validators = {a.role for a in cfg.answer_generators} | {roles["judge"]}
    for seed, own_counts, own_samples in map_items(validate, dd.kept, llm, validators):
        counts.update(own_counts)
        for key, values in own_samples.items():
            result.samples[key] += values
        if seed:
            result.seeds.append(seed)
            final_questions.append(seed["question"])
    result.samples["jaccard_final"] += _pairwise_jaccard(final_questions)
    return result


_SCALES = [Decimal(10**6), Decimal(10**3), Decimal(1), Decimal(10**8)]


def _fact_bearing(doc: DocContext, text: str) -> bool:
    """Does the chunk state at least two figures the company's XBRL facts hold (any common scale)?"""
    hits = 0
    for n in find_numbers(text):
        if doc.facts.match(n.value, "", _SCALES, None, "") is not None:
            hits += 1
            if hits >= 2:
                return True
    return False


def _sample_chunks(doc: DocContext, chunks: list[int], cfg, rng: random.Random, counts: Counter) -> list[int]:
    """Up to `max_chunks_per_document` chunks, seeded; with `prefer_fact_chunks`, up to half of them
    from chunks whose figures the XBRL facts hold (their seeds can be verified against ground truth)."""
    if len(chunks) <= cfg.max_chunks_per_document:
        return chunks
    bearing = [i for i in chunks if cfg.prefer_fact_chunks and len(doc.facts) and _fact_bearing(doc, doc.passages[i]["text"])]
    counts["chunks_fact_bearing"] += len(bearing)
    first = rng.sample(bearing, min(len(bearing), cfg.max_chunks_per_document // 2))
    rest = [i for i in chunks if i not in set(first)]
    return sorted(first + rng.sample(rest, cfg.max_chunks_per_document - len(first)))


def _pairwise_jaccard(questions: list[str]) -> list[float]:
    return [jaccard(a, b) for a, b in combinations(questions, 2)]


def _answer_fact(doc: DocContext, facts: tuple[TripletItem, ...], top: AnswerOut, question: str) -> TripletItem | None:
    """The stated figure the answer gives: of the cells with its line and figure (a row may state one
    figure in two columns, "| 주식발행초과금 | 4,403,893 | 4,403,893 |"), the one the question asks for."""
    same = [x for x in facts if x.evidence == top.evidence and x.span == top.span]
    return next((x for x in same if triplet_mismatch(question, x, doc, None) is None), same[0] if same else None)


# An answer with the generator that wrote it ("role:style").
_Answer = tuple[str, AnswerOut]
# A stage-2 survivor: (quality score, order among the factual answers, generator, answer).
_Survivor = tuple[float, int, str, AnswerOut]


def _validate(
    doc: DocContext, cand: dict, cfg, llm: LLMRouter, roles: dict, counts: Counter, samples: dict[str, list[float]]
) -> QaSeedsRow | None:
    """The candidate's seed when its answers pass the three stages, else None (the step counted)."""
    i = cand["i"]
    p = doc.passages[i]
    inputs = doc.op_inputs(i)
    q = cand["question"]
    answers = _generate_answers(p, q, cfg, llm, inputs, counts)
    _sample_disagreement(samples["numeric_disagreement_before"], [o for _, o in answers], q)
    factual = _factual_answers(p, q, answers, cfg, llm, roles["judge"], inputs, counts)
    survivors = _quality_survivors(q, factual, cfg, llm, roles["judge"], doc.lang, counts)
    if len(survivors) < cfg.min_agreeing_answers:
        return None
    counts["questions_with_2_quality_ok"] += 1
    _sample_disagreement(samples["numeric_disagreement_after"], [o for _, _, _, o in survivors], q)
    # Stage 3: top-2 consensus.
    (_, _, g1, top), (_, _, _, second) = survivors[0], survivors[1]
    if not answers_agree(top.answer, second.answer, q):
        counts["questions_top2_disagree"] += 1
        return None
    counts["questions_top2_agree"] += 1
    return _consensus_seed(doc, cand, p, inputs, g1, top, counts)


def _generate_answers(p: dict, q: str, cfg, llm: LLMRouter, inputs: dict, counts: Counter) -> list[_Answer]:
    """Every answer generator's answer to the question (together, see llm.parallel); failed calls give none."""
    outs = map_items(
        lambda a: llm.call(a.role, "answer_question", chunk=p["text"], question=q, style=a.style, **inputs),
        cfg.answer_generators,
        llm,
        {a.role for a in cfg.answer_generators},
    )
    answers = []
    for a, out in zip(cfg.answer_generators, outs):
        if out is None:
            counts["llm_failures"] += 1
            continue
        answers.append((f"{a.role}:{a.style}", out))
    counts["answers_generated"] += len(answers)
    return answers


def _sample_disagreement(sample: list[float], answers: list[AnswerOut], q: str) -> None:
    """Whether the answers that give figures give different ones (sampled when two or more do)."""
    numeric = [f for f in (answer_figures(o.answer, q) for o in answers) if f]
    if len(numeric) >= 2:
        sample.append(float(len(set(numeric)) > 1))


def _factual_answers(
    p: dict, q: str, answers: list[_Answer], cfg, llm: LLMRouter, judge: str, inputs: dict, counts: Counter
) -> list[_Answer]:
    """Stage 1: binary factuality against the chunk; the judge checks every answer together."""
    verdicts = map_items(
        lambda a: llm.call(
            judge,
            "check_factuality",
            chunk=p["text"],
            question=q,
            answer=a[1].answer,
            span=a[1].span,
            evidence=a[1].evidence,
            **inputs,
        ),
        answers,
        llm,
        (judge,),
    )
    factual = [(g, o) for (g, o), v in zip(answers, verdicts) if v is not None and v.factual]  # no verdict: not factual
    counts["answers_factual"] += len(factual)
    if len(factual) >= cfg.min_agreeing_answers:
        counts["questions_with_2_factual"] += 1
    return factual


def _quality_survivors(
    q: str, factual: list[_Answer], cfg, llm: LLMRouter, judge: str, lang: str, counts: Counter
) -> list[_Survivor]:
    """Stage 2: listwise quality scoring; the answers scoring >= tau, best first."""
    listwise = (
        llm.call(judge, "score_answers_listwise", question=q, answers=[o.answer for _, o in factual], lang=lang)
        if factual
        else None
    )
    scores = listwise.scores if listwise is not None else []  # no scores: nothing survives stage 2
    survivors = sorted(
        ((s, k, g, o) for k, ((g, o), s) in enumerate(zip(factual, scores)) if s >= cfg.quality_threshold),
        key=lambda x: (-x[0], x[1]),
    )
    counts["answers_quality_ok"] += len(survivors)
    return survivors


def _consensus_seed(
    doc: DocContext, cand: dict, p: dict, inputs: dict, generator: str, top: AnswerOut, counts: Counter
) -> QaSeedsRow | None:
    """The seed of the agreed answer: its clue is the line the answer cites and its figure the
    chunk's stated one, verified against the XBRL facts; None when the line or figure is not
    found, a fact contradicts it, or the question asks for another period or line item."""
    q = cand["question"]
    clue_start = p["text"].find(top.evidence)
    t = _answer_fact(doc, chunk_facts(p["text"], **inputs), top, q)
    if clue_start < 0 or t is None:
        return None
    fact_id = None
    if len(doc.facts):
        grounded, contradicted = ground_in_facts([t], doc.facts, bool(inputs["scale_note"]))
        if contradicted:
            counts["questions_contradicted_by_xbrl"] += 1
            return None
        fact_id = grounded[0]["fact_id"]
        t = grounded[0]["t"]
    why = triplet_mismatch(q, t, doc, fact_id)
    if why:  # the question asks for another period or line item than the answer's, or XBRL facts say so
        counts[f"questions_dropped_{why}"] += 1
        return None
    counts["seeds"] += 1
    return seed_row(
        p,
        method=METHOD,
        question=q,
        answer=top.span,
        clue=top.evidence,
        clue_start=clue_start,
        qa_kind="table" if top.evidence.startswith("|") else "span",
        origin_id=f"{p['passage_id']}|{cand['generator']}|{q}",
        generator=f"{cand['generator']} -> {generator}",
        triplet_ids=[],
        fact_id=fact_id,
        answer_value=t.value,
        answer_unit=t.unit,
        period=t.period,
    )


def disagreement_ratio(samples: list[float]) -> float:
    return float(np.mean(samples)) if samples else 0.0
