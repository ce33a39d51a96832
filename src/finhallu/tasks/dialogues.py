"""dialogues: seeds + retrievals -> faithful multi-turn `dialogues` and `turns` (K-FinHallu §4.1).

Per document: a seed question; the user side picks each next question among unused seeds of
the same document or of the passages retrieved for the current question (the most related
one, so the flow stays coherent); past turn 4 a reconfirm turn may ask the assistant to
verify an earlier statement; every standalone question is rewritten into a
context-dependent utterance (the standalone form stays the retrieval key). The assistant
answers from the gold passage and clue only; unanswerable questions get a refusal over a
context made entirely of hard negatives. Retrieval is fresh per turn (top-K, K=10).
"""

from __future__ import annotations

import hashlib

import polars as pl

from finhallu.config import DialogueConfig
from finhallu.llm.router import LLMRouter
from finhallu.tasks import responses  # noqa: F401  (registers the dialogue operations)
from finhallu.tasks.base import Frames, StageContext, rows_frame
from finhallu.tasks.textnorm import jaccard

USER, ASSISTANT = "user_llm", "assistant_llm"
_KO_RECONFIRM_YES = ["네, 맞습니다. ", "맞습니다. ", "네, 다시 확인해 보니 맞습니다. "]
_EN_RECONFIRM_YES = ["Yes, that's right. ", "Correct. ", "Yes, I double-checked: "]


