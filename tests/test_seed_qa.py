"""seed_qa: AI-Hub pass-through and the two generated-seed methods on small authored filings."""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal

import polars as pl
import pytest

from finhallu.stages.seed_qa import SeedQAConfig
from finhallu.llm.router import LLMRouter
from finhallu.schemas.contracts import CONTRACTS
from finhallu.schemas.gate import run_gate
from finhallu.stages.pipeline import table_rules
from finhallu.stages import seed_qa
from finhallu.stages.base import StageContext
from finhallu.stages.seed_qa import alignment
from finhallu.stages.seed_qa.common import DocContext, MethodResult, seed_row, xbrl_mismatch
from finhallu.stages.seed_qa.facts import FactIndex
from finhallu.stages.seed_qa.multi_llm_qa import answer_question, check_factuality
from finhallu.stages.seed_qa.tables import combine_header, table_cells
from finhallu.stages.seed_qa.triplet_qa import generate_triplet_qa, judge_seed_qa, triplet_mismatch
from finhallu.stages.seed_qa.triplets import (
    ENTITY_TYPES,
    RELATION_TYPES,
    TripletItem,
    _en_sentence_triplets,
    extract_triplets,
    ground_in_facts,
    reflect_triplets,
)
from finhallu.stages.seed_qa.values import DocPeriods, Period, find_scale, period_in, vup

SCHEMA = {"entity_types": list(ENTITY_TYPES), "relation_types": list(RELATION_TYPES)}

# An authored 10-K page: an income statement table and MD&A prose.
SEC_TABLE = """All dollar amounts in the tables below are in millions.
| Year ended December 31, | 2024 | 2023 | Change |
| --- | --- | --- | --- |
| Total interest income | 1,062 | 958 | 104 |
| Total interest expense | 448 | 362 | 86 |
| Net interest income | 614 | 596 | 18 |
| Provision for credit losses | 52 | 38 | 14 |
| Total noninterest income | 148 | 139 | 9 |
| Total noninterest expense | 431 | 417 | 14 |
| Net income | 218 | 217 | 1 |
| Net interest margin | 3.59% | 3.62% | (0.03)% |"""
SEC_TEXT = (
    "Net income for 2024 was $218 million, compared with $217 million for 2023. Net interest income "
    "increased $18 million, or 3.0%, to $614 million in 2024. The net interest margin declined 3 basis points "
    "to 3.59% from 3.62%."
)
DART_TABLE = """(단위 : 백만원, %)
| 구 분 | 제12기말 | 제11기말 |
| --- | --- | --- |
| 보통주자본 | 3,492,500 | 3,240,000 |
| 기본자본 | 3,850,000 | 3,560,000 |
| 총자본 | 4,420,000 | 4,105,000 |
| 위험가중자산 | 29,850,000 | 28,420,000 |
| 보통주자본비율(BIS) | 11.70 | 11.40 |
| 총자본비율(BIS) | 14.81 | 14.44 |"""
DART_TEXT = (
    "제12기 연결 당기순이익은 4,125억 원으로 전기 4,035억 원 대비 90억 원(2.2%) 증가하였습니다. "
    "유효법인세율은 24.8%로 전기(24.9%)와 비슷한 수준을 유지하였습니다."
)


def _passage(pid, doc, source, inst, lang, kind, text, title, block, section="Item 7."):
    return {
        "passage_id": pid,
        "doc_id": doc,
        "block_id": block,
        "source": source,
        "institution": inst,
        "lang": lang,
        "split": "train",
        "doc_type": "10-K" if source == "sec10k" else "사업보고서",
        "title": title,
        "section_path": section,
        "kind": kind,
        "chunk_index": 0,
        "chunk_total": 1,
        "char_start": 0,
        "text": text,
        "token_count": 300,
        "tokenizer": "approx",
    }


