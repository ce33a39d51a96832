"""The label verifier: each wrong label a reviewer found is rejected, the right ones pass."""

from __future__ import annotations

import pytest

from finhallu.injectors import hallu_subtypes
from finhallu.labelcheck import verify_inputs, verify_sample
from finhallu.labelcheck.fluency import fluency_issues
from finhallu.labelcheck.rules import RULES
from finhallu.text.quantities import impossible_dates, quantities, states_value


def verdict(label, response, paired="", evidence=(), history="", question="", answer=None, clue=None, lang="ko"):
    return verify_sample(**verify_inputs(label, response, paired, list(evidence), history, question, answer, clue, lang))


# ---- the shared quantities module -------------------------------------------------------------


@pytest.mark.parametrize(
    "stated, table, holds",
    [
        ("4조 1,500억 원", "(단위 : 백만원)\n| 자본총계 | 4,150,000 | 3,900,000 |", True),
        ("6,315억 원", "(단위: 백만원, %)\n| 대손충당금 잔액 | 631,500 |", True),
        ("$3.0 billion", "(In millions)\n| Revenue | 2,987 |", True),
        ("$3.0 billion", "(In millions)\n| Revenue | 3,200 |", False),
        ("4조 1,500억 원", "| 자본총계 | 4,150,000 |", False),  # no note: the scale is unknown
        ("1억 원", "8천만 원까지 보호", False),  # a round figure is not ±50 %
        ("4월", "3월과 9월에 공개", False),
    ],
)
def test_states_value_reads_scale_notes_and_rounding(stated, table, holds):
    assert states_value(table, quantities(stated)[0]) is holds


def test_unknown_scale_is_the_cautious_reading():
    answer = quantities("6,315억 원")[0]
    assert not states_value("대손충당금 잔액 631,500", answer)
    assert states_value("대손충당금 잔액 631,500", answer, unknown_scale=True)


def test_signs_and_dates():
    q = quantities("(In millions)\n| Net income (loss) | $(2,722) | $30,425 |")
    assert [x.value for x in q] == [-2722 * 10**6, 30425 * 10**6]
    assert quantities("3-5%")[0].value == 3  # a range, not a negative number
    assert impossible_dates("6월 31일, 2월 29일, February 30, March 31") == ["6월 31일", "February 30"]


# ---- every leaf has a written rule ------------------------------------------------------------


def test_every_taxonomy_leaf_has_an_acceptance_rule():
    leaves = set(hallu_subtypes()) | {"false_acceptance", "false_refusal", "faithful_answer", "true_refusal"}
    assert leaves <= set(RULES.names()), leaves - set(RULES.names())
    assert all(len(r.rule) > 30 for _, r in RULES.items())


# ---- the quoted cases ---------------------------------------------------------------------------

DSR = (
    "총대출액이 1억 원을 초과하는 차주에게는 차주 단위 DSR 규제가 적용되어, 은행권에서는 40%, 제2금융권에서는 50%를 "
    "넘지 않는 범위에서만 대출을 받을 수 있습니다."
)


def test_condition_not_satisfied_as_a_number_swap_is_rejected():
    swapped = DSR.replace("은행권에서는 40%", "은행권에서는 50%")
    v = verdict(
        "condition_not_satisfied", swapped, DSR, [DSR], question="은행권의 DSR 한도는 몇 퍼센트인가요?", answer="40%", clue=DSR
    )
    assert not v.ok
    other = "제2금융권에서는 DSR 한도가 50%입니다."
    v = verdict(
        "condition_not_satisfied",
        other,
        "은행권에서는 DSR 한도가 40%입니다.",
        [DSR],
        question="은행권의 DSR 한도는 몇 퍼센트인가요?",
        answer="40%",
        clue=DSR,
    )
    assert v.ok, v.reasons


