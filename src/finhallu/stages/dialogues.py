"""dialogues: seeds + retrievals -> faithful multi-turn `dialogues` and `turns` (K-FinHallu §4.2).

Per document: a seed question sampled from its QAs; the dialogue then grows turn by turn. The user
LLM picks each next question among unused QAs of the same document or of the top-K passages
retrieved for the current question (`choose_next_question`) — in the dialogue's language, and
never one whose answer an assistant response already stated — and when none keeps the flow
coherent it writes a new question from the current passage (`write_question`); past turn 4 a
reconfirm turn may ask the assistant to verify an earlier statement. The same call that picks or
writes a question says it as a context-dependent utterance (ellipsis, coreference after the
previous turn; the standalone form stays the retrieval key): one user call per turn. The
assistant LLM answers from the gold passage and clue only (`answer_turn`); unanswerable questions get a refusal (`refuse_turn`) over a context
made entirely of hard negatives. Retrieval is fresh per turn (top-K, K as the retrieve stage used
it). Everything is seeded per document and dialogue.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import cast

import polars as pl

from finhallu.codeversion import code_hash
from finhallu.result_cache import CACHE_FILE, item_digest, open_result_cache
from finhallu.text import sentences
from finhallu.text.morpheme_cache import analyser_id
from finhallu.traced_memo import Reads, TracedMemo, value_digest
from finhallu.llm.parallel import in_flight, map_items
from finhallu.llm.router import LLMRouter
from finhallu.dialogue import assistant, user  # noqa: F401  (register the operations)
from finhallu.schemas.rules import Rule
from finhallu.schemas.rows import ContextEntry, DialoguesRow, HardNegativesRow, RetrievalsRow, TurnsRow
from finhallu.schemas.contracts import CONTRACTS
from finhallu.stages.base import Frames, Stage, StageContext, typed_rows_frame, typed_rows
from finhallu.text.normalize import in_normalized, normalized_join
from pydantic import Field, model_validator
from finhallu.schemas.section import Section


class DialogueConfig(Section):
    min_turns: int = Field(4, ge=1)
    max_turns: int = Field(8, ge=1)
    dialogues_per_document: int = 1
    dialogues_per_filing: int = 3  # 10-K / DART documents are long: several dialogues each
    min_hard_negatives: int = 3  # an unanswerable turn needs at least this many hard negatives
    reconfirm_probability: float = 0.6
    supporting_sentence_probability: float = 0.5
    # The user LLM writes a new question from the current passage when no candidate keeps the
    # flow coherent (a candidate of another document must share this much with the current question).
    write_new_questions: bool = True
    coherence_min_overlap: float = 0.15

    @model_validator(mode="after")
    def _turns(self) -> "DialogueConfig":
        if self.min_turns > self.max_turns:
            raise ValueError(f"dialogues.min_turns ({self.min_turns}) must not exceed dialogues.max_turns ({self.max_turns})")
        return self


USER, ASSISTANT = "user_llm", "assistant_llm"
_KO_RECONFIRM_YES = ["네, 맞습니다. ", "맞습니다. ", "네, 다시 확인해 보니 맞습니다. "]
_EN_RECONFIRM_YES = ["Yes, that's right. ", "Correct. ", "Yes, I double-checked: "]


def _seed_int(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


class _Context:
    """Per-turn retrieval contexts from the retrieve stage's tables."""

    def __init__(self, retrievals: pl.DataFrame, hard_negatives: pl.DataFrame, top_k: int):
        self.top_k = top_k
        ret: dict[str, list[RetrievalsRow]] = {}
        for r in typed_rows(retrievals.sort("seed_id", "rank"), RetrievalsRow):
            ret.setdefault(r["seed_id"], []).append(r)
        neg: dict[str, list[str]] = {}
        for h in typed_rows(
            hard_negatives.filter(pl.col("is_hard_negative")).sort("seed_id", "candidate_rank"), HardNegativesRow
        ):
            neg.setdefault(h["seed_id"], []).append(h["passage_id"])
        self.ret: Mapping[str, list[RetrievalsRow]] = ret
        self.neg: Mapping[str, list[str]] = neg

    def traced(self, reads: Reads) -> "_Context":
        """The same contexts, the seeds looked up logged in `reads` (see finhallu.traced_memo)."""
        view = copy.copy(self)
        view.ret, view.neg = reads.view("retrievals", self.ret), reads.view("hard_negatives", self.neg)
        return view

    def answerable(self, seed: dict, rng) -> list[ContextEntry]:
        ranked = self.ret.get(seed["seed_id"], [])
        positives = [r["passage_id"] for r in ranked if r["is_positive"]]
        others = [r["passage_id"] for r in ranked if not r["is_gold"] and not r["is_positive"]]
        ctx: list[ContextEntry] = [{"passage_id": p, "role": "positive"} for p in positives]
        ctx += [{"passage_id": p, "role": "retrieved"} for p in others]
        ctx = ctx[: self.top_k - 1]
        ctx.insert(rng.randrange(len(ctx) + 1), {"passage_id": seed["passage_id"], "role": "gold"})
        return ctx

    def unanswerable(self, seed: dict) -> list[ContextEntry]:
        return [{"passage_id": p, "role": "hard_negative"} for p in self.neg.get(seed["seed_id"], [])[: self.top_k]]

    def related_seeds(self, seed_id: str, seeds_by_passage: Mapping[str, list[str]]) -> list[str]:
        out = []
        for r in self.ret.get(seed_id, []):
            out.extend(seeds_by_passage.get(r["passage_id"], []))
        return out


