"""Faithful dialogue simulation (stages/dialogues.py, dialogue/assistant.py) and the dialogue judge (stages/dialogue_qc.py).

A small hand-written corpus: one document whose passage holds more facts than its shipped
questions ask (so the user must write new questions), an unrelated document, and filler passages
that serve as hard negatives.
"""

from __future__ import annotations

import re
from collections import Counter

import polars as pl
import random

import pytest

from finhallu.stages.dialogues import DialogueConfig
from finhallu.stages.dialogue_qc import DialogueQCConfig
from finhallu.stages import dialogues
from finhallu.stages import dialogue_qc as judge
from finhallu.stages.base import StageContext
from finhallu.dialogue.user import choose_next_question, reconfirm_query, rewrite_query, write_question
from finhallu.dialogue.assistant import answer_turn, is_refusal, refuse_turn, table_sentence
from finhallu.text.phrases import topic_of
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import number_keys

PA = (
    "예금보험공사는 금융회사가 파산하면 1인당 1억 원까지 예금을 보호합니다. "
    "보호 한도는 2025년 9월 1일부터 5천만 원에서 1억 원으로 상향되었습니다. "
    "예금보험금은 지급 공고일부터 5년 이내에 청구해야 합니다. "
    "가지급금은 1인당 최대 2천만 원까지 먼저 받을 수 있습니다. "
    "외화예금도 보호 대상에 포함됩니다. "
    "보험계약자는 청약일부터 30일 이내에 청약을 철회할 수 있습니다."
)
PB = "신용카드 가맹점 수수료는 카드 결제 금액에 수수료율을 곱해 산정됩니다. 영세가맹점의 체크카드 수수료율은 0.15%입니다."
FILLER = [
    "주택연금은 집을 담보로 평생 매달 연금을 받는 제도입니다.",
    "펀드의 투자위험등급은 6단계로 나뉩니다.",
    "자동차보험 대차료는 동급 차량의 최저 대여요금을 기준으로 합니다.",
]
TABLE = (
    "결제수단별 공제율은 다음과 같습니다.\n결제수단 | 공제율\n신용카드 | 15%\n체크카드·현금영수증 | 30%\n"
    "연 매출액 | 신용카드 | 체크카드\n3억 원 이하 | 0.40% | 0.15%"
)


def _frames() -> dict[str, pl.DataFrame]:
    docs = pl.DataFrame(
        [
            {"doc_id": "A", "source": "aihub", "institution": "예금보험공사", "lang": "ko", "split": "train"},
            {"doc_id": "B", "source": "aihub", "institution": "여신금융협회", "lang": "ko", "split": "train"},
            {"doc_id": "F", "source": "aihub", "institution": "기타", "lang": "ko", "split": "train"},
        ]
    )
    passages = pl.DataFrame(
        [{"passage_id": "pA", "doc_id": "A", "text": PA}, {"passage_id": "pB", "doc_id": "B", "text": PB}]
        + [{"passage_id": f"pF{i}", "doc_id": "F", "text": t} for i, t in enumerate(FILLER)]
    )
    sents = PA.split(". ")
    seed = lambda sid, pid, doc, q, a, clue, kind="span", ok=True: {  # noqa: E731
        "seed_id": sid,
        "passage_id": pid,
        "doc_id": doc,
        "split": "train",
        "lang": "ko",
        "question": q,
        "answer": a,
        "clue_text": clue,
        "qa_kind": kind,
        "answerable": ok,
        "source": "aihub",
    }
    seeds = pl.DataFrame(
        [
            seed("s1", "pA", "A", "예금자보호 한도는 1인당 얼마인가요?", "1억 원", sents[0] + "."),
            seed("s2", "pA", "A", "외화예금도 예금자보호 대상인가요?", "예", "외화예금도 보호 대상에 포함됩니다.", "yesno"),
            seed("s3", "pA", "A", "예금보험금은 지급 공고일부터 언제까지 청구해야 하나요?", "5년 이내", sents[2] + "."),
            seed("s4", "pA", "A", "예금자보호 제도의 예금 이자율 상한은 몇 %인가요?", "3%", None, "unanswerable", False),
            seed(
                "b1",
                "pB",
                "B",
                "영세가맹점의 체크카드 수수료율은 얼마인가요?",
                "0.15%",
                "영세가맹점의 체크카드 수수료율은 0.15%입니다.",
            ),
        ]
    )
    ret = []
    for s in seeds.iter_rows(named=True):
        order = [s["passage_id"]] + [p for p in ("pA", "pB", "pF0", "pF1", "pF2") if p != s["passage_id"]]
        ret += [
            {
                "seed_id": s["seed_id"],
                "rank": r + 1,
                "passage_id": p,
                "score": 1.0 - r / 10,
                "is_gold": p == s["passage_id"] and s["answerable"],
                "is_positive": False,
            }
            for r, p in enumerate(order)
        ]
    negs = [
        {"seed_id": "s4", "passage_id": p, "candidate_rank": i + 1, "is_hard_negative": True, "judge": "rules"}
        for i, p in enumerate(["pB", "pF0", "pF1", "pF2"])
    ]
    return {
        "documents": docs,
        "passages": passages,
        "qa_seeds": seeds,
        "retrievals": pl.DataFrame(ret),
        "hard_negatives": pl.DataFrame(negs),
    }


