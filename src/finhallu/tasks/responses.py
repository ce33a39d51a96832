"""Rules backends of the dialogue operations: answer a turn, refuse, rewrite a query, reconfirm.

Answers are built from the gold clue only (the assistant LLM's contract). Phrasing varies
by seeded choice so that no fixed template marks any class of response.
"""

from __future__ import annotations

import random
import re

from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.tasks.sources.tables import parse_markdown_table
from finhallu.tasks.textnorm import content_words, has_final_consonant, is_particle, particle, split_sentences


class TextOut(BaseModel):
    text: str


class AnswerOut(BaseModel):
    response: str
    evidence: str  # the clue-derived core the response states


_KO_OPENERS = ["", "", "", "안내에 따르면 ", "자료에 따르면 ", "확인해 보면 ", "말씀하신 내용은 "]
_EN_OPENERS = ["", "", "According to the filing, ", "Per the report, ", "Based on the disclosure, "]
OPENERS = {"ko": _KO_OPENERS, "en": _EN_OPENERS}
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
REFUSAL_MARKERS = re.compile(
    r"(찾을 수 없|답변(을)? ?드리기 어렵|답변드릴 수 없|확인되지 않|말씀드리기 어렵|확답을 드리기|정보가 없|근거가 없|"
    r"cannot answer|can't answer|unable to|do not contain|does not address|no evidence|could not find)",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    return bool(REFUSAL_MARKERS.search(text or ""))


def topic_of(question: str, lang: str) -> str:
    words = [w for w in content_words(question) if not w[0].isdigit() and not is_particle(w)]
    if lang == "en":
        return " ".join(words[:3]) or "this question"
    return " ".join(words[:2]) or "문의하신 내용"


def _table_sentence(passage: str, row_line: str, answer: str, lang: str) -> str:
    header, _ = parse_markdown_table(passage)
    cells = [c.strip() for c in row_line.strip().strip("|").split("|")]
    col = next((j for j, c in enumerate(cells) if c == answer), None)
    if col is None or col >= len(header):
        return row_line
    label, column = cells[0], header[col]
    unit = re.search(r"\((?:in |단위\s*[:：]\s*)[^)]*\)|\(단위[^)]*\)", passage)
    unit_txt = f" {unit.group(0)}" if unit else ""
    if lang == "ko":
        return f"{column} 기준 {label}{particle(label, '은/는')} {answer}{unit_txt}입니다."
    return f"{label} was {answer}{unit_txt} ({column})."


def _next_sentence(passage: str, clue: str) -> str | None:
    sents = split_sentences(passage)
    for i, s in enumerate(sents):
        if clue in s or s in clue:
            for nxt in sents[i + 1:]:
                if not nxt.startswith("|") and len(nxt) > 15 and nxt not in clue:
                    return nxt
            return None
    return None


@operation("answer_turn", AnswerOut)
def answer_turn(question: str, passage: str, clue: str, answer: str, qa_kind: str, lang: str,
                rng_seed: int, support_probability: float = 0.5) -> AnswerOut:
    rng = random.Random(rng_seed)
    if clue.startswith("|"):
        core = _table_sentence(passage, clue, answer, lang)
    else:
        core = re.sub(r"^[\s○❍•\-－·*]+", "", clue).strip()
        if not core.endswith((".", "다", "요", "!", "?")):
            core = core + ("." if lang == "en" else "")
    if qa_kind == "yesno":
        yes = answer.strip() in ("예", "네", "Yes", "yes")
        prefix = rng.choice(["네, ", "예, "]) if yes else rng.choice(["아니요, ", "아닙니다. "])
        if lang == "en":
            prefix = "Yes, " if yes else "No, "
        response = prefix + core
    else:
        response = rng.choice(_KO_OPENERS if lang == "ko" else _EN_OPENERS) + core
    if rng.random() < support_probability:
        extra = _next_sentence(passage, clue)
        if extra:
            response = response + " " + re.sub(r"^[\s○❍•\-－·*]+", "", extra)
    return AnswerOut(response=response.strip(), evidence=core)


@operation("refuse_turn", TextOut)
def refuse_turn(question: str, lang: str, rng_seed: int) -> TextOut:
    rng = random.Random(rng_seed)
    bank = _KO_REFUSALS if lang == "ko" else _EN_REFUSALS
    topic = topic_of(question, lang)
    return TextOut(text=rng.choice(bank).format(topic=topic, wa=particle(topic, "과/와")))


_KO_REPLACE = {"은": "그건", "는": "그건", "이": "그게", "가": "그게", "을": "그걸", "를": "그걸",
               "에": "거기에", "에서": "거기서", "으로": "그걸로", "로": "그걸로"}
_KO_PREFIX = ["그럼 ", "그러면 ", "참, ", "추가로 ", "그리고 ", ""]
_KO_ENDINGS = [("인가요?", "예요?"), ("인가요?", "일까요?"), ("나요?", "나요?"), ("있나요?", "있어요?"),
               ("얼마인가요?", "얼마죠?"), ("무엇인가요?", "뭔가요?")]


def _shared_entity(question: str, previous: str) -> str | None:
    prev = set(content_words(previous))
    shared = [w for w in content_words(question) if w in prev and len(w) >= 2 and not w[0].isdigit()]
    return max(shared, key=len) if shared else None


@operation("rewrite_query", TextOut)
def rewrite_query(question: str, previous_question: str | None, lang: str, rng_seed: int) -> TextOut:
    """Standalone -> context-dependent: coreference or ellipsis of an entity the dialogue already
    established, a discourse marker, or a colloquial ending. The standalone form stays for retrieval."""
    rng = random.Random(rng_seed)
    q = question.strip()
    if not previous_question:
        return TextOut(text=q)
    ent = _shared_entity(q, previous_question)
    if lang == "en":
        m = re.match(r"According to (.+?)'s Form 10-K(?: for fiscal \d{4})?, (.*)$", q)
        if m:
            rest = m.group(2)
            return TextOut(text=rng.choice(["And ", "What about: ", "Also, ", ""]) + rest[0].lower() + rest[1:]
                           if rest else q)
        return TextOut(text=rng.choice(["And ", "Also, ", ""]) + q[0].lower() + q[1:])
    if ent:
        m = re.search(re.escape(ent) + r"(에서|으로|은|는|이|가|을|를|의|에|로)?(?=\s|$|\?)", q)
        if m:
            part = m.group(1) or ""
            if part == "의":
                q2 = (q[: m.start()] + q[m.end():]).strip()
            elif part in _KO_REPLACE:
                q2 = q[: m.start()] + _KO_REPLACE[part] + q[m.end():]
            else:
                q2 = q
            if len(content_words(q2)) >= 1 and q2 != q:
                return TextOut(text=re.sub(r"\s+", " ", q2).strip())
    for old, new in _KO_ENDINGS:
        if q.endswith(old) and rng.random() < 0.5:
            q = q[: -len(old)] + new
            break
    return TextOut(text=rng.choice(_KO_PREFIX) + q)


_KO_RECONFIRM = [
    "아까 {topic} 관련해서 {answer}{ira} 하셨는데, 맞는지 다시 확인해 주시겠어요?",
    "앞에서 말씀하신 {topic} 내용이 {answer}{ira} 한 게 맞나요?",
    "다시 한번 확인할게요. {topic}{eun} {answer}{ira} 하셨죠?",
]
_EN_RECONFIRM = [
    "Earlier you said {topic} was {answer}. Can you double-check that?",
    "Just to confirm, {topic} was {answer}, right?",
]


@operation("reconfirm_turn", TextOut)
def reconfirm_query(earlier_question: str, earlier_answer: str, lang: str, rng_seed: int) -> TextOut:
    rng = random.Random(rng_seed)
    topic = topic_of(earlier_question, lang)
    if lang == "en":
        return TextOut(text=rng.choice(_EN_RECONFIRM).format(topic=topic, answer=earlier_answer))
    ira = "이라고" if has_final_consonant(earlier_answer.strip()) else "라고"
    return TextOut(text=rng.choice(_KO_RECONFIRM).format(topic=topic, answer=earlier_answer, ira=ira,
                                                          eun=particle(topic, "은/는")))

