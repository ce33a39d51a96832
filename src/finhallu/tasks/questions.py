"""Rules backends of the user-side dialogue operations (K-FinHallu §4.2): pick the next question,
write a new one when no candidate fits, rewrite standalone questions into context-dependent
utterances, ask reconfirm questions. Phrasing varies by seeded choice.
"""

from __future__ import annotations

import random
import re

from finhallu.llm.operations import operation
from finhallu.tasks.inject.edits import fix_particle
from finhallu.tasks.responses import ChoiceOut, QuestionOut, TextOut, clean_sentence
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import find_numbers
from finhallu.text.phrases import noun_phrases, topic_of
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_words, has_final_consonant, jaccard, particle


@operation("choose_next_question", ChoiceOut)
def choose_next_question(current_question: str, history: list[str], candidates: list[dict], lang: str,
                         rng_seed: int, min_overlap: float = 0.15) -> ChoiceOut:
    """Candidates ({question, same_document}) that keep the flow: same document, or sharing
    content words with the current question; never a question already asked in other words.
    A seeded pick among the three most related; -1 when none fits."""
    rng = random.Random(rng_seed)
    scored = []
    for i, c in enumerate(candidates):
        if any(jaccard(c["question"], h) >= 0.6 for h in history):
            continue  # a paraphrase of a question already asked
        overlap = jaccard(c["question"], current_question)
        if not c.get("same_document") and overlap < min_overlap:
            continue  # another document, unrelated topic: would break the flow
        scored.append((-int(bool(c.get("same_document"))), -overlap, i))
    if not scored:
        return ChoiceOut(index=-1, reason="no candidate keeps the flow coherent")
    scored.sort()
    pick = rng.choice(scored[:3])
    return ChoiceOut(index=pick[2], reason="same document" if pick[0] else f"related topic ({-pick[1]:.2f})")


_KO_WH = {"원": "얼마", "%": "몇 %", "%p": "몇 %p", "개월": "몇 개월", "일": "며칠", "년": "몇 년", "세": "몇 세", "명": "몇 명",
          "건": "몇 건", "회": "몇 회", "배": "몇 배", "시간": "몇 시간", "주": "몇 주"}


def _ko_question_ending(sentence: str) -> str | None:
    """Declarative -> interrogative: "…적용됩니다." -> "…적용되나요?", "…입니다." -> "…인가요?"."""
    s = sentence.rstrip(". ")
    if s.endswith("입니다"):
        return s[:-3] + "인가요?"
    if s.endswith("습니다"):
        return s[:-3] + "나요?"
    if s.endswith("니다") and len(s) > 2 and "가" <= s[-3] <= "힣":
        code = ord(s[-3]) - 0xAC00
        if code % 28 == 17:  # final ㅂ: 됩 -> 되, 합 -> 하
            return s[:-3] + chr(ord(s[-3]) - 17) + "나요?"
    return None


@operation("write_question", QuestionOut)
def write_question(passage: str, asked: list[str], lang: str, rng_seed: int) -> QuestionOut:
    """A new question about the current passage: a sentence not used by any question so far, its
    amount asked for ("…1억 원까지 보호합니다." -> "…얼마까지 보호하나요?")."""
    rng = random.Random(rng_seed)
    options = []
    for sent in split_sentences(passage):
        s = clean_sentence(sent)
        if "|" in s or len(s) < 20 or any(contains_normalized(a, s) or contains_normalized(s, a) for a in asked if a):
            continue
        for span in find_numbers(s):
            if lang == "ko":
                date_part = span.unit == "일" and re.search(r"월\s*$", s[: span.start])
                if span.unit not in _KO_WH or span.unit == "년" or date_part:
                    continue  # years, dates and bare numbers make poor questions
                wh = _KO_WH[span.unit]
                stem = _ko_question_ending(s[: span.start] + wh + fix_particle(wh, s[span.end:]))
                if stem:
                    options.append((stem, span.raw.strip(), s))
            elif not (span.unit == "" and 1900 <= span.value <= 2100):
                m = re.match(r"^(.*?)\s+(was|were|totaled|amounted to)\s+\$?$", s[: span.start])
                if m:
                    subj = m.group(1)[0].lower() + m.group(1)[1:]
                    verb = {"totaled": "did", "amounted to": "did"}.get(m.group(2), m.group(2))
                    tail = s[span.end:].rstrip(". ")
                    q = f"How much {verb} {subj}{' total' if verb == 'did' else ''}{tail}?"
                    dollar = "$" if s[: span.start].endswith("$") else ""
                    options.append((q, dollar + span.raw.strip(), s))
    if not options:
        return QuestionOut(question="")
    q, answer, clue = rng.choice(options)
    return QuestionOut(question=q, answer=answer, clue=clue)