def _inputs() -> dict[str, pl.DataFrame]:
    sec = ("sec10k-1-2024", "sec10k", "ACME BANCORP, INC.", "en")
    dart = ("dart-9-20241231-11011", "dart", "가나금융지주 주식회사", "ko")
    passages = pl.DataFrame(
        [
            _passage("p1", *sec, "table", SEC_TABLE, "ACME BANCORP, INC. Form 10-K FY2024", "b1"),
            _passage("p2", *sec, "text", SEC_TEXT, "ACME BANCORP, INC. Form 10-K FY2024", "b2"),
            _passage("p3", *dart, "table", DART_TABLE, "가나금융지주 사업보고서", "b1", "II. 사업의 내용"),
            _passage("p4", *dart, "text", DART_TEXT, "가나금융지주 사업보고서", "b2", "III. 재무에 관한 사항"),
        ]
    )
    documents = pl.DataFrame(
        [
            {"doc_id": sec[0], "title": "ACME BANCORP, INC. Form 10-K FY2024", "published": "December 31, 2024"},
            {"doc_id": dart[0], "title": "가나금융지주 사업보고서", "published": "20240101-20241231"},
        ]
    )
    empty_qas = pl.DataFrame(schema=CONTRACTS["source_qas"].schema)
    return {
        "documents": documents,
        "passages": passages,
        "source_qas": empty_qas,
        "facts": pl.DataFrame(schema=CONTRACTS["facts"].schema),
    }


def _run(cfg: SeedQAConfig | None = None, inputs=None) -> dict[str, pl.DataFrame]:
    return seed_qa.run(inputs or _inputs(), StageContext(stage="seed_qa", config=cfg or SeedQAConfig(), seed=7))


# ---- numbers, scales, periods ----------------------------------------------------------


def test_value_unit_period_keys_follow_finreflectkg():
    # the largest of m/bn/tn that keeps the value >= 1, so one figure has one key however it was written
    assert vup(Decimal(700_000_000), "USD", Period("FY", 2024)) == "700m-USD-FY-2024"
    assert vup(Decimal("0.7") * 10**9, "USD", Period("FY", 2024)) == "700m-USD-FY-2024"
    assert vup(Decimal(391_035) * 10**6, "USD", Period("FY", 2024)) == "391.035bn-USD-FY-2024"
    assert vup(Decimal("21.5"), "%", Period("FY", 2022)) == "21.5%-FY-2022"
    assert vup(Decimal(50), "bps", None) == "50-bps-NA"
    assert vup(Decimal(3_492_500) * 10**6, "KRW", Period("H1", 2022)) == "3.4925tn-KRW-H1-2022"


def test_scales_and_periods_as_filings_state_them():
    assert find_scale("(단위 : 백만원, %)").multiplier == 10**6
    assert find_scale("($ in millions)").currency == "USD"
    half = DocPeriods(2022, "H1", 54)
    assert period_in("제54기 반기말", half, "ko") == Period("H1", 2022)
    assert period_in("제53기", half, "ko") == Period("FY", 2021)
    assert period_in("제53기 반기", half, "ko") == Period("H1", 2021)  # the same half of the prior term
    assert period_in("전기말", half, "ko") == Period("FY", 2021)
    assert period_in("제53기 반기 3개월", half, "ko") is None  # a quarter inside a half-year report
    assert period_in("Year ended December 31, 2023", DocPeriods(2024), "en") == Period("FY", 2023)


def test_misaligned_10k_rows_align_by_their_non_empty_cells():
    text = (
        "|  | 2024 |  | Change |  | 2023 |  | Change |  | 2022 |  |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- |\n| Americas | $167,045 | 3 | $162,560 | (4) | $169,658 |\n"
        "| Europe | 101,328 |  | 7 | 94,294 |  | (1) | 95,118 |  |"
    )
    cells = {(c.label, c.period.label): c.amount.raw for c in table_cells(text, DocPeriods(2024), "en")}
    assert cells == {
        ("Americas", "FY-2024"): "$167,045",
        ("Americas", "FY-2023"): "$162,560",
        ("Americas", "FY-2022"): "$169,658",
        ("Europe", "FY-2024"): "101,328",
        ("Europe", "FY-2023"): "94,294",
        ("Europe", "FY-2022"): "95,118",
    }  # change columns skipped


# ---- triplets ---------------------------------------------------------------------------