def _run(frames, seed: int = 7, **cfg):
    ctx = StageContext(stage="dialogues", config=DialogueConfig(**{"dialogues_per_document": 3, **cfg}), seed=seed)
    return dialogues.run(frames, ctx)


@pytest.fixture(scope="module")
def built():
    frames = _frames()
    return frames, _run(frames)


def test_dialogues_have_4_to_8_turns_and_rerun_identically(built):
    frames, out = built
    d, t = out["dialogues"], out["turns"]
    assert d.height >= 3 and d["n_turns"].is_between(4, 8).all()
    assert t.group_by("dialogue_id").len().join(d, on="dialogue_id").filter(pl.col("len") != pl.col("n_turns")).height == 0
    again = _run(frames)
    assert again["turns"].equals(t) and again["dialogues"].equals(d)
    assert not _run(frames, seed=8)["turns"].equals(t)  # the seed matters


def test_user_writes_a_new_question_when_no_candidate_fits(built):
    frames, out = built
    gen = out["turns"].filter(pl.col("origin") == "generated")
    assert gen.height > 0
    shipped = set(frames["qa_seeds"]["question"])
    for r in gen.iter_rows(named=True):
        assert r["standalone_query"] not in shipped and r["standalone_query"].endswith("?")
        assert contains_normalized(PA, r["clue_text"]) and contains_normalized(r["clue_text"], r["answer"])
        assert contains_normalized(r["response"], r["answer"])  # the assistant answers it from the passage
        assert r["gold_passage_id"] == "pA"
    # the unrelated document's question never follows a question of document A
    seeds_a = set(frames["qa_seeds"].filter(pl.col("doc_id") == "A")["seed_id"])
    for did in out["dialogues"].filter(pl.col("doc_id") == "A")["dialogue_id"]:
        assert set(out["turns"].filter(pl.col("dialogue_id") == did)["seed_id"]) <= seeds_a


def test_reconfirm_turns_come_after_turn_4_and_point_back(built):
    _, out = built
    t = out["turns"]
    rec = t.filter(pl.col("kind") == "reconfirm")
    assert rec.height > 0
    for r in rec.iter_rows(named=True):
        assert r["turn_index"] >= 5 and 1 <= r["reconfirms_turn"] < r["turn_index"]
        earlier = t.filter((pl.col("dialogue_id") == r["dialogue_id"]) & (pl.col("turn_index") == r["reconfirms_turn"])).row(
            0, named=True
        )
        assert r["standalone_query"] == earlier["standalone_query"]
        assert r["response"].startswith(("네", "맞습니다"))


def test_turns_answer_from_the_gold_passage_and_refuse_over_hard_negatives(built):
    _, out = built
    for r in out["turns"].iter_rows(named=True):
        if r["answerable"]:
            assert {"passage_id": r["gold_passage_id"], "role": "gold"} in r["context"]
            assert not is_refusal(r["response"]) and number_keys(r["response"]) <= number_keys(PA + PB)
        else:
            assert is_refusal(r["response"]) and all(c["role"] == "hard_negative" for c in r["context"])


def test_the_judge_keeps_the_simulated_dialogues(built):
    frames, out = built
    inputs = {**out, "passages": frames["passages"], "qa_seeds": frames["qa_seeds"]}
    qc = judge.run(inputs, StageContext(stage="dialogue_qc", config=DialogueQCConfig(), seed=1))["dialogue_qc"]
    assert qc["passed"].all(), qc.filter(~pl.col("passed"))["reasons"].to_list()


# ---- the assistant's answers ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "row,answer,expected",
    [
        ("체크카드·현금영수증 | 30%", "30%", "체크카드·현금영수증의 공제율은 30%입니다."),
        ("3억 원 이하 | 0.40% | 0.15%", "0.15%", "체크카드 기준 연 매출액 3억 원 이하는 0.15%입니다."),
    ],
)
def test_table_rows_are_stated_as_sentences(row, answer, expected):
    assert table_sentence(TABLE, row, answer, "ko") == expected
    out = answer_turn("질문", TABLE, row, answer, "table", "ko", rng_seed=3, support_probability=0.0, paraphrase_rate=0.0)
    assert "|" not in out.response and out.response.endswith(expected)


