"""Generated QA seeds on the real fixtures: Apple's 10-K (FY2024) with Apple's XBRL instance (FY2023),
Samsung's DART half-year report (2022 H1) with Samsung's DART XBRL (FY2021). Offline backends."""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
import polars as pl
import pytest

from finhallu.stages.chunk import ChunkConfig
from finhallu.stages.ingest import IngestConfig
from finhallu.stages.seed_qa import SeedQAConfig
from finhallu.llm.router import LLMRouter
from finhallu.schemas.contracts import CONTRACTS
from finhallu.schemas.gate import run_gate
from finhallu.stages.pipeline import table_rules
from finhallu.stages.seed_qa import _funnel_non_increasing
from finhallu.stages import chunk as chunking
from finhallu.stages import ingest
from finhallu.stages import seed_qa
from finhallu.stages.base import StageContext
from finhallu.stages.seed_qa.alignment import named_years, seed_mismatch
from finhallu.stages.seed_qa.common import SCHEMA_INPUTS, document_contexts
from finhallu.stages.seed_qa.dedup import deduplicate
from finhallu.stages.seed_qa.multi_llm_qa import answer_question, check_factuality, generate_questions
from finhallu.stages.seed_qa.triplets import extract_triplets
from finhallu.stages.seed_qa.values import parse_cell
from finhallu.text.numbers import find_numbers

pytestmark = pytest.mark.realdata

# VALUE-UNIT-PERIOD: "391.035bn-USD-FY-2024", "16.2%-FY-2022", "8m-USD-NA", "50-bps-NA"
VUP = re.compile(
    r"^(?:-?\d+(?:\.\d+)?(?:m|bn|tn)?-(?:USD|KRW|count|shares|x|bps|NA)|-?\d+(?:\.\d+)?%p?|NA-\w+)-"
    r"(?:(?:FY|H1|Q1|Q3)-\d{4}|NA)$"
)


@pytest.fixture(scope="module")
def built(real_data):
    sources = [
        {"kind": "sec10k", "paths": [str(real_data / "sec10k/html/aapl-10-k-2024-11-01.html")]},
        {
            "kind": "xbrl",
            "paths": [str(real_data / "sec10k/xbrl/aapl_10k_2023_aapl-20230930_htm.xml"), str(real_data / "dart/xbrl")],
        },
        {"kind": "dart", "paths": [str(real_data / "dart/document-xml")]},
    ]
    ing = ingest.run({}, StageContext(stage="ingest", config=IngestConfig(sources=sources), seed=1))
    docs = CONTRACTS["documents"].conform(ing["documents"])
    passages = chunking.run({"documents": docs}, StageContext(stage="chunk", config=ChunkConfig(), seed=1))["passages"]
    inputs = {
        "documents": docs,
        "passages": passages,
        "source_qas": ing["source_qas"],
        "facts": CONTRACTS["facts"].conform(ing["facts"]),
    }
    out = seed_qa.run(inputs, StageContext(stage="seed_qa", config=SeedQAConfig(), seed=20240917))
    return inputs, {k: CONTRACTS[k].conform(v) for k, v in out.items()}


def test_seeds_for_the_10k_and_the_dart_report(built):
    _, out = built
    seeds = out["qa_seeds"]
    n = {(s, m): k for s, m, k in seeds.group_by("source", "method").len().iter_rows()}
    assert n.get(("sec10k", "triplet_qa"), 0) >= 30 and n.get(("dart", "multi_llm_qa"), 0) >= 20, n
    sec = seeds.filter(pl.col("source") == "sec10k")
    assert sec["question"].str.contains("Apple Inc.").all() and sec["question"].str.contains(r"fiscal 20\d\d").all()
    dart = seeds.filter(pl.col("source") == "dart")
    assert dart["question"].str.contains("삼성전자").all() and dart["question"].str.contains(r"20\d\d년").all()


def test_every_clue_is_its_passage_text_at_clue_start(built):
    inputs, out = built
    texts = dict(zip(inputs["passages"]["passage_id"], inputs["passages"]["text"]))
    seeds = out["qa_seeds"].filter(pl.col("method") != "aihub_given")
    for s in seeds.iter_rows(named=True):
        text = texts[s["passage_id"]]
        assert text[s["clue_start"] : s["clue_start"] + len(s["clue_text"])] == s["clue_text"], s
        assert text[s["answer_start"] : s["answer_start"] + len(s["answer"])] == s["answer"], s


