"""The answerability taxonomy every stage serves (DESIGN: "The taxonomy")."""

from __future__ import annotations

from finhallu.text.normalize import normalize

SOURCES = ("aihub", "sec10k", "dart")
SPLITS = ("train", "valid", "test")
LABEL_BINARY = ("faithful", "hallucinated")
LABEL_4CLASS = ("faithful_answer", "hallucination", "false_refusal", "true_refusal")

CONTRADICTORY = "contradictory"
UNVERIFIABLE = "unverifiable"
IRRELEVANCE = "irrelevance"
FALSE_ACCEPTANCE = "false_acceptance"
FALSE_REFUSAL = "false_refusal"
HALLU_TYPES = (CONTRADICTORY, UNVERIFIABLE, IRRELEVANCE, FALSE_ACCEPTANCE, FALSE_REFUSAL)

# The subtypes are the open part of the taxonomy: each is a leaf an injector registers
# (finhallu/injectors/: `register_leaf`) with its names, acceptance rule and rationale.

# Display names of the types (paper wording) for reports and the SFT rationales; subtypes carry their own.
NAMES: dict[str, dict[str, str]] = {
    "en": {
        CONTRADICTORY: "Contradictory",
        UNVERIFIABLE: "Unverifiable",
        IRRELEVANCE: "Irrelevance",
        FALSE_ACCEPTANCE: "False Acceptance",
        FALSE_REFUSAL: "False Refusal",
    },
    "ko": {
        CONTRADICTORY: "모순",
        UNVERIFIABLE: "검증 불가",
        IRRELEVANCE: "무관한 응답",
        FALSE_ACCEPTANCE: "잘못된 수용",
        FALSE_REFUSAL: "잘못된 거절",
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
