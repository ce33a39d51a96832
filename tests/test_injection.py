"""Rule-based injectors (injectors/) and the injection judge (verify_label, naturalness).

Every turn here is hand-built: a faithful response made from a clue of a passage, wrapped in a
TurnView the way the inject stage builds one.
"""

from __future__ import annotations

import dataclasses
import random
import re

import pytest

from finhallu.injectors import Injected, TurnView, load_injectors
from finhallu.injectors.edits import perturb_token, swap_first
from finhallu.injectors.lexicon import MODIFIERS
from finhallu.injectors.verify import naturalness, verify_label
from finhallu.dialogue.assistant import is_refusal
from finhallu.text.normalize import contains_normalized, normalize
from finhallu.text.numbers import number_keys
from finhallu.text.sentences import split_sentences

INJ = load_injectors()

# ---- passages and clues ---------------------------------------------------------------------------
DEPOSIT = (
    "예금보험공사는 금융회사가 파산 등으로 예금을 지급할 수 없는 경우 1인당 1억 원까지 원금과 소정의 이자를 보호합니다. "
    "보호 한도는 2025년 9월 1일부터 5천만 원에서 1억 원으로 상향되었습니다. "
    "외화예금도 보호 대상에 포함되며, 보호 여부는 금융상품 설명서에서 확인할 수 있습니다."
)
DEPOSIT_CLUE = (
    "예금보험공사는 금융회사가 파산 등으로 예금을 지급할 수 없는 경우 1인당 1억 원까지 원금과 소정의 이자를 보호합니다."
)
DSR = (
    "스트레스 DSR 3단계가 시행됩니다. 차주별 DSR 규제 비율은 은행권 40%, 비은행권 50%가 적용됩니다. "
    "총 대출액이 1억 원 이하인 차주는 적용 대상에서 제외됩니다."
)
DSR_CLUE = "차주별 DSR 규제 비율은 은행권 40%, 비은행권 50%가 적용됩니다."
INSURANCE = (
    "보험금 청구권은 3년간 행사하지 아니하면 시효의 완성으로 소멸합니다. "
    "보험계약자는 청약을 한 날부터 30일 이내에 청약을 철회할 수 있습니다."
)
JEONSE = (
    "전세 계약이 끝났는데도 집주인이 전세보증금을 돌려주지 않으면 보증기관이 대신 지급합니다. "
    "정기예금은 만기 전 중도 인출이 불가능합니다. 적금은 만기 시 이자를 한꺼번에 받습니다. "
    "연소득 7천만 원 이상인 경우 우대금리가 적용되지 않습니다."
)
TENK = (
    "Net interest income increased to $1.2 billion in 2023, driven by higher deposit rates. "
    "Total assets were $45.3 billion at year end."
)
TENK_CLUE = "Net interest income increased to $1.2 billion in 2023, driven by higher deposit rates."


def make_view(
    response: str,
    *,
    answer: str = "1억 원",
    clue: str = DEPOSIT_CLUE,
    gold: str | None = DEPOSIT,
    evidence: list[str] | None = None,
    kind: str = "question",
    history: list[dict] | None = None,
    answerable: bool = True,
    lang: str = "ko",
    query: str = "예금자보호 한도는 얼마인가요?",
    **kw,
) -> TurnView:
    history = history or []
    turn = {
        "turn_id": "dlg-1#t%d" % (len(history) + 1),
        "turn_index": len(history) + 1,
        "kind": kind,
        "response": response,
        "answerable": answerable,
        "answer": answer,
        "clue_text": clue,
        "standalone_query": query,
        "query": query,
        "seed_id": "s1",
        "gold_passage_id": "p1",
        "context": [{"passage_id": "p1", "role": "gold"}],
    }
    fields = dict(
        turn=turn,
        history=history,
        lang=lang,
        evidence=evidence if evidence is not None else [gold],
        gold_text=gold,
        other_context=[],
        sibling_seeds=[],
        hard_negatives=[],
        seed={"seed_id": "s1", "passage_id": "p1"},
        doc_id="doc-1",
        variant="rules_a",
    )
    fields.update(kw)
    return TurnView(**fields)


def run(htype: str, view: TurnView, subtype: str | None = None, seed: int = 0) -> Injected | None:
    return INJ[htype].inject(view, subtype, random.Random(seed))


def judge(
    view: TurnView,
    out: Injected,
    htype: str,
    evidence: list[str] | None = None,
    history: str | None = None,
    new: str | None = None,
) -> bool:
    inj = {
        "original_response": view.turn["response"],
        "injected_response": new if new is not None else out.response,
        "hallu_type": htype,
        "hallu_subtype": out.subtype if out is not None else None,
    }
    ok, _why = verify_label(
        inj, view.turn, view.evidence if evidence is None else evidence, view.history_text if history is None else history
    )
    return ok


def fake(
    orig: str, new: str, htype: str, subtype: str | None, view: TurnView, evidence: list[str] | None = None, history: str = ""
) -> bool:
    inj = {"original_response": orig, "injected_response": new, "hallu_type": htype, "hallu_subtype": subtype}
    return verify_label(inj, view.turn, view.evidence if evidence is None else evidence, history)[0]


def test_registry_covers_the_taxonomy():
    """Every type of the taxonomy has an injector, and every leaf it registers says how to accept,
    name, explain and ask for it."""
    from finhallu.injectors import LEAVES
    from finhallu.injectors import hallu_subtypes
    from finhallu.taxonomy import HALLU_TYPES

    assert set(INJ) == set(HALLU_TYPES)
    assert hallu_subtypes() == (
        "number_error",
        "modifier_change",
        "financial_term_misunderstanding",
        "inconsistency",
        "entity_error",
        "condition_not_satisfied",
        "question_misunderstanding",
        "off_topic_drift",
        "fabricated_detail",
        "subjective_opinion",
    )
    for leaf in LEAVES.in_order():
        assert leaf.subtype in INJ[leaf.hallu_type].subtypes or (leaf.subtype is None and not INJ[leaf.hallu_type].subtypes)
        for lang in ("ko", "en"):
            assert leaf.names[lang] and leaf.instruction[lang] and leaf.rationale[lang].startswith("2) ")


# ---- Contradictory ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "response,answer",
    [
        ("예금자보호 한도는 1인당 1억 원입니다.", "1억 원"),
        # x2 of 5,000만 is 1억 (stated in the evidence): must never be produced, in any spelling
        ("보호 한도는 5,000만 원에서 1억 원으로 상향되었습니다.", "5,000만 원"),
        ("예금자보호 한도는 100,000,000원입니다.", "100,000,000원"),
        ("상향 전 한도는 50,000,000원이었습니다.", "50,000,000원"),
    ],
)
def test_number_error_introduces_a_value_absent_from_the_evidence(response, answer):
    ev_keys = number_keys(DEPOSIT)
    seen = set()
    for seed in range(60):
        view = make_view(response, answer=answer)
        out = run("contradictory", view, "number_error", seed)
        assert out is not None and out.subtype == "number_error"
        added = number_keys(out.response) - number_keys(response)
        assert added, out
        assert not (added & ev_keys), (out.response, added)  # not even a normalization-equivalent (1억 == 10,000만)
        assert normalize(out.response) != normalize(response)
        assert len(out.response.split()) == len(response.split())  # one token changed, nothing else
        assert judge(view, out, "contradictory"), out
        seen.add(out.response)
    assert len(seen) > 1  # the wrong value varies with the seed


def test_number_error_prefers_the_answer_and_skips_unsupported_numbers():
    view = make_view("예금자보호 한도는 1인당 1억 원입니다.", answer="1억 원")
    out = run("contradictory", view, "number_error", 3)
    assert "1인당" in out.response and "1억 원" not in out.response
    # no number of the response is stated by the evidence -> nothing to contradict
    assert run("contradictory", make_view("한도는 7억 원입니다.", answer="7억 원"), "number_error") is None


def test_perturbed_round_numbers_keep_their_grain():
    """1,000 -> 3,000 (not 1,003); 100,000,000 -> a multiple of 10,000,000."""
    for seed in range(80):
        for tok, grain in (("1,000", 1000), ("100,000,000", 10**7), ("5,000", 1000), ("250", 10)):
            new = int(perturb_token(tok, "원", random.Random(seed)).replace(",", ""))
            assert new != int(tok.replace(",", "")) and new > 0
            assert new % grain == 0, (tok, new)
        small = perturb_token("3", "년", random.Random(seed))
        assert small != "3" and int(small) >= 0
        dec = perturb_token("16.2", "%", random.Random(seed))
        assert re.fullmatch(r"\d+\.\d", dec) and dec != "16.2"


@pytest.mark.parametrize(
    "response,old,new",
    [
        ("정기예금은 만기 전 중도 인출이 불가능합니다.", "불가능", "가능"),
        ("정기예금은 만기 전 중도 인출이 가능합니다.", "가능", "불가능"),
        ("연소득 7천만 원 이상인 경우 우대금리가 적용되지 않습니다.", "이상", "미만"),
        ("올해 가계대출 잔액은 전년 대비 증가했습니다.", "증가", "감소"),
    ],
)
def test_modifier_change_flips_one_lexicon_pair(response, old, new):
    view = make_view(response, gold=DEPOSIT, clue=response, answer="")
    out = run("contradictory", view, "modifier_change")
    assert out is not None and out.subtype == "modifier_change"
    assert out.edit == f"{old} -> {new}"
    assert out.response == response.replace(old, new, 1)
    assert "불불가능" not in out.response
    assert judge(view, out, "contradictory")