def _stated(answer: str) -> Decimal:
    a = parse_cell(answer)
    return abs(a.number) if a else abs(find_numbers(answer)[0].value)


def test_numeric_answers_equal_the_xbrl_facts(built):
    inputs, out = built
    facts = {r["fact_id"]: r for r in inputs["facts"].iter_rows(named=True)}
    verified = out["qa_seeds"].filter(pl.col("fact_id").is_not_null())
    by_source = dict(verified.group_by("source").len().iter_rows())
    assert by_source.get("sec10k", 0) >= 10 and by_source.get("dart", 0) >= 1, by_source
    for s in verified.iter_rows(named=True):
        fact = facts[s["fact_id"]]
        value, truth = Decimal(repr(s["answer_value"])), Decimal(repr(fact["numeric_value"]))
        if s["answer_unit"] in ("%", "%p"):
            truth *= 100
        # the answer states the fact's value, rounded to the precision the filing prints it with
        stated = _stated(s["answer"])
        scale = abs(value) / stated if stated else Decimal(1)
        assert abs(abs(value) - abs(truth)) <= scale / 2 + Decimal("1e-6"), (s["question"], s["answer"], fact["value"])
        assert fact["period_end"][:4] == s["period"][-4:], (s["question"], fact["period_end"])
    # triplets carry the same guarantee, with well-formed VALUE-UNIT-PERIOD tails
    trip = out["triplets"]
    for t in trip.filter(pl.col("fact_id").is_not_null()).iter_rows(named=True):
        truth = Decimal(repr(facts[t["fact_id"]]["numeric_value"])) * (100 if t["unit"] in ("%", "%p") else 1)
        assert abs(abs(Decimal(repr(t["value"]))) - abs(truth)) <= abs(truth) * Decimal("0.0005") + 1, t
    values = trip.filter(pl.col("tail_type") == "VALUE")
    assert values.height > 100 and values["tail"].map_elements(lambda x: bool(VUP.match(x)), return_dtype=pl.Boolean).all()


def test_dedup_removes_planted_duplicates_from_real_questions(built):
    inputs, _ = built
    doc = next(d for d in document_contexts(inputs["documents"], inputs["passages"], inputs["facts"], {"dart"}))
    i = next(
        k
        for k, p in enumerate(doc.passages)
        if "요약재무정보" in (p["section_path"] or "") and p["kind"] == "table" and "자산총계" in p["text"]
    )
    real = generate_questions(chunk=doc.passages[i]["text"], **doc.op_inputs(i), style="formal", n=6, rng_seed=3).questions
    originals = [q.question for q in real]
    assert len(set(originals)) == len(originals) >= 4
    planted = [
        originals[0],
        originals[1].replace(" ", "  ", 1).replace("  ", ""),  # exact copy, spacing variant
        generate_questions(chunk=doc.passages[i]["text"], **doc.op_inputs(i), style="colloquial", n=6, rng_seed=3)
        .questions[0]
        .question,
    ]  # the same figure asked in another style
    questions = originals + planted
    from finhallu.embedders import embedder_from_config
    from finhallu.embedders import EmbedConfig

    vectors = embedder_from_config(EmbedConfig()).encode(questions)
    res = deduplicate(
        questions,
        np.asarray(vectors),
        [(k,) for k in range(len(questions))],
        LLMRouter({}),
        "qa_judge",
        doc.company,
        doc.lang,
        0.5,
        0.95,
    )
    kept = [questions[k] for k in res.kept]
    assert sorted(kept) == sorted(originals), (kept, planted)  # every plant removed, no original lost
    assert res.compression_rate == pytest.approx(len(planted) / len(questions))