def _item(seed: dict, origin: str = "seed", **over) -> dict:
    """One planned question: the seed it stands on and what it asks (a generated question keeps
    its seed's passage, context and hard negatives but asks its own question)."""
    return {
        "seed_id": seed["seed_id"],
        "question": seed["question"],
        "answer": seed["answer"],
        "clue": seed["clue_text"],
        "qa_kind": seed["qa_kind"],
        "answerable": bool(seed["answerable"]),
        "passage_id": seed["passage_id"],
        "origin": origin,
        "reconfirms": None,
        "utterance": "",
        **over,
    }


def said_before(answer: str | None, clue: str | None, responses: list[str]) -> bool:
    """Whether an earlier assistant response already states this answer (a yes/no answer: its clue),
    so that asking it would make the user re-ask what they were told."""
    return said_in(answer, clue, normalized_join(responses))


def said_in(answer: str | None, clue: str | None, said: str) -> bool:
    """`said_before` of responses already joined by `normalized_join` (one join for every candidate)."""
    ans = (answer or "").strip()
    needle = clue if ans in ("예", "네", "아니오", "아니요", "Yes", "No", "yes", "no") else ans
    return len((needle or "").strip()) >= 2 and in_normalized(said, needle)


class _Dialogue:
    """What one dialogue has so far: its document, planned items, realised turns and responses."""

    def __init__(self, doc: dict, did: str, k: int):
        self.doc, self.did, self.k = doc, did, k
        self.items: list[dict] = []
        self.turns: list[TurnsRow] = []
        self.said: dict[int, str] = {}
        self.used_unanswerable = False

    @property
    def responses(self) -> list[str]:
        return [t["response"] for t in self.turns]


def _candidates(dlg: _Dialogue, seed_rows: Mapping, by_doc: Mapping, by_passage: Mapping, contexts: _Context) -> list[str]:
    """Unused seeds of the document or of the passages retrieved for the current question, in the
    dialogue's language (a dialogue never switches language), neither asking the same evidence
    twice nor asking what an assistant response already said."""
    doc, cur = dlg.doc, dlg.items[-1]
    chosen = {i["seed_id"] for i in dlg.items if i["origin"] == "seed"}
    cands = [
        s
        for s in by_doc.get(doc["doc_id"], []) + contexts.related_seeds(cur["seed_id"], by_passage)
        if s not in chosen and seed_rows[s]["split"] == doc["split"] and seed_rows[s]["lang"] == doc["lang"]
    ]
    cands = [s for s in dict.fromkeys(cands) if seed_rows[s]["answerable"] or not dlg.used_unanswerable]
    # Sources often ship paraphrases of one question: never ask for the same evidence twice.
    asked = {(i["passage_id"], i["answer"]) for i in dlg.items}
    cands = [c for c in cands if (seed_rows[c]["passage_id"], seed_rows[c]["answer"]) not in asked]
    said = normalized_join(dlg.responses)
    return [
        c for c in cands if not (seed_rows[c]["answerable"] and said_in(seed_rows[c]["answer"], seed_rows[c]["clue_text"], said))
    ]


