"""Retrieve stage: top-K per split, and hard negatives that really lack the evidence."""

import polars as pl

from finhallu.embedders import EmbedConfig
from finhallu.stages.retrieve import RetrieveConfig
from finhallu.schemas.contracts import CONTRACTS
from finhallu.stages.pipeline import table_rules
from finhallu.stages import embed as embedding
from finhallu.stages import retrieve as retrieval
from finhallu.stages.base import StageContext

TEXTS = {
    "pA": ("dA", "예금자보호 한도는 2025년 9월 1일부터 1인당 1억 원으로 상향되었습니다. 이자도 포함됩니다."),
    "pB": ("dB", "예금보험공사 안내: 예금자보호 한도는 금융회사별 1인당 100,000,000원입니다."),  # same fact, other spelling
    "pC": ("dC", "예금자보호 제도는 금융회사가 파산했을 때 예금보험공사가 예금을 대신 돌려주는 제도입니다."),
    "pD": ("dD", "신용카드 연회비는 카드를 해지하면 남은 기간만큼 돌려받을 수 있습니다."),
    "pE": ("dE", "예금자보호 대상 상품과 비보호 상품을 구분하는 방법을 알아봅니다. 펀드는 보호되지 않습니다."),
}


def _passages(split="train"):
    return pl.DataFrame(
        [
            {
                "passage_id": pid,
                "doc_id": d,
                "block_id": f"{d}-b",
                "source": "aihub",
                "institution": d,
                "lang": "ko",
                "split": split,
                "doc_type": "x",
                "title": "t",
                "section_path": "s",
                "kind": "text",
                "chunk_index": 0,
                "chunk_total": 1,
                "char_start": 0,
                "text": t,
                "token_count": 10,
                "tokenizer": "approx",
            }
            for pid, (d, t) in TEXTS.items()
        ]
    )


def _seed(sid="s1", answerable=True, passage="pA", doc="dA"):
    return {
        "seed_id": sid,
        "passage_id": passage,
        "doc_id": doc,
        "source": "aihub",
        "institution": doc,
        "lang": "ko",
        "split": "train",
        "question": "예금자보호 한도는 1인당 얼마인가요?",
        "answer": "1억 원" if answerable else "2억 원",
        "clue_text": "예금자보호 한도는 2025년 9월 1일부터 1인당 1억 원으로 상향되었습니다." if answerable else None,
        "clue_start": 0 if answerable else None,
        "answer_start": 36 if answerable else None,
        "qa_kind": "span",
        "answerable": answerable,
        "method": "aihub_given",
        "origin_id": sid,
    }


def _run(seeds, top_k=3, judge_answerable_seeds="in_retrieve"):
    passages = _passages()
    emb = embedding.run({"passages": passages}, StageContext(stage="embed", config=EmbedConfig(), seed=1))["embeddings"]
    cfg = RetrieveConfig(top_k=top_k, candidate_pool=10, judge_answerable_seeds=judge_answerable_seeds)
    ctx = StageContext(stage="retrieve", config=cfg, seed=1)
    out = retrieval.run({"passages": passages, "embeddings": emb, "qa_seeds": pl.DataFrame(seeds)}, ctx)
    return passages, out


def test_passage_with_the_clue_is_never_a_hard_negative():
    passages, out = _run([_seed()])
    hn = out["hard_negatives"]
    verdict = {r["passage_id"]: r for r in hn.iter_rows(named=True)}
    assert "pA" not in verdict  # the gold passage is no candidate
    assert verdict["pB"]["answer_absent"] is False and verdict["pB"]["is_hard_negative"] is False  # 100,000,000원 == 1억 원
    assert verdict["pB"]["unanswerable"] is None  # step 2 only runs after step 1
    assert verdict["pC"]["is_hard_negative"] and verdict["pC"]["judge"] == "offline:rules"
    ret = out["retrievals"].filter(pl.col("seed_id") == "s1")
    assert ret.height == 3 and ret.filter(pl.col("is_gold"))["passage_id"].to_list() == ["pA"]
    conformed = {n: CONTRACTS[n].conform(df) for n, df in out.items()}
    for rule in table_rules("hard_negatives"):
        assert rule.derive(conformed["hard_negatives"], {"passages": passages, "qa_seeds": pl.DataFrame([_seed()])})["ok"].all()


