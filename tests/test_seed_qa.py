"""seed_qa: AI-Hub pass-through and the two generated-seed methods on small authored filings."""

from __future__ import annotations

import re
from decimal import Decimal

import polars as pl
import pytest

from finhallu.config import SeedQAConfig
from finhallu.llm.router import LLMRouter
from finhallu.schemas.contracts import CONTRACTS
from finhallu.schemas.gate import run_gate
from finhallu.tasks import seed_qa
from finhallu.tasks.base import StageContext
from finhallu.tasks.seeds.facts import FactIndex
from finhallu.tasks.seeds.tables import table_cells
from finhallu.tasks.seeds.triplet_qa import judge_seed_qa
from finhallu.tasks.seeds.triplets import (ENTITY_TYPES, RELATION_TYPES, extract_triplets, ground_in_facts,
                                           reflect_triplets)
from finhallu.tasks.seeds.values import DocPeriods, Period, find_scale, period_in, vup

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
SEC_TEXT = ("Net income for 2024 was $218 million, compared with $217 million for 2023. Net interest income "
            "increased $18 million, or 3.0%, to $614 million in 2024. The net interest margin declined 3 basis points "
            "to 3.59% from 3.62%.")
DART_TABLE = """(단위 : 백만원, %)
| 구 분 | 제12기말 | 제11기말 |
| --- | --- | --- |
| 보통주자본 | 3,492,500 | 3,240,000 |
| 기본자본 | 3,850,000 | 3,560,000 |
| 총자본 | 4,420,000 | 4,105,000 |
| 위험가중자산 | 29,850,000 | 28,420,000 |
| 보통주자본비율(BIS) | 11.70 | 11.40 |
| 총자본비율(BIS) | 14.81 | 14.44 |"""
DART_TEXT = ("제12기 연결 당기순이익은 4,125억 원으로 전기 4,035억 원 대비 90억 원(2.2%) 증가하였습니다. "
             "유효법인세율은 24.8%로 전기(24.9%)와 비슷한 수준을 유지하였습니다.")


def _passage(pid, doc, source, inst, lang, kind, text, title, block, section="Item 7."):
    return {"passage_id": pid, "doc_id": doc, "block_id": block, "source": source, "institution": inst, "lang": lang,
            "split": "train", "doc_type": "10-K" if source == "sec10k" else "사업보고서", "title": title,
            "section_path": section, "kind": kind, "chunk_index": 0, "chunk_total": 1, "char_start": 0, "text": text,
            "token_count": 300, "tokenizer": "approx"}


def _inputs() -> dict[str, pl.DataFrame]:
    sec = ("sec10k-1-2024", "sec10k", "ACME BANCORP, INC.", "en")
    dart = ("dart-9-20241231-11011", "dart", "가나금융지주 주식회사", "ko")
    passages = pl.DataFrame([
        _passage("p1", *sec, "table", SEC_TABLE, "ACME BANCORP, INC. Form 10-K FY2024", "b1"),
        _passage("p2", *sec, "text", SEC_TEXT, "ACME BANCORP, INC. Form 10-K FY2024", "b2"),
        _passage("p3", *dart, "table", DART_TABLE, "가나금융지주 사업보고서", "b1", "II. 사업의 내용"),
        _passage("p4", *dart, "text", DART_TEXT, "가나금융지주 사업보고서", "b2", "III. 재무에 관한 사항"),
    ])
    documents = pl.DataFrame([
        {"doc_id": sec[0], "title": "ACME BANCORP, INC. Form 10-K FY2024", "published": "December 31, 2024"},
        {"doc_id": dart[0], "title": "가나금융지주 사업보고서", "published": "20240101-20241231"},
    ])
    empty_qas = pl.DataFrame(schema=CONTRACTS["source_qas"].schema)
    return {"documents": documents, "passages": passages, "source_qas": empty_qas,
            "facts": pl.DataFrame(schema=CONTRACTS["facts"].schema)}


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
    text = ("|  | 2024 |  | Change |  | 2023 |  | Change |  | 2022 |  |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- "
            "| --- | --- |\n| Americas | $167,045 | 3 | $162,560 | (4) | $169,658 |\n"
            "| Europe | 101,328 |  | 7 | 94,294 |  | (1) | 95,118 |  |")
    cells = {(c.label, c.period.label): c.amount.raw for c in table_cells(text, DocPeriods(2024), "en")}
    assert cells == {("Americas", "FY-2024"): "$167,045", ("Americas", "FY-2023"): "$162,560",
                     ("Americas", "FY-2022"): "$169,658", ("Europe", "FY-2024"): "101,328",
                     ("Europe", "FY-2023"): "94,294", ("Europe", "FY-2022"): "95,118"}  # change columns skipped