def _next_item(
    dlg: _Dialogue,
    seed_rows: Mapping,
    by_doc: Mapping,
    by_passage: Mapping,
    contexts: _Context,
    passages: Mapping,
    cfg: DialogueConfig,
    llm: LLMRouter,
    ctx: StageContext[DialogueConfig],
) -> dict | None:
    """The user's next question: a candidate that keeps the flow, else a new question written
    from the current passage; None ends the dialogue."""
    doc, cur = dlg.doc, dlg.items[-1]
    cands = _candidates(dlg, seed_rows, by_doc, by_passage, contexts)
    nseed = _seed_int(ctx.seed, doc["doc_id"], dlg.k, len(dlg.items))
    choice = None  # no candidate left: nothing to choose, no call
    previous_response = dlg.turns[-1]["response"]
    if cands:
        choice = llm.call(
            USER,
            "choose_next_question",
            current_question=cur["question"],
            history=[i["question"] for i in dlg.items],
            candidates=[
                {"question": seed_rows[c]["question"], "same_document": seed_rows[c]["doc_id"] == doc["doc_id"]} for c in cands
            ],
            previous_response=previous_response,
            lang=doc["lang"],
            rng_seed=nseed,
        )
    if choice is not None and 0 <= choice.index < len(cands):  # None: a failed call (in llm_calls), nothing fits
        return _item(seed_rows[cands[choice.index]], utterance=choice.utterance)
    # The user writes a new question from the passage of the last answered turn (an unanswerable
    # turn has no passage to read on).
    answered = [i for i in dlg.items if i["answerable"]]
    if not cfg.write_new_questions or not answered:
        return None
    base = seed_rows[answered[-1]["seed_id"]]
    same_passage = [i for i in dlg.items if i["passage_id"] == base["passage_id"]]
    new = llm.call(
        USER,
        "write_question",
        passage=passages[base["passage_id"]],
        asked=[x for i in same_passage for x in (i["clue"] or "", i["question"])] + dlg.responses,
        previous_question=cur["question"],
        previous_response=previous_response,
        lang=doc["lang"],
        rng_seed=nseed,
    )
    if new is None or not new.question or said_before(new.answer, new.clue, dlg.responses):
        return None  # nothing left to ask (or the call failed): the dialogue ends here
    return _item(
        base, "generated", question=new.question, answer=new.answer, clue=new.clue, qa_kind="span", utterance=new.utterance
    )


def _reconfirm_item(dlg: _Dialogue, rng) -> dict | None:
    """A reconfirm turn about an earlier answered turn (K-FinHallu: turns n >= 4)."""
    earlier = [n for n, i in enumerate(dlg.items, start=1) if i["answerable"] and i["reconfirms"] is None]
    if not earlier:
        return None
    j = rng.choice(earlier)
    return {**dlg.items[j - 1], "reconfirms": j}


def _plan(rng, cfg: DialogueConfig) -> tuple[int, int | None]:
    """A dialogue's first draws: the number of questions it aims for, and the turn at which it asks
    again what it asked before (a reconfirm turn may come past turn 4), if it does."""
    target = rng.randint(cfg.min_turns, cfg.max_turns)
    reconfirm_at = rng.randint(5, target + 1) if target >= 4 and rng.random() < cfg.reconfirm_probability else None
    return target, reconfirm_at


def _planned_calls(doc: dict, k: int, cfg: DialogueConfig, ctx: StageContext[DialogueConfig]) -> int:
    """The sequential calls `_converse` will make, about: each turn's answer, and the choice of the
    next question between two turns."""
    target, reconfirm_at = _plan(ctx.rng("dialogue", doc["doc_id"], k), cfg)
    turns = min(cfg.max_turns, target + (reconfirm_at is not None))
    return 2 * turns - 1