def _seed_int(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


class _Context:
    """Per-turn retrieval contexts from the retrieve stage's tables."""

    def __init__(self, retrievals: pl.DataFrame, hard_negatives: pl.DataFrame, top_k: int):
        self.top_k = top_k
        self.ret: dict[str, list[dict]] = {}
        for r in retrievals.sort("seed_id", "rank").iter_rows(named=True):
            self.ret.setdefault(r["seed_id"], []).append(r)
        self.neg: dict[str, list[str]] = {}
        for r in hard_negatives.filter(pl.col("is_hard_negative")).sort("seed_id", "candidate_rank").iter_rows(named=True):
            self.neg.setdefault(r["seed_id"], []).append(r["passage_id"])

    def answerable(self, seed: dict, rng) -> list[dict]:
        ranked = self.ret.get(seed["seed_id"], [])
        positives = [r["passage_id"] for r in ranked if r["is_positive"]]
        others = [r["passage_id"] for r in ranked if not r["is_gold"] and not r["is_positive"]]
        ctx = [{"passage_id": p, "role": "positive"} for p in positives]
        ctx += [{"passage_id": p, "role": "retrieved"} for p in others]
        ctx = ctx[: self.top_k - 1]
        ctx.insert(rng.randrange(len(ctx) + 1), {"passage_id": seed["passage_id"], "role": "gold"})
        return ctx

    def unanswerable(self, seed: dict) -> list[dict]:
        return [{"passage_id": p, "role": "hard_negative"} for p in self.neg.get(seed["seed_id"], [])[: self.top_k]]

    def related_seeds(self, seed_id: str, seeds_by_passage: dict[str, list[str]]) -> list[str]:
        out = []
        for r in self.ret.get(seed_id, []):
            out.extend(seeds_by_passage.get(r["passage_id"], []))
        return out


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: DialogueConfig = ctx.config
    llm = LLMRouter(ctx.roles)
    seeds = inputs["qa_seeds"]
    passages = {r["passage_id"]: r for r in inputs["passages"].select("passage_id", "text").iter_rows(named=True)}
    top_k = int(inputs["retrievals"]["rank"].max() or 10)  # K as the retrieve stage used it
    contexts = _Context(inputs["retrievals"], inputs["hard_negatives"], top_k=top_k)
    min_negs = cfg.min_hard_negatives
    seed_rows = {s["seed_id"]: s for s in seeds.iter_rows(named=True)}
    by_doc: dict[str, list[str]] = {}
    by_passage: dict[str, list[str]] = {}
    for s in seeds.sort("seed_id").iter_rows(named=True):
        usable = s["answerable"] or len(contexts.neg.get(s["seed_id"], [])) >= min_negs
        if usable:
            by_doc.setdefault(s["doc_id"], []).append(s["seed_id"])
            by_passage.setdefault(s["passage_id"], []).append(s["seed_id"])
    docs = inputs["documents"].select("doc_id", "source", "institution", "lang", "split").sort("doc_id")

    dialogues, turns = [], []
    for n_doc, doc in enumerate(docs.iter_rows(named=True)):
        pool = [sid for sid in by_doc.get(doc["doc_id"], []) if seed_rows[sid]["answerable"]]
        per_doc = cfg.dialogues_per_document if doc["source"] == "aihub" else cfg.dialogues_per_filing
        for k in range(per_doc):
            rng = ctx.rng("dialogue", doc["doc_id"], k)
            if not pool:
                break
            target = rng.randint(cfg.min_turns, cfg.max_turns)
            chosen = [rng.choice(pool)]
            used_unanswerable = False
            while len(chosen) < target:
                cur = seed_rows[chosen[-1]]
                cands = [s for s in by_doc.get(doc["doc_id"], []) + contexts.related_seeds(cur["seed_id"], by_passage)
                         if s not in chosen and seed_rows[s]["split"] == doc["split"]]
                cands = [s for s in dict.fromkeys(cands) if seed_rows[s]["answerable"] or not used_unanswerable]
                # Sources often ship paraphrases of one question: never ask for the same evidence twice.
                asked = {(seed_rows[c]["passage_id"], seed_rows[c]["answer"]) for c in chosen}
                cands = [c for c in cands if (seed_rows[c]["passage_id"], seed_rows[c]["answer"]) not in asked]
                if not cands:
                    break  # no candidate fits: the dialogue ends here
                # choose_next_question (rules): most related candidates first, then a seeded pick among the top 3
                cands.sort(key=lambda s: (-(seed_rows[s]["doc_id"] == doc["doc_id"]),
                                          -jaccard(seed_rows[s]["question"], cur["question"]), s))
                nxt = rng.choice(cands[:3])
                used_unanswerable |= not seed_rows[nxt]["answerable"]
                chosen.append(nxt)
            # Reconfirm turn past turn 4, at a random position, about an earlier answerable turn.
            plan: list[tuple[str, int | None]] = [(s, None) for s in chosen]
            if len(plan) >= 4 and len(plan) < cfg.max_turns and rng.random() < cfg.reconfirm_probability:
                pos = rng.randint(4, len(plan))  # insert as turn pos+1 >= 5
                earlier = [i for i in range(pos) if seed_rows[plan[i][0]]["answerable"]]
                if earlier:
                    j = rng.choice(earlier)
                    plan.insert(pos, (plan[j][0], j + 1))
            if len(plan) < cfg.min_turns:
                continue
            did = "dlg-" + hashlib.sha256(f"{doc['doc_id']}|{k}".encode()).hexdigest()[:12]
            prev_q = None
            said: dict[int, dict] = {}
            for t, (sid, reconf) in enumerate(plan, start=1):
                s = seed_rows[sid]
                tseed = _seed_int(ctx.seed, did, t)
                lang = s["lang"]
                trng = ctx.rng("turn", did, t)
                if reconf is not None:
                    first = said[reconf]
                    query = llm.call(USER, "reconfirm_turn", earlier_question=s["question"],
                                     earlier_answer=s["answer"], lang=lang, rng_seed=tseed).text
                    yes = trng.choice(_KO_RECONFIRM_YES if lang == "ko" else _EN_RECONFIRM_YES)
                    response = yes + first["evidence"]
                    context = contexts.answerable(s, trng)
                    kind = "reconfirm"
                elif s["answerable"]:
                    query = llm.call(USER, "rewrite_query", question=s["question"], previous_question=prev_q,
                                     lang=lang, rng_seed=tseed).text
                    ans = llm.call(ASSISTANT, "answer_turn", question=s["question"],
                                   passage=passages[s["passage_id"]]["text"], clue=s["clue_text"], answer=s["answer"],
                                   qa_kind=s["qa_kind"], lang=lang, rng_seed=tseed,
                                   support_probability=cfg.supporting_sentence_probability)
                    response = ans.response
                    said[t] = {"evidence": ans.evidence}
                    context = contexts.answerable(s, trng)
                    kind = "question"
                else:
                    query = llm.call(USER, "rewrite_query", question=s["question"], previous_question=prev_q,
                                     lang=lang, rng_seed=tseed).text
                    response = llm.call(ASSISTANT, "refuse_turn", question=s["question"], lang=lang,
                                        rng_seed=tseed).text
                    context = contexts.unanswerable(s)
                    kind = "question"
                turns.append({
                    "turn_id": f"{did}#t{t}", "dialogue_id": did, "turn_index": t, "seed_id": sid, "kind": kind,
                    "reconfirms_turn": reconf, "standalone_query": s["question"], "query": query,
                    "response": response, "answerable": bool(s["answerable"]),
                    "gold_passage_id": s["passage_id"] if s["answerable"] else None,
                    "clue_text": s["clue_text"], "answer": s["answer"], "context": context,
                })
                prev_q = s["question"]
            dialogues.append({
                "dialogue_id": did, "doc_id": doc["doc_id"], "source": doc["source"], "institution": doc["institution"],
                "lang": doc["lang"], "split": doc["split"], "n_turns": len(plan), "seed_ids": [p[0] for p in plan],
                "has_reconfirm": any(r is not None for _, r in plan),
            })
        ctx.progress(n_doc + 1, docs.height)
    return {"dialogues": rows_frame(dialogues, "dialogue_id"),
            "turns": rows_frame(turns, ["dialogue_id", "turn_index"])}