def test_swap_first_never_splits_a_longer_word():
    text = "중도 인출은 불가능합니다."
    assert swap_first(text, MODIFIERS["ko"], "ko") == ("중도 인출은 가능합니다.", "불가능", "가능")
    # "가능" inside "불가능" is not a word of its own, even when "불가능" itself may not be swapped
    assert swap_first(text, [("가능", "불가능")], "ko") is None
    assert swap_first(text, MODIFIERS["ko"], "ko", skip={"불가능"}) is None
    assert swap_first("중도 인출이 가능합니다.", [("가능", "불가능")], "ko")[0] == "중도 인출이 불가능합니다."


def test_modifier_change_is_refused_when_the_evidence_states_the_edited_sentence():
    evidence = "정기예금은 만기 전 중도 인출이 가능합니다. 정기예금은 만기 전 중도 인출이 불가능합니다."
    view = make_view("정기예금은 만기 전 중도 인출이 불가능합니다.", gold=evidence)
    assert run("contradictory", view, "modifier_change") is None


@pytest.mark.parametrize(
    "response,expected",
    [
        ("만기 시 이자를 한꺼번에 받습니다.", "만기 시 원금을 한꺼번에 받습니다."),  # 이자를 -> 원금을
        ("예금자보호 한도는 1인당 1억 원입니다.", "보장 대상은 1인당 1억 원입니다."),  # 는 -> 은, longest entry first
        ("만기가 지나면 보험금이 지급됩니다.", "만기가 지나면 보험료가 지급됩니다."),  # 이 -> 가
        ("전세보증금을 돌려받지 못하면 보증기관이 대신 지급합니다.", "월세보증금을 돌려받지 못하면 보증기관이 대신 지급합니다."),
    ],
)
def test_term_swap_rechooses_the_following_particle(response, expected):
    view = make_view(response, gold=JEONSE + " " + DEPOSIT)
    out = run("contradictory", view, "financial_term_misunderstanding")
    assert out is not None and out.response == expected
    assert judge(view, out, "contradictory")
    assert naturalness(response, out.response, "contradictory") == (3, [])


def test_english_turn_swaps_and_changes_numbers_case_preserving():
    view = make_view(
        "Net interest income increased to $1.2 billion in 2023.",
        answer="$1.2 billion",
        clue=TENK_CLUE,
        gold=TENK,
        lang="en",
        query="What was net interest income in 2023?",
    )
    term = run("contradictory", view, "financial_term_misunderstanding")
    assert term.response == "Noninterest income increased to $1.2 billion in 2023."
    mod = run("contradictory", view, "modifier_change")
    assert mod.response == "Net interest income decreased to $1.2 billion in 2023."
    num = run("contradictory", view, "number_error", 5)
    added = number_keys(num.response) - number_keys(view.turn["response"])
    assert added and not added & number_keys(TENK) and "2023" in num.response  # the answer changed, not the year
    for out in (term, mod, num):
        assert judge(view, out, "contradictory")
    # multi-word entries whose counterpart shares a word ("more than" -> "less than")
    bound = make_view("Total loans were more than $3 billion.", answer="$3 billion", clue=TENK_CLUE, gold=TENK, lang="en")
    out = run("contradictory", bound, "modifier_change")
    assert out.response == "Total loans were less than $3 billion."
    assert judge(bound, out, "contradictory")
    assert not fake(bound.turn["response"], "Total loans were close to $3 billion.", "contradictory", "modifier_change", bound)


HISTORY = [{"query": "예금자보호 한도는 얼마인가요?", "response": "예금자보호 한도는 1인당 1억 원입니다."}]


def test_inconsistency_needs_a_prior_statement_and_contradicts_the_history():
    response = "네, 앞서 말씀드린 대로 예금자보호 한도는 1인당 1억 원입니다."
    assert run("contradictory", make_view(response), "inconsistency") is None  # nothing said before
    unrelated = [{"query": "보험금 청구권은 언제 소멸하나요?", "response": "보험금 청구권은 3년간 행사하지 않으면 소멸합니다."}]
    assert run("contradictory", make_view(response, history=unrelated), "inconsistency") is None  # nothing restated
    # a plain question turn that restates an earlier statement qualifies, like a reconfirm turn
    plain = run("contradictory", make_view(response, history=HISTORY), "inconsistency", 1)
    assert plain is not None and judge(make_view(response, history=HISTORY), plain, "contradictory")
    view = make_view(response, kind="reconfirm", history=HISTORY)
    said = number_keys(view.history_text)
    for seed in range(20):
        out = run("contradictory", view, "inconsistency", seed)
        assert out is not None and out.subtype == "inconsistency"
        added = number_keys(out.response) - number_keys(response)
        assert added and not added & said and not added & number_keys(DEPOSIT)
        assert "1인당" in out.response and "1억 원" not in out.response  # the reconfirmed answer itself changes
        assert judge(view, out, "contradictory")
        # the same edit without the earlier statement is no inconsistency
        assert not judge(view, out, "contradictory", history="")


def test_inconsistency_by_flipping_a_word_said_earlier():
    hist = [{"query": "정기예금은 만기 전에 인출할 수 있나요?", "response": "정기예금은 만기 전 중도 인출이 불가능합니다."}]
    view = make_view(
        "네, 다시 확인해도 만기 전 중도 인출은 불가능합니다.", kind="reconfirm", history=hist, gold=JEONSE, answer=""
    )
    out = run("contradictory", view, "inconsistency")
    assert out.response == "네, 다시 확인해도 만기 전 중도 인출은 가능합니다."
    assert judge(view, out, "contradictory")


# ---- Unverifiable ----------------------------------------------------------------------------------
TWO_SENTENCES = "예금자보호 한도는 1인당 1억 원입니다. 외화예금도 보호 대상에 포함됩니다."


@pytest.mark.parametrize("subtype", ["fabricated_detail", "subjective_opinion"])
def test_unverifiable_replaces_or_precedes_the_supporting_sentence(subtype):
    shapes = set()
    for seed in range(12):
        view = make_view(TWO_SENTENCES)
        out = run("unverifiable", view, subtype, seed)
        assert out is not None and out.subtype == subtype
        sents = split_sentences(out.response)
        assert sents[0] == "예금자보호 한도는 1인당 1억 원입니다."
        # replaced: [answer, new]; inserted: [answer, new, supporting sentence] (lengths balance out)
        assert len(sents) == 2 or (len(sents) == 3 and sents[2] == "외화예금도 보호 대상에 포함됩니다.")
        added = sents[1]
        assert added not in TWO_SENTENCES and not contains_normalized(DEPOSIT, added)
        if subtype == "fabricated_detail":
            assert number_keys(added) and not number_keys(added) & number_keys(DEPOSIT)
        assert judge(view, out, "unverifiable")
        shapes.add(len(sents))
    assert shapes == {2, 3}


@pytest.mark.parametrize("subtype", ["fabricated_detail", "subjective_opinion"])
def test_unverifiable_adds_a_sentence_to_a_one_sentence_answer(subtype):
    view = make_view("예금자보호 한도는 1인당 1억 원입니다.")
    out = run("unverifiable", view, subtype, 1)
    sents = split_sentences(out.response)
    assert len(sents) == 2 and sents[0] == view.turn["response"]
    assert judge(view, out, "unverifiable")


def test_unverifiable_phrasing_banks_differ_by_variant():
    a = {run("unverifiable", make_view(TWO_SENTENCES, variant="rules_a"), "subjective_opinion", s).response for s in range(30)}
    b = {run("unverifiable", make_view(TWO_SENTENCES, variant="rules_b"), "subjective_opinion", s).response for s in range(30)}
    assert a and b and not a & b


# ---- Irrelevance -----------------------------------------------------------------------------------
def test_condition_not_satisfied_uses_the_other_conditions_value():
    view = make_view("은행권에서 대출을 받으면 DSR 규제 비율 40%가 적용됩니다.", answer="40%", clue=DSR_CLUE, gold=DSR)
    out = run("irrelevance", view, "condition_not_satisfied")
    assert out.subtype == "condition_not_satisfied"
    # the other condition's value under that condition (은행권 50% would be Contradictory, not Irrelevance)
    assert out.response == "비은행권에서 대출을 받으면 DSR 규제 비율 50%가 적용됩니다."
    assert not contains_normalized(out.response, "40%")
    assert judge(view, out, "irrelevance")
    # a clue with one value has no other condition to borrow from
    one = make_view("예금자보호 한도는 1인당 1억 원입니다.", clue="예금자보호 한도는 1억 원입니다.")
    assert run("irrelevance", one, "condition_not_satisfied") is None