def _converse(
    doc: dict,
    k: int,
    pool: list[str],
    seed_rows: Mapping,
    by_doc: Mapping,
    by_passage: Mapping,
    contexts: _Context,
    passages: Mapping,
    cfg: DialogueConfig,
    llm: LLMRouter,
    ctx: StageContext[DialogueConfig],
) -> list[TurnsRow] | None:
    """One dialogue, question by question: each next question is chosen knowing what the assistant
    has said. A reconfirm turn may come past turn 4. None when an LLM call failed for good."""
    rng = ctx.rng("dialogue", doc["doc_id"], k)
    target, reconfirm_at = _plan(rng, cfg)
    dlg = _Dialogue(doc, "dlg-" + hashlib.sha256(f"{doc['doc_id']}|{k}".encode()).hexdigest()[:12], k)
    item: dict | None = _item(seed_rows[rng.choice(pool)])
    while item is not None:
        turn = _realise(dlg, item, seed_rows, contexts, passages, cfg, llm, ctx)
        if turn is None:
            return None
        dlg.items.append(item)
        dlg.turns.append(turn)
        dlg.used_unanswerable |= not item["answerable"]
        questions = sum(i["reconfirms"] is None for i in dlg.items)
        if len(dlg.turns) >= cfg.max_turns or (questions >= target and reconfirm_at != len(dlg.turns) + 1):
            break
        item = _reconfirm_item(dlg, rng) if reconfirm_at == len(dlg.turns) + 1 else None
        item = item or _next_item(dlg, seed_rows, by_doc, by_passage, contexts, passages, cfg, llm, ctx)
    return dlg.turns


class _DialogueMemo:
    """Dialogues of earlier builds (offline roles only), each taken again while every seed,
    retrieval, hard-negative list and passage it read is unchanged (finhallu.traced_memo): a rebuild
    after new documents converses again only the dialogues whose reads they touched. The key holds
    the rest of what a dialogue depends on: its document, number and seed pool, the section, the
    build seed, K, the roles' settings and the sentence splitter's analyser (the code: the cache
    version). With remote roles the call cache does this work and llm_calls records every call."""

    def __init__(self, memo: TracedMemo, ctx: StageContext[DialogueConfig], top_k: int):
        self.memo = memo
        roles = [ctx.llm.role_config(r) for r in (USER, ASSISTANT)]
        settings = (json.dumps(ctx.config.model_dump(mode="json"), sort_keys=True), ctx.seed, top_k, analyser_id())
        self.shared = item_digest((settings, value_digest(roles)))

    def key(self, doc: dict, k: int, pool: list[str]) -> bytes:
        return item_digest((self.shared, value_digest(doc), k, pool))


def _memo(ctx: StageContext[DialogueConfig], tables: dict[str, Mapping], contexts: _Context) -> _DialogueMemo | None:
    if ctx.cache_dir is None or not all(ctx.llm.is_offline(r) for r in (USER, ASSISTANT)):
        return None
    cache = open_result_cache(ctx.cache_dir / CACHE_FILE, "dialogues", code_hash(__name__), buffer=2000)
    if cache is None:
        return None
    memo = TracedMemo(cache, {**tables, "retrievals": contexts.ret, "hard_negatives": contexts.neg})
    return _DialogueMemo(memo, ctx, contexts.top_k)


def _conversations(
    planned: list[tuple[dict, int, list[str]]],
    tables: dict[str, Mapping],
    contexts: _Context,
    cfg: DialogueConfig,
    ctx: StageContext[DialogueConfig],
) -> list[list[TurnsRow] | None]:
    """Each planned dialogue's turns (None: an LLM call failed for good), from the memo where its
    reads are unchanged, else conversed now."""
    llm = ctx.llm
    memo = _memo(ctx, tables, contexts)
    keys = [memo.key(doc, k, pool) for doc, k, pool in planned] if memo else []
    known = memo.memo.get(keys) if memo else {}
    todo = [i for i in range(len(planned)) if not keys or keys[i] not in known]
    sentences.load_for(planned[i][0]["lang"] for i in todo)
    # A dialogue's Korean answers are analysed as it ends, into the build's morpheme store, when
    # the stage waits for a remote model anyway: the stages after it (inject reads the answers'
    # entities) find them there. Analysed by inject, they were ~0.5 s of its start at demo scale.
    analyse_answers = in_flight(llm, (USER, ASSISTANT)) > 0

    def converse(i: int) -> list[TurnsRow] | None:
        doc, k, pool = planned[i]
        reads = Reads() if memo is not None else None  # with a memo, what the dialogue reads is logged
        view = {name: reads.view(name, table) for name, table in tables.items()} if reads else tables
        realised = _converse(
            doc,
            k,
            pool,
            view["seeds"],
            view["doc_seeds"],
            view["passage_seeds"],
            contexts.traced(reads) if reads else contexts,
            view["passages"],
            cfg,
            llm,
            ctx,
        )
        if memo is not None and reads is not None and realised is not None:
            memo.memo.put(keys[i], reads, realised)
        if analyse_answers and realised and doc["lang"] == "ko":
            sentences.tokenize_korean_many([t["response"] for t in realised])
        return realised

    # Dialogues advance turn by turn, each on its own; all of them together (see llm.parallel).
    try:
        fresh = map_items(
            converse,
            todo,
            llm,
            (USER, ASSISTANT),
            ctx.progress,
            longest_first=lambda i: _planned_calls(planned[i][0], planned[i][1], cfg, ctx),
        )
    finally:
        if memo is not None:
            memo.memo.cache.close()
    by_index = dict(zip(todo, fresh))
    return [by_index[i] if i in by_index else known[keys[i]] for i in range(len(planned))]