def test_answers_are_written_not_copied():
    """The rules assistant restates its clue (dialogue/paraphrase.py): across seeds the answers differ from
    the clue, keep every figure's value and the gold answer span, and the label verifier accepts them."""
    from finhallu.labelcheck import verify_inputs, verify_sample
    from finhallu.dialogue.paraphrase import paraphrase
    from finhallu.text.quantities import quantities, states_value

    clue = "서울의 경우 보증금 1억 6,500만 원 이하 임차인은 10일 이내에 신청하면 5,500만 원까지 우선해 변제받을 수 있습니다."
    q = "서울 소액임차인이 최우선변제로 보호받는 금액은 최대 얼마인가요?"
    written = {
        answer_turn(q, clue, clue, "5,500만 원", "span", "ko", rng_seed=seed, support_probability=0.0).response
        for seed in range(12)
    }
    copies = [w for w in written if clue in w]
    assert len(written) >= 4 and len(copies) < len(written) / 2, written
    for w in written:
        assert "5,500만 원" in w and all(states_value(w, x) for x in quantities(clue)), w
        assert verify_sample(**verify_inputs("faithful_answer", w, "", [clue], "", q, "5,500만 원", clue, "ko")).ok, w
    en = paraphrase(
        "We recorded revenue of $1.1 billion, compared to $900 million; our margin increased.", "en", random.Random(0), 1.0
    )
    assert en == "The company recorded revenue of $1,100 million, versus $900 million; the company's margin rose."
    assert (
        paraphrase("한도는 10일 이내에 정합니다.", "ko", random.Random(0), 1.0, keep=["10일 이내"])
        == "한도는 10일 이내에 정합니다."
    )


def test_markdown_rows_and_multi_row_clues():
    md = "(in millions)\n| Item | 2024 | 2023 |\n| --- | --- | --- |\n| Net income | 412 | 388 |"
    assert table_sentence(md, "| Net income | 412 | 388 |", "388", "en") == "Net income was 388 (in millions) (2023)."
    two_rows = "신용카드 | 15%\n체크카드·현금영수증 | 30%"
    out = answer_turn("공제율은?", TABLE, two_rows, "15%", "table", "ko", rng_seed=1, support_probability=0.0)
    assert "|" not in out.response and "신용카드의 공제율은 15%입니다." in out.response and "30%" in out.response


def test_answers_drop_connectives_and_keep_yes_no_polarity():
    out = answer_turn("외화예금도 보호되나요?", PA, "또한 외화예금도 보호 대상에 포함됩니다.", "예", "yesno", "ko", 2, 0.0)
    assert re.match(r"^(네|예), 외화예금도", out.response)
    no = answer_turn("한도가 5천만 원인가요?", PA, PA.split(". ")[0] + ".", "아니오", "yesno", "ko", 2, 0.0)
    assert no.response.startswith(("아니요, ", "아닙니다. "))


def test_a_supporting_sentence_passes_on_the_passages_own_advice_half_of_the_time():
    # An assistant passes on the advice its passage gives, so a faithful answer speaks in the
    # evaluative register too (an opinion is then told by its lack of support, not by its words).
    passage = (
        "전세자금대출 금리는 취급 금융기관이 정합니다. 대출 기간은 최장 10년입니다. "
        "여러 은행의 금리와 우대조건을 비교한 뒤 신청하는 것이 좋습니다."
    )
    clue = "전세자금대출 금리는 취급 금융기관이 정합니다."
    extras = Counter()
    for seed in range(40):
        out = answer_turn(
            "금리는 누가 정하나요?",
            passage,
            clue,
            "취급 금융기관",
            "span",
            "ko",
            seed,
            support_probability=1.0,
            paraphrase_rate=0.0,
        )
        extras["advice" if "비교한 뒤" in out.response else "next" if "최장 10년" in out.response else "none"] += 1
    assert extras["none"] == 0 and 10 <= extras["advice"] <= 30 and extras["next"] >= 10
    no_advice = "전세자금대출 금리는 취급 금융기관이 정합니다. 대출 기간은 최장 10년입니다."
    out = answer_turn(
        "금리는 누가 정하나요?", no_advice, clue, "취급 금융기관", "span", "ko", 1, support_probability=1.0, paraphrase_rate=0.0
    )
    assert "최장 10년" in out.response


def test_refusals_are_recognised_but_answers_mentioning_missing_information_are_not():
    for seed in range(8):
        assert is_refusal(refuse_turn("예금자보호 한도는 얼마인가요?", "ko", seed).text)
        assert is_refusal(refuse_turn("What was net income?", "en", seed).text)
    assert not is_refusal("새로 가맹점이 된 사업자는 매출 정보가 없어 처음에는 업종 평균 수수료율을 적용받습니다.")


# ---- the user's utterances ----------------------------------------------------------------------
def test_rewrites_use_ellipsis_or_coreference_without_breaking_words():
    assert (
        rewrite_query("한국은행의 현재 물가안정목표는 몇 퍼센트인가요?", "한국은행 보고서는 언제 나오나요?", "ko", 1)
        == "현재 물가안정목표는 몇 퍼센트인가요?"
    )
    assert (
        rewrite_query("주택연금 수시인출금은 어떤 용도로 쓸 수 있나요?", "주택연금 초기증액형은?", "ko", 1)
        == "수시인출금은 어떤 용도로 쓸 수 있나요?"
    )
    co = rewrite_query("현금서비스는 보통 다음 결제일에 갚나요?", "현금서비스 금리는?", "ko", 1)
    assert co.split()[0] in ("그건", "이건") and co.endswith("다음 결제일에 갚나요?")
    for seed in range(20):
        for q, prev in [
            ("스트레스 DSR 2단계는 언제부터 시행되었나요?", "펀드 위험등급 2단계는?"),
            ("총급여가 7,000만 원을 넘으면 기본 한도는 얼마인가요?", "총급여 기준 한도는?"),
            ("최근 가계대출 증가를 이끈 것은 신용대출인가요?", "가계대출 통계는?"),
        ]:
            text = rewrite_query(q, prev, "ko", seed)
            assert not re.search(r"[0-9가-힣](그건|그게|그걸|이건)", text), text  # no glued pronoun ("2그건")
            assert not judge._copula_error(text), text  # "신용대출예요" / "무엇예요" never
            assert text.endswith("?")