def test_sentences_become_value_triplets_with_their_own_periods():
    out = extract_triplets(
        passage=SEC_TEXT,
        company="Acme",
        lang="en",
        fiscal_year=2024,
        report_kind="FY",
        current_term=None,
        scale_note=None,
        **SCHEMA,
    ).triplets
    got = {(t.head, t.relation, t.tail) for t in out}
    assert ("Net income", "Has_Value", "218m-USD-FY-2024") in got
    assert ("Net income", "Has_Value", "217m-USD-FY-2023") in got
    assert ("Net interest income", "Increased_By", "18m-USD-FY-2024") in got
    assert ("Net interest income", "Has_Value", "614m-USD-FY-2024") in got
    assert ("Net interest margin", "Decreased_By", "3-bps-FY-2024") in got
    assert ("Net interest margin", "Has_Value", "3.62%-FY-2023") in got
    ko = extract_triplets(
        passage=DART_TEXT,
        company="가나",
        lang="ko",
        fiscal_year=2024,
        report_kind="FY",
        current_term=12,
        scale_note=None,
        **SCHEMA,
    ).triplets
    kgot = {(t.head, t.relation, t.tail, t.span) for t in ko}
    assert ("당기순이익", "Has_Value", "412.5bn-KRW-FY-2024", "4,125억 원") in kgot
    assert ("당기순이익", "Has_Value", "403.5bn-KRW-FY-2023", "4,035억 원") in kgot
    assert ("당기순이익", "Increased_By", "9bn-KRW-FY-2024", "90억 원") in kgot
    assert ("유효법인세율", "Has_Value", "24.9%-FY-2023", "24.9%") in kgot


def test_reflection_drops_what_the_passage_does_not_state():
    good = extract_triplets(
        passage=SEC_TABLE,
        company="Acme",
        lang="en",
        fiscal_year=2024,
        report_kind="FY",
        current_term=None,
        scale_note=None,
        **SCHEMA,
    ).triplets
    assert {t.tail for t in good if t.head == "Net income"} == {"218m-USD-FY-2024", "217m-USD-FY-2023"}
    forged = good[0].model_copy(update={"evidence": "| Net income | 999 | 217 | 1 |"})
    wrong_tail = good[1].model_copy(update={"tail": "1bn-USD-FY-2024"})
    out = reflect_triplets(
        passage=SEC_TABLE, triplets=[t.model_dump() for t in [forged, wrong_tail, *good[2:]]], lang="en", **SCHEMA
    )
    assert forged.model_dump() not in [t.model_dump() for t in out.triplets]
    assert any("evidence not in passage" in i for i in out.issues)
    fixed = next(t for t in out.triplets if t.head == wrong_tail.head and t.span == wrong_tail.span)
    assert fixed.tail != "1bn-USD-FY-2024" and any(i.startswith("fix tail") for i in out.issues)


def _facts(rows):
    base = {c: None for c in CONTRACTS["facts"].columns}
    return pl.DataFrame(
        [
            {
                **base,
                "fact_id": f"f{i}",
                "source": "sec10k",
                "entity": "Acme",
                "entity_id": "1",
                "concept": "c",
                "value": str(v),
                "unit": "USD",
                "period_start": s,
                "period_end": e,
                "instant": s is None,
                "source_path": "x",
                **{"label": lab, "label_en": lab, "numeric_value": float(v)},
            }
            for i, (lab, v, s, e) in enumerate(rows)
        ],
        schema=CONTRACTS["facts"].schema,
    )


def test_xbrl_facts_verify_contradict_and_supply_a_missing_scale():
    table = SEC_TABLE.split("\n", 1)[1]  # no scale note: the facts must supply it
    found = extract_triplets(
        passage=table, company="Acme", lang="en", fiscal_year=2024, report_kind="FY", current_term=None, scale_note=None, **SCHEMA
    ).triplets
    assert all(t.value is None for t in found if t.unit != "%")
    facts = FactIndex(
        _facts(
            [
                ("Revenue from interest", 1_062_000_000, "2024-01-01", "2024-12-31"),
                ("Interest expense", 448_000_000, "2024-01-01", "2024-12-31"),
                ("Net income", 999_000_000, "2023-01-01", "2023-12-31"),
            ]
        ),
        "en",
    )
    rows, contradicted = ground_in_facts(found, facts, scale_known=False)
    verified = {r["t"].head: r["fact_id"] for r in rows if r["fact_id"]}
    assert verified == {"Total interest income": "f0", "Total interest expense": "f1"}
    assert contradicted == 1  # "Net income" FY-2023 is 217 in the table, 999 in the facts
    scaled = {r["t"].head: r["t"].value for r in rows if r["t"].period == "FY-2024"}
    assert scaled["Net interest income"] == 614e6  # the scale the verified cells agree on


