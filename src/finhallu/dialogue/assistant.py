"""Rules backends of the assistant-side dialogue operations (K-FinHallu §4.2): answer from the
gold passage and clue only, or refuse. The user side is `dialogue/user.py`.

Phrasing varies by seeded choice so that no fixed template marks any class of response.
"""

from __future__ import annotations

import random
import re

from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.dialogue.paraphrase import paraphrase
from finhallu.text.normalize import contains_normalized
from finhallu.text.phrases import topic_of
from finhallu.text.sentences import split_sentences
from finhallu.text.words import particle


class TextOut(BaseModel):
    text: str


class AnswerOut(BaseModel):
    response: str
    evidence: str  # the clue-derived core the response states


class ChoiceOut(BaseModel):
    index: int  # position in `candidates`; -1 = no candidate keeps the flow coherent
    utterance: str = ""  # the chosen question as the user says it after the previous turn
    reason: str = ""


class QuestionOut(BaseModel):
    question: str  # "" = the passage offers nothing new to ask
    answer: str = ""
    clue: str = ""
    utterance: str = ""  # the question as the user says it after the previous turn


# ---- the assistant: answers and refusals --------------------------------------------------------
OPENERS = {
    "ko": ["", "", "", "안내에 따르면 ", "자료에 따르면 ", "확인해 보니 ", "문서에 따르면 "],
    "en": ["", "", "According to the filing, ", "Per the report, ", "Based on the disclosure, "],
}
_KO_REFUSALS = [
    "제공된 자료에서는 {topic}에 관한 내용을 찾을 수 없어 정확한 답변을 드리기 어렵습니다.",
    "죄송하지만 참고한 문서에 {topic}에 대한 정보가 없어 답변드릴 수 없습니다.",
    "현재 확인 가능한 자료만으로는 {topic}에 대해 답변드리기 어렵습니다. 해당 기관에 직접 문의해 보시기 바랍니다.",
    "검색된 문서에는 {topic}{wa} 관련된 근거가 없어 확답을 드리기 어렵습니다.",
    "주어진 자료 범위에서는 {topic} 내용이 확인되지 않습니다. 정확한 내용은 담당 기관을 통해 확인하시기 바랍니다.",
    "{topic}에 대해서는 제공된 문서에 명시된 내용이 없어 말씀드리기 어렵습니다.",
]
_EN_REFUSALS = [
    "The provided documents do not contain information about {topic}, so I cannot answer that.",
    "I could not find anything on {topic} in the retrieved passages; I am unable to give a reliable answer.",
    "The available context does not address {topic}. Please consult the full filing for that detail.",
    "There is no evidence about {topic} in the documents provided, so I can't answer accurately.",
]
# A refusal declines to answer for lack of evidence; "정보가 없어" inside an answer
# ("매출 정보가 없어 처음에는 평균 수수료율을 …") is no refusal.
REFUSAL_MARKERS = re.compile(
    r"(찾을 수 없|답변(을)? ?드리기 어렵|답변드릴 수 없|말씀드리기 어렵|확답을 드리기|"
    r"(자료|문서)[^.]{0,30}(정보|근거|내용)[이가]? ?(없어|없습니다|확인되지 않)|"
    r"cannot answer|can't answer|unable to (answer|give|provide)|do not contain|does not (address|cover)|no evidence|"
    r"could not find)",
    re.IGNORECASE,
)
# Discourse connectives that tie a clue sentence to its neighbours ("또한", "넷째,"): dropped
# when the sentence stands alone in an answer.
_CONNECTIVE = re.compile(
    r"^(?:또한|다만|그러나|하지만|따라서|그리고|그럼에도|이에 따라|이때|한편|특히|아울러|마찬가지로|다음으로|마지막으로|"
    r"첫째|둘째|셋째|넷째|다섯째|Also|However|In addition|Additionally|Moreover|Furthermore|"
    r"Therefore)\s*,?\s+"
)
_BULLET = re.compile(r"^[\s○❍•\-－·*]+")
_VALUE_HEADER = re.compile(r"(율|률|액|금|일|기간|한도|비율|금리|범위|수준|요금|수수료|이율|시행일|대상|방식|등급|위험)$")


def is_refusal(text: str) -> bool:
    return bool(REFUSAL_MARKERS.search(text or ""))