def test_on_demand_leaves_answerable_seeds_candidates_to_inject_and_judges_unanswerable_ones():
    seeds = [_seed(), _seed("s2", answerable=False)]
    passages, out = _run(seeds, judge_answerable_seeds="on_demand")
    hn = out["hard_negatives"]
    mine = hn.filter(pl.col("seed_id") == "s1")
    step1 = mine.filter(pl.col("clue_absent") & pl.col("answer_absent"))
    assert step1.height >= 2 and step1["unanswerable"].is_null().all() and not mine["is_hard_negative"].any()
    assert set(step1["judge"]) == {retrieval.DEFERRED}
    theirs = hn.filter(pl.col("seed_id") == "s2")
    assert theirs["is_hard_negative"].any() and theirs["unanswerable"].is_not_null().any()  # refusal contexts: judged here
    conformed = CONTRACTS["hard_negatives"].conform(hn)
    for rule in table_rules("hard_negatives"):
        assert rule.derive(conformed, {"passages": passages, "qa_seeds": pl.DataFrame(seeds)})["ok"].all()


def test_unanswerable_seed_keeps_its_own_passage_as_a_candidate():
    _, out = _run([_seed("s2", answerable=False)])
    hn = out["hard_negatives"].filter(pl.col("is_hard_negative"))
    assert "pA" in hn["passage_id"].to_list()  # its context lacks the (plausible) answer
    assert not out["retrievals"]["is_gold"].any()


def test_retrieval_never_crosses_splits():
    passages = pl.concat([_passages("train"), _passages("test").with_columns(pl.col("passage_id") + "-t")])
    emb = embedding.run({"passages": passages}, StageContext(stage="embed", config=EmbedConfig(), seed=1))["embeddings"]
    seed = {**_seed(), "split": "test", "passage_id": "pA-t"}
    out = retrieval.run(
        {"passages": passages, "embeddings": emb, "qa_seeds": pl.DataFrame([seed])},
        StageContext(stage="retrieve", config=RetrieveConfig(top_k=5, candidate_pool=10), seed=1),
    )
    shown = out["retrievals"]["passage_id"].to_list() + out["hard_negatives"]["passage_id"].to_list()
    assert shown and all(p.endswith("-t") for p in shown)


def test_step1_finds_the_answer_at_any_scale_a_table_states_it():
    from finhallu.answerability import step1_verdicts

    seed = {"clue_text": "자본총계는 4조 1,500억 원입니다.", "answer": "4조 1,500억 원", "qa_kind": "span"}
    noted = "(단위 : 백만원)\n| 구 분 | 제12기 |\n| 자본총계 | 4,150,000 |"
    assert step1_verdicts(noted, seed) == (True, False)  # the answer is there, scaled: no hard negative
    assert step1_verdicts("| 자본총계 | 4,150,000 |", seed)[1] is False  # cut from its note: still unsafe
    assert step1_verdicts("(단위 : 백만원)\n| 자본총계 | 3,900,000 |", seed) == (True, True)


def test_a_home_encodes_and_checks_each_question_once(tmp_path, monkeypatch):
    from finhallu.embedders.hashing import HashingEmbedder

    passages = _passages()
    emb = embedding.run({"passages": passages}, StageContext(stage="embed", config=EmbedConfig(), seed=1))["embeddings"]
    cfg = RetrieveConfig(top_k=3, candidate_pool=10)
    one = {**_seed(), "question": "예금자보호 한도는 1인당 얼마인가요?"}
    two = {**_seed("s2", passage="pD", doc="dD"), "question": "신용카드 연회비는 해지하면 돌려받나요?"}
    seeds = pl.DataFrame([one])

    def run(seed_rows, cache_dir):
        ctx = StageContext(stage="retrieve", config=cfg, seed=1, cache_dir=cache_dir)
        return retrieval.run({"passages": passages, "embeddings": emb, "qa_seeds": pl.DataFrame(seed_rows)}, ctx)

    plain = run([one, two], None)
    queries: list[str] = []
    real = HashingEmbedder.encode_queries
    monkeypatch.setattr(HashingEmbedder, "encode_queries", lambda self, texts: queries.extend(texts) or real(self, texts))
    checked: list[str] = []
    real_checks = retrieval._checks
    monkeypatch.setattr(retrieval, "_checks", lambda seed, *a: checked.append(seed["seed_id"]) or real_checks(seed, *a))
    run(seeds.to_dicts(), tmp_path)
    assert queries == [one["question"]] and checked == ["s1"]
    queries.clear()
    checked.clear()
    again = run([one, two], tmp_path)
    # The first question's vector and its candidates' checks from the cache (its ranking kept).
    assert queries == [two["question"]] and checked == ["s2"]
    assert again["retrievals"].equals(plain["retrievals"]) and again["hard_negatives"].equals(plain["hard_negatives"])