def run(inputs: Frames, ctx: StageContext[DialogueConfig]) -> Frames:
    cfg: DialogueConfig = ctx.config
    seeds = inputs["qa_seeds"]
    passages = dict(zip(inputs["passages"]["passage_id"], inputs["passages"]["text"]))
    top_k = int(cast(int | None, inputs["retrievals"]["rank"].max()) or 10)  # K as the retrieve stage used it
    contexts = _Context(inputs["retrievals"], inputs["hard_negatives"], top_k=top_k)
    seed_rows = {s["seed_id"]: s for s in seeds.iter_rows(named=True)}
    by_doc: dict[str, list[str]] = {}
    by_passage: dict[str, list[str]] = {}
    for s in seeds.sort("seed_id").iter_rows(named=True):
        usable = s["answerable"] or len(contexts.neg.get(s["seed_id"], [])) >= cfg.min_hard_negatives
        if usable:
            by_doc.setdefault(s["doc_id"], []).append(s["seed_id"])
            by_passage.setdefault(s["passage_id"], []).append(s["seed_id"])
    docs = inputs["documents"].select("doc_id", "source", "institution", "lang", "split").sort("doc_id")

    planned = []  # (document, k, its seed pool): every dialogue to converse, in a fixed order
    for doc in docs.iter_rows(named=True):
        pool = [
            sid for sid in by_doc.get(doc["doc_id"], []) if seed_rows[sid]["answerable"] and seed_rows[sid]["lang"] == doc["lang"]
        ]
        per_doc = cfg.dialogues_per_document if doc["source"] == "aihub" else cfg.dialogues_per_filing
        planned += [(doc, k, pool) for k in range(per_doc if pool else 0)]

    tables: dict[str, Mapping] = {"seeds": seed_rows, "doc_seeds": by_doc, "passage_seeds": by_passage, "passages": passages}
    conversed = _conversations(planned, tables, contexts, cfg, ctx)
    dialogues: list[DialoguesRow] = []
    turns: list[TurnsRow] = []
    for (doc, _, _), realised in zip(planned, conversed):
        if realised is None or len(realised) < cfg.min_turns:
            continue  # too short, or an LLM call failed for good (recorded in llm_calls): not built
        turns.extend(realised)
        dialogues.append(
            {
                "dialogue_id": realised[0]["dialogue_id"],
                "doc_id": doc["doc_id"],
                "source": doc["source"],
                "institution": doc["institution"],
                "lang": doc["lang"],
                "split": doc["split"],
                "n_turns": len(realised),
                "seed_ids": [t["seed_id"] for t in realised],
                "has_reconfirm": any(t["reconfirms_turn"] is not None for t in realised),
            }
        )
    return {
        "dialogues": typed_rows_frame(dialogues, CONTRACTS["dialogues"].columns, "dialogue_id"),
        "turns": typed_rows_frame(turns, CONTRACTS["turns"].columns, ["dialogue_id", "turn_index"]),
    }


def _user_query(it: dict, lang: str, tseed: int, llm: LLMRouter) -> str | None:
    """The user's utterance: a reconfirm question, or the utterance the call that chose the question
    wrote (the opening question, and one whose utterance came back empty, stand as they are)."""
    if it["reconfirms"] is None:
        return it["utterance"].strip() or it["question"]
    out = llm.call(
        USER, "reconfirm_turn", earlier_question=it["question"], earlier_answer=it["answer"], lang=lang, rng_seed=tseed
    )
    return None if out is None else out.text


