"""seed_qa: passages (+ shipped QA triplets, XBRL facts) -> `qa_seeds`, `triplets`, `seed_qa_stats`.

AI-Hub: the (question, answer, clue) triplets as given, re-anchored in their passage.
SEC 10-K and DART ship none, so seeds are generated and verified (stages/seed_qa/):
  triplet_qa    FinReflectKG HalluBench: KG triplets per page -> QA per sampled triplet -> Keep/Drop judge
  multi_llm_qa  FinDartBench: questions from several generators -> dedup -> answers from several
                generators -> factuality, listwise quality, top-2 consensus
`seed_qa.methods` names the methods per source. Every seed has the AI-Hub fields (question,
answer, clue text and offset in its passage) plus provenance (method, generator, triplet ids,
the XBRL fact that verifies its number); `seed_qa_stats` holds each method's stepwise counts.

Modules: config (the stage's settings), values (numbers, scales, periods, VALUE-UNIT-PERIOD), tables
(cells with their periods), facts (XBRL ground truth), triplets, triplet_qa, dedup, multi_llm_qa,
common, alignment (does a question name the period and line item of its answer).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

import numpy as np
import polars as pl

from finhallu.text import sentences
from finhallu.embedders import EmbedConfig
from finhallu.stages.seed_qa.config import SeedMethod, SeedQAConfig
from finhallu.llm.parallel import map_items
from finhallu.llm.router import LLMRouter
from finhallu.schemas.rows import QaSeedsRow, SeedQaStatsRow, TripletsRow
from finhallu.schemas.rules import Rule
from finhallu.stages.base import Frames, Stage, StageContext, rows_frame
from finhallu.ids import stable_id
from finhallu.embedders import embedder_for_model, embedder_from_config
from finhallu.stages.seed_qa import multi_llm_qa, triplet_qa
from finhallu.stages.seed_qa.alignment import seed_mismatch
from finhallu.stages.seed_qa.common import DocContext, MethodResult, document_contexts
from finhallu.text.sentences import split_sentences

# LLM roles of the stage (pipeline.py lists them; their config enters the cache key).
EXTRACTOR, QA_GENERATOR, JUDGE = "triplet_extractor", "qa_generator_a", "qa_judge"
SEED_ROLES = ("triplet_extractor", "qa_generator_a", "qa_generator_b", "qa_generator_c", "qa_judge")


def _line_containing(text: str, start: int, length: int) -> tuple[int, str]:
    """The sentence (or line) of text that contains [start, start+length)."""
    pos = 0
    for sent in split_sentences(text):
        at = text.find(sent, pos)
        pos = at + len(sent)
        if at <= start and start + length <= at + len(sent):
            return at, sent
    return start, text[start : start + length]


def _aihub_seeds(qas: pl.DataFrame, passages: pl.DataFrame) -> list[QaSeedsRow]:
    by_block: dict[str, list[dict]] = {}
    for p in passages.filter(pl.col("source") == "aihub").iter_rows(named=True):
        by_block.setdefault(p["block_id"], []).append(p)
    seeds: list[QaSeedsRow] = []
    for qa in qas.iter_rows(named=True):
        parts = by_block.get(qa["block_id"])
        if not parts:
            continue
        if qa["is_impossible"]:
            seeds.append(_seed(parts[0], qa, None, None, None, answerable=False))
            continue
        anchor = qa["clue_start"] if qa["clue_start"] is not None else qa["answer_start"]
        if anchor is None:
            continue  # flagged at ingest: neither clue nor answer located in the context
        part = next((x for x in parts if x["char_start"] <= anchor < x["char_start"] + len(x["text"])), None)
        if part is None:
            continue
        text, off = part["text"], part["char_start"]
        if qa["clue_text"] and qa["clue_start"] is not None:
            clue, clue_start = qa["clue_text"], qa["clue_start"] - off
        else:  # the 행정문서 set ships no clue for spans: the answer's sentence is its evidence
            clue_start, clue = _line_containing(text, qa["answer_start"] - off, len(qa["answer"] or ""))
        if text[clue_start : clue_start + len(clue)] != clue:
            continue  # clue crosses a chunk boundary
        answer = qa["answer"]
        answer_start = None
        if qa["qa_kind"] not in ("yesno", "entailment") and answer:
            k = clue.find(answer)
            answer_start = clue_start + k if k >= 0 else (qa["answer_start"] - off if qa["answer_start"] is not None else None)
        seeds.append(_seed(part, qa, clue, clue_start, answer_start, answerable=True))
    return seeds


def _seed(p: dict, qa: dict, clue, clue_start, answer_start, answerable: bool) -> QaSeedsRow:
    kind = "yesno" if qa["qa_kind"] == "entailment" else qa["qa_kind"]
    answer = qa["answer"] or ""
    if kind == "yesno":
        answer = {"yes": "예", "no": "아니오"}.get(answer.strip().lower(), answer)
    return {
        "seed_id": f"s-{stable_id('aihub', qa['qa_id'])}",
        "passage_id": p["passage_id"],
        "doc_id": p["doc_id"],
        "source": p["source"],
        "institution": p["institution"],
        "lang": p["lang"],
        "split": p["split"],
        "question": qa["question"],
        "answer": answer,
        "clue_text": clue,
        "clue_start": clue_start,
        "answer_start": answer_start,
        "qa_kind": kind,
        "answerable": answerable,
        "method": "aihub_given",
        "origin_id": qa["qa_id"],
        "generator": "source",
        "triplet_ids": [],
        "fact_id": None,
        "answer_value": None,
        "answer_unit": None,
        "period": None,
    }


# ---- generated seeds for filings ------------------------------------------------------------


def _run_triplet_qa(doc: DocContext, cfg: SeedQAConfig, llm: LLMRouter, ctx: StageContext, encoder) -> MethodResult:
    roles = {"extractor": EXTRACTOR, "generator": QA_GENERATOR, "judge": JUDGE}
    return triplet_qa.run_document(doc, cfg.triplet_qa, llm, ctx.rng("triplet_qa", doc.doc_id), roles)


def _run_multi_llm_qa(doc: DocContext, cfg: SeedQAConfig, llm: LLMRouter, ctx: StageContext, encoder) -> MethodResult:
    return multi_llm_qa.run_document(
        doc, cfg.multi_llm_qa, llm, ctx.rng("multi_llm_qa", doc.doc_id), {"judge": JUDGE, "grouper": JUDGE}, encoder
    )


SEED_METHODS: dict[str, Callable[..., MethodResult]] = {"triplet_qa": _run_triplet_qa, "multi_llm_qa": _run_multi_llm_qa}
# Rounds of calls on a document's longest path per method (llm_calls.chain): triplets extracted,
# reflected, turned into QA, judged; questions generated, grouped, answered, checked, scored. The
# longer method's documents start first and their requests get free slots first (llm.parallel).
SEED_METHOD_ROUNDS = {"triplet_qa": 4, "multi_llm_qa": 5}

# Funnels of `seed_qa_stats`: (funnel, metrics in order). Each step keeps a subset of the one before.
FUNNELS = {
    "triplet_qa": [
        ("pages", ["pages", "pages_extracted", "pages_used"]),
        ("triplets", ["triplets_extracted", "triplets_reflected", "triplets_kept"]),
        ("qa", ["qa_sampled", "qa_generated", "qa_clue_located", "qa_kept", "seeds"]),
    ],
    "multi_llm_qa": [
        ("chunks", ["chunks", "chunks_with_figures", "chunks_sampled"]),
        (
            "questions",
            [
                "questions_generated",
                "questions_after_grouping",
                "questions_after_cosine_filter",
                "questions_with_2_factual",
                "questions_with_2_quality_ok",
                "questions_top2_agree",
                "seeds",
            ],
        ),
        ("answers", ["answers_generated", "answers_factual", "answers_quality_ok"]),
    ],
}


def _stats_rows(source: str, method: str, res: MethodResult) -> list[SeedQaStatsRow]:
    c = res.counts
    rows: list[SeedQaStatsRow] = []
    in_funnel: set[str] = set()
    for funnel, metrics in FUNNELS[method]:
        for step, m in enumerate(metrics, start=1):
            rows.append({"source": source, "method": method, "funnel": funnel, "step": step, "metric": m, "value": float(c[m])})
            in_funnel.add(m)
    extra = {k: float(v) for k, v in c.items() if k not in in_funnel}
    extra["seeds_fact_verified"] = float(sum(s["fact_id"] is not None for s in res.seeds))
    s = res.samples
    if method == "multi_llm_qa":
        sizes = s.get("cluster_sizes", [])
        extra["compression_rate"] = (
            1 - c["questions_after_cosine_filter"] / c["questions_generated"] if c["questions_generated"] else 0.0
        )
        extra["cluster_size_mean"] = float(np.mean(sizes)) if sizes else 0.0
        extra["cluster_size_max"] = float(max(sizes)) if sizes else 0.0
        for size, name in ((1, "1"), (2, "2"), (3, "3")):
            extra[f"clusters_of_size_{name}"] = float(sum(x == size for x in sizes))
        extra["clusters_of_size_4_or_more"] = float(sum(x >= 4 for x in sizes))
        for key in ("candidates", "final"):
            vals = s.get(f"jaccard_{key}", [])
            extra[f"jaccard_similarity_{key}"] = float(np.mean(vals)) if vals else 0.0
            extra[f"lexical_diversity_{key}"] = 1 - extra[f"jaccard_similarity_{key}"] if vals else 0.0
        for key in ("before", "after"):
            extra[f"numeric_disagreement_{key}_validation"] = multi_llm_qa.disagreement_ratio(
                s.get(f"numeric_disagreement_{key}", [])
            )
    rows += [
        {"source": source, "method": method, "funnel": None, "step": None, "metric": k, "value": v}
        for k, v in sorted(extra.items())
    ]
    return rows


def _aligned(seeds: list[QaSeedsRow], docs: list[DocContext]) -> tuple[list[QaSeedsRow], Counter]:
    """The generic post-check of generated seeds: a seed whose question names a period or a line item
    its clue (table row and column, or sentence) does not carry is dropped, counted by reason."""
    by_doc: dict[str | None, DocContext] = {d.doc_id: d for d in docs}  # a seed's doc_id may be null
    texts = {p["passage_id"]: p["text"] for d in docs for p in d.passages}
    kept: list[QaSeedsRow] = []
    dropped: Counter[tuple[str | None, str, str]] = Counter()  # (source, method, reason)
    for s in seeds:
        doc = by_doc.get(s["doc_id"])
        why = (
            seed_mismatch(s, texts[s["passage_id"]], doc.periods)
            if s["method"] != "aihub_given" and doc is not None and s["clue_text"]
            else None
        )
        if why:
            dropped[(s["source"], s["method"], why)] += 1
            continue
        kept.append(s)
    return kept, dropped


def _dedup_encoder(cfg: SeedQAConfig, embeddings: pl.DataFrame | None):
    """The embedder for question deduplication: the configured model, else the embed stage's."""
    model = cfg.dedup_model or (embeddings["model"][0] if embeddings is not None and embeddings.height else None)
    return embedder_for_model(model) if model else embedder_from_config(EmbedConfig())


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: SeedQAConfig = ctx.config
    passages = inputs["passages"]
    seeds = _aihub_seeds(inputs["source_qas"], passages)
    llm = ctx.llm
    documents = inputs.get("documents", pl.DataFrame())
    docs = document_contexts(documents, passages, inputs.get("facts"), set(cfg.methods))
    encoder = (
        _dedup_encoder(cfg, inputs.get("embeddings"))
        if any("multi_llm_qa" in cfg.methods.get(d.source, []) for d in docs)
        else None
    )
    per_method: dict[tuple[str, SeedMethod], MethodResult] = {}
    triplets: list[TripletsRow] = []
    work = [(doc, method) for doc in docs for method in cfg.methods.get(doc.source, [])]
    sentences.load_for(doc.lang for doc, _ in work)
    # Every document's methods together (see llm.parallel); merged in the documents' order.
    results = map_items(
        lambda dm: SEED_METHODS[dm[1]](dm[0], cfg, llm, ctx, encoder),
        work,
        llm,
        SEED_ROLES,
        ctx.progress,
        longest_first=lambda dm: SEED_METHOD_ROUNDS[dm[1]],
    )
    for (doc, method), res in zip(work, results):
        seeds += res.seeds
        triplets += res.triplets
        per_method.setdefault((doc.source, method), MethodResult()).merge(res)
    seeds, misaligned = _aligned(seeds, docs)
    # One seed per (document, question): generators may ask the same thing from two pages.
    first: dict[str, QaSeedsRow] = {}
    asked: set[tuple] = set()
    dropped: Counter = Counter()
    for s in seeds:
        key = (s["doc_id"], s["question"])
        if s["seed_id"] in first or (s["method"] != "aihub_given" and key in asked):
            dropped[(s["source"], s["method"])] += 1
            continue
        first[s["seed_id"]] = s
        asked.add(key)
    kept = list(first.values())
    stats: list[SeedQaStatsRow] = []
    for (source, method), res in sorted(per_method.items()):
        res.seeds = [s for s in kept if s["source"] == source and s["method"] == method]
        res.counts["seeds"] = len(res.seeds)
        res.counts["seeds_dropped_as_repeated_question"] = dropped[(source, method)]
        for why in ("period_mismatch", "row_mismatch"):
            res.counts[f"seeds_dropped_{why}"] = misaligned[(source, method, why)]
        stats += _stats_rows(source, method, res)
    from finhallu.schemas.contracts import CONTRACTS

    trip_df = (
        pl.DataFrame(triplets, infer_schema_length=None).unique("triplet_id", keep="first").sort("triplet_id")
        if triplets
        else pl.DataFrame(schema=CONTRACTS["triplets"].schema)
    )
    return {
        "qa_seeds": rows_frame(kept, "seed_id", schema_overrides={"triplet_ids": pl.List(pl.String)}),
        "triplets": trip_df,
        "seed_qa_stats": rows_frame(stats, ["source", "method", "metric"]),
    }


