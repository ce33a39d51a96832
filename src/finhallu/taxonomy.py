"""The answerability taxonomy every stage serves (DESIGN: "The taxonomy")."""

from __future__ import annotations

from finhallu.text.normalize import normalize

SOURCES = ("aihub", "sec10k", "dart")
SPLITS = ("train", "valid", "test")
LABEL_BINARY = ("faithful", "hallucinated")
LABEL_4CLASS = ("faithful_answer", "hallucination", "false_refusal", "true_refusal")
PASSAGE_ROLES = ("gold", "positive", "retrieved", "hard_negative")

CONTRADICTORY = "contradictory"
UNVERIFIABLE = "unverifiable"
IRRELEVANCE = "irrelevance"
FALSE_ACCEPTANCE = "false_acceptance"
FALSE_REFUSAL = "false_refusal"
HALLU_TYPES = (CONTRADICTORY, UNVERIFIABLE, IRRELEVANCE, FALSE_ACCEPTANCE, FALSE_REFUSAL)

SUBTYPES: dict[str, tuple[str, ...]] = {
    # entity_error: the "harmful factuality" entity perturbations (embedding-space or instructed
    # replacement of an organisation, product or term by another of the same type).
    CONTRADICTORY: ("financial_term_misunderstanding", "number_error", "modifier_change", "inconsistency", "entity_error"),
    UNVERIFIABLE: ("fabricated_detail", "subjective_opinion"),
    IRRELEVANCE: ("condition_not_satisfied", "question_misunderstanding", "off_topic_drift"),
    FALSE_ACCEPTANCE: (),
    FALSE_REFUSAL: (),
}
HALLU_SUBTYPES = tuple(s for subs in SUBTYPES.values() for s in subs)
# Subtypes realised by a minimal edit of the faithful response (their edit distance is reported).
MINIMAL_EDIT_SUBTYPES = ("number_error", "modifier_change", "financial_term_misunderstanding", "inconsistency",
                         "entity_error", "condition_not_satisfied")

# Display names (paper wording) for reports and the SFT rationales.
NAMES: dict[str, dict[str, str]] = {
    "en": {
        CONTRADICTORY: "Contradictory", UNVERIFIABLE: "Unverifiable", IRRELEVANCE: "Irrelevance",
        FALSE_ACCEPTANCE: "False Acceptance", FALSE_REFUSAL: "False Refusal",
        "financial_term_misunderstanding": "Financial Term Misunderstanding", "number_error": "Number Error",
        "modifier_change": "Modifier Change", "inconsistency": "Inconsistency", "entity_error": "Entity Error",
        "fabricated_detail": "Fabricated Detail", "subjective_opinion": "Subjective Opinion",
        "condition_not_satisfied": "Condition Not Satisfied", "question_misunderstanding": "Question Misunderstanding",
        "off_topic_drift": "Off-topic Drift",
    },
    "ko": {
        CONTRADICTORY: "모순", UNVERIFIABLE: "검증 불가", IRRELEVANCE: "무관한 응답",
        FALSE_ACCEPTANCE: "잘못된 수용", FALSE_REFUSAL: "잘못된 거절",
        "financial_term_misunderstanding": "금융 용어 오해", "number_error": "수치 오류", "modifier_change": "수식어 변경",
        "inconsistency": "대화 내 불일치", "entity_error": "개체 오류", "fabricated_detail": "세부 정보 날조",
        "subjective_opinion": "주관적 의견", "condition_not_satisfied": "조건 불충족",
        "question_misunderstanding": "질문 오해", "off_topic_drift": "주제 이탈",
    },
}


def labels_for(hallu_type: str | None, answerable: bool) -> tuple[str, str]:
    """(label_binary, label_4class) of a sample from its type and answerability."""
    if hallu_type is None:
        return ("faithful", "faithful_answer") if answerable else ("faithful", "true_refusal")
    if hallu_type == FALSE_REFUSAL:
        return "hallucinated", "false_refusal"
    return "hallucinated", "hallucination"


def answer_is_checkable(seed: dict) -> bool:
    """Whether a seed's answer identifies its evidence: yes/no answers and one-character answers
    occur everywhere, so their presence in a passage proves nothing."""
    return seed["qa_kind"] != "yesno" and len(normalize(seed["answer"] or "")) >= 2
