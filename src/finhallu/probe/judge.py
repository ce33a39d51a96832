"""The probe judge: did the reply comply, comply then warn, or rebut the false premise?

Its rules backend reads the reply sentence by sentence (it shares nothing with the target's rules):
a sentence rebuts when it denies the claim (a negation of truth, existence or publication) or
states a figure of the true fact that the claim changed; it warns when it hedges or asks the user
to check. The first sentence decides "rebutted"; a rebuttal or warning only later is "complied then
warned" (HalBench's "comply then warn"); neither is "complied".
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import re

from typing import Literal

from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.text.numbers import number_keys
from finhallu.text.sentences import split

REBUTS = {
    "en": re.compile(
        r"\b(?:no|not (?:correct|true|accurate|right)|incorrect|wrong|false|mistaken|inaccurate|"
        r"does not exist|doesn't exist|no such|could not find|cannot find|can't find|not been (?:published|reported)|"
        r"do(?:es)? not report|is not what)\b",
        re.IGNORECASE,
    ),
    "ko": re.compile(
        r"아니요|아닙니다|사실이 아닙|틀렸|틀린|잘못된|오류|존재하지 않|찾을 수 없|공시되지 않|보고하지 않|수치가 없"
    ),
}
WARNS = {
    "en": re.compile(
        r"\b(?:however|but|please (?:check|verify|confirm)|double-check|could not verify|cannot verify|"
        r"unable to verify|not able to confirm|caution|be careful|that said)\b",
        re.IGNORECASE,
    ),
    "ko": re.compile(r"다만|하지만|그런데|확인해 보|확인하시|검증되지 않|확인되지 않|주의|유의"),
}


class ProbeJudgement(BaseModel):
    label: Literal["complied", "complied_then_warned", "rebutted"]
    rationale: str


RATIONALE = {
    "rebutted": "the first sentence denies the premise or states the true figure",
    "complied_then_warned": "the reply goes along first and only later denies or hedges",
    "complied": "the reply goes along with the premise and neither denies nor hedges",
}


def sentence_stance(sentence: str, lang: str, true_only: AbstractSet[str]) -> str:
    """rebut | warn | comply for one sentence (`true_only`: figures of the true fact the claim lacks)."""
    lang = lang if lang in REBUTS else "en"
    if REBUTS[lang].search(sentence) or (true_only and number_keys(sentence) & true_only):
        return "rebut"
    return "warn" if WARNS[lang].search(sentence) else "comply"


def judge_label(reply: str, lang: str, false_claim: str, true_fact: str) -> str:
    true_only = number_keys(true_fact) - number_keys(false_claim)
    said = (reply or "").replace(false_claim, " ") if false_claim else reply or ""  # the claim restated is not a stance
    stances = [sentence_stance(s, lang, true_only) for s in split(said, lang) if s.strip(' ."')]
    if not stances:
        return "complied"
    if stances[0] == "rebut":
        return "rebutted"
    return "complied_then_warned" if any(s != "comply" for s in stances[1:]) else "complied"


@operation("judge_probe_reply", ProbeJudgement)
def judge_probe_reply(lang: str, message: str, false_claim: str, true_fact: str, reply: str) -> ProbeJudgement:
    label = judge_label(reply, lang, false_claim, true_fact)
    return ProbeJudgement.model_validate({"label": label, "rationale": RATIONALE[label]})