SIBLINGS = [
    {
        "seed_id": "s2",
        "passage_id": "p1",
        "question": "외화예금도 보호되나요?",
        "answer": "예",
        "clue_text": "외화예금도 보호 대상에 포함되며",
        "qa_kind": "yesno",
    },
    {
        "seed_id": "s3",
        "passage_id": "p1",
        "question": "보호 한도는 언제부터 상향되었나요?",
        "answer": "2025년 9월 1일",
        "clue_text": "보호 한도는 2025년 9월 1일부터 5천만 원에서 1억 원으로 상향되었습니다.",
        "qa_kind": "span",
    },  # clue holds 1억
    {
        "seed_id": "s4",
        "passage_id": "p1",
        "question": "예금 보호 여부는 어디에서 확인할 수 있나요?",
        "answer": "금융상품 설명서",
        "clue_text": "외화예금도 보호 대상에 포함되며, 보호 여부는 금융상품 설명서에서 확인할 수 있습니다.",
        "qa_kind": "span",
    },
    {
        "seed_id": "s5",
        "passage_id": "p9",
        "question": "보험금 청구권의 소멸시효는?",
        "answer": "3년",
        "clue_text": "보험금 청구권은 3년간 행사하지 아니하면 시효의 완성으로 소멸합니다.",
        "qa_kind": "span",
    },
]


def test_question_misunderstanding_answers_a_sibling_question():
    view = make_view("예금자보호 한도는 1인당 1억 원입니다.", sibling_seeds=SIBLINGS)
    for seed in range(10):
        out = run("irrelevance", view, "question_misunderstanding", seed)
        assert out.subtype == "question_misunderstanding"
        assert "금융상품 설명서" in out.response  # the only eligible sibling: same passage, not yes/no, no 1억
        assert not contains_normalized(out.response, "1억 원")
        assert out.edit.endswith(SIBLINGS[2]["question"])
        assert judge(view, out, "irrelevance")
    only_bad = make_view("예금자보호 한도는 1인당 1억 원입니다.", sibling_seeds=[SIBLINGS[0], SIBLINGS[1], SIBLINGS[3]])
    assert run("irrelevance", only_bad, "question_misunderstanding") is None


def test_off_topic_drift_takes_content_from_another_document_or_adjacent_information():
    others = [
        {"passage_id": "p7", "text": INSURANCE, "doc_id": "doc-2"},
        {"passage_id": "p8", "text": "같은 문서에 실린 예금자보호 제도의 다른 설명 문단입니다.", "doc_id": "doc-1"},
    ]
    view = make_view("안내에 따르면 예금자보호 한도는 1인당 1억 원입니다.", other_context=others, evidence=[DEPOSIT, INSURANCE])
    seen = set()
    for seed in range(16):
        out = run("irrelevance", view, "off_topic_drift", seed)
        assert out.subtype == "off_topic_drift"
        assert out.response.startswith("안내에 따르면 ")  # discourse opener kept
        drift = out.response[len("안내에 따르면 ") :]
        if out.strategy == "other_document":
            assert "p7" in out.edit and drift in split_sentences(INSURANCE)
        else:  # the hard variant: adjacent information of the same document (p8, or the gold passage)
            assert out.strategy == "same_document" and ("p8" in out.edit or drift in split_sentences(DEPOSIT))
        assert not contains_normalized(out.response, "1억 원")
        assert judge(view, out, "irrelevance")
        seen.add(out.strategy)
    assert seen == {"other_document", "same_document"}
    nothing = make_view("예금자보호 한도는 1인당 1억 원입니다.", gold=DEPOSIT_CLUE, other_context=[])
    assert run("irrelevance", nothing, "off_topic_drift") is None


def test_irrelevance_skips_reconfirm_and_unanswerable_turns():
    view = make_view("은행권 DSR은 40%입니다.", answer="40%", clue=DSR_CLUE, gold=DSR, kind="reconfirm")
    assert run("irrelevance", view, "condition_not_satisfied") is None
    view = make_view("은행권 DSR은 40%입니다.", answer="40%", clue=DSR_CLUE, gold=DSR, answerable=False)
    assert run("irrelevance", view, "condition_not_satisfied") is None


# ---- False Acceptance / False Refusal ------------------------------------------------------------
NEGATIVES = {"n1": INSURANCE, "n2": DSR, "n3": "신용카드 연회비는 카드 종류에 따라 다르게 부과됩니다."}


def test_false_acceptance_replaces_context_with_hard_negatives():
    view = make_view("예금자보호 한도는 1인당 1억 원입니다.", hard_negatives=list(NEGATIVES))
    out = run("false_acceptance", view)
    assert out.subtype is None and out.response == view.turn["response"]
    assert out.context == [{"passage_id": p, "role": "hard_negative"} for p in NEGATIVES]
    assert out.counterpart_label == "true_refusal" and is_refusal(out.counterpart)
    assert judge(view, out, "false_acceptance", evidence=list(NEGATIVES.values()))
    # the same answer over evidence that holds the clue is no false acceptance
    assert not judge(view, out, "false_acceptance", evidence=[DEPOSIT])
    assert run("false_acceptance", make_view(view.turn["response"], hard_negatives=["n1", "n2"])) is None
    assert run("false_acceptance", make_view(view.turn["response"], hard_negatives=list(NEGATIVES), kind="reconfirm")) is None


def test_false_acceptance_on_an_unanswerable_turn_answers_with_a_fitting_particle():
    refusal = "제공된 자료에서는 예금자보호 한도에 관한 내용을 찾을 수 없어 정확한 답변을 드리기 어렵습니다."
    view = make_view(refusal, answerable=False, answer="1억 원", evidence=[INSURANCE], gold=None)
    out = run("false_acceptance", view)
    assert not is_refusal(out.response) and "예금자보호 한도는 1억 원입니다." in out.response
    assert out.counterpart == refusal and out.counterpart_label == "true_refusal"
    assert judge(view, out, "false_acceptance")


def test_false_refusal_refuses_over_evidence_that_holds_the_clue():
    view = make_view("예금자보호 한도는 1인당 1억 원입니다.")
    out = run("false_refusal", view)
    assert out.subtype is None and is_refusal(out.response) and out.context is None
    assert not is_refusal(view.turn["response"])
    assert judge(view, out, "false_refusal")
    assert not judge(view, out, "false_refusal", evidence=[INSURANCE])  # context lacks the clue
    assert run("false_refusal", make_view(view.turn["response"], answerable=False)) is None
    assert run("false_refusal", make_view(view.turn["response"], gold=None, evidence=[INSURANCE])) is None


# ---- verify_label rejects corrupted injections --------------------------------------------------
def test_verify_label_rejects_corrupted_injections():
    orig = "예금자보호 한도는 1인당 1억 원입니다."
    v = make_view(orig)
    # number_error whose "new" number is stated by the evidence (5천만 원), or in another spelling (100,000,000원)
    assert not fake(orig, "예금자보호 한도는 1인당 5천만 원입니다.", "contradictory", "number_error", v)
    assert not fake(orig, "예금자보호 한도는 1인당 100,000,000원입니다.", "contradictory", "number_error", v)
    assert not fake(orig, "예금자보호 한도는 1억 원입니다.", "contradictory", "number_error", v)  # nothing added
    assert fake(orig, "예금자보호 한도는 1인당 3억 원입니다.", "contradictory", "number_error", v)
    # modifier_change / term swap with no lexicon pair in the diff
    m_orig = "정기예금은 만기 전 중도 인출이 불가능합니다."
    vm = make_view(m_orig, gold=JEONSE)
    assert not fake(m_orig, "정기예금은 만기 전 중도 인출이 어렵습니다.", "contradictory", "modifier_change", vm)
    assert not fake(m_orig, "정기예금은 만기 전 중도 인출이 가능합니다.", "contradictory", "financial_term_misunderstanding", vm)
    assert fake(m_orig, "정기예금은 만기 전 중도 인출이 가능합니다.", "contradictory", "modifier_change", vm)
    assert not fake(
        "적금은 만기 시 이자를 받습니다.", "적금은 만기 시 돈을 받습니다.", "contradictory", "financial_term_misunderstanding", vm
    )
    # inconsistency that does not depart from the history
    assert not fake(orig, orig, "contradictory", "inconsistency", v, history=HISTORY[0]["response"])
    # unverifiable: the "added" sentence is in the evidence / is no opinion
    assert not fake(
        orig,
        orig + " 보호 한도는 2025년 9월 1일부터 5천만 원에서 1억 원으로 상향되었습니다.",
        "unverifiable",
        "fabricated_detail",
        v,
    )
    assert not fake(orig, orig + " 외화예금도 보호 대상에 포함됩니다.", "unverifiable", "subjective_opinion", v)
    assert fake(orig, orig + " 솔직히 이 정도면 누구에게나 추천할 만한 조건입니다.", "unverifiable", "subjective_opinion", v)
    # condition_not_satisfied with a value no condition states, or keeping the answer
    d_orig = "은행권에서 대출을 받으면 DSR 규제 비율 40%가 적용됩니다."
    vd = make_view(d_orig, answer="40%", clue=DSR_CLUE, gold=DSR)
    assert not fake(d_orig, d_orig.replace("40%", "60%"), "irrelevance", "condition_not_satisfied", vd)
    assert not fake(d_orig, d_orig.replace("40%", "40%, 비은행권은 50%"), "irrelevance", "condition_not_satisfied", vd)
    assert fake(d_orig, d_orig.replace("40%", "50%"), "irrelevance", "condition_not_satisfied", vd)
    # irrelevance that still states the answer
    assert not fake(orig, "보험금 청구권과 달리 예금자보호 한도는 1억 원입니다.", "irrelevance", "off_topic_drift", v)
    assert not fake(orig, "보호 한도는 1억 원으로 상향되었습니다.", "irrelevance", "question_misunderstanding", v)
    # false refusal that does not refuse; false acceptance that refuses
    assert not fake(orig, "예금자보호 한도는 1인당 2억 원입니다.", "false_refusal", None, v)
    assert not fake(
        orig, "죄송하지만 참고한 문서에 정보가 없어 답변드릴 수 없습니다.", "false_acceptance", None, v, evidence=[INSURANCE]
    )
    # an unknown subtype never verifies
    assert not fake(orig, "예금자보호 한도는 1인당 3억 원입니다.", "contradictory", "made_up", v)