def test_stepwise_counts_are_consistent(built):
    _, out = built
    stats = out["seed_qa_stats"]
    assert _funnel_non_increasing(stats, {})["ok"].all()
    v = {(r["source"], r["method"], r["metric"]): r["value"] for r in stats.iter_rows(named=True)}
    for source, method, n in (
        out["qa_seeds"].filter(pl.col("method") != "aihub_given").group_by("source", "method").len().iter_rows()
    ):
        assert v[(source, method, "seeds")] == n
    d = ("dart", "multi_llm_qa")
    gen = v[(*d, "questions_generated")]
    assert gen == v[(*d, "questions_generated_by_qa_generator_a")] + v[(*d, "questions_generated_by_qa_generator_b")]
    assert v[(*d, "compression_rate")] == pytest.approx(1 - v[(*d, "questions_after_cosine_filter")] / gen)
    assert v[(*d, "answers_generated")] == 3 * v[(*d, "questions_after_cosine_filter")]
    assert v[(*d, "numeric_disagreement_after_validation")] == 0.0 <= v[(*d, "numeric_disagreement_before_validation")]
    assert 0 < v[(*d, "lexical_diversity_final")] < 1
    s = ("sec10k", "triplet_qa")
    assert v[(*s, "triplets_fact_verified")] > 0 and v[(*s, "pages_used")] <= v[(*s, "pages_extracted")]


def test_outputs_pass_their_gates(built):
    inputs, out = built
    nb = {**inputs, **out}
    for table, df in out.items():
        failed = [r for r in run_gate(table, df, nb, table_rules(table)).rows if r["outcome"] != "passed"]
        assert not failed, (table, failed[:3])


# ---- the faithful side names the period and the row of its answer ----------------------------

EDGAR = "sec10k/edgar-corpus"


def _build(sources: list[dict], methods: dict) -> tuple[dict, dict]:
    ing = ingest.run({}, StageContext(stage="ingest", config=IngestConfig(sources=sources), seed=1))
    docs = CONTRACTS["documents"].conform(ing["documents"])
    passages = chunking.run({"documents": docs}, StageContext(stage="chunk", config=ChunkConfig(), seed=1))["passages"]
    inputs = {
        "documents": docs,
        "passages": passages,
        "source_qas": ing["source_qas"],
        "facts": CONTRACTS["facts"].conform(ing["facts"]) if ing["facts"].height else None,
    }
    out = seed_qa.run(inputs, StageContext(stage="seed_qa", config=SeedQAConfig(methods=methods), seed=20240917))
    return inputs, out


@pytest.fixture(scope="module")
def edgar(real_data):
    """The EDGAR-CORPUS 10-Ks of fiscal 1997 (Home Health Corp of America) and 2007 (Pericom): MD&A
    sentences that look back on earlier years."""
    paths = [str(p) for p in sorted((real_data / EDGAR).glob("*.json")) if re.search(r"_(1997|2007)_", p.name)]
    assert len(paths) == 2, paths
    return _build([{"kind": "edgar_corpus", "paths": paths}], {"sec10k": ["triplet_qa"]})


def _passage_with(inputs: dict, doc_suffix: str, text: str, sources=("sec10k",)) -> tuple:
    docs = document_contexts(inputs["documents"], inputs["passages"], inputs["facts"], set(sources))
    doc = next(d for d in docs if d.doc_id.endswith(doc_suffix))
    i = next(k for k, p in enumerate(doc.passages) if text in p["text"])
    return doc, i


@pytest.mark.parametrize(
    "doc_suffix,sentence,span,period",
    [
        # asked about fiscal 2007, answered with fiscal 2005's net income: "2005" was read as the first figure
        ("-2007", "was the result of net income of $927,000", "$927,000", "FY-2005"),
        # asked about fiscal 1997, answered "In fiscal 1996, ..."
        ("-1997", "In fiscal 1996, amortization increased to $1.0 million.", "$1.0 million", "FY-1996"),
        ("-1997", "In fiscal 1996, the provision for doubtful accounts increased to $3.5 million.", "$3.5 million", "FY-1996"),
        # no year of its own, in a sentence about fiscal 1996 of a fiscal-1997 filing: not dated, never asked
        ("-1997", "effective tax rate decreased to 42.1%", "42.1%", "NA"),
    ],
)
def test_edgar_lookback_sentences_are_dated_by_their_own_year(edgar, doc_suffix, sentence, span, period):
    inputs, _ = edgar
    doc, i = _passage_with(inputs, doc_suffix, sentence)
    found = extract_triplets(passage=doc.passages[i]["text"], **doc.op_inputs(i), **SCHEMA_INPUTS).triplets
    periods = {t.period for t in found if t.span == span and sentence.split(" ", 3)[-1][:20] in t.evidence}
    assert periods == {period}, (span, periods)