def clean_sentence(text: str) -> str:
    """A clue sentence as a standalone statement: no bullet, no leading connective."""
    return _CONNECTIVE.sub("", _BULLET.sub("", text or "").strip()).strip()


def _table_block(passage: str, row_line: str) -> tuple[list[str], list[str]] | None:
    """(header cells, row cells) of a pipe-delimited row (markdown "| a | b |" or AI-Hub "a | b")."""
    lines = (passage or "").splitlines()
    row = row_line.strip()
    idx = next((i for i, ln in enumerate(lines) if ln.strip() == row), None)
    if idx is None:
        return None
    split = lambda ln: [c.strip() for c in ln.strip().strip("|").split("|")]  # noqa: E731
    width = len(split(row))
    start = idx  # the table runs up through lines of the same width (its header included)
    while start > 0 and "|" in lines[start - 1] and len(split(lines[start - 1])) == width:
        start -= 1
    block = [ln for ln in lines[start : idx + 1] if not set(ln.replace("|", "").split()) <= {"---"}]
    header = split(block[0]) if len(block) >= 2 else []
    return header, split(row)


def josa(word: str, pair: str) -> str:
    """particle() for a word that may end in a parenthetical: "연금저축(신탁·보험)" takes 은, like 보험."""
    return particle(re.sub(r"\s*\([^)]*\)$", "", word) or word, pair)


def _unit_note(passage: str) -> str:
    unit = re.search(r"\((?:in |단위\s*[:：]\s*)[^)]*\)|\(단위[^)]*\)", passage)
    return f" {unit.group(0)}" if unit else ""


def table_sentence(passage: str, row_line: str, answer: str, lang: str) -> str:
    """A table row stated as a sentence: "체크카드 기준 연 매출액 3억 원 이하는 0.15%입니다."."""
    parsed = _table_block(passage, row_line)
    if not parsed:
        return row_line.strip().strip("|").replace(" | ", ", ")
    header, cells = parsed
    unit = _unit_note(passage)
    col = next((j for j, c in enumerate(cells) if c == answer), None)
    if col is None:
        col = next((j for j, c in enumerate(cells) if j and answer and contains_normalized(c, answer)), None)
    label = cells[0]
    if header and label[:1].isdigit() and header[0] and header[0] not in label:
        label = f"{header[0]} {label}"  # "3억 원 이하" -> "연 매출액 3억 원 이하"
    if lang == "en":
        if col and col < len(header):
            return f"{label} was {cells[col]}{unit} ({header[col]})."
        return f"{label}: " + "; ".join(f"{h} {v}" for h, v in zip(header[1:], cells[1:])) + "."
    if col and col < len(header):
        value, column = cells[col], header[col]
        if _VALUE_HEADER.search(column):
            return f"{label}의 {column}{josa(column, '은/는')} {value}{unit}입니다."
        if re.search(r"\d", column):  # a period or date column: "2025년 9월 1일부터 연금저축은 1억 원입니다."
            return f"{column} {label}{josa(label, '은/는')} {value}{unit}입니다."
        return f"{column} 기준 {label}{josa(label, '은/는')} {value}{unit}입니다."
    pairs = ", ".join(f"{h} {v}" for h, v in zip(header[1:], cells[1:]) if v)
    return f"{label}{josa(label, '은/는')} {pairs}입니다." if pairs else label + "."


def _clue_core(passage: str, clue: str, answer: str, lang: str) -> str:
    lines = [ln for ln in clue.splitlines() if ln.strip()]
    if lines and all("|" in ln for ln in lines):
        # one sentence per row; the answer's row first when the clue spans several rows
        return " ".join(table_sentence(passage, ln, answer if contains_normalized(ln, answer) else "", lang) for ln in lines)
    core = clean_sentence(clue)
    if core and not core.endswith((".", "다", "요", "!", "?")):
        core = core + ("." if lang == "en" else "")
    return core


# Advice the passage itself gives (what to compare, check, beware of): an assistant passes it on, so a
# faithful answer speaks in the evaluative register too, and that register alone does not mark an opinion.
_GUIDANCE = re.compile(
    r"(것이 좋습니다|것이 바람직|바람직하지 않|권장됩니다|유의해야|주의가 필요|주의해야|유리하며|유리합니다|"
    r"확인해야 합니다|보시기 바랍니다|\bshould\b|\badvisable\b|\brecommend)"
)