def test_reconfirm_questions_say_what_they_reconfirm():
    value = reconfirm_query("상조회사로 등록하려면 자본금이 얼마 이상이어야 하나요?", "15억 원 이상", "ko", 0).text
    assert "15억 원 이상" in value and "상조회사" in value and "자본금" in value
    yesno = reconfirm_query("시가 9억 원이 넘는 주택을 가진 사람도 HF 전세자금보증을 이용할 수 있나요?", "아니오", "ko", 1).text
    assert "'아니요'" in yesno and "HF 전세자금보증" in yesno
    assert topic_of("예금자보호 한도는 얼마인가요?", "ko") == "예금자보호 한도"


@pytest.mark.parametrize(
    "question, topic",
    [
        ("According to Gainsco, Inc.'s Form 10-K for fiscal 2009, what was the Accumulated deficit?", "accumulated deficit"),
        ("What was the Total operating expenses in fiscal 2023?", "total operating expenses"),
        ("By how much did the Segment operating income increase?", "segment operating income"),
        (
            "How much did Pericom Semiconductor Corp report as Primarily comprised of depreciation for fiscal 2007?",
            "primarily comprised of depreciation",
        ),
        ("How about total net sales that year?", "total net sales"),
        ("What was Apple Inc.'s Total net sales for fiscal 2023?", "Apple Inc.'s Total net sales"),
    ],
)
def test_english_topics_name_the_line_item_not_the_frame(question, topic):
    """Refusals say what is missing ("no information about accumulated deficit"), never "according gainsco inc"."""
    assert topic_of(question, "en") == topic


def test_write_question_asks_for_an_amount_of_an_unused_sentence():
    for seed in range(10):
        q = write_question(PA, ["예금자보호 한도는 1인당 얼마인가요?", PA.split(". ")[0] + "."], "ko", seed)
        assert q.question.endswith("?") and q.answer and q.clue in PA and contains_normalized(q.clue, q.answer)
        assert not contains_normalized(q.question, q.answer)
        assert q.clue != PA.split(". ")[0] + "."
    assert (
        "얼마로" in write_question("한도는 5천만 원에서 1억 원으로 올랐습니다.", [], "ko", 5).question
        or "얼마에서" in write_question("한도는 5천만 원에서 1억 원으로 올랐습니다.", [], "ko", 5).question
    )
    assert write_question("이 문단에는 물을 만한 수치가 없습니다.", [], "ko", 1).question == ""
    en = write_question("Total assets were $45.3 billion at year end.", [], "en", 1)
    assert en.question == "How much were total assets at year end?" and en.answer == "$45.3 billion"


def test_choose_next_question_keeps_the_flow():
    cands = [
        {"question": "보험료 납입을 미루면 어떻게 되나요?", "same_document": False},
        {"question": "예금자보호 한도는 1인당 얼마인가요?", "same_document": True},
        {"question": "예금보험금은 언제까지 청구하나요?", "same_document": True},
    ]
    history = ["예금자보호 한도는 1인당 얼마예요?"]
    picks = {choose_next_question("외화예금도 보호되나요?", history, cands, "ko", s).index for s in range(20)}
    assert picks == {2}  # the paraphrase of an asked question and the unrelated document never
    assert choose_next_question("외화예금도 보호되나요?", history, cands[:2], "ko", 1).index == -1