# ---- triplets ---------------------------------------------------------------------------

def test_sentences_become_value_triplets_with_their_own_periods():
    out = extract_triplets(passage=SEC_TEXT, company="Acme", lang="en", fiscal_year=2024, report_kind="FY",
                           current_term=None, scale_note=None, **SCHEMA).triplets
    got = {(t.head, t.relation, t.tail) for t in out}
    assert ("Net income", "Has_Value", "218m-USD-FY-2024") in got
    assert ("Net income", "Has_Value", "217m-USD-FY-2023") in got
    assert ("Net interest income", "Increased_By", "18m-USD-FY-2024") in got
    assert ("Net interest income", "Has_Value", "614m-USD-FY-2024") in got
    assert ("Net interest margin", "Decreased_By", "3-bps-FY-2024") in got
    assert ("Net interest margin", "Has_Value", "3.62%-FY-2023") in got
    ko = extract_triplets(passage=DART_TEXT, company="가나", lang="ko", fiscal_year=2024, report_kind="FY",
                          current_term=12, scale_note=None, **SCHEMA).triplets
    kgot = {(t.head, t.relation, t.tail, t.span) for t in ko}
    assert ("당기순이익", "Has_Value", "412.5bn-KRW-FY-2024", "4,125억 원") in kgot
    assert ("당기순이익", "Has_Value", "403.5bn-KRW-FY-2023", "4,035억 원") in kgot
    assert ("당기순이익", "Increased_By", "9bn-KRW-FY-2024", "90억 원") in kgot
    assert ("유효법인세율", "Has_Value", "24.9%-FY-2023", "24.9%") in kgot


def test_reflection_drops_what_the_passage_does_not_state():
    good = extract_triplets(passage=SEC_TABLE, company="Acme", lang="en", fiscal_year=2024, report_kind="FY",
                            current_term=None, scale_note=None, **SCHEMA).triplets
    assert {t.tail for t in good if t.head == "Net income"} == {"218m-USD-FY-2024", "217m-USD-FY-2023"}
    forged = good[0].model_copy(update={"evidence": "| Net income | 999 | 217 | 1 |"})
    wrong_tail = good[1].model_copy(update={"tail": "1bn-USD-FY-2024"})
    out = reflect_triplets(passage=SEC_TABLE, triplets=[t.model_dump() for t in [forged, wrong_tail, *good[2:]]],
                           lang="en", **SCHEMA)
    assert forged.model_dump() not in [t.model_dump() for t in out.triplets]
    assert any("evidence not in passage" in i for i in out.issues)
    fixed = next(t for t in out.triplets if t.head == wrong_tail.head and t.span == wrong_tail.span)
    assert fixed.tail != "1bn-USD-FY-2024" and any(i.startswith("fix tail") for i in out.issues)