@pytest.mark.parametrize(
    "orig, swapped, answer",
    [
        (
            "만 19세 이상 거주자이거나, 만 15세 이상으로 직전 연도 근로소득이 있는 거주자라면 가입할 수 있습니다.",
            "만 19세 이상 거주자이거나, 만 19세 이상으로 직전 연도 근로소득이 있는 거주자라면 가입할 수 있습니다.",
            "만 15세",
        ),
        (
            "추가 한도는 총급여 7,000만 원 이하이면 300만 원, 초과하면 200만 원입니다.",
            "추가 한도는 총급여 7,000만 원 이하이면 300만 원, 초과하면 300만 원입니다.",
            "200만 원",
        ),
    ],
)
def test_duplicated_condition_values_are_rejected(orig, swapped, answer):
    assert not verdict("condition_not_satisfied", swapped, orig, [orig], question="q", answer=answer, clue=orig).ok


DART_TABLE = "(단위 : 백만원)\n| 구 분 | 제12기 | 제11기 |\n| --- | --- | --- |\n| 자본총계 | 4,150,000 | 3,900,000 |"


@pytest.mark.parametrize(
    "answer, table",
    [
        ("4조 1,500억 원", DART_TABLE),
        ("6,315억 원", "| 대손충당금 잔액 | 631,500 | 598,200 |"),  # a table cut from its note: any plausible scale
    ],
)
def test_false_acceptance_over_a_scaled_table_is_rejected(answer, table):
    response = f"제12기 말 기준 금액은 {answer}입니다."
    refusal = "제공된 자료에서는 관련 내용을 찾을 수 없어 답변드리기 어렵습니다."
    assert not verdict("false_acceptance", response, refusal, [table], question="제12기 말 금액은?", answer=answer).ok
    assert not verdict("true_refusal", refusal, response, [table], question="제12기 말 금액은?", answer=answer).ok
    other = "| 현금및현금성자산 | 2,145,320 | 1,987,450 |"
    assert verdict("false_acceptance", response, refusal, [other], question="제12기 말 금액은?", answer=answer).ok


def test_unverifiable_that_deletes_the_answer_is_rejected():
    orig = "맞습니다. 사기범에게 돈을 송금했다면 즉시 경찰청(112)이나 송금한 금융회사의 콜센터에 전화해 계좌 지급정지를 요청해야 합니다."
    new = "맞습니다. 개인적으로는 크게 걱정하지 않으셔도 되는 수준이라고 생각합니다."
    v = verdict("subjective_opinion", new, orig, [orig], question="어디에 전화해야 하나요?", answer="경찰청(112)")
    assert not v.ok and any("answer" in r for r in v.reasons)
    kept = orig + " 개인적으로는 크게 걱정하지 않으셔도 되는 수준이라고 생각합니다."
    assert verdict("subjective_opinion", kept, orig, [orig], question="어디에 전화해야 하나요?", answer="경찰청(112)").ok


@pytest.mark.parametrize(
    "text, issue",
    [
        ("주택 전체를 월세나 월세로 주고 다른 곳에 사는 경우에는 가입할 수 없습니다.", "repeated span"),
        ("연소득이 1억 원을 이하하면 신청할 수 있습니다.", "comparison noun"),
        ("같은 해 6월 31일 공개된 2.0 버전부터 확대되었습니다.", "impossible date"),
        ("관련 민원은 한 해 동안 27천 건 접수되었습니다.", "malformed numeral"),
        ("현금은 순증가(증가)하였습니다.", "repeated span"),
        ("만 19세 이상하여 가입할 수 있습니다.", "comparison noun"),
        ("가입 후 3개월 이내하면 해지할 수 있습니다.", "comparison noun"),
    ],
)
def test_broken_edits_are_rejected(text, issue):
    assert any(issue in i for i in fluency_issues(text, "ko"))


@pytest.mark.parametrize(
    "text",
    [
        "1억 원을 초과하는 차주",
        "전세나 월세로 주고",
        "2만 7천 건",
        "5천만 원",
        "6월 30일",
        "이상한 조건은 없습니다",
        "계좌를 이전하는 경우",
        "만 19세 이상이면 가입할 수 있습니다",
    ],
)
def test_fluent_text_passes(text):
    assert fluency_issues(text, "ko") == []