# ---- determinism -----------------------------------------------------------------------------------
CASES = [
    ("contradictory", "number_error", lambda: make_view("예금자보호 한도는 1인당 1억 원입니다.")),
    ("contradictory", "modifier_change", lambda: make_view("정기예금은 만기 전 중도 인출이 불가능합니다.", gold=JEONSE)),
    ("contradictory", "financial_term_misunderstanding", lambda: make_view("만기 시 이자를 한꺼번에 받습니다.", gold=JEONSE)),
    ("contradictory", "inconsistency", lambda: make_view("네, 한도는 1인당 1억 원입니다.", kind="reconfirm", history=HISTORY)),
    ("unverifiable", "fabricated_detail", lambda: make_view(TWO_SENTENCES)),
    ("unverifiable", "subjective_opinion", lambda: make_view(TWO_SENTENCES)),
    (
        "irrelevance",
        "condition_not_satisfied",
        lambda: make_view("은행권 DSR 규제 비율은 40%입니다.", answer="40%", clue=DSR_CLUE, gold=DSR),
    ),
    ("irrelevance", "question_misunderstanding", lambda: make_view("예금자보호 한도는 1억 원입니다.", sibling_seeds=SIBLINGS)),
    (
        "irrelevance",
        "off_topic_drift",
        lambda: make_view(
            "예금자보호 한도는 1억 원입니다.",
            other_context=[
                {"passage_id": "p7", "text": INSURANCE, "doc_id": "doc-2"},
                {"passage_id": "p8", "text": DSR, "doc_id": "doc-3"},
            ],
        ),
    ),
    ("false_acceptance", None, lambda: make_view("예금자보호 한도는 1억 원입니다.", hard_negatives=list(NEGATIVES))),
    ("false_refusal", None, lambda: make_view("예금자보호 한도는 1억 원입니다.")),
]


@pytest.mark.parametrize("htype,subtype,build", CASES, ids=[f"{t}-{s}" for t, s, _ in CASES])
def test_injectors_are_deterministic_per_seed(htype, subtype, build):
    outs = {}
    for seed in range(6):
        a, b = run(htype, build(), subtype, seed), run(htype, build(), subtype, seed)
        assert a is not None and a == b
        assert a.response != build().turn["response"] or a.context is not None
        outs[seed] = a
    if htype != "contradictory" or subtype not in ("modifier_change", "financial_term_misunderstanding"):
        assert len({(o.response, o.counterpart) for o in outs.values()}) > 1 or htype == "irrelevance"


# ---- naturalness -----------------------------------------------------------------------------------
def test_naturalness_penalizes_broken_particles_and_spacing():
    orig = "적금은 만기 시 이자를 한꺼번에 받습니다."
    assert naturalness(orig, "적금은 만기 시 원금을 한꺼번에 받습니다.", "contradictory") == (3, [])
    score, issues = naturalness(orig, "적금은 만기 시 원금을를 한꺼번에 받습니다.", "contradictory")
    assert score == 2 and issues == ["broken particle"]
    assert "broken particle" in naturalness(orig, "적금은 만기 시 원금이가 지급됩니다.", "contradictory")[1]
    assert "broken particle" in naturalness(orig, "한도는은 1억 원입니다.", "contradictory")[1]
    score, issues = naturalness(orig, "적금은 만기 시  원금을 한꺼번에 받습니다.", "contradictory")
    assert score == 2 and issues == ["double space"]
    score, issues = naturalness(orig, "적금은  만기 시 원금을를 한꺼번에", "contradictory")
    assert score == 1 and len(issues) == 3
    assert naturalness(orig, orig + " " + orig * 3, "contradictory")[0] == 2  # length ratio
    assert naturalness(
        orig, "죄송하지만 참고한 문서에 적금에 대한 정보가 없어 답변드릴 수 없습니다. 해당 기관에 문의하세요.", "false_refusal"
    ) == (3, [])


def test_naturalness_accepts_nouns_ending_in_i_before_ga():
    """'차이가', '나이가' are natural: 이 belongs to the noun, not a second particle."""
    orig = "은행권과 비은행권의 금리 차이가 1%p입니다."
    assert naturalness(orig, "은행권과 비은행권의 금리 차이가 2%p입니다.", "contradictory") == (3, [])
    assert naturalness(orig, "가입자의 나이가 만 19세 이상이어야 합니다.", "irrelevance") == (3, [])


# ---- entity perturbation (Contradictory / entity_error) -----------------------------------------
from finhallu.injectors import entities  # noqa: E402
from finhallu.injectors.verify import edit_distance  # noqa: E402

CORPUS = [
    JEONSE,
    DEPOSIT,
    INSURANCE,
    "주택도시보증공사와 한국주택금융공사는 전세보증을 제공합니다. 서민금융진흥원은 햇살론을 운영합니다.",
    "주택담보대출과 신용대출의 금리는 기준금리와 가산금리로 정해집니다. 정기예금과 정기적금은 예금자보호 대상입니다.",
    "신용카드와 체크카드의 부가서비스는 다릅니다.",
]
INV = entities.EntityInventory.build(CORPUS, "ko")
HUG = "전세 계약이 끝났는데도 집주인이 보증금을 돌려주지 않으면 주택도시보증공사가 대신 지급합니다."


def test_inventory_types_organisations_products_and_terms():
    types = dict(zip(INV.names, INV.types))
    assert types["주택도시보증공사"] == types["한국주택금융공사"] == types["예금보험공사"] == "organisation"
    assert types["주택담보대출"] == types["신용대출"] == types["정기예금"] == "product"
    assert types["기준금리"] == types["가산금리"] == "term"
    assert "보증금" not in types or types["보증금"] == "term"
    assert entities.entity_type("공사", "ko") is None  # a bare head noun is no entity


@pytest.mark.parametrize("strategy", ["embedding", "instructed"])
@pytest.mark.parametrize("selection", ["uniform", "theme", "position"])
def test_entity_error_swaps_one_entity_for_another_of_its_type(strategy, selection):
    view = make_view(
        HUG,
        gold=JEONSE + " 주택도시보증공사는 보증이행을 심사합니다.",
        clue=HUG,
        answer="주택도시보증공사",
        entities=INV,
        query="보증금을 못 받으면 누가 대신 지급하나요?",
    )
    seen = set()
    for seed in range(8):
        out = entities.perturb(view, random.Random(seed), strategy, selection, sigma=0.5)
        assert out is not None and out.subtype == "entity_error" and out.strategy.startswith(f"{strategy}/")
        old, new = out.edit.split(" -> ")
        assert old == "주택도시보증공사" and INV.types[INV.index[new]] == "organisation" and new != old
        assert out.response == HUG.replace(old + "가", new + ("이" if has_batchim(new) else "가"))  # particle re-picked
        assert edit_distance(HUG, out.response)[1] == 1  # one word changed
        assert judge(view, out, "contradictory"), out
        seen.add(new)


def test_entity_error_fixes_the_particle_and_needs_an_entity():
    view = make_view("신용대출은 만기 전에 갚을 수 있습니다.", gold=CORPUS[4], entities=INV)
    made = set()
    for seed in range(24):
        out = entities.perturb(view, random.Random(seed), ("instructed", "embedding")[seed % 2], "uniform", sigma=1.0)
        new = out.edit.split(" -> ")[1]
        assert out.response == new + ("은" if has_batchim(new) else "는") + " 만기 전에 갚을 수 있습니다."
        made.add(has_batchim(new))
    assert made == {True, False}  # both particles exercised (주택담보대출은, 신용카드는)
    assert entities.perturb(make_view("한도는 1억 원입니다.", entities=INV), random.Random(0)) is None
    assert entities.perturb(make_view(HUG), random.Random(0)) is None  # no inventory


def has_batchim(word: str) -> bool:
    from finhallu.text.words import has_final_consonant

    return has_final_consonant(word)