# ---- the dialogue judge (Table 7 rubric) -------------------------------------------------------
GOOD = [
    {
        "turn_index": 1,
        "kind": "question",
        "reconfirms_turn": None,
        "query": "예금자보호 한도는 1인당 얼마인가요?",
        "standalone_query": "예금자보호 한도는 1인당 얼마인가요?",
        "response": "예금보험공사는 금융회사가 파산하면 1인당 1억 원까지 예금을 보호합니다.",
        "answerable": True,
        "clue": PA.split(". ")[0] + ".",
        "answer": "1억 원",
        "gold_passage": PA,
        "doc": "A",
        "context": [PA, PB],
    },
    {
        "turn_index": 2,
        "kind": "question",
        "reconfirms_turn": None,
        "query": "그럼 외화예금도 보호되나요?",
        "standalone_query": "외화예금도 예금자보호 대상인가요?",
        "response": "네, 외화예금도 보호 대상에 포함됩니다.",
        "answerable": True,
        "clue": "외화예금도 보호 대상에 포함됩니다.",
        "answer": "예",
        "gold_passage": PA,
        "doc": "A",
        "context": [PB, PA],
    },
    {
        "turn_index": 3,
        "kind": "question",
        "reconfirms_turn": None,
        "query": "예금보험금은 언제까지 청구해야 하나요?",
        "standalone_query": "예금보험금은 지급 공고일부터 언제까지 청구해야 하나요?",
        "response": "안내에 따르면 예금보험금은 지급 공고일부터 5년 이내에 청구해야 합니다.",
        "answerable": True,
        "clue": PA.split(". ")[2] + ".",
        "answer": "5년 이내",
        "gold_passage": PA,
        "doc": "A",
        "context": [PA],
    },
    {
        "turn_index": 4,
        "kind": "question",
        "reconfirms_turn": None,
        "query": "예금 이자율 상한은 몇 %인가요?",
        "standalone_query": "예금자보호 제도의 예금 이자율 상한은 몇 %인가요?",
        "response": "제공된 자료에서는 예금 이자율 상한에 관한 내용을 찾을 수 없어 정확한 답변을 드리기 어렵습니다.",
        "answerable": False,
        "clue": None,
        "answer": "3%",
        "gold_passage": None,
        "doc": "A",
        "context": FILLER,
    },
    {
        "turn_index": 5,
        "kind": "reconfirm",
        "reconfirms_turn": 1,
        "query": "아까 예금자보호 한도 관련해서 1억 원이라고 하셨는데, 맞나요?",
        "standalone_query": "예금자보호 한도는 1인당 얼마인가요?",
        "response": "네, 맞습니다. 예금보험공사는 금융회사가 파산하면 1인당 1억 원까지 예금을 보호합니다.",
        "answerable": True,
        "clue": PA.split(". ")[0] + ".",
        "answer": "1억 원",
        "gold_passage": PA,
        "doc": "A",
        "context": [PA],
    },
]


def _judge(turns):
    s = judge.judge_dialogue(turns=turns, lang="ko")
    return s, judge.threshold_failures(s, DialogueQCConfig())


def _with(i: int, **change) -> list[dict]:
    turns = [dict(t) for t in GOOD]
    turns[i].update(change)
    return turns


def test_a_sound_dialogue_gets_full_marks():
    s, failures = _judge(GOOD)
    assert (s.answerability, s.plausibility, s.correctness, s.diversity, s.coherency) == (1.0, 3, 1.0, 3, 3), s.reasons
    assert failures == []


@pytest.mark.parametrize(
    "turns,criterion,finding",
    [
        # a question asked again (the same evidence, other words)
        (
            _with(
                2,
                standalone_query="예금자보호 한도는 1인당 얼마예요?",
                query="한도는 1인당 얼마예요?",
                clue=PA.split(". ")[0] + ".",
                answer="1억 원",
                response="1인당 1억 원까지 예금을 보호합니다.",
            ),
            "diversity",
            "asks again",
        ),
        # an answer the gold passage does not support: a number it never states
        (
            _with(2, response="안내에 따르면 예금보험금은 지급 공고일부터 3년 이내에 청구해야 합니다."),
            "correctness",
            "absent from the gold passage",
        ),
        # ... or a sentence it does not hold
        (
            _with(0, response="1인당 1억 원까지 보호합니다. 또한 증권사의 주식 투자 손실도 전액 보상받을 수 있습니다."),
            "correctness",
            "not supported",
        ),
        # a yes/no answer with the wrong polarity
        (_with(1, response="아니요, 외화예금도 보호 대상에 포함됩니다."), "correctness", "where the passage says yes"),
        # an answer to an unanswerable question
        (_with(3, response="예금 이자율 상한은 3%입니다."), "correctness", "answers an unanswerable"),
        # an incoherent topic jump: another document, no shared term
        (
            _with(
                2,
                query="영세가맹점의 체크카드 수수료율은 얼마인가요?",
                standalone_query="영세가맹점의 체크카드 수수료율은 얼마인가요?",
                response="영세가맹점의 체크카드 수수료율은 0.15%입니다.",
                clue="영세가맹점의 체크카드 수수료율은 0.15%입니다.",
                answer="0.15%",
                gold_passage=PB,
                doc="B",
                context=[PB],
            ),
            "coherency",
            "jumps to an unrelated topic",
        ),
        # broken rewrites in two of five utterances
        (
            GOOD[:1]
            + [dict(GOOD[1], query="그럼 외화예금 2그건 보호되나요?"), dict(GOOD[2], query="예금보험금 청구 기한.")]
            + GOOD[3:],
            "plausibility",
            "not a well-formed question",
        ),
        # a turn labelled answerable whose context lacks the evidence
        (_with(2, context=[PB], gold_passage=PB), "answerability", "does not hold the evidence"),
    ],
)
def test_weak_dialogues_are_dropped_with_the_reason(turns, criterion, finding):
    s, failures = _judge(turns)
    assert any(f.startswith(criterion + " ") for f in failures), (failures, s.reasons)
    assert any(finding in f for f in failures if f.startswith(criterion)), failures