def test_fluency_read_in_one_batch_finds_what_one_at_a_time_finds():
    from finhallu.labelcheck import fluency

    texts = [
        "연소득이 1억 원을 이하하면 신청할 수 있습니다.",
        "만 19세 이상이면 가입할 수 있습니다",
        "가입 후 3개월 이내하면 해지할 수 있습니다.",
    ]
    fluency.clear_memo()
    alone = [fluency_issues(t, "ko") for t in texts]
    fluency.clear_memo()
    fluency.prefetch(texts)
    assert set(fluency._BOUND_FOUND) == set(texts)  # analysed by the batch, not again by the checks
    assert [fluency_issues(t, "ko") for t in texts] == alone
    assert [bool(issues) for issues in alone] == [True, False, True]


def test_english_fluency():
    assert any("article" in i for i in fluency_issues("Net sales saw a increase of 5%.", "en"))
    for ok in ("Net sales saw an increase of 5%.", "Series A equity and a unit of account.", "a one-time charge"):
        assert fluency_issues(ok, "en") == []


def test_an_edit_the_context_still_states_is_rejected():
    """전세 -> 월세 where the context allows both: the edited sentence is still true, not Contradictory."""
    ev = [
        "주택 전체를 전세나 월세로 주고 다른 곳에 사는 경우에는 가입할 수 없습니다.",
        "주택 일부를 월세로 주는 경우에는 가입할 수 있습니다.",
    ]
    faithful = "주택 일부를 전세로 주는 경우에는 가입할 수 있습니다."
    still_true = "주택 일부를 월세로 주는 경우에는 가입할 수 있습니다."
    v = verdict("financial_term_misunderstanding", still_true, faithful, ev + [faithful], question="일부를 세주면 가입되나요?")
    assert not v.ok and any("still states" in r for r in v.reasons)
    false = "주택 일부를 매매로 주는 경우에는 가입할 수 있습니다."
    assert verdict("financial_term_misunderstanding", false, faithful, ev + [faithful], question="일부를 세주면 가입되나요?").ok


def test_question_misunderstanding_that_lets_the_answer_be_derived_is_rejected():
    ev = ["Net sales decreased $0.2 billion, from $3.2 billion in fiscal 2011 to $3.0 billion in fiscal 2012."]
    new = "Net sales were $3.0 billion compared to $3.2 billion in fiscal 2011."
    v = verdict(
        "question_misunderstanding",
        new,
        "Net sales decreased by $0.2 billion.",
        ev,
        question="By how much did net sales decrease in fiscal 2012?",
        answer="$0.2 billion",
        lang="en",
    )
    assert not v.ok and any("follows from" in r for r in v.reasons)


def test_faithful_answer_for_the_wrong_period_or_row_is_rejected():
    ev = ["Net income was $927,000 in fiscal 2005 and $1,204,000 in fiscal 2007."]
    assert not verdict(
        "faithful_answer",
        "Net income was $927,000.",
        evidence=ev,
        question="What was net income in fiscal 2007?",
        answer="$927,000",
        lang="en",
    ).ok
    assert verdict(
        "faithful_answer",
        "Net income was $1,204,000.",
        evidence=ev,
        question="What was net income in fiscal 2007?",
        answer="$1,204,000",
        lang="en",
    ).ok
    assert not verdict(
        "faithful_answer",
        "In fiscal 1996, revenue grew.",
        evidence=["In fiscal 1996, revenue grew."],
        question="How did revenue change in fiscal 1997?",
        lang="en",
    ).ok
    table = (
        "(단위 : 백만원)\n| 구 분 | 제12기 |\n| 장기금융상품의 취득 | (4,326,888) |\n"
        "| 기타포괄손익-공정가치금융자산의 취득 | (1,203,117) |"
    )
    q = "기타포괄손익-공정가치금융자산의 취득 금액은 얼마인가요?"
    assert not verdict(
        "faithful_answer", "장기금융상품의 취득은 4,326,888입니다.", evidence=[table], question=q, answer="4,326,888"
    ).ok
    assert verdict(
        "faithful_answer",
        "기타포괄손익-공정가치금융자산의 취득은 1,203,117입니다.",
        evidence=[table],
        question=q,
        answer="1,203,117",
    ).ok