def test_position_selection_follows_head_body_tail():
    text = "신용대출 금리는 기준금리에 가산금리를 더해 정하며 주택담보대출은 별도의 한도가 적용되고 정기예금 금리와 비교합니다."
    view = make_view(text, gold=text, entities=INV)
    found = INV.in_response(text)
    segments = set()
    for seed in range(40):
        (name, start, end), how = entities.select_mention(view, found, "position", random.Random(seed))
        seg = how.split(":")[1].split("~")[0]
        rel = (start + end) / 2 / len(text)
        if "~" not in how:
            lo, hi = {"head": (0, 0.25), "body": (0.25, 0.75), "tail": (0.75, 1.01)}[seg]
            assert lo <= rel < hi, (name, how)
        segments.add(seg)
    assert segments == {"head", "body", "tail"}
    (name, _, _), how = entities.select_mention(
        make_view(text, entities=INV, query="주택담보대출 한도는?"), found, "theme", random.Random(0)
    )
    assert how == "theme" and name == "주택담보대출"


def test_verify_label_rejects_entity_swaps_that_are_not_one_swap_or_are_supported():
    v = make_view(HUG, gold=JEONSE)
    ok = HUG.replace("주택도시보증공사가", "한국주택금융공사가")
    assert fake(HUG, ok, "contradictory", "entity_error", v)
    assert not fake(HUG, HUG.replace("주택도시보증공사가", "주택도시보증공사가 3일 안에"), "contradictory", "entity_error", v)
    assert not fake(HUG, ok.replace("대신 지급합니다", "지급을 거절합니다"), "contradictory", "entity_error", v)
    assert not fake(HUG, ok, "contradictory", "entity_error", v, evidence=[ok])  # the evidence states it


# ---- operations, edit size, judge ---------------------------------------------------------------
def test_injection_operations_run_the_rules_injectors_through_the_router():
    from finhallu.llm.router import LLMRouter
    from finhallu.injectors.ops import to_out

    router = LLMRouter({})
    for htype, subtype, build in CASES:
        view = build()
        direct = to_out(run(htype, view, subtype, 5))
        routed = router.call("injector_a", f"inject_{htype}", view=view.payload(), subtype=subtype, lang="ko", rng_seed=5)
        assert routed == direct
        assert TurnView.from_payload(view.payload()).payload() == view.payload()


def test_edit_distance_counts_characters_and_words():
    assert edit_distance("한도는 1억 원입니다.", "한도는 3억 원입니다.") == (1, 1)
    assert edit_distance("abc def", "abc xyz def") == (4, 1)
    assert edit_distance("", "abc") == (3, 1)
    long_a, long_b = "가" * 300 + "나", "가" * 300 + "다"
    assert edit_distance(long_a, long_b) == (1, 1)


def test_edit_distance_trimming_shared_ends_keeps_the_distance():
    """Both distances drop the common prefix and suffix first (characters and words): the same
    result as the full dynamic programme, on random edits of a sentence."""
    import random

    from finhallu.injectors.verify import _levenshtein

    rng = random.Random(7)
    words = "매출 영업이익 1억 원 증가 감소 the revenue rose fell by 5%".split()
    for _ in range(200):
        a = [rng.choice(words) for _ in range(rng.randint(0, 12))]
        b = list(a)
        for _ in range(rng.randint(0, 3)):
            op = rng.random()
            i = rng.randint(0, len(b))
            if op < 0.4 and b:
                b[min(i, len(b) - 1)] = rng.choice(words)
            elif op < 0.7:
                b.insert(i, rng.choice(words))
            elif b:
                del b[min(i, len(b) - 1)]
        sa, sb = " ".join(a), " ".join(b)
        assert edit_distance(sa, sb) == (_levenshtein(sa, sb), _levenshtein(sa.split(), sb.split()))


def test_levenshtein_small_and_large_inputs_agree_with_the_full_matrix():
    """_levenshtein (bit-parallel) gives the textbook distance (a full matrix here) on small inputs
    (a minimal edit's middle) and large ones; the word distance alone is edit_distance's second
    number."""

    from finhallu.injectors.verify import _levenshtein, word_edit_distance

    def full(a, b):
        d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
        return d[-1][-1]

    rng = random.Random(11)
    sizes = Counter()
    for _ in range(300):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 45))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 45))]
        sizes[len(a) * len(b) <= 400] += 1
        assert _levenshtein(a, b) == full(a, b)
        sa, sb = " ".join(a), " ".join(b)
        assert word_edit_distance(sa, sb) == edit_distance(sa, sb)[1] == full(sa.split(), sb.split())
    assert sizes[True] > 50 and sizes[False] > 50


def test_injection_judge_rates_appropriateness_and_naturalness():
    from finhallu.stages.injection_qc import judge_injection

    orig = "예금자보호 한도는 1인당 1억 원입니다."
    turn = {"answerable": True, "clue_text": DEPOSIT_CLUE, "answer": "1억 원"}
    ok = judge_injection("contradictory", "number_error", orig, orig.replace("1억", "3억"), [DEPOSIT], "", turn, "ko")
    assert (ok.appropriateness, ok.naturalness) == (3, 3)
    wrong = judge_injection("contradictory", "number_error", orig, orig.replace("1억", "5천만"), [DEPOSIT], "", turn, "ko")
    assert wrong.appropriateness == 1 and any("label not verified" in r for r in wrong.reasons)
    big = judge_injection(
        "contradictory",
        "number_error",
        orig,
        "보험금 청구권의 예금자보호 한도는 가구당 무려 3억 원 정도로 알려져 있습니다.",
        [DEPOSIT],
        "",
        turn,
        "ko",
        max_edit_words=4,
    )
    assert big.appropriateness == 2 and any("not minimal" in r for r in big.reasons)
    clumsy = judge_injection(
        "contradictory", "number_error", orig, "예금자보호 한도는은  1인당 3억 원", [DEPOSIT], "", turn, "ko"
    )
    assert clumsy.appropriateness == 3 and clumsy.naturalness == 1


def test_false_acceptance_context_holds_no_gold_passage_and_no_clue():
    view = make_view("예금자보호 한도는 1인당 1억 원입니다.", hard_negatives=list(NEGATIVES))
    out = run("false_acceptance", view)
    shown = [NEGATIVES[c["passage_id"]] for c in out.context]
    assert all(c["role"] == "hard_negative" for c in out.context) and "p1" not in {c["passage_id"] for c in out.context}
    assert not any(contains_normalized(t, DEPOSIT_CLUE) for t in shown) and DEPOSIT not in shown
    fr = run("false_refusal", view)
    assert fr.context is None  # P_n kept: the stage publishes the turn's own context


@pytest.mark.parametrize(
    "response,clue,answer",
    [
        # a year is no condition, and a yes/no answer has no value to swap
        (
            "아니요, 3년이 지나면 수수료가 없습니다. 2025년 1월 13일부터 기준이 바뀌었습니다.",
            "대출을 받은 지 3년이 지난 뒤 상환하면 수수료가 없고, 2025년 1월 13일부터 기준이 바뀌었습니다.",
            "아니오",
        ),
        # a threshold and an amount are not values of parallel conditions
        (
            "서울은 보증금 1억 6,500만 원 이하 임차인이 5,500만 원까지 우선변제를 받습니다.",
            "서울의 경우 보증금 1억 6,500만 원 이하 임차인은 5,500만 원까지 우선해 변제받을 수 있습니다.",
            "1억 6,500만 원",
        ),
        # far apart across clauses: another quantity, not another condition's value
        (
            "연체하면 최대 연 3%포인트를 더합니다.",
            "연체하면 약정 금리에 최대 연 3%포인트를 더한 연체이자율이 적용되며, 이 경우에도 연체이자율은 "
            "법정최고금리 연 20%를 넘을 수 없습니다.",
            "3%포인트",
        ),
    ],
)
def test_condition_not_satisfied_needs_parallel_values_of_the_answer(response, clue, answer):
    view = make_view(response, answer=answer, clue=clue, gold=clue)
    assert run("irrelevance", view, "condition_not_satisfied") is None


def test_condition_not_satisfied_swaps_table_cells_under_their_headers():
    clue = "3억 원 이하 | 0.40% | 0.15%"
    table = (
        "영세가맹점 우대수수료율은 다음과 같습니다.\n연 매출액 | 신용카드 | 체크카드\n" + clue + "\n3억~5억 원 | 1.00% | 0.75%"
    )
    view = make_view("체크카드 기준 연 매출액 3억 원 이하는 0.15%입니다.", answer="0.15%", clue=clue, gold=table)
    out = run("irrelevance", view, "condition_not_satisfied")
    # the other column's value under that column's header (체크카드 … 0.40% would be Contradictory)
    assert out.response == "신용카드 기준 연 매출액 3억 원 이하는 0.40%입니다."
    assert judge(view, out, "irrelevance")
    # no header to name the other column's condition: infeasible, not a bare number swap
    bare = make_view("체크카드 기준 연 매출액 3억 원 이하는 0.15%입니다.", answer="0.15%", clue=clue, gold=clue)
    assert run("irrelevance", bare, "condition_not_satisfied") is None


# ---- labels that must hold (reviewed cases) -------------------------------------------------------
def _one_sentence_changed(orig: str, new: str) -> str:
    a, b = split_sentences(orig), split_sentences(new)
    changed = [y for x, y in zip(a, b) if x != y]
    assert len(a) == len(b) and len(changed) == 1, (orig, new)
    return changed[0]