def test_plausibility_flags_broken_wording_and_unreferenced_reconfirmations():
    turns = _with(1, query="그럼 외화예금도 보호 대상예요?")
    turns = [dict(t) for t in turns]
    turns[2]["query"] = "예금보험 2그건 언제까지 청구해야 하나요?"
    s, failures = _judge(turns)
    assert s.plausibility == 1 and sum("broken wording" in r for r in s.reasons) == 2
    lost = _with(4, query="다시 한번 확인해 주시겠어요?")
    s, _ = _judge(lost)
    assert s.plausibility == 2 and any("does not say which earlier statement" in r for r in s.reasons)


def test_a_related_document_change_is_a_soft_transition():
    turns = _with(
        2,
        query="외화예금과 달리 가지급금은 얼마까지 먼저 받나요?",
        standalone_query="외화예금과 달리 가지급금은 1인당 얼마까지 먼저 받을 수 있나요?",
        response="가지급금은 1인당 최대 2천만 원까지 먼저 받을 수 있습니다.",
        clue="가지급금은 1인당 최대 2천만 원까지 먼저 받을 수 있습니다.",
        answer="2천만 원",
        doc="C",
    )
    s, failures = _judge(turns)
    assert s.coherency == 2 and failures == [] and any("moves to another document" in r for r in s.reasons)


# --- user side: history-dependent follow-ups, no re-asked facts, one language, grammatical reconfirms ---

from finhallu.stages.dialogues import said_before  # noqa: E402


def test_filing_lookups_become_elliptical_follow_ups():
    prev = "한강금융지주의 제12기(2024년) 금융투자 부문의 영업수익은 얼마입니까?"
    out = {rewrite_query("한강금융지주의 제12기(2024년) 카드 부문의 영업수익은 얼마입니까?", prev, "ko", s) for s in range(6)}
    assert all(o.endswith("카드 부문의 영업수익은요?") and "한강금융지주" not in o for o in out), out
    # the period the dialogue named goes with its "기준", the company after it too; the item never
    q = rewrite_query(
        "제12기말(2024년) 기준 한강금융지주 금융투자 부문의 영업수익 규모가 어떻게 되나요?",
        "제12기말(2024년) 기준 한강금융지주 기업대출 규모가 어떻게 되나요?",
        "ko",
        1,
    )
    assert q == "금융투자 부문의 영업수익 규모가 어떻게 되나요?"
    # another period is kept
    assert "제11기(2023년)" in rewrite_query("한강금융지주의 제11기(2023년) 자본총계는 얼마입니까?", prev, "ko", 1)


def test_english_follow_ups_refer_to_the_company_and_year():
    prev = "What was Hanriver Bancorp, Inc.'s Total capital (Ratio) for fiscal 2023?"
    same_year = {rewrite_query("What was Hanriver Bancorp, Inc.'s Loans, net for fiscal 2023?", prev, "en", s) for s in range(8)}
    assert all("Hanriver" not in q and "2023" not in q and "loans, net" in q for q in same_year), same_year
    other_year = rewrite_query("How much did Hanriver Bancorp, Inc. report as Total liabilities for fiscal 2024?", prev, "en", 3)
    assert "Hanriver" not in other_year and "2024" in other_year and re.search(r"\b(its?|they)\b", other_year)
    # another company: no pronoun that would point at the wrong one
    assert "Acme" in rewrite_query("What was Acme Corp's Net income for fiscal 2023?", prev, "en", 1)


@pytest.mark.parametrize(
    "question,previous,expected",
    [
        ("예금자 본인이 아닌 대리인도 예금보험금을 청구할 수 있나요?", "예금보험금은 언제까지 청구하나요?", "그걸 청구할"),
        ("현금서비스는 신용등급에 영향을 주나요?", "현금서비스 수수료율은 얼마인가요?", "그건 신용등급에"),
    ],
)
def test_korean_coreference_replaces_the_established_noun(question, previous, expected):
    assert expected in rewrite_query(question, previous, "ko", 1)


def test_no_pro_form_for_a_light_verb_object_or_a_clause_subject():
    q = rewrite_query("은행에서 가입한 양도성예금증서(CD)도 예금자보호를 받나요?", "예금자보호 한도는 얼마인가요?", "ko", 1)
    assert "그걸" not in q and "예금자보호를 받" in q
    q = rewrite_query("저축은행이 영업정지되면 가지급금 한도는 얼마인가요?", "저축은행 영업정지 때 먼저 주는 돈은?", "ko", 1)
    assert q.startswith("저축은행이")


def test_connectors_only_open_topic_shifts():
    same = [
        rewrite_query(
            "예금보험금 청구권은 몇 년 동안 행사하지 않으면 소멸시효가 완성되나요?", "예금보험금은 어디서 청구하나요?", "ko", s
        )
        for s in range(10)
    ]
    assert not any(q.startswith(("그럼", "그러면", "추가로", "그리고", "참,")) for q in same), same
    shift = [rewrite_query("외화예금도 보호 대상인가요?", "주택연금 가입 연령은 몇 세인가요?", "ko", s) for s in range(20)]
    assert any(q != "외화예금도 보호 대상인가요?" for q in shift)


