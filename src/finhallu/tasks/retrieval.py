"""retrieve: standalone questions -> top-K `retrievals` and two-step-filtered `hard_negatives`.

Search is exact inner product (FAISS IndexFlatIP over L2-normalized vectors) within the
seed's own split, so no passage of another split can reach a sample (no leakage).
Hard negatives (K-FinHallu §4.2, App. C): candidates are the top-ranked passages other than
the gold one and same-document passages holding the clue; step 1 (lexical) rejects any that
contain the clue or the answer, after number/unit/spacing normalization; step 2 is the
`judge_answerability` operation (LLM backend, or rules: the passage still covers most of the
clue's content words), asked lazily in rank order until a seed has K hard negatives (the stages
read no more). Every candidate's verdicts are kept (`unanswerable` None: never asked, not needed);
`is_hard_negative` marks survivors.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import BaseModel

from finhallu.config import RetrieveConfig
from finhallu.llm.operations import operation
from finhallu.llm.router import LLMRouter
from finhallu.tasks.base import Frames, StageContext, rows_frame
from finhallu.tasks.embedders.hybrid import HybridEmbedder
from finhallu.tasks.embedding import embedder_for_model
from finhallu.tasks.index import build_index
from finhallu.taxonomy import answer_is_checkable
from finhallu.text.normalize import contains_normalized
from finhallu.text.quantities import quantities, states_value
from finhallu.text.words import content_words


JUDGE = "answerability_judge"


def clue_coverage(passage: str, clue: str | None) -> float:
    words = set(content_words(clue or ""))
    if not words:
        return 0.0
    have = set(content_words(passage))
    return len(words & have) / len(words)


class AnswerabilityOut(BaseModel):
    answerable: bool
    reason: str


@operation("judge_answerability", AnswerabilityOut)
def judge_answerability(question: str, passage: str, clue: str | None, answer: str | None, lang: str,
                        max_coverage: float = 0.6) -> AnswerabilityOut:
    """Step 2, rules backend: a passage that still holds most of the clue's content words could
    answer the question (paraphrased evidence), so it is no hard negative."""
    cov = clue_coverage(passage, clue)
    return AnswerabilityOut(answerable=cov >= max_coverage, reason=f"clue content-word coverage {cov:.2f}")


def step1_verdicts(text: str, seed: dict) -> tuple[bool, bool]:
    """Step 1 (lexical): (clue absent, answer absent) after number/unit/spacing normalization. An
    answer amount counts as present at any scale the passage could state it in ("4조 1,500억 원" is
    "4,150,000" under "(단위 : 백만원)", or in a table cut from its note)."""
    clue_absent = not (seed["clue_text"] and contains_normalized(text, seed["clue_text"]))
    checkable = answer_is_checkable(seed)
    answer_absent = not (checkable and (contains_normalized(text, seed["answer"]) or any(
        states_value(text, q, unknown_scale=True) for q in _answer_amounts(seed["answer"]))))
    return clue_absent, answer_absent


def _answer_amounts(answer: str) -> list:
    """The amounts of an answer that identify it (money, or a bare figure of 4+ digits)."""
    return [q for q in quantities(answer or "") if q.unit in ("KRW", "USD") or (not q.unit and abs(q.value) >= 1000)]


def _judge(step2: list[tuple[dict, dict]], llm: LLMRouter, judge_name: str, cfg: RetrieveConfig) -> None:
    """Step 2 on the candidates that passed step 1 (rows in rank order per seed), in concurrent (or
    batch) rounds: lazily, each round asks per seed for the hard negatives it still lacks (plus a
    margin); rows never asked keep `unanswerable` None ("not needed"), which is no hard negative."""
    queues: dict[str, list[tuple[dict, dict]]] = {}
    for row, kw in step2:
        queues.setdefault(row["seed_id"], []).append((row, kw))
    found = dict.fromkeys(queues, 0)
    while True:
        wave = []
        for sid, queue in queues.items():
            want = len(queue) if not cfg.judge_lazily else max(0, cfg.top_k - found[sid])
            if want:
                take = want + cfg.judge_round_margin if cfg.judge_lazily else want
                wave += queue[:take]
                del queue[:take]
        if not wave:
            for row, _ in step2:
                if row["unanswerable"] is None:
                    row["judge"] = "not asked (the seed had its hard negatives)"
            return
        verdicts = llm.call_many(JUDGE, "judge_answerability", [kw for _, kw in wave])
        for (row, _), verdict in zip(wave, verdicts):
            if verdict is None:  # the judge failed for good (recorded in llm_calls): when in doubt, no hard negative
                row["unanswerable"], row["judge"] = False, f"{judge_name} (failed)"
            else:
                row["unanswerable"] = not verdict.answerable
            row["is_hard_negative"] = row["unanswerable"]
            found[row["seed_id"]] += row["unanswerable"]


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: RetrieveConfig = ctx.config
    passages = (inputs["passages"].join(inputs["embeddings"].select("passage_id", "vector", "model"), on="passage_id")
                .sort("passage_id"))  # join order is unspecified; index positions must not depend on it
    seeds = inputs["qa_seeds"]
    model = passages["model"][0]
    encoder = embedder_for_model(model)
    ret_rows, neg_rows = [], []
    step2: list[tuple[dict, dict]] = []
    llm = LLMRouter(ctx.roles)
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
            index = build_index(mat, ps["passage_id"].to_list(), model_id=model, cfg=cfg, cache_dir=ctx.cache_dir,
                                meta={"split": split})
            scores, idx = index.search_rows(encoder.encode_queries(questions), pool)
        pids = ps["passage_id"].to_list()
        texts = ps["text"].to_list()
        docs = ps["doc_id"].to_list()
        for i, seed in enumerate(ss.iter_rows(named=True)):
            ranked = [(int(j), float(s)) for j, s in zip(idx[i], scores[i]) if j >= 0]
            for rank, (j, s) in enumerate(ranked[: cfg.top_k], start=1):
                gold = pids[j] == seed["passage_id"] and seed["answerable"]
                positive = (not gold) and seed["answerable"] and contains_normalized(texts[j], seed["clue_text"])
                ret_rows.append({"seed_id": seed["seed_id"], "rank": rank, "passage_id": pids[j], "score": s,
                                 "is_gold": gold, "is_positive": positive})
            for rank, (j, s) in enumerate(ranked, start=1):
                # Candidates: ranked passages other than the gold one and same-document passages with the clue.
                if seed["answerable"] and pids[j] == seed["passage_id"]:
                    continue
                if seed["answerable"] and docs[j] == seed["doc_id"] and contains_normalized(texts[j], seed["clue_text"]):
                    continue
                clue_absent, answer_absent = step1_verdicts(texts[j], seed)
                neg_rows.append({"seed_id": seed["seed_id"], "passage_id": pids[j], "candidate_rank": rank, "score": s,
                                 "clue_absent": clue_absent, "answer_absent": answer_absent,
                                 "unanswerable": None, "is_hard_negative": False, "judge": judge_name})
                if clue_absent and answer_absent:
                    step2.append((neg_rows[-1], {
                        "question": seed["question"], "passage": texts[j], "clue": seed["clue_text"],
                        "answer": seed["answer"], "lang": seed["lang"], "max_coverage": cfg.max_clue_coverage}))
            done += 1
            ctx.progress(done, seeds.height)
    _judge(step2, llm, judge_name, cfg)
    return {
        "retrievals": rows_frame(ret_rows, ["seed_id", "rank"]),
        "hard_negatives": rows_frame(neg_rows, ["seed_id", "candidate_rank"]),
    }