def _realise(
    dlg: _Dialogue,
    it: dict,
    seed_rows: Mapping,
    contexts: _Context,
    passages: Mapping,
    cfg: DialogueConfig,
    llm: LLMRouter,
    ctx: StageContext[DialogueConfig],
) -> TurnsRow | None:
    """The user's utterance and the assistant's response of the dialogue's next turn (None when an
    LLM call failed for good: a dialogue with a hole in it is no dialogue)."""
    did, t = dlg.did, len(dlg.turns) + 1
    seed = seed_rows[it["seed_id"]]
    lang, tseed, trng = seed["lang"], _seed_int(ctx.seed, did, t), ctx.rng("turn", did, t)
    query = _user_query(it, lang, tseed, llm)
    if query is None:
        return None
    if it["reconfirms"] is not None:
        response = trng.choice(_KO_RECONFIRM_YES if lang == "ko" else _EN_RECONFIRM_YES) + dlg.said[it["reconfirms"]]
        context, kind = contexts.answerable(seed, trng), "reconfirm"
    elif it["answerable"]:
        ans = llm.call(
            ASSISTANT,
            "answer_turn",
            question=it["question"],
            passage=passages[it["passage_id"]],
            clue=it["clue"],
            answer=it["answer"],
            qa_kind=it["qa_kind"],
            lang=lang,
            rng_seed=tseed,
            support_probability=cfg.supporting_sentence_probability,
        )
        if ans is None:
            return None
        response, dlg.said[t] = ans.response, ans.evidence
        context, kind = contexts.answerable(seed, trng), "question"
    else:
        refusal = llm.call(ASSISTANT, "refuse_turn", question=it["question"], lang=lang, rng_seed=tseed)
        if refusal is None:
            return None
        response, context, kind = refusal.text, contexts.unanswerable(seed), "question"
    return {
        "turn_id": f"{did}#t{t}",
        "dialogue_id": did,
        "turn_index": t,
        "seed_id": it["seed_id"],
        "kind": kind,
        "reconfirms_turn": it["reconfirms"],
        "standalone_query": it["question"],
        "query": query,
        "response": response,
        "answerable": it["answerable"],
        "gold_passage_id": it["passage_id"] if it["answerable"] else None,
        "clue_text": it["clue"],
        "answer": it["answer"],
        "context": context,
        "origin": it["origin"],
    }


# ---- gate rules -------------------------------------------------------------------------------
def _dialogue_turn_count(df: pl.DataFrame, nb: dict) -> pl.DataFrame:
    counts = nb["turns"].group_by("dialogue_id").agg(actual=pl.len(), max_index=pl.col("turn_index").max())
    return (
        df.select("dialogue_id", "n_turns")
        .join(counts, on="dialogue_id", how="left")
        .with_columns(ok=(pl.col("actual") == pl.col("n_turns")) & (pl.col("max_index") == pl.col("n_turns")))
        .fill_null(False)
    )


def _turn_context_matches_answerability(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    rows = []
    for r in df.select("turn_id", "answerable", "gold_passage_id", "context").iter_rows(named=True):
        roles = [c["role"] for c in r["context"]]
        pids = [c["passage_id"] for c in r["context"]]
        if r["answerable"]:
            ok = r["gold_passage_id"] in pids and "hard_negative" not in roles
        else:
            ok = len(roles) > 0 and all(x == "hard_negative" for x in roles)
        rows.append({"turn_id": r["turn_id"], "answerable": r["answerable"], "ok": ok})
    return pl.DataFrame(rows, schema={"turn_id": pl.String, "answerable": pl.Boolean, "ok": pl.Boolean})


STAGE = Stage(
    "dialogues",
    run,
    DialogueConfig,
    inputs=("documents", "passages", "qa_seeds", "retrievals", "hard_negatives"),
    outputs=("dialogues", "turns"),
    description="faithful multi-turn dialogues",
    roles=(USER, ASSISTANT),
    operations=("choose_next_question", "write_question", "answer_turn", "refuse_turn", "reconfirm_turn"),
    rules={
        "dialogues": (Rule("turn_count_matches", "n_turns equals the turns published for the dialogue", _dialogue_turn_count),),
        "turns": (
            Rule(
                "context_matches_answerability",
                "answerable turns show the gold passage and no hard negative; unanswerable turns show only hard negatives",
                _turn_context_matches_answerability,
            ),
        ),
    },
)