# ---- the stage --------------------------------------------------------------------------


def test_stage_seeds_filings_with_both_methods_and_passes_its_gate():
    inputs = _inputs()
    out = _run(inputs=inputs)
    seeds = out["qa_seeds"]
    by = {(src, m): n for src, m, n in seeds.group_by("source", "method").len().iter_rows()}
    assert set(by) == {("sec10k", "triplet_qa"), ("dart", "multi_llm_qa")}, by
    texts = dict(zip(inputs["passages"]["passage_id"], inputs["passages"]["text"]))
    for s in seeds.iter_rows(named=True):
        text = texts[s["passage_id"]]
        assert text[s["clue_start"] : s["clue_start"] + len(s["clue_text"])] == s["clue_text"]
        assert text[s["answer_start"] : s["answer_start"] + len(s["answer"])] == s["answer"]
        assert s["period"] and s["answer_value"] is not None and s["generator"]
        if s["source"] == "sec10k":
            assert "Acme Bancorp" in s["question"] and re.search(r"fiscal 20\d\d", s["question"]), s["question"]
            assert s["triplet_ids"] and set(s["triplet_ids"]) <= set(out["triplets"]["triplet_id"])
        else:
            assert "가나금융지주" in s["question"] and "주식회사" not in s["question"]
            assert re.search(r"20\d\d년", s["question"]), s["question"]
    nb = {**inputs, **{k: CONTRACTS[k].conform(v) for k, v in out.items()}}
    for table in out:
        failed = [r for r in run_gate(table, nb[table], nb, table_rules(table)).rows if r["outcome"] != "passed"]
        assert not failed, failed


def test_stage_is_deterministic_and_stats_match_the_seeds():
    a, b = _run(), _run()
    assert all(a[k].equals(b[k]) for k in a)
    stats = {(r["source"], r["method"], r["metric"]): r["value"] for r in a["seed_qa_stats"].iter_rows(named=True)}
    for source, method, n in a["qa_seeds"].group_by("source", "method").len().iter_rows():
        assert stats[(source, method, "seeds")] == n
    assert stats[("dart", "multi_llm_qa", "questions_generated")] >= stats[("dart", "multi_llm_qa", "seeds")] > 0
    assert 0 <= stats[("dart", "multi_llm_qa", "compression_rate")] < 1
    assert stats[("sec10k", "triplet_qa", "triplets_extracted")] >= 10


def test_pages_with_too_few_triplets_are_skipped():
    out = _run(SeedQAConfig(triplet_qa={"min_triplets_per_page": 500}))
    assert out["qa_seeds"].filter(pl.col("method") == "triplet_qa").height == 0
    stats = {r["metric"]: r["value"] for r in out["seed_qa_stats"].filter(pl.col("method") == "triplet_qa").iter_rows(named=True)}
    assert stats["pages_used"] == 0 and stats["triplets_extracted"] > 0


@pytest.mark.parametrize(
    "question,answer,line,why",
    [
        ("What was Acme's net income?", "218", "| Net income | 218 | 217 | 1 |", "period"),
        ("What was Acme's net income for fiscal 2024?", "999", "| Net income | 218 | 217 | 1 |", "answer"),
        ("What was Acme's dividend for fiscal 2024?", "218", "| Net income | 218 | 217 | 1 |", "grounded"),
        ("What was Acme's net income for fiscal 2024?", "218", "| Net income | 218 | 217 |", "supporting line"),
    ],
)
def test_keep_drop_judge_drops_when_in_doubt(question, answer, line, why):
    v = judge_seed_qa(
        passage=SEC_TABLE,
        question=question,
        answer=answer,
        supporting_line=line,
        company="Acme",
        period_text="fiscal 2024",
        scale_note="in millions",
        lang="en",
    )
    assert v.decision == "Drop" and why in v.reason
    keep = judge_seed_qa(
        passage=SEC_TABLE,
        question="What was Acme's net income for fiscal 2024?",
        answer="218",
        supporting_line="| Net income | 218 | 217 | 1 |",
        company="Acme",
        period_text="fiscal 2024",
        scale_note="in millions",
        lang="en",
    )
    assert keep.decision == "Keep"


