"""retrieve: standalone questions -> top-K `retrievals` and two-step-filtered `hard_negatives`.

Search is exact inner product (FAISS IndexFlatIP over L2-normalized vectors) within the
seed's own split, so no passage of another split can reach a sample (no leakage).
Hard negatives (K-FinHallu §4.2, App. C): candidates are the top-ranked passages other than
the gold one and same-document passages holding the clue; step 1 (lexical) rejects any that
contain the clue or the answer, after number/unit/spacing normalization; step 2 is the
`judge_answerability` operation (LLM backend, or rules: the passage still covers most of the
clue's content words), asked lazily in rank order until a seed has K hard negatives (the stages
read no more). An answerable seed's candidates serve only False Acceptance: by default
(`retrieve.judge_answerable_seeds: on_demand`) the inject stage judges them, for the turns it
picks, and their rows here say so (`judge` "deferred: ..."). Every candidate's verdicts are kept
(`unanswerable` None: never asked here); `is_hard_negative` marks survivors.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import polars as pl

from finhallu.codeversion import code_hash
from finhallu.result_cache import CACHE_FILE, cached_map, item_digest, open_result_cache
from finhallu.answerability import DEFERRED, JUDGE, HardNegativeConfig, judge_kwargs, judge_lazily, step1_verdicts
from finhallu.schemas.rows import HardNegativesRow, RetrievalsRow
from finhallu.schemas.rules import Rule
from finhallu.taxonomy import answer_is_checkable
from finhallu.schemas.contracts import CONTRACTS
from finhallu.stages.base import Frames, Stage, StageContext, typed_rows_frame
from finhallu.embedders.hybrid import HybridEmbedder
from finhallu.embedders import embedder_for_model
from finhallu.embedders.cache import home_vectors
from finhallu.stages.retrieve.index import IndexConfig, build_index
from finhallu.text.normalize import contains_normalized
from pydantic import Field, model_validator


class RetrieveConfig(HardNegativeConfig, IndexConfig):
    """`retrieve:`: top-K search, the hard-negative filter's step 2 and the index."""

    top_k: int = Field(10, ge=1)
    candidate_pool: int = Field(40, ge=1)

    @model_validator(mode="after")
    def _pool_holds_top_k(self) -> "RetrieveConfig":
        if self.candidate_pool < self.top_k:
            raise ValueError(f"retrieve.candidate_pool ({self.candidate_pool}) is smaller than top_k ({self.top_k})")
        return self


# What the candidates' checks read of a seed.
_CHECKED_FIELDS = ("passage_id", "doc_id", "answerable", "clue_text", "answer", "qa_kind")


def _checks(seed: dict, ranked: list[tuple[int, float]], pids: list, texts: list, docs: list, top_k: int) -> tuple:
    """A seed's lexical checks over its ranked passages: whether each of the top K holds the clue
    (a positive), and per candidate (every ranked passage but the gold one and same-document passages
    with the clue) its rank and step 1's (clue absent, answer absent)."""
    positives = [
        not (pids[j] == seed["passage_id"] and seed["answerable"])
        and seed["answerable"]
        and contains_normalized(texts[j], seed["clue_text"])
        for j, _ in ranked[:top_k]
    ]
    candidates = []
    for rank, (j, _) in enumerate(ranked, start=1):
        if seed["answerable"] and pids[j] == seed["passage_id"]:
            continue
        if seed["answerable"] and docs[j] == seed["doc_id"] and contains_normalized(texts[j], seed["clue_text"]):
            continue
        candidates.append((rank, *step1_verdicts(texts[j], seed)))
    return positives, candidates


def _checked(rows: list[dict], ranked_of: list, pids: list, texts: list, docs: list, top_k: int, cache_dir: Path | None) -> list:
    """`_checks` per seed, those of earlier builds taken from the home's result cache: each keyed by
    what it reads (the seed's fields, its ranked passages' ids, documents and texts, K), so a
    rebuild after new documents checks again only the seeds whose rankings changed."""
    memo = open_result_cache(cache_dir / CACHE_FILE, "retrieve-checks", code_hash(__name__), buffer=2000) if cache_dir else None
    text_keys: dict[int, bytes] = {}  # a passage's text digest, made once (it is in many seeds' rankings)

    def text_key(j: int) -> bytes:
        if j not in text_keys:
            text_keys[j] = item_digest(texts[j])
        return text_keys[j]

    def key(i: int) -> tuple:
        return [rows[i][f] for f in _CHECKED_FIELDS], [(pids[j], docs[j], text_key(j)) for j, _ in ranked_of[i]], top_k

    def check(todo: list[int]) -> list:
        return [_checks(rows[i], ranked_of[i], pids, texts, docs, top_k) for i in todo]

    try:
        return cached_map(check, range(len(rows)), memo, keys=key)[0]
    finally:
        if memo is not None:
            memo.close()