# ---- gate rules -------------------------------------------------------------------------------
def _clue_at_offset(df: pl.DataFrame, nb: dict) -> pl.DataFrame:
    """A seed's clue is its passage's text at clue_start, character for character."""
    texts = dict(zip(nb["passages"]["passage_id"], nb["passages"]["text"]))
    rows = df.filter(pl.col("clue_text").is_not_null()).select("seed_id", "passage_id", "clue_text", "clue_start")
    ok = [
        s is not None and texts.get(p, "")[s : s + len(c)] == c
        for p, c, s in zip(rows["passage_id"], rows["clue_text"], rows["clue_start"])
    ]
    return rows.select("seed_id").with_columns(ok=pl.Series(ok, dtype=pl.Boolean))


def _funnel_non_increasing(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    """Each step of a seed method's funnel keeps at most what the step before it had."""
    rows = []
    for (source, method, funnel), g in (
        df.filter(pl.col("funnel").is_not_null()).sort("step").group_by(["source", "method", "funnel"], maintain_order=True)
    ):
        values = g["value"].to_list()
        for metric, before, after in zip(g["metric"].to_list()[1:], values, values[1:]):
            rows.append({"source": source, "method": method, "metric": metric, "ok": after <= before})
    return pl.DataFrame(rows, schema={"source": pl.String, "method": pl.String, "metric": pl.String, "ok": pl.Boolean})


def _generator_roles(cfg: SeedQAConfig, _roles) -> list[str]:
    mq = cfg.multi_llm_qa
    return [g.role for g in mq.question_generators + mq.answer_generators]


STAGE = Stage(
    "seed_qa",
    run,
    SeedQAConfig,
    inputs=("documents", "passages", "source_qas", "facts", "embeddings"),
    outputs=("qa_seeds", "triplets", "seed_qa_stats"),
    description="QA seeds",
    roles=SEED_ROLES,
    configured_roles=_generator_roles,
    operations=(
        "extract_triplets",
        "reflect_triplets",
        "generate_triplet_qa",
        "judge_seed_qa",
        "generate_questions",
        "group_questions",
        "answer_question",
        "check_factuality",
        "score_answers_listwise",
    ),
    rules={
        "qa_seeds": (Rule("clue_at_offset", "clue_text is the passage text at clue_start", _clue_at_offset),),
        "seed_qa_stats": (
            Rule(
                "funnel_non_increasing",
                "each funnel step of a seed method keeps a subset of the one before",
                _funnel_non_increasing,
            ),
        ),
    },
)