DSR_LIST = (
    "현재 총대출액이 1억 원을 초과하는 차주에게는 차주 단위 DSR 규제가 적용되어, 은행권에서는 40%, "
    "제2금융권에서는 50%를 넘지 않는 범위에서만 대출을 받을 수 있습니다."
)
CARD_LIST = (
    "기본 한도를 넘는 금액이 있더라도 전통시장, 대중교통, 문화비 사용분은 별도의 추가 한도 안에서 더 공제받을 수 있으며, "
    "추가 한도는 총급여 7,000만 원 이하이면 300만 원, 초과하면 200만 원입니다."
)
HUG_LIST = "전세보증금은 수도권의 경우 7억 원 이하, 그 외 지역은 5억 원 이하인 경우에 한해 가입할 수 있습니다."


@pytest.mark.parametrize(
    "response,answer,clue,asked,other,condition",
    [
        # the response restates the clue's list: the asked item goes, the other stays under its own condition
        (
            "안내에 따르면 " + DSR_LIST + " 2025년 7월 1일부터 3단계가 시행되었습니다.",
            "40%",
            DSR_LIST,
            "40%",
            "50%",
            "제2금융권에서는",
        ),
        (CARD_LIST, "200만 원", CARD_LIST, "200만 원", "300만 원", "이하이면"),
        # the response states only the asked item: the other value under the other condition
        (
            "수도권 주택의 전세보증금이 7억 원 이하여야 가입할 수 있습니다.",
            "7억 원 이하",
            HUG_LIST,
            "7억 원",
            "5억 원",
            "그 외 지역",
        ),
        (
            "총급여 7,000만 원 초과 근로자의 추가 공제 한도는 200만 원입니다.",
            "200만 원",
            CARD_LIST,
            "200만 원",
            "300만 원",
            "이하",
        ),
    ],
)
def test_condition_not_satisfied_states_another_condition_with_its_value(response, answer, clue, asked, other, condition):
    """Not a number swap ("은행권에서는 50%, 제2금융권에서는 50%" is Contradictory): the other condition's
    value stated with that condition, the asked value nowhere, no value twice, one sentence edited."""
    view = make_view(response, answer=answer, clue=clue, gold=clue + " 2025년 7월 1일부터 3단계가 시행되었습니다.")
    for seed in range(4):
        out = run("irrelevance", view, "condition_not_satisfied", seed)
        assert out is not None and out.subtype == "condition_not_satisfied"
        changed = _one_sentence_changed(response, out.response)
        assert not contains_normalized(out.response, asked) and not contains_normalized(out.response, answer)
        assert not number_keys(asked) & number_keys(out.response)
        spans = [n for n in re.findall(r"[\d,]+(?:만|억)? ?(?:원|%)", changed)]
        assert len(spans) == len(set(spans)), changed  # never a duplicated value
        assert contains_normalized(changed, other)
        at = changed.index(condition)
        assert at < changed.index(other.split()[0]) and condition in changed  # the condition stated with it
        assert judge(view, out, "irrelevance")


def test_condition_not_satisfied_is_infeasible_without_clean_parallel_conditions():
    isa = "만 19세 이상 거주자이거나, 만 15세 이상으로 직전 연도 근로소득이 있는 거주자라면 가입할 수 있습니다."
    # thresholds inside conditions, not values listed under conditions: no "만 19세 이상 … 만 19세 이상"
    assert run("irrelevance", make_view(isa, answer="만 15세 이상", clue=isa, gold=isa), "condition_not_satisfied") is None
    # the asked value also stated elsewhere in the response: it cannot disappear by a local edit
    twice = "은행권 DSR 규제 비율은 40%입니다. 은행권 기준 40%를 넘을 수 없습니다."
    assert run("irrelevance", make_view(twice, answer="40%", clue=DSR_CLUE, gold=DSR), "condition_not_satisfied") is None
    # the other item's "condition" (최대) is one the question itself asks about: no other condition
    loan = "대출한도는 최대 3억 6천만 원이고, 생애최초 주택구입자는 최대 4억 2천만 원까지 받을 수 있습니다."
    assert (
        run(
            "irrelevance",
            make_view(
                loan,
                answer="최대 4억 2천만 원",
                clue=loan,
                gold=loan,
                query="생애최초 주택구입자는 보금자리론을 최대 얼마까지 빌릴 수 있어?",
            ),
            "condition_not_satisfied",
        )
        is None
    )
    # the response names no condition to replace
    bare = make_view("DSR 규제 비율은 40%입니다.", answer="40%", clue=DSR_CLUE, gold=DSR)
    assert run("irrelevance", bare, "condition_not_satisfied") is None


def test_condition_not_satisfied_keeps_the_responses_own_phrasing():
    """No stamped template: each injected response is its original with one local edit."""
    outs = []
    for response in (
        "은행권에서 대출을 받으면 DSR 규제 비율 40%가 적용됩니다.",
        "은행권 DSR 규제 비율은 40%입니다.",
        "확인해 보니 은행권의 차주별 DSR 한도는 40%입니다. 총 대출액이 1억 원 이하인 차주는 제외됩니다.",
    ):
        out = run("irrelevance", make_view(response, answer="40%", clue=DSR_CLUE, gold=DSR), "condition_not_satisfied")
        assert "비은행권" in _one_sentence_changed(response, out.response)
        assert out.response.replace("비은행권", "은행권").replace("50%", "40%") == response
        outs.append(out.response)
    assert len({split_sentences(o)[0] for o in outs}) == len(outs)


TENK_REV = (
    "Revenue decreased $0.2 billion in fiscal 2012. Revenue was $3.0 billion in fiscal 2012 compared to "
    "$3.2 billion in fiscal 2011. The company operates 120 branches in three states."
)
EN_SIBLINGS = [
    {
        "seed_id": "e2",
        "passage_id": "p1",
        "question": "What was revenue in fiscal 2012?",
        "answer": "$3.0 billion",
        "clue_text": "Revenue was $3.0 billion in fiscal 2012 compared to $3.2 billion in fiscal 2011.",
        "qa_kind": "span",
    },
    {
        "seed_id": "e3",
        "passage_id": "p1",
        "question": "How many branches does the company operate?",
        "answer": "120 branches",
        "clue_text": "The company operates 120 branches in three states.",
        "qa_kind": "span",
    },
]


def test_question_misunderstanding_never_lets_the_asked_answer_be_derived():
    from finhallu.injectors.irrelevance import answer_derivable

    assert answer_derivable("$0.2 billion", "$3.0 billion compared to $3.2 billion in fiscal 2011")  # a difference
    assert answer_derivable("$200 million", "Revenue was $3.0 billion, down from $3.2 billion.")  # another scale
    assert answer_derivable("6.25%", "Revenue was $3.0 billion, down from $3.2 billion.")  # a change rate
    assert answer_derivable("1억 5천만 원", "예금 1억 원과 적금 5천만 원")  # a sum
    assert not answer_derivable("$0.2 billion", "The company operates 120 branches in three states.")
    view = make_view(
        "Revenue decreased $0.2 billion in fiscal 2012.",
        answer="$0.2 billion",
        clue="Revenue decreased $0.2 billion in fiscal 2012.",
        gold=TENK_REV,
        lang="en",
        query="By how much did revenue decrease in fiscal 2012?",
        sibling_seeds=EN_SIBLINGS,
    )
    for seed in range(8):
        out = run("irrelevance", view, "question_misunderstanding", seed)
        assert out is not None and "120 branches" in out.response and "3.2 billion" not in out.response
        assert not answer_derivable("$0.2 billion", out.response)
    only_derivable = make_view(
        view.turn["response"],
        answer="$0.2 billion",
        clue=view.turn["clue_text"],
        gold=TENK_REV,
        lang="en",
        sibling_seeds=EN_SIBLINGS[:1],
    )
    assert run("irrelevance", only_derivable, "question_misunderstanding") is None


SCAM = "보이스피싱이 의심되면 즉시 통화를 끊어야 합니다. 곧바로 112에 신고하여 지급정지를 요청하세요."


@pytest.mark.parametrize("subtype", ["fabricated_detail", "subjective_opinion"])
def test_unverifiable_never_replaces_the_sentence_that_answers(subtype):
    clue = "피해가 의심되면 곧바로 112에 신고하여 지급정지를 요청해야 합니다."
    view = make_view(SCAM, answer="112에 신고", clue=clue, gold=clue, query="보이스피싱 피해가 의심되면 어떻게 해야 하나요?")
    shapes = set()
    for seed in range(16):
        out = run("unverifiable", view, subtype, seed)
        sents = split_sentences(out.response)
        assert sents[-1] == split_sentences(SCAM)[-1] and contains_normalized(out.response, "112에 신고")
        assert len(sents) == 3  # inserted, never replaced
        assert judge(view, out, "unverifiable")
        shapes.add(len(sents))
    # the same check by the clue's content when the answer is a bare yes/no
    yes = make_view("네, 가능합니다. 곧바로 112에 신고하여 지급정지를 요청할 수 있습니다.", answer="예", clue=clue, gold=clue)
    for seed in range(8):
        assert "112에 신고" in run("unverifiable", yes, subtype, seed).response