def test_edgar_seeds_ask_for_the_year_their_sentence_states(edgar):
    inputs, out = edgar
    seeds = out["qa_seeds"].filter(pl.col("method") == "triplet_qa")
    assert seeds.height >= 5 and seeds["doc_id"].n_unique() == 2
    docs = {d.doc_id: d for d in document_contexts(inputs["documents"], inputs["passages"], None, {"sec10k"})}
    texts = dict(zip(inputs["passages"]["passage_id"], inputs["passages"]["text"]))
    for s in seeds.iter_rows(named=True):
        periods = docs[s["doc_id"]].periods
        stated = named_years(s["clue_text"], periods)
        assert not stated or named_years(s["question"], periods) <= stated, (s["question"], s["clue_text"])
        assert seed_mismatch(s, texts[s["passage_id"]], periods) is None, (s["question"], s["clue_text"])
        assert not (s["answer"] == "$927,000" and "2007" in s["question"]), s["question"]
        assert not ("fiscal 1997" in s["question"] and s["clue_text"].startswith("In fiscal 1996")), s["question"]
    stats = {r["metric"]: r["value"] for r in out["seed_qa_stats"].iter_rows(named=True)}
    assert {"seeds_dropped_period_mismatch", "seeds_dropped_row_mismatch"} <= set(stats)


CASH_FLOW_ROW = "| 기타포괄손익-공정가치금융자산의 취득 | (15,385) | (910,232) |"
WRONG_ROW = "| 장기금융상품의 취득 | (4,326,888) | (4,498,757) |"
Q_OCI = "삼성전자의 제54기반기(2022년) 기타포괄손익-공정가치금융자산의 취득은 얼마입니까?"


def test_dart_cash_flow_question_is_answered_from_the_row_it_names(built):
    """Asked 기타포괄손익-공정가치금융자산의 취득, answered 장기금융상품의 취득 (4,326,888): rejected now."""
    inputs, _ = built
    doc, i = _passage_with(inputs, "", CASH_FLOW_ROW, sources=("dart",))
    chunk = doc.passages[i]["text"]
    assert WRONG_ROW in chunk
    ans = answer_question(chunk=chunk, question=Q_OCI, style="table_first", **doc.op_inputs(i))
    assert (ans.span, ans.evidence) == ("(15,385)", CASH_FLOW_ROW), ans
    wrong = check_factuality(
        chunk=chunk, question=Q_OCI, answer="(4,326,888)백만원입니다.", span="(4,326,888)", evidence=WRONG_ROW, **doc.op_inputs(i)
    )
    assert not wrong.factual and "line item" in wrong.reason
    seed = {"question": Q_OCI, "answer": "(4,326,888)", "clue_text": WRONG_ROW, "clue_start": chunk.find(WRONG_ROW), "lang": "ko"}
    assert seed_mismatch(seed, chunk, doc.periods) == "row_mismatch"
    right = {**seed, "answer": "(15,385)", "clue_text": CASH_FLOW_ROW, "clue_start": chunk.find(CASH_FLOW_ROW)}
    assert seed_mismatch(right, chunk, doc.periods) is None
    prior = {**right, "question": Q_OCI.replace("제54기반기(2022년)", "제53기반기(2021년)")}
    assert seed_mismatch(prior, chunk, doc.periods) == "period_mismatch"  # (15,385) is 제54기's, not 제53기's


def test_every_generated_seed_names_its_row_and_its_period(built):
    inputs, out = built
    docs = {d.doc_id: d for d in document_contexts(inputs["documents"], inputs["passages"], None, {"sec10k", "dart"})}
    texts = dict(zip(inputs["passages"]["passage_id"], inputs["passages"]["text"]))
    seeds = out["qa_seeds"].filter(pl.col("method") != "aihub_given")
    bad = [
        (s["question"], s["answer"], s["clue_text"][:80])
        for s in seeds.iter_rows(named=True)
        if seed_mismatch(s, texts[s["passage_id"]], docs[s["doc_id"]].periods)
    ]
    assert not bad, bad[:5]
    assert not seeds.filter(pl.col("question").str.contains("3 ?개 ?월") & pl.col("period").str.starts_with("H1")).height