def test_a_generator_role_the_config_names_is_declared_and_called():
    """The stage's declaration takes the generator roles from its config (`configured_roles`), so a
    role named there is one the stage's router lets it call (and one its cache key covers)."""
    cfg = SeedQAConfig(multi_llm_qa={"question_generators": [{"role": "analyst_llm", "style": "formal"}]})
    seeds = _run(cfg)["qa_seeds"].filter(pl.col("method") == "multi_llm_qa")
    assert seeds.height and seeds["generator"].str.contains("analyst_llm").any()


def test_router_backends_name_the_generators():
    seeds = _run()["qa_seeds"]
    assert LLMRouter({}).backend("qa_generator_a") == "offline:rules"
    assert seeds.filter(pl.col("method") == "multi_llm_qa")["generator"].str.contains("qa_generator_").all()


def test_every_operation_renders_its_prompts_with_the_inputs_the_stage_passes(monkeypatch):
    """The LLM backend renders `prompts/{ko,en}/<op>.j2` with the stage's inputs (StrictUndefined)."""
    from finhallu.llm.operations import OPERATIONS

    calls: dict[str, dict] = {}
    original = LLMRouter.call

    def record(self, role, op_name, **inputs):
        calls.setdefault(op_name, inputs)
        return original(self, role, op_name, **inputs)

    monkeypatch.setattr(LLMRouter, "call", record)
    _run()
    stage_ops = set(
        next(s for s in __import__("finhallu.stages.pipeline", fromlist=["STAGES"]).STAGES if s.name == "seed_qa").operations
    )
    assert set(calls) == stage_ops
    for name, inputs in calls.items():
        for lang in ("ko", "en"):
            (_, system), (_, user) = OPERATIONS[name].render(lang, inputs)
            assert "JSON" in user and len(user) > 100, (name, lang)


# ---- a seed's question names the period and the line item of its answer ---------------------

# A later year's MD&A looking back: the sentence names its own fiscal year before its figures.
LOOKBACK = (
    "In fiscal 2005, our net cash provided by operating activities of $3.0 million was the result of net "
    "income of $927,000, non-cash adjustments to net income of $3.4 million, partially offset by an "
    "unfavorable net change in assets and liabilities of $1.3 million."
)
# A half-year cash-flow statement: two acquisitions that both end in "취득".
CASH_FLOW = """(단위 : 백만원)
|  | 제 54 기 반기 | 제 53 기 반기 |
| --- | --- | --- |
| 장기금융상품의 처분 | 5,343,921 | 5,029,379 |
| 장기금융상품의 취득 | (4,326,888) | (4,498,757) |
| 기타포괄손익-공정가치금융자산의 처분 | 484,094 | 2,625,165 |
| 기타포괄손익-공정가치금융자산의 취득 | (15,385) | (910,232) |"""
H1 = DocPeriods(2022, "H1", 54)
Q_OCI = "삼성전자의 제54기반기(2022년) 기타포괄손익-공정가치금융자산의 취득은 얼마입니까?"


@pytest.mark.parametrize(
    "year,sentence,span,period",
    [
        (2007, LOOKBACK, "$927,000", "FY-2005"),  # was FY-2007: the year "2005" counted as the first figure
        (1997, "In fiscal 1996, amortization increased to $1.0 million.", "$1.0 million", "FY-1996"),
        (
            2013,
            "Cash used in financing activities in fiscal 2012 was $3.0 billion compared to $3.2 billion in fiscal 2011.",
            "$3.0 billion",
            "FY-2012",
        ),
        # a figure with no year of its own in a sentence about another year: no period, no question
        (
            1997,
            "The effective tax rate decreased to 42.1% of pretax income from 51.1%, reflecting the use of net "
            "operating losses in fiscal 1996 by a subsidiary.",
            "42.1%",
            "NA",
        ),
        (2024, "Net income was $218 million.", "$218 million", "FY-2024"),
        (2024, "Net income was $218 million (2023: $31 million).", "$218 million", "FY-2024"),  # a comparison year
        (
            2013,
            "The decrease in cash used by financing activities of $0.2 billion compared to fiscal 2011 was due to "
            "lower repurchases.",
            "$0.2 billion",
            "NA",
        ),
    ],
)
def test_a_sentence_dates_its_figures_by_the_year_it_names(year, sentence, span, period):
    found = {t.span: t.period for t in _en_sentence_triplets(sentence, DocPeriods(year))}
    assert found[span] == period, found