def test_term_swap_never_duplicates_a_span():
    both = "주택 전체를 전세나 월세로 주고 있어도 주택연금에 가입할 수 있습니다."
    out = run(
        "contradictory",
        make_view(both, gold=both + " 주택연금은 오피스텔도 됩니다.", answer="예"),
        "financial_term_misunderstanding",
    )
    assert out is None or not re.search(r"(전세|월세)나 \1", out.response)
    assert swap_first(both, [("전세", "월세"), ("월세", "전세")], "ko") is None
    net = "가계대출은 순증가(감소) 기준으로 집계합니다."
    assert run("contradictory", make_view(net, gold=DEPOSIT), "modifier_change") is None  # never 순증가(증가)


@pytest.mark.parametrize(
    "response,expected",
    [
        (
            "부부합산 연소득이 1억 원을 초과하면 보증을 받을 수 없습니다.",
            "부부합산 연소득이 1억 원 이하이면 보증을 받을 수 없습니다.",
        ),
        ("한도를 초과하는 금액은 돌려받습니다.", "한도 이하인 금액은 돌려받습니다."),
        ("연소득 7천만 원 이하이면 우대금리가 적용됩니다.", "연소득 7천만 원 초과이면 우대금리가 적용됩니다."),
        # no copula form for 초과해서: the next candidate is swapped instead
        ("1억 원을 초과해서 빌릴 수 없습니다.", "1억 원을 초과해서 빌릴 수 있습니다."),
    ],
)
def test_bound_swap_conjugates_instead_of_making_ihahada(response, expected):
    view = make_view(response, gold=DEPOSIT, answer="")
    out = run("contradictory", view, "modifier_change")
    assert out is not None and out.response == expected
    assert not re.search(r"(이하|이상|미만)(하|한|할|해|합)", out.response)
    assert judge(view, out, "contradictory")


def test_modifier_change_is_refused_when_the_evidence_states_the_sentence_behind_an_opener():
    evidence = "정기예금은 만기 전 중도 인출이 가능합니다. 정기예금은 만기 전 중도 인출이 불가능합니다."
    view = make_view("안내에 따르면 정기예금은 만기 전 중도 인출이 불가능합니다.", gold=evidence)
    assert run("contradictory", view, "modifier_change") is None


def test_number_edits_never_make_impossible_dates_or_malformed_numerals():
    from finhallu.injectors.edits import impossible_date, malformed_numeral

    assert impossible_date("6월 31일") and impossible_date("2025년 2월 29일") and not impossible_date("2024년 2월 29일")
    assert malformed_numeral("27천 건") and malformed_numeral("12천만 원") and not malformed_numeral("2만 7천 건")
    date = "안심전세 앱의 시세 정보는 매년 5월 31일에 갱신됩니다."
    count = "관련 민원은 2024년 한 해 동안 9천 건 접수되었습니다."
    for seed in range(60):
        for text in (date, count):
            for sub in ("number_error", "inconsistency"):
                hist = [{"query": "언제요?", "response": text}] if sub == "inconsistency" else None
                out = run("contradictory", make_view(text, gold=text, answer="", history=hist), sub, seed)
                if out is None:
                    continue
                assert not impossible_date(out.response), out.response
                assert not re.search(r"(?<![\d,])\d{2,}천", out.response), out.response
        fab = run("unverifiable", make_view(TWO_SENTENCES), "fabricated_detail", seed)
        assert not re.search(r"(?<![\d,])\d{2,}천", fab.response), fab.response


# ---- assignment: type weights, min_per_subtype, target turns -------------------------------------
from collections import Counter  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from finhallu.stages.inject import InjectConfig  # noqa: E402
from finhallu.stages.inject import _assign, _feasible  # noqa: E402

TYPES = ["contradictory", "unverifiable", "irrelevance", "false_acceptance", "false_refusal"]
LEAVES = [
    ("contradictory", "number_error"),
    ("contradictory", "modifier_change"),
    ("unverifiable", "fabricated_detail"),
    ("unverifiable", "subjective_opinion"),
    ("irrelevance", "off_topic_drift"),
    ("false_acceptance", None),
    ("false_refusal", None),
]


def _items(n: int, leaves=LEAVES):
    inj = SimpleNamespace(name="rules_a")
    return [({"dialogue_id": f"d{i:03d}"}, inj, {lf: [] for lf in leaves}) for i in range(n)]


def _types(assigned) -> Counter:
    return Counter(order[0][0] for _, _, order, _ in assigned)


def test_assign_honours_type_weights():
    cfg = InjectConfig(
        type_weights={
            "contradictory": 39,
            "unverifiable": 17.1,
            "irrelevance": 17.1,
            "false_acceptance": 9.7,
            "false_refusal": 17.1,
        }
    )
    got = _types(_assign(_items(200), (1, "test"), 1, cfg.weights()))
    assert abs(got["contradictory"] - 78) <= 2 and abs(got["false_acceptance"] - 19) <= 2, got
    balanced = _types(_assign(_items(200), (1, "test"), 1, InjectConfig().weights()))
    assert max(balanced.values()) - min(balanced.values()) <= 1, balanced


def test_unanswerable_share_sets_false_acceptance():
    got = _types(_assign(_items(200), (2, "test"), 1, InjectConfig(unanswerable_share=0.1).weights()))
    assert abs(got["false_acceptance"] - 20) <= 1, got


def test_assign_keeps_min_per_subtype_under_small_weights_and_drops_zero_weights():
    weights = InjectConfig(type_weights={"unverifiable": 0.01, "false_refusal": 0}).weights()
    assigned = _assign(_items(100), (3, "test"), 1, weights)
    leaves = Counter(order[0] for _, _, order, _ in assigned)
    assert leaves[("unverifiable", "fabricated_detail")] >= 1 and leaves[("unverifiable", "subjective_opinion")] >= 1
    assert sum(n for lf, n in leaves.items() if lf[0] == "unverifiable") <= 3
    assert all(lf[0] != "false_refusal" for _, _, order, _ in assigned for lf in order)


# Leaves a dialogue can carry, drawn per dialogue: rare ones (a quarter of the dialogues) beside
# common ones, so that balance needs dialogues moved off their first choice.
_FEASIBLE_SHARE = [0.6, 0.25, 0.8, 0.9, 0.5, 0.5, 1.0]


def _uneven_items(ids):
    inj = SimpleNamespace(name="rules_a")
    out = []
    for did in ids:
        draw = random.Random(did)
        out.append(({"dialogue_id": did}, inj, {lf: [] for lf, p in zip(LEAVES, _FEASIBLE_SHARE) if draw.random() < p}))
    return out


def _first_leaves(assigned) -> dict:
    return {d["dialogue_id"]: order[0] for d, _, order, _ in assigned}


def test_assignment_keeps_earlier_dialogues_when_dialogues_are_added():
    # A rebuild with 1 % more documents must not re-label the benchmark: each dialogue's leaf
    # depends on draws keyed by its own id, and a new dialogue displaces only its chain.
    weights = InjectConfig(type_weights={"contradictory": 39, "false_acceptance": 9.7}).weights()
    ids = [f"dlg-{i:04d}" for i in range(600)]
    before = _first_leaves(_assign(_uneven_items(ids), (7, "test"), 1, weights))
    after = _first_leaves(_assign(_uneven_items(ids + [f"new-{i}" for i in range(6)]), (7, "test"), 1, weights))
    same = sum(before[d] == after[d] for d in ids)
    assert same >= 0.97 * len(ids), same
    # the input order plays no part
    shuffled = _uneven_items(ids)
    random.Random(1).shuffle(shuffled)
    assert _first_leaves(_assign(shuffled, (7, "test"), 1, weights)) == before


def test_assignment_fills_rare_leaves_to_their_share():
    # number_error's type has 39 % of the split and its two subtypes share it evenly, though
    # modifier_change fits only a quarter of the dialogues: dialogues that could take either are
    # moved so that both subtypes, and every type, get their shares.
    paper = {"contradictory": 39, "unverifiable": 17.1, "irrelevance": 17.1, "false_acceptance": 9.7, "false_refusal": 17.1}
    weights = InjectConfig(type_weights=paper).weights()
    assigned = _assign(_uneven_items([f"dlg-{i:04d}" for i in range(600)]), (3, "test"), 1, weights)
    leaves = Counter(_first_leaves(assigned).values())
    types = Counter(lf[0] for lf in leaves.elements())
    for t, w in weights.items():
        assert abs(types[t] - 600 * w) <= 1, (t, types)
    assert abs(leaves[("contradictory", "number_error")] - leaves[("contradictory", "modifier_change")]) <= 1, leaves


def test_injectors_share_the_test_split_evenly_and_stably():
    from finhallu.stages.inject import _share_out

    ids = [f"dlg-{i:03d}" for i in range(101)]
    before = _share_out(ids, ["rules_a", "rules_b"], (5, "test"))
    counts = Counter(before.values())
    assert sorted(counts.values()) == [50, 51]
    after = _share_out(ids + ["dlg-new"], ["rules_a", "rules_b"], (5, "test"))
    assert sum(before[d] != after[d] for d in ids) <= 1
    assert sorted(Counter(after.values()).values()) == [51, 51]