def run(inputs: Frames, ctx: StageContext[RetrieveConfig]) -> Frames:
    cfg: RetrieveConfig = ctx.config
    passages = (
        inputs["passages"].join(inputs["embeddings"].select("passage_id", "vector", "model"), on="passage_id").sort("passage_id")
    )  # join order is unspecified; index positions must not depend on it
    seeds = inputs["qa_seeds"]
    model = passages["model"][0]
    encoder = embedder_for_model(model)
    ret_rows: list[RetrievalsRow] = []
    neg_rows: list[HardNegativesRow] = []
    step2: list[tuple[dict, dict]] = []
    llm = ctx.llm
    judge_name = llm.backend(JUDGE)
    done = 0
    for split in sorted(seeds["split"].unique().to_list()):
        ps = passages.filter(pl.col("split") == split)
        ss = seeds.filter(pl.col("split") == split)
        if ps.height == 0 or ss.height == 0:
            continue
        mat = np.asarray(ps["vector"].to_list(), dtype=np.float32)
        pool = min(cfg.candidate_pool, ps.height)
        questions = ss["question"].to_list()  # the standalone question is the retrieval key
        if isinstance(encoder, HybridEmbedder):  # hybrid: dense vectors fused with BM25 over the passage texts
            idx, scores = encoder.build_index(ps["text"].to_list(), mat).search(questions, pool)
        else:  # FAISS: exact inner product, ANN past cfg.ann_threshold; persisted under the home cache
            index = build_index(
                mat, ps["passage_id"].to_list(), model_id=model, cfg=cfg, cache_dir=ctx.cache_dir, meta={"split": split}
            )
            scores, idx = index.search_rows(home_vectors(encoder, questions, ctx.cache_dir, queries=True), pool)
        pids = ps["passage_id"].to_list()
        texts = ps["text"].to_list()
        docs = ps["doc_id"].to_list()
        rows = list(ss.iter_rows(named=True))
        ranked_of = [[(int(j), float(s)) for j, s in zip(idx[i], scores[i]) if j >= 0] for i in range(len(rows))]
        checked = _checked(rows, ranked_of, pids, texts, docs, cfg.top_k, ctx.cache_dir)
        for seed, ranked, (positives, candidates) in zip(rows, ranked_of, checked):
            for rank, ((j, s), positive) in enumerate(zip(ranked[: cfg.top_k], positives), start=1):
                ret_rows.append(
                    {
                        "seed_id": seed["seed_id"],
                        "rank": rank,
                        "passage_id": pids[j],
                        "score": s,
                        "is_gold": pids[j] == seed["passage_id"] and seed["answerable"],
                        "is_positive": positive,
                    }
                )
            for rank, clue_absent, answer_absent in candidates:
                j, s = ranked[rank - 1]
                neg_rows.append(
                    {
                        "seed_id": seed["seed_id"],
                        "passage_id": pids[j],
                        "candidate_rank": rank,
                        "score": s,
                        "clue_absent": clue_absent,
                        "answer_absent": answer_absent,
                        "unanswerable": None,
                        "is_hard_negative": False,
                        "judge": judge_name,
                    }
                )
                if clue_absent and answer_absent:
                    if seed["answerable"] and cfg.judge_answerable_seeds == "on_demand":
                        neg_rows[-1]["judge"] = DEFERRED
                    else:
                        # judge_lazily takes the row as a plain dict (it is one) and fills in its verdict
                        step2.append((cast(dict, neg_rows[-1]), judge_kwargs(seed, texts[j], cfg)))
            done += 1
            ctx.progress(done, seeds.height)
    judge_lazily(step2, llm, judge_name, cfg.top_k, cfg.judge_lazily, cfg.judge_round_margin)
    return {
        "retrievals": typed_rows_frame(ret_rows, CONTRACTS["retrievals"].columns, ["seed_id", "rank"]),
        "hard_negatives": typed_rows_frame(neg_rows, CONTRACTS["hard_negatives"].columns, ["seed_id", "candidate_rank"]),
    }


# ---- gate rules -------------------------------------------------------------------------------
def _hard_negative_lacks_clue(df: pl.DataFrame, nb: dict) -> pl.DataFrame:
    seeds = nb["qa_seeds"].select("seed_id", "clue_text", "answer", "answerable", "qa_kind")
    texts = nb["passages"].select("passage_id", "text")
    joined = df.filter(pl.col("is_hard_negative")).join(seeds, on="seed_id", how="left").join(texts, on="passage_id", how="left")
    ok = []
    for r in joined.iter_rows(named=True):
        clue_in = bool(r["clue_text"]) and contains_normalized(r["text"], r["clue_text"])
        answer_in = answer_is_checkable(r) and contains_normalized(r["text"], r["answer"])
        ok.append(not clue_in and not answer_in)
    return joined.select("seed_id", "passage_id").with_columns(ok=pl.Series(ok, dtype=pl.Boolean))


def _verdicts_consistent(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    """A hard negative passed both steps; step 2 ran only where step 1 passed, and (judged lazily,
    in rank order) a seed's step-1 candidate is left unjudged only behind all its judged ones."""
    step1 = pl.col("clue_absent") & pl.col("answer_absent")
    judged = pl.col("unanswerable").is_not_null()
    last_judged = pl.when(judged).then(pl.col("candidate_rank")).max().over("seed_id").fill_null(-1)
    return df.select(
        "seed_id",
        "passage_id",
        ok=(
            (pl.col("is_hard_negative") == (step1 & pl.col("unanswerable").fill_null(False)))
            & (~judged | step1)
            & (judged | ~step1 | (pl.col("candidate_rank") > last_judged))
        ),
    )


STAGE = Stage(
    "retrieve",
    run,
    RetrieveConfig,
    inputs=("passages", "embeddings", "qa_seeds"),
    outputs=("retrievals", "hard_negatives"),
    description="top-K retrieval and hard negatives",
    roles=(JUDGE,),
    operations=("judge_answerability",),
    rules={
        "hard_negatives": (
            Rule(
                "hard_negative_lacks_clue",
                "a hard negative contains neither the clue nor the answer (normalized)",
                _hard_negative_lacks_clue,
            ),
            Rule(
                "verdicts_consistent",
                "is_hard_negative = step 1 and step 2 passed; step 2 asked in rank order",
                _verdicts_consistent,
            ),
        )
    },
)