@pytest.mark.parametrize(
    "question,answer,lang,bad",
    [
        ("대출사기범이 계좌 지급정지를 요청하면 어떻게 되나요?", "계좌 지급정지를 요청", "ko", "요청이라고"),
        (
            "According to Walt Disney's Form 10-K for fiscal 2024, what was the Net income?",
            "$359 million",
            "en",
            "according walt disney",
        ),
    ],
)
def test_reconfirms_stay_grammatical(question, answer, lang, bad):
    for s in range(6):
        text = reconfirm_query(question, answer, lang, s).text
        assert bad not in text.lower() and answer in text
    ko = {reconfirm_query("ISA 서민형 계좌의 비과세 한도는 얼마인가요?", "400만 원", "ko", s).text for s in range(6)}
    assert all("400만 원이라고" in t for t in ko)
    en = reconfirm_query(
        "How much did Hanriver Bancorp, Inc. report as Interest income – loans for fiscal 2024?", "888", "en", 1
    ).text
    assert "interest income – loans for fiscal 2024 was 888" in en


def test_said_before_reads_restated_values_and_yes_no_clues():
    responses = ["예금보험공사는 한 사람당 100,000,000원까지 예금을 보호해요."]
    assert said_before("1억 원", None, responses)
    assert not said_before("5천만 원", None, responses)
    assert said_before("예", "예금보험공사는 한 사람당 100,000,000원까지 예금을 보호해요.", responses)
    assert not said_before("예", "외화예금도 보호 대상에 포함됩니다.", responses)


def test_write_question_never_asks_a_value_already_said():
    said = ["보호 한도는 1억 원으로 올라갔어요."]
    for s in range(10):
        q = write_question(PA, said, "ko", s)
        assert q.question and not contains_normalized(said[0], q.answer), q


def test_candidates_keep_the_dialogues_language_and_skip_answered_facts():
    frames = _frames()
    en = pl.DataFrame(
        [
            {
                "seed_id": "e1",
                "passage_id": "pB",
                "doc_id": "B",
                "split": "train",
                "lang": "en",
                "question": "What is the deposit protection limit?",
                "answer": "100 million won",
                "clue_text": "Deposits are protected up to 100 million won.",
                "qa_kind": "span",
                "answerable": True,
                "source": "aihub",
            }
        ]
    )
    seeds = {r["seed_id"]: r for r in pl.concat([frames["qa_seeds"], en]).iter_rows(named=True)}
    ctx = dialogues._Context(frames["retrievals"], frames["hard_negatives"], top_k=10)
    by_passage = {"pA": ["s1", "s2", "s3"], "pB": ["b1", "e1"]}
    doc = frames["documents"].row(0, named=True)  # A, Korean
    dlg = dialogues._Dialogue(doc, "d", 0)
    dlg.items.append(dialogues._item(seeds["s3"]))
    dlg.turns.append({"response": "예금보험금은 지급 공고일부터 5년 안에 청구하셔야 해요."})
    cands = dialogues._candidates(dlg, seeds, {"A": ["s1", "s2", "s3"]}, by_passage, ctx)
    assert "b1" in cands and "e1" not in cands  # another document in the dialogue's language only
    assert "s1" in cands
    dlg.turns.append({"response": "1인당 100,000,000원까지 보호돼요."})
    assert "s1" not in dialogues._candidates(dlg, seeds, {"A": ["s1", "s2", "s3"]}, by_passage, ctx)


def test_dialogues_never_reask_answered_facts():
    out = _run(_frames(), dialogues_per_document=6)
    t = out["turns"].sort("dialogue_id", "turn_index")
    asked = 0
    for _, part in t.group_by("dialogue_id"):
        rows = part.sort("turn_index").to_dicts()
        for i, r in enumerate(rows):
            if r["kind"] == "question" and r["answerable"] and i:
                asked += 1
                assert not said_before(r["answer"], r["clue_text"], [e["response"] for e in rows[:i]]), r
    assert asked >= 6


def test_the_user_llm_is_not_asked_what_needs_no_asking(monkeypatch):
    # An opening question has no history to be rewritten for, and no candidate is nothing to choose
    # from: neither costs a call (at paper scale one call per dialogue and more).
    from finhallu.llm.router import LLMRouter

    asked = []
    real = LLMRouter.call

    def spy(self, role, op, **kw):
        asked.append((op, kw))
        return real(self, role, op, **kw)

    monkeypatch.setattr(LLMRouter, "call", spy)
    out = _run(_frames())
    assert all(kw["candidates"] for op, kw in asked if op == "choose_next_question")
    assert "rewrite_query" not in {op for op, _ in asked}  # the call that picks a question also words it
    first = out["turns"].filter(pl.col("turn_index") == 1)
    assert (first["query"] == first["standalone_query"]).all()
    later = out["turns"].filter((pl.col("turn_index") > 1) & (pl.col("kind") == "question"))
    assert (later["query"] != later["standalone_query"]).mean() > 0.5  # follow-ups lean on the history