def test_a_lookback_sentence_is_asked_about_its_own_year():
    t = next(t for t in _en_sentence_triplets(LOOKBACK, DocPeriods(2007)) if t.span == "$927,000")
    doc = DocContext("sec10k-1-2007", "sec10k", "Pericom", "en", DocPeriods(2007), FactIndex(pl.DataFrame(), "en"), [], [])
    qa = generate_triplet_qa(
        passage=LOOKBACK, company="Pericom", period_text="fiscal 2005", triplet=t.model_dump(), lang="en", rng_seed=1
    )
    assert "fiscal 2005" in qa.question and qa.answer == "$927,000"
    assert triplet_mismatch(qa.question, t, doc, None) is None
    assert triplet_mismatch(qa.question.replace("2005", "2007"), t, doc, None) == "period_mismatch"


def test_korean_period_words_are_not_line_items_or_quarters():
    assert period_in("당기손익-공정가치측정 금융자산", H1, "ko") is None  # 당기손익 is profit or loss, not 당기
    assert period_in("당기순이익", H1, "ko") is None
    assert period_in("당기말", H1, "ko") == Period("H1", 2022)
    assert period_in("당반기 3 개 월", H1, "ko") is None  # a quarter's figure inside a half-year report
    assert period_in("Years ended September 28,2024", DocPeriods(2024), "en") == Period("FY", 2024)
    assert period_in("In fiscal 2005, our", DocPeriods(2007), "en") == Period("FY", 2005)


def test_a_spanning_header_cell_dates_the_sub_columns_under_it():
    header = combine_header(["구 분", "당반기", "", "전반기", ""], ["구 분", "3 개 월", "누 적", "3 개 월", "누 적"])
    assert header == ["구 분", "당반기 3 개 월", "당반기 누 적", "전반기 3 개 월", "전반기 누 적"]
    text = (
        "| 구 분 | 당반기 |  | 전반기 |  |\n| --- | --- | --- | --- | --- |\n"
        "| 구 분 | 3 개 월 | 누 적 | 3 개 월 | 누 적 |\n| 임대료수익 | 42,472 | 85,710 | 40,701 | 81,890 |"
    )
    periods = {c.amount.raw: c.period for c in table_cells(text, H1, "ko")}
    assert periods == {"42,472": None, "85,710": Period("H1", 2022), "40,701": None, "81,890": Period("H1", 2021)}


def _inputs_ko() -> dict:
    return {
        "company": "삼성전자",
        "lang": "ko",
        "fiscal_year": 2022,
        "report_kind": "H1",
        "current_term": 54,
        "scale_note": "(단위 : 백만원)",
    }


def test_the_answer_is_the_row_the_question_names():
    """ "기타포괄손익-공정가치금융자산의 취득" was answered from "장기금융상품의 취득" (4,326,888): the
    question's hyphenated compound and the row's words were split differently, and half the words
    (취득) was a match; factuality checked the figure and period, never the row."""
    ans = answer_question(chunk=CASH_FLOW, question=Q_OCI, style="sentence_first", **_inputs_ko())
    assert ans.span == "(15,385)" and ans.evidence.startswith("| 기타포괄손익-공정가치금융자산의 취득 |"), ans
    wrong = "| 장기금융상품의 취득 | (4,326,888) | (4,498,757) |"
    v = check_factuality(
        chunk=CASH_FLOW, question=Q_OCI, answer="(4,326,888)백만원입니다.", span="(4,326,888)", evidence=wrong, **_inputs_ko()
    )
    assert not v.factual and "line item" in v.reason
    ok = check_factuality(
        chunk=CASH_FLOW, question=Q_OCI, answer=ans.answer, span=ans.span, evidence=ans.evidence, **_inputs_ko()
    )
    assert ok.factual, ok.reason


def _seed(question: str, answer: str, clue: str, text: str, lang: str = "ko") -> dict:
    return {"question": question, "answer": answer, "clue_text": clue, "clue_start": text.find(clue), "lang": lang}


