"""The answerability taxonomy every stage serves (DESIGN: "The taxonomy")."""

from __future__ import annotations

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
    CONTRADICTORY: ("financial_term_misunderstanding", "number_error", "modifier_change", "inconsistency"),
    UNVERIFIABLE: ("fabricated_detail", "subjective_opinion"),
    IRRELEVANCE: ("condition_not_satisfied", "question_misunderstanding", "off_topic_drift"),
    FALSE_ACCEPTANCE: (),
    FALSE_REFUSAL: (),
}
HALLU_SUBTYPES = tuple(s for subs in SUBTYPES.values() for s in subs)


def labels_for(hallu_type: str | None, answerable: bool) -> tuple[str, str]:
    """(label_binary, label_4class) of a sample from its type and answerability."""
    if hallu_type is None:
        return ("faithful", "faithful_answer") if answerable else ("faithful", "true_refusal")
    if hallu_type == FALSE_REFUSAL:
        return "hallucinated", "false_refusal"
    return "hallucinated", "hallucination"