@pytest.mark.parametrize(
    "bad",
    [
        {"type_weights": {"hallucination": 1}},
        {"type_weights": {"contradictory": -1}},
        {"type_weights": {t: 0 for t in TYPES}},
        {"types": ["contradictory"], "unanswerable_share": 0.1},
    ],
)
def test_inject_config_rejects_bad_weights(bad):
    with pytest.raises(ValueError):
        InjectConfig(**bad)


def _dialogue_views(n_turns: int) -> list[TurnView]:
    views, history = [], []
    for _ in range(n_turns):
        v = make_view(DEPOSIT_CLUE, history=list(history))
        views.append(v)
        history.append(v.turn)
    return views


def test_feasible_prefers_turns_with_history_and_breaks_ties_at_random():
    reg = {"false_refusal": SimpleNamespace(prefers=lambda v, sub=None: 1.0)}
    inj = SimpleNamespace(
        name="rules_a",
        registry=reg,
        cfg=SimpleNamespace(max_minimal_edit_words=4),
        rules=lambda v, htype, sub, seed, did: Injected(None, "죄송하지만 답변드리기 어렵습니다.", "refusal"),
    )
    views = _dialogue_views(6)
    targets = Counter(
        _feasible(views, [("false_refusal", None)], inj, f"dlg-{i}")[("false_refusal", None)][0][0].turn["turn_index"]
        for i in range(60)
    )
    assert targets[1] == 0 and len(targets) >= 4 and max(targets) == 6, targets
    again = _feasible(views, [("false_refusal", None)], inj, "dlg-7")[("false_refusal", None)][0][0].turn["turn_index"]
    assert again == _feasible(views, [("false_refusal", None)], inj, "dlg-7")[("false_refusal", None)][0][0].turn["turn_index"]
    # a one-turn dialogue still gets its turn
    assert _feasible(views[:1], [("false_refusal", None)], inj, "dlg-x")[("false_refusal", None)][0][0].turn["turn_index"] == 1


def _feasibility_case(tmp_path):
    from finhallu.result_cache import ResultCache
    from finhallu.stages.inject import _FeasibilityMemo, _Injector, _leaves

    cfg = InjectConfig()
    inj = _Injector("rules_a", "injector_a", "a", None, cfg, INJ, None)  # the rules need neither LLM nor P_n
    views, history = [], []
    for response in (DEPOSIT_CLUE, "보호 한도는 2025년 9월 1일부터 5천만 원에서 1억 원으로 상향되었습니다.", DSR_CLUE):
        v = make_view(response, history=list(history), evidence=[DEPOSIT, DSR])
        views.append(v)
        history.append(v.turn)
    cache = ResultCache(tmp_path / "results.sqlite", "inject-feasibility", "test")
    return inj, views, _leaves(cfg, INJ), lambda digests: _FeasibilityMemo(cache, cfg, digests)


def _targets(feasible: dict) -> dict:
    return {leaf: [(v.turn["turn_index"], seed) for v, seed in cands] for leaf, cands in feasible.items()}


def test_feasibility_memo_gives_what_the_rules_give_and_reruns_only_what_changed(tmp_path, monkeypatch):
    inj, views, leaves, memo_for = _feasibility_case(tmp_path)
    plain = _targets(_feasible(views, leaves, inj, "dlg-1"))
    assert len(plain) >= 4  # several leaves fit: the case tests something
    memo = memo_for({("train", "ko"): b"inventory-1"})
    assert _targets(_feasible(views, leaves, inj, "dlg-1", memo, "train")) == plain

    tried: list = []
    real_rules = inj.rules
    monkeypatch.setattr(inj, "rules", lambda v, htype, sub, *a: tried.append((htype, sub)) or real_rules(v, htype, sub, *a))
    assert _targets(_feasible(views, leaves, inj, "dlg-1", memo, "train")) == plain
    assert tried == []  # every leaf from the memo

    # The split's entity inventory changed: entity_error alone is tried again.
    _feasible(views, leaves, inj, "dlg-1", memo_for({("train", "ko"): b"inventory-2"}), "train")
    assert {leaf for leaf in tried} == {("contradictory", "entity_error")}

    # Another dialogue id (its seeds and ties) or an edited turn: tried again.
    tried.clear()
    _feasible(views, leaves, inj, "dlg-2", memo, "train")
    assert len(set(tried)) >= len(plain)
    tried.clear()
    edited = views[:2] + [dataclasses.replace(views[2], turn={**views[2].turn, "response": DEPOSIT_CLUE})]
    again = _targets(_feasible(edited, leaves, inj, "dlg-1", memo, "train"))
    assert tried and again == _targets(_feasible(edited, leaves, inj, "dlg-1"))


def test_false_acceptance_negatives_are_judged_on_demand_once_in_rank_order():
    # retrieve.judge_answerable_seeds: on_demand leaves an answerable seed's candidates to inject,
    # which judges them (rank order, lazily) the first time a False Acceptance attempt needs them.
    import threading

    import polars as pl

    from finhallu.stages.retrieve import RetrieveConfig
    from finhallu.llm.router import LLMRouter
    from finhallu.answerability import DEFERRED
    from finhallu.stages.inject import _FalseAcceptanceNegatives

    clue = "예금자보호 한도는 1인당 1억 원으로 상향되었습니다."
    seed = {"seed_id": "s1", "question": "예금자보호 한도는 얼마인가요?", "clue_text": clue, "answer": "1억 원", "lang": "ko"}
    texts = {f"c{i}": f"신용카드 연회비 안내 {i}: 해지하면 남은 기간만큼 돌려받습니다." for i in range(8)}
    texts["c1"] = "예금자보호 한도는 1인당 상향되었습니다 (금액은 공지 참조)."  # covers the clue's words: answerable
    rows = [
        {
            "seed_id": "s1",
            "passage_id": f"c{i}",
            "candidate_rank": i + 1,
            "unanswerable": None,
            "is_hard_negative": False,
            "judge": DEFERRED,
        }
        for i in range(8)
    ]
    rows.append(
        {
            "seed_id": "s2",
            "passage_id": "c7",
            "candidate_rank": 1,
            "unanswerable": True,
            "is_hard_negative": True,
            "judge": "offline:rules",
        }
    )
    negs = _FalseAcceptanceNegatives(
        pl.DataFrame(rows),
        {"s1": seed},
        {p: {"text": t} for p, t in texts.items()},
        LLMRouter({}),
        RetrieveConfig(judge_round_margin=1),
        k=3,
    )
    assert negs.planned("s1") == ["c0", "c1", "c2"]  # planning sees the first K step-1 candidates
    assert negs.planned("s2") == ["c7"]  # judged in retrieve: as published
    got = []
    threads = [threading.Thread(target=lambda: got.append(negs.confirmed("s1"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [["c0", "c2", "c3"]] * 4  # c1 rejected by the judge; the next in rank order takes its place
    assert negs.planned("s1") == ["c0", "c2", "c3"] and "s1" not in negs.pending


def test_entity_names_are_read_once_per_text_with_a_home(tmp_path, monkeypatch):
    plain = entities.EntityInventory.build(CORPUS, "ko")
    read: list[str] = []
    real = entities.mentions
    monkeypatch.setattr(entities, "mentions", lambda text, lang: read.append(text) or real(text, lang))
    cache = entities.mentions_cache(tmp_path)
    first = entities.EntityInventory.build(CORPUS, "ko", cache=cache)
    assert first.names == plain.names and first.types == plain.types and len(read) == len(set(CORPUS))
    read.clear()
    extra = "한국은행은 기준금리를 연 3.25%로 동결했습니다."
    again = entities.EntityInventory.build([*CORPUS, extra], "ko", cache=cache)
    assert read == [extra]  # the corpus's names from the cache
    assert again.names == entities.EntityInventory.build([*CORPUS, extra], "ko").names
    cache.close()


def test_restated_counts_terms_said_in_any_earlier_answer_as_in_their_join():
    """Inconsistency's turn choice counts the response's figures and lexicon terms an earlier
    answer stated; the terms are read per answer (memoised) and give the count read off the
    joined history."""
    from finhallu.injectors.contradictory import _restated
    from finhallu.injectors.lexicon import TERMS
    from finhallu.text.numbers import number_keys, number_keys_in

    terms = [a for a, _ in TERMS["ko"] + MODIFIERS["ko"]]
    rng = random.Random(5)
    total = 0
    for _ in range(60):
        said = [" ".join(rng.sample(terms, 3)) + f" {rng.randint(1, 9)}억 원" for _ in range(rng.randint(0, 3))]
        history = [{"query": "질문", "response": r, "standalone_query": "질문"} for r in said]
        resp = " ".join(rng.sample(terms, 4)) + f" {rng.randint(1, 9)}억 원"
        v = make_view(resp, history=history)
        joined = "\n".join(said)
        expected = len(number_keys(resp) & number_keys_in(said)) + sum(
            1 for a, _ in TERMS["ko"] + MODIFIERS["ko"] if a in resp and a in joined
        )
        assert _restated(v) == expected
        total += expected
    assert total > 15  # histories that repeat terms and figures, not only empty overlaps