@pytest.mark.parametrize(
    "question,answer,row,why",
    [
        (Q_OCI, "(4,326,888)", "| 장기금융상품의 취득 | (4,326,888) | (4,498,757) |", "row_mismatch"),
        (
            Q_OCI.replace("제54기반기(2022년)", "제53기반기(2021년)"),
            "(15,385)",
            "| 기타포괄손익-공정가치금융자산의 취득 | (15,385) | (910,232) |",
            "period_mismatch",
        ),
        (Q_OCI, "(15,385)", "| 기타포괄손익-공정가치금융자산의 취득 | (15,385) | (910,232) |", None),
        (
            Q_OCI.replace("제54기반기(2022년)", "제53기반기(2021년)"),
            "(910,232)",
            "| 기타포괄손익-공정가치금융자산의 취득 | (15,385) | (910,232) |",
            None,
        ),
    ],
)
def test_post_check_holds_a_table_answer_to_its_row_and_column(question, answer, row, why):
    assert alignment.seed_mismatch(_seed(question, answer, row, CASH_FLOW), CASH_FLOW, H1) == why


@pytest.mark.parametrize(
    "question,why",
    [
        ("What was Pericom's net income for fiscal 2007?", "period_mismatch"),
        ("What was Pericom's net income for fiscal 2005?", None),
    ],
)
def test_post_check_holds_a_sentence_answer_to_the_years_it_names(question, why):
    seed = _seed(question, "$927,000", LOOKBACK, LOOKBACK, "en")
    assert alignment.seed_mismatch(seed, LOOKBACK, DocPeriods(2007)) == why


def test_xbrl_facts_cross_check_the_asked_period_and_value():
    facts = FactIndex(
        _facts(
            [("Net income", 999_000_000, "2023-01-01", "2023-12-31"), ("Net income", 217_000_000, "2022-01-01", "2022-12-31")]
        ),
        "en",
    )
    doc = DocContext("sec10k-1-2024", "sec10k", "Acme", "en", DocPeriods(2024), facts, [], [])
    t = TripletItem(
        head="Net income",
        head_type="FIN_METRIC",
        relation="Has_Value",
        tail="217m-USD-FY-2023",
        tail_type="VALUE",
        evidence="| Net income | 218 | 217 |",
        span="217",
        value=217e6,
        unit="USD",
        period="FY-2023",
    )
    assert xbrl_mismatch(doc, t, None, "What was Acme's Net income for fiscal 2023?") == "contradicted_by_xbrl"
    assert xbrl_mismatch(doc, t, "f1", "What was Acme's Net income for fiscal 2023?") == "xbrl_fact_of_other_period"
    assert (
        xbrl_mismatch(doc, t.model_copy(update={"period": "FY-2022"}), "f1", "What was Acme's Net income for fiscal 2022?")
        is None
    )


def test_stage_drops_misaligned_seeds_with_counted_reasons(monkeypatch):
    """The generic post-check: whatever a method returns, a seed whose question names a period or a
    line item its clue does not carry never becomes a faithful answer; seed_qa_stats counts why."""
    inputs = _inputs()
    p = inputs["passages"].filter(pl.col("passage_id") == "p1").row(0, named=True)
    row = "| Net income | 218 | 217 | 1 |"

    def fake(doc, cfg, llm, ctx, encoder):
        if doc.source != "sec10k":
            return MethodResult()
        seeds = [
            seed_row(
                p,
                method="triplet_qa",
                question=q,
                answer=a,
                clue=row,
                clue_start=p["text"].find(row),
                qa_kind="table",
                origin_id=q,
                generator="test",
                triplet_ids=[],
                fact_id=None,
                answer_value=None,
                answer_unit="USD",
                period=None,
            )
            for q, a in (
                ("What was Acme's Net income for fiscal 2024?", "218"),
                ("What was Acme's Net income for fiscal 2024?", "217"),  # the 2023 column
                ("What was Acme's Total interest income for fiscal 2023?", "217"),
            )
        ]  # another row
        return MethodResult(seeds=seeds, counts=Counter(qa_kept=3))

    monkeypatch.setitem(seed_qa.SEED_METHODS, "triplet_qa", fake)
    out = _run(inputs=inputs)
    kept = out["qa_seeds"].filter(pl.col("method") == "triplet_qa")
    assert kept.select("question", "answer").rows() == [("What was Acme's Net income for fiscal 2024?", "218")]
    stats = {r["metric"]: r["value"] for r in out["seed_qa_stats"].filter(pl.col("method") == "triplet_qa").iter_rows(named=True)}
    assert stats["seeds_dropped_period_mismatch"] == 1 and stats["seeds_dropped_row_mismatch"] == 1
    assert stats["seeds"] == 1