def test_dialogue_memo_gives_what_conversing_gives_and_reconverses_only_what_read_a_change(tmp_path, monkeypatch):
    def run(frames):
        ctx = StageContext(
            stage="dialogues", config=DialogueConfig(dialogues_per_document=3), seed=7, cache_dir=tmp_path / "cache"
        )
        return dialogues.run(frames, ctx)

    frames = _frames()
    plain = _run(frames)
    conversed: list = []
    real = dialogues._converse
    monkeypatch.setattr(dialogues, "_converse", lambda doc, k, *a: conversed.append((doc["doc_id"], k)) or real(doc, k, *a))
    assert run(frames)["turns"].equals(plain["turns"]) and len(conversed) == 6  # 3 per document with seeds
    conversed.clear()
    again = run(frames)
    assert conversed == [] and again["turns"].equals(plain["turns"]) and again["dialogues"].equals(plain["dialogues"])

    # A new document whose passage no earlier seed retrieved: only its own dialogues are new.
    grown = {name: frame.clone() for name, frame in frames.items()}
    grown["documents"] = pl.concat(
        [grown["documents"], grown["documents"].filter(pl.col("doc_id") == "B").with_columns(doc_id=pl.lit("G"))]
    )
    grown["passages"] = pl.concat(
        [grown["passages"], pl.DataFrame([{"passage_id": "pG", "doc_id": "G", "text": PB.replace("0.15%", "0.25%")}])]
    )
    g1 = (
        grown["qa_seeds"]
        .filter(pl.col("seed_id") == "b1")
        .with_columns(
            seed_id=pl.lit("g1"),
            passage_id=pl.lit("pG"),
            doc_id=pl.lit("G"),
            answer=pl.lit("0.25%"),
            clue_text=pl.col("clue_text").str.replace("0.15%", "0.25%", literal=True),
        )
    )
    grown["qa_seeds"] = pl.concat([grown["qa_seeds"], g1])
    g_ret = (
        grown["retrievals"]
        .filter(pl.col("seed_id") == "b1")
        .with_columns(seed_id=pl.lit("g1"), passage_id=pl.col("passage_id").replace("pB", "pG"))
    )
    grown["retrievals"] = pl.concat([grown["retrievals"], g_ret])
    expected = _run(grown)["turns"]
    conversed.clear()
    out = run(grown)
    assert sorted(conversed) == [("G", 0), ("G", 1), ("G", 2)]
    assert out["turns"].equals(expected)

    # An edited seed: the dialogues that read it (here all of B's) converse again.
    edited = {
        **frames,
        "qa_seeds": frames["qa_seeds"].with_columns(
            question=pl.when(pl.col("seed_id") == "b1")
            .then(pl.lit("체크카드 수수료율은 영세가맹점이면 얼마인가요?"))
            .otherwise(pl.col("question"))
        ),
    }
    expected = _run(edited)["turns"]
    conversed.clear()
    out = run(edited)
    assert out["turns"].equals(expected)
    assert {("B", 0), ("B", 1), ("B", 2)} <= set(conversed)

    # An edited passage that no dialogue read (no seed stands on it): nothing converses again.
    unread = {**edited, "passages": edited["passages"].with_columns(text=pl.col("text").str.replace("6단계", "5단계"))}
    assert unread["passages"]["text"].to_list() != edited["passages"]["text"].to_list()
    conversed.clear()
    assert run(unread)["turns"].equals(expected) and conversed == []


@pytest.mark.parametrize("remote", [True, False])
def test_korean_answers_are_analysed_as_each_dialogue_ends_when_the_stage_waits_on_a_remote_model(monkeypatch, remote):
    """With remote roles the answers go into the build's morpheme store as the dialogue ends (the
    stages after it read them there); offline, the stage adds no analysis of its own."""
    from finhallu.llm import parallel
    from finhallu.stages import dialogues as stage
    from finhallu.text.morpheme_cache import stored, use_morpheme_store

    class DictStore(dict):
        def get(self, digests):  # type: ignore[override]
            return {d: self[d] for d in digests if d in self}

        def put(self, items):
            self.update(items)

    answers = {"ko": ["삼성전자의 매출은 10조원입니다.", "영업이익은 증가했습니다."], "en": ["Revenue rose 5%."]}
    monkeypatch.setattr(stage, "in_flight", lambda router, roles: 4 if remote else 0)
    monkeypatch.setattr(parallel, "in_flight", lambda router, roles: 0)  # the items themselves run one after another
    monkeypatch.setattr(stage, "_converse", lambda doc, *a: [{"response": r} for r in answers[doc["lang"]]])
    from finhallu.config import load_config

    ctx = stage.STAGE.context(load_config("demo"))
    planned = [({"doc_id": "d1", "lang": "ko"}, 0, []), ({"doc_id": "d2", "lang": "en"}, 0, [])]
    store = DictStore()
    with use_morpheme_store(store):
        tables = dict.fromkeys(("seeds", "doc_seeds", "passage_seeds", "passages"), {})
        out = stage._conversations(planned, tables, None, ctx.config, ctx)
        kept = stored(answers["ko"] + answers["en"])
    assert [[t["response"] for t in turns] for turns in out] == [answers["ko"], answers["en"]]
    assert sorted(kept) == (sorted(answers["ko"]) if remote else [])