def is_lead_in(sentence: str) -> bool:
    """A sentence that only announces a list or table ("…다음과 같습니다.", "as follows:")."""
    return sentence.rstrip().endswith(("다음과 같습니다.", ":", "as follows:", "following:"))


def _usable_support(sent: str, clue: str) -> bool:
    return "|" not in sent and len(sent) > 15 and sent not in clue and not is_lead_in(sent)


def _supporting_sentence(passage: str, clue: str, rng: random.Random) -> str | None:
    """The sentence an answer adds after the clue: the clue's next sentence or, half of the time where
    the passage gives advice (the first after the clue, else before it), that advice."""
    sents = split_sentences(passage)
    at = next((i for i, s in enumerate(sents) if clue in s or s in clue), None)
    if at is None:
        return None
    after, before = sents[at + 1 :], sents[:at]
    advice = next((c for c in after + before[::-1] if _GUIDANCE.search(c) and _usable_support(c, clue)), None)
    following = next((s for s in after if _usable_support(s, clue)), None)
    if advice and (following is None or rng.random() < 0.5):
        return advice
    return following


_QUESTION_WORD = re.compile(r"며칠|몇|얼마|어디|언제|무엇|무슨|어떤|어느|누구")


def direct_answer(question: str, answer: str) -> str | None:
    """A one-sentence direct answer ("예금자보호 한도는 1억 원입니다.") that a written answer may lead
    with (False Acceptance over an unanswerable turn states its answer the same way); None where the
    answer is no short noun phrase or the question names no topic."""
    answer = (answer or "").strip()
    topic = topic_of(question, "ko")
    # Only where "X는 Y입니다" reads right: a short topic naming no question word, and a figure
    # ("9억 원 이하", "10영업일 이내") rather than a clause ("3개월이 지나면") or a long span.
    if (
        not answer
        or len(answer) > 16
        or not re.search(r"\d", answer)
        or re.search(r"[면고서며지]$", answer)
        or answer.endswith(("다", "요", "."))
        or len(topic.split()) > 2
        or _QUESTION_WORD.search(topic)
        or topic == "문의하신 내용"
    ):
        return None
    return f"{topic}{josa(topic, '은/는')} {answer}입니다."


@operation("answer_turn", AnswerOut)
def answer_turn(
    question: str,
    passage: str,
    clue: str,
    answer: str,
    qa_kind: str,
    lang: str,
    rng_seed: int,
    support_probability: float = 0.5,
    paraphrase_rate: float = 0.7,
    direct_probability: float = 0.3,
) -> AnswerOut:
    """The clue stated as an answer, in the assistant's words (dialogue/paraphrase.py rewrites each
    rewrite site with probability paraphrase_rate), with an optional supporting sentence; a Korean
    span answer leads with a direct one-sentence answer with probability direct_probability."""
    rng = random.Random(rng_seed)
    core = _clue_core(passage, clue, answer, lang)
    written = random.Random(rng_seed * 7919 + 1)  # its own stream: the opener and extra choices stay as they were
    if qa_kind == "yesno":
        yes = answer.strip() in ("예", "네", "Yes", "yes")
        prefix = rng.choice(["네, ", "예, "]) if yes else rng.choice(["아니요, ", "아닙니다. "])
        if lang == "en":
            prefix = "Yes, " if yes else "No, "
        response = prefix + core
    else:
        response = rng.choice(OPENERS[lang if lang in OPENERS else "en"]) + core
        direct = random.Random(rng_seed * 7919 + 2)  # its own stream, as `written` below
        if lang == "ko" and qa_kind not in ("table",) and direct.random() < direct_probability:
            lead = direct_answer(question, answer)
            if lead and not core.startswith(lead):
                response = lead + " " + core
    if rng.random() < support_probability:
        extra = _supporting_sentence(passage, clue, random.Random(rng_seed * 7919 + 3))
        if extra:
            response = response + " " + clean_sentence(extra)
    return AnswerOut(response=paraphrase(response.strip(), lang, written, paraphrase_rate, keep=[answer]), evidence=core)


@operation("refuse_turn", TextOut)
def refuse_turn(question: str, lang: str, rng_seed: int) -> TextOut:
    rng = random.Random(rng_seed)
    bank = _KO_REFUSALS if lang == "ko" else _EN_REFUSALS
    topic = topic_of(question, lang)
    return TextOut(text=rng.choice(bank).format(topic=topic, wa=particle(topic, "과/와")))