def test_refusals_are_told_from_answers_that_mention_missing_information():
    said = "새로 카드 가맹점이 된 사업자는 매출 정보가 없어 처음에는 해당 업종의 평균 수수료율을 적용받습니다."
    assert verdict("faithful_answer", said, evidence=[said], question="새 가맹점의 수수료율은?", answer="평균 수수료율").ok
    refusal = "검색된 문서에는 신용카드 연회비 전액과 관련된 근거가 없어 확답을 드리기 어렵습니다."
    assert verdict("false_refusal", refusal, evidence=[said], question="q", answer="평균 수수료율").ok


def test_readme_documents_every_acceptance_rule():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
    for label, rule in RULES.items():
        assert f"| `{label}` | {rule.rule} |" in readme, label


def test_nli_check_of_faithful_answers_and_contradictory_edits():
    """The optional NLI opinion (a local cross-encoder where one exists; a scorer stands in here):
    a faithful sentence must be entailed, an edited Contradictory sentence must not be."""
    import numpy as np

    from finhallu.labelcheck.entailment import nli_reasons

    ev = ["예금보험공사는 1인당 최고 1억 원까지 예금을 보호합니다."]

    def scorer(pairs):  # entailed exactly when the hypothesis is in the premise
        return np.array([[0.9, 0.05, 0.05] if h.rstrip(".") in p else [0.1, 0.3, 0.6] for p, h in pairs])

    common = dict(evidence=ev, history="", question="보호 한도는?", answer="1억 원", clue=None, lang="ko")
    checks = [
        verify_inputs("faithful_answer", "1인당 최고 1억 원까지 예금을 보호합니다.", "", **common),
        verify_inputs("faithful_answer", "1인당 최고 3억 원까지 예금을 보호합니다.", "", **common),
        verify_inputs(
            "number_error", "1인당 최고 3억 원까지 예금을 보호합니다.", "1인당 최고 1억 원까지 예금을 보호합니다.", **common
        ),
        verify_inputs(
            "number_error", "1인당 최고 1억 원까지 예금을 보호합니다.", "1인당 최고 2억 원까지 예금을 보호합니다.", **common
        ),
        verify_inputs("false_refusal", "죄송하지만 답변드릴 수 없습니다.", "", **common),
    ]
    reasons = nli_reasons(checks, scorer, 0.5)
    assert reasons[0] == [] and reasons[2] == [] and reasons[4] == []
    assert "not entailed" in reasons[1][0] and reasons[1][0].startswith("faithful_answer: nli:")
    assert "still entailed" in reasons[3][0]


def test_a_configured_nli_verifier_without_its_model_is_named_before_work(tmp_path, monkeypatch):
    from finhallu.cli import checked_config

    monkeypatch.delenv("FINHALLU_NLI_PATH", raising=False)
    _, problem = checked_config("demo", [f"injection_qc.verifier_nli_model={tmp_path / 'no-such-model'}"])
    assert problem and problem.startswith("injection_qc.verifier_nli_model:") and "\n" not in problem
    assert checked_config("demo", [])[1] is None


def test_injection_qc_adds_the_nli_rejections_to_the_verdicts(monkeypatch):
    import numpy as np

    from finhallu import nli_model
    from finhallu.stages.injection_qc import InjectionQCConfig
    from finhallu.stages.injection_qc import _with_nli
    from finhallu.labelcheck import SampleVerdict

    seen = {}

    def fake_load(params):
        seen.update(params)
        return (lambda pairs: np.tile([0.05, 0.05, 0.9], (len(pairs), 1))), "fake@fp-0"

    monkeypatch.setattr(nli_model, "load_scorer", fake_load)
    common = dict(
        evidence=["예금은 1억 원까지 보호됩니다."], history="", question="한도는?", answer="1억 원", clue=None, lang="ko"
    )
    checks = [
        verify_inputs("number_error", "예금은 3억 원까지 보호됩니다.", "예금은 1억 원까지 보호됩니다.", **common),
        verify_inputs("faithful_answer", "예금은 1억 원까지 보호됩니다.", "예금은 3억 원까지 보호됩니다.", **common),
    ]
    cfg = InjectionQCConfig(verifier_nli_model="some/local-nli")
    out = _with_nli([SampleVerdict(ok=True), SampleVerdict(ok=True)], checks, cfg)
    assert seen["model"] == "some/local-nli"
    assert out[0].ok and not out[1].ok and "not entailed" in out[1].reasons[0]