_KO_PREFIX = ["그럼 ", "그러면 ", "참, ", "추가로 ", "그리고 ", ""]
_TOPIC_PARTICLE = re.compile(r"^(\S+?)(은|는)$")
_GENITIVE = re.compile(r"^(\S+?)의$")


def _ko_colloquial(q: str, rng: random.Random) -> str:
    """A colloquial ending with the copula agreeing with the noun ("대출이에요?", "얼마예요?")."""
    if rng.random() >= 0.5:
        return q
    if q.endswith("무엇인가요?"):
        return q[: -len("무엇인가요?")] + "뭔가요?"
    m = re.search(r"(\S)인가요\?$", q)
    if m:
        noun_end = m.group(1)
        cop = "이에요?" if has_final_consonant(noun_end) else "예요?"
        if noun_end == "%":
            cop = "예요?"  # 퍼센트예요
        return q[: m.end(1)] + cop
    for old, new in (("있나요?", "있어요?"), ("없나요?", "없어요?"), ("되나요?", "되죠?")):
        if q.endswith(old):
            return q[: -len(old)] + new
    return q


def _shares(word: str, previous: str) -> bool:
    prev = set(content_words(previous))
    return bool(word) and any(w in prev for w in content_words(word)) and not word[0].isdigit()


@operation("rewrite_query", TextOut)
def rewrite_query(question: str, previous_question: str | None, lang: str, rng_seed: int) -> TextOut:
    """Standalone -> context-dependent, the way a user continues a conversation: ellipsis of a
    leading modifier the dialogue already established ("한국은행의 현재 …" -> "현재 …"),
    coreference of a shared topic ("현금서비스는 …" -> "그건 …"), or a discourse marker and a
    colloquial ending. The standalone form stays the retrieval key."""
    rng = random.Random(rng_seed)
    q = question.strip()
    if not previous_question:
        return TextOut(text=q)
    if lang == "en":
        m = re.match(r"According to (.+?)'s Form 10-K(?: for fiscal \d{4})?, (.*)$", q)
        rest = m.group(2) if m else q
        return TextOut(text=rng.choice(["And ", "What about: ", "Also, ", ""]) + rest[0].lower() + rest[1:] if rest else q)
    words = q.split()
    if len(words) >= 3:
        first = words[0]
        gen = _GENITIVE.match(first)
        topic = _TOPIC_PARTICLE.match(first)
        if gen and _shares(gen.group(1), previous_question):
            return TextOut(text=" ".join(words[1:]))  # ellipsis of "X의"
        bare_noun = [p[0] for p in noun_phrases(first)] == [first]
        if bare_noun and _shares(first, previous_question) and _TOPIC_PARTICLE.match(words[1]):
            return TextOut(text=" ".join(words[1:]))  # ellipsis of a bare modifier noun ("주택연금 수시인출금은")
        if topic and _shares(topic.group(1), previous_question) and not words[1][0].isdigit():
            return TextOut(text=" ".join([rng.choice(["그건", "그건", "이건"])] + words[1:]))  # coreference
    return TextOut(text=rng.choice(_KO_PREFIX) + _ko_colloquial(q, rng))


_KO_RECONFIRM = [
    "아까 {topic} 관련해서 {answer}{ira} 하셨는데, 맞는지 다시 확인해 주시겠어요?",
    "앞에서 말씀하신 {topic}{i} {answer}{ira} 한 게 맞나요?",
    "다시 한번 확인할게요. {topic}{eun} {answer}{ira} 하셨죠?",
]
_KO_RECONFIRM_YESNO = [
    "앞에서 {topic}에 대해 '{answer}'{ira} 답하셨는데, 확실한가요?",
    "아까 {topic} 질문에 '{answer}'{ira} 하셨는데, 다시 확인해 주시겠어요?",
]
_EN_RECONFIRM = [
    "Earlier you said {topic} was {answer}. Can you double-check that?",
    "Just to confirm, {topic} was {answer}, right?",
]


@operation("reconfirm_turn", TextOut)
def reconfirm_query(earlier_question: str, earlier_answer: str, lang: str, rng_seed: int) -> TextOut:
    rng = random.Random(rng_seed)
    topic = topic_of(earlier_question, lang)
    answer = earlier_answer.strip()
    if lang == "en":
        return TextOut(text=rng.choice(_EN_RECONFIRM).format(topic=topic, answer=answer))
    yesno = answer in ("예", "네", "아니오", "아니요")
    if yesno:
        answer = "네" if answer in ("예", "네") else "아니요"
    ira = "이라고" if has_final_consonant(answer) else "라고"
    bank = _KO_RECONFIRM_YESNO if yesno else _KO_RECONFIRM
    return TextOut(text=rng.choice(bank).format(topic=topic, answer=answer, ira=ira, eun=particle(topic, "은/는"),
                                                i=particle(topic, "이/가")))