def _facts(rows):
    base = {c: None for c in CONTRACTS["facts"].columns}
    return pl.DataFrame([{**base, "fact_id": f"f{i}", "source": "sec10k", "entity": "Acme", "entity_id": "1",
                          "concept": "c", "value": str(v), "unit": "USD", "period_start": s, "period_end": e,
                          "instant": s is None, "source_path": "x", **{"label": lab, "label_en": lab,
                                                                        "numeric_value": float(v)}}
                         for i, (lab, v, s, e) in enumerate(rows)], schema=CONTRACTS["facts"].schema)


def test_xbrl_facts_verify_contradict_and_supply_a_missing_scale():
    table = SEC_TABLE.split("\n", 1)[1]  # no scale note: the facts must supply it
    found = extract_triplets(passage=table, company="Acme", lang="en", fiscal_year=2024, report_kind="FY",
                             current_term=None, scale_note=None, **SCHEMA).triplets
    assert all(t.value is None for t in found if t.unit != "%")
    facts = FactIndex(_facts([("Revenue from interest", 1_062_000_000, "2024-01-01", "2024-12-31"),
                              ("Interest expense", 448_000_000, "2024-01-01", "2024-12-31"),
                              ("Net income", 999_000_000, "2023-01-01", "2023-12-31")]), "en")
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
        assert text[s["clue_start"]:s["clue_start"] + len(s["clue_text"])] == s["clue_text"]
        assert text[s["answer_start"]:s["answer_start"] + len(s["answer"])] == s["answer"]
        assert s["period"] and s["answer_value"] is not None and s["generator"]
        if s["source"] == "sec10k":
            assert "Acme Bancorp" in s["question"] and re.search(r"fiscal 20\d\d", s["question"]), s["question"]
            assert s["triplet_ids"] and set(s["triplet_ids"]) <= set(out["triplets"]["triplet_id"])
        else:
            assert "가나금융지주" in s["question"] and "주식회사" not in s["question"]
            assert re.search(r"20\d\d년", s["question"]), s["question"]
    nb = {**inputs, **{k: CONTRACTS[k].conform(v) for k, v in out.items()}}
    for table in out:
        failed = [r for r in run_gate(table, nb[table], nb).rows if r["outcome"] != "passed"]
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


@pytest.mark.parametrize("question,answer,line,why", [
    ("What was Acme's net income?", "218", "| Net income | 218 | 217 | 1 |", "period"),
    ("What was Acme's net income for fiscal 2024?", "999", "| Net income | 218 | 217 | 1 |", "answer"),
    ("What was Acme's dividend for fiscal 2024?", "218", "| Net income | 218 | 217 | 1 |", "grounded"),
    ("What was Acme's net income for fiscal 2024?", "218", "| Net income | 218 | 217 |", "supporting line"),
])
def test_keep_drop_judge_drops_when_in_doubt(question, answer, line, why):
    v = judge_seed_qa(passage=SEC_TABLE, question=question, answer=answer, supporting_line=line, company="Acme",
                      period_text="fiscal 2024", scale_note="in millions", lang="en")
    assert v.decision == "Drop" and why in v.reason
    keep = judge_seed_qa(passage=SEC_TABLE, question="What was Acme's net income for fiscal 2024?", answer="218",
                         supporting_line="| Net income | 218 | 217 | 1 |", company="Acme", period_text="fiscal 2024",
                         scale_note="in millions", lang="en")
    assert keep.decision == "Keep"


def test_unknown_generator_role_is_refused():
    cfg = SeedQAConfig(multi_llm_qa={"question_generators": [{"role": "nobody", "style": "formal"}]})
    with pytest.raises(ValueError, match="nobody"):
        _run(cfg)


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
    stage_ops = set(next(s for s in __import__("finhallu.tasks.pipeline", fromlist=["STAGES"]).STAGES
                         if s.name == "seed_qa").operations)
    assert set(calls) == stage_ops
    for name, inputs in calls.items():
        for lang in ("ko", "en"):
            (_, system), (_, user) = OPERATIONS[name].render(lang, inputs)
            assert "JSON" in user and len(user) > 100, (name, lang)
