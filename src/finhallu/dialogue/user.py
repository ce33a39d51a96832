"""Rules backends of the user-side dialogue operations (K-FinHallu §4.2): pick the next question,
or write a new one when no candidate fits, each said as a context-dependent utterance (the
standalone question rewritten for the history, in the same call: one user call per turn), and ask
reconfirm questions. Phrasing varies by seeded choice.
"""

from __future__ import annotations

import random
import re

from finhallu.llm.operations import operation
from finhallu.text.words import fix_particle
from finhallu.dialogue.assistant import ChoiceOut, QuestionOut, TextOut, clean_sentence
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import find_numbers
from finhallu.text.phrases import noun_phrases, topic_of
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_word_set, content_words, has_final_consonant, jaccard, particle


@operation("choose_next_question", ChoiceOut)
def choose_next_question(
    current_question: str,
    history: list[str],
    candidates: list[dict],
    lang: str,
    rng_seed: int,
    previous_response: str = "",
    min_overlap: float = 0.15,
) -> ChoiceOut:
    """Candidates ({question, same_document}) that keep the flow: same document, or sharing
    content words with the current question; never a question already asked in other words.
    A seeded pick among the three most related, with its utterance after the current question and
    the previous response (`rewrite_query`); -1 when none fits."""
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
    utterance = rewrite_query(candidates[pick[2]]["question"], current_question, lang, rng.getrandbits(64), previous_response)
    return ChoiceOut(index=pick[2], utterance=utterance, reason="same document" if pick[0] else f"related topic ({-pick[1]:.2f})")


_KO_WH = {
    "원": "얼마",
    "%": "몇 %",
    "%p": "몇 %p",
    "개월": "몇 개월",
    "일": "며칠",
    "년": "몇 년",
    "세": "몇 세",
    "명": "몇 명",
    "건": "몇 건",
    "회": "몇 회",
    "배": "몇 배",
    "시간": "몇 시간",
    "주": "몇 주",
}


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
def write_question(
    passage: str, asked: list[str], lang: str, rng_seed: int, previous_question: str = "", previous_response: str = ""
) -> QuestionOut:
    """A new question about the current passage: a sentence not used by any question or response so
    far, whose value nothing asked or said so far states, its amount asked for ("…1억 원까지 보호합니다." -> "…얼마까지 보호하나요?"),
    with its utterance after the previous turn (`rewrite_query`)."""
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
                stem = _ko_question_ending(s[: span.start] + wh + fix_particle(wh, s[span.end :]))
                if stem:
                    options.append((stem, span.raw.strip(), s))
            elif not (span.unit == "" and 1900 <= span.value <= 2100):
                m = re.match(r"^(.*?)\s+(was|were|totaled|amounted to)\s+\$?$", s[: span.start])
                if m:
                    subj = m.group(1)[0].lower() + m.group(1)[1:]
                    verb = {"totaled": "did", "amounted to": "did"}.get(m.group(2), m.group(2))
                    tail = s[span.end :].rstrip(". ")
                    q = f"How much {verb} {subj}{' total' if verb == 'did' else ''}{tail}?"
                    dollar = "$" if s[: span.start].endswith("$") else ""
                    options.append((q, dollar + span.raw.strip(), s))
    # An answer something already asked or said states would have the user re-ask a known fact.
    options = [o for o in options if not any(contains_normalized(a, o[1]) for a in asked if a)]
    if not options:
        return QuestionOut(question="")
    q, answer, clue = rng.choice(options)
    utterance = rewrite_query(q, previous_question, lang, rng.getrandbits(64), previous_response)
    return QuestionOut(question=q, answer=answer, clue=clue, utterance=utterance)


# Connectors open a follow-up only when it shares nothing with the previous turn (a topic shift);
# a follow-up on the same topic leans on the history instead (ellipsis, coreference).
_KO_SHIFT = ["참, ", "그리고 ", "혹시 ", "그런데 ", "다른 걸 여쭤보면, ", "하나 더 여쭤볼게요. ", "아, ", "", ""]
_EN_SHIFT = ["Also, ", "One more thing: ", "Separately, ", "", "", ""]
_TOPIC_PARTICLE = re.compile(r"^(\S+?)(은|는)$")
_GENITIVE = re.compile(r"^(\S+?)의$")
_PERIOD = re.compile(r"^(제\d+기(?:말|반기)?)?\(?(\d{4})년\)?(에|의|에는)?$")
_KO_LOOKUP = re.compile(r"^(.+?(?:은|는)) (?:얼마|몇 퍼센트|몇 ?%)(?:입니까|인가요|였나요|예요|이에요)\?$")
# "X<particle>" at the head of a follow-up whose X the dialogue established -> a pro-form.
# (No "그게" for 이/가: a leading subject is often a clause's, "저축은행이 영업정지되면 …".)
_KO_PROFORM = [
    ("에서", "거기서"),
    ("에는", "거기에는"),
    ("은", "그건"),
    ("는", "그건"),
    ("을", "그걸"),
    ("를", "그걸"),
    ("도", "그것도"),
]


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
    for old, new in (("있나요?", "있어요?"), ("없나요?", "없어요?"), ("되나요?", "되죠?"), ("입니까?", "인가요?")):
        if q.endswith(old):
            return q[: -len(old)] + new
    return q


def _shares(word: str, previous: str) -> bool:
    prev = content_word_set(previous)
    return bool(word) and any(w in prev for w in content_words(word)) and not word[0].isdigit()


def _ko_context_words(words: list[str], previous: str) -> list[int]:
    """Positions of words the dialogue already established: a period the previous question named
    ("2024년", "제12기(2024년)") or a genitive of a shared noun ("한강금융지주의")."""
    out = []
    for i, w in enumerate(words[:-2]):  # only the leading run: the asked item itself is never elided
        period, gen = _PERIOD.match(w), _GENITIVE.match(w)
        if period and period.group(2) + "년" in previous and (not period.group(1) or period.group(1) in previous):
            out.append(i)
        elif w == "기준" and out and out[-1] == i - 1:  # "제12기말(2024년) 기준" goes with its period
            out.append(i)
        elif out and w in previous.split() and [p[0] for p in noun_phrases(w)] == [w]:
            out.append(i)  # the company named after the period ("… 기준 한강금융지주 …")
        elif gen and _shares(gen.group(1), previous) and [p[0] for p in noun_phrases(gen.group(1))] == [gen.group(1)]:
            out.append(i)
        else:
            break
    return out


# Inside the question only object and place pro-forms read naturally ("대리인도 그걸 청구할 수 있나요?").
_LIGHT_VERBS = ("받", "하", "해", "했", "되", "된", "될", "돼", "주", "줄", "드리", "가능", "필요")
_KO_PROFORM_INNER = [("에서", "거기서"), ("에는", "거기에는"), ("을", "그걸"), ("를", "그걸")]


def _ko_proform(words: list[str], context: str) -> str | None:
    """Coreference: a noun the dialogue established becomes a pro-form ("예금보험금은 …" -> "그건 …",
    "대리인도 예금보험금을 청구할 수 있나요?" -> "대리인도 그걸 청구할 수 있나요?")."""
    if len(words) < 3:
        return None
    for pos, w in enumerate(words[:-1]):
        bank = _KO_PROFORM if pos == 0 else _KO_PROFORM_INNER
        for ending, pro in bank:
            noun = w[: -len(ending)]
            light_verb = pos > 0 and words[pos + 1].startswith(_LIGHT_VERBS)  # "보호를 받나요" is one predicate
            if (
                w.endswith(ending)
                and len(noun) >= 2
                and not words[pos + 1][0].isdigit()
                and not light_verb
                and _shares(noun, context)
                and [p[0] for p in noun_phrases(noun)] == [noun]
                and (pos == 0 or not _GENITIVE.match(words[pos - 1]))
            ):
                return " ".join(words[:pos] + [pro] + words[pos + 1 :])
    return None


def _ko_rewrite(q: str, previous: str, previous_response: str, rng: random.Random) -> str:
    words = q.split()
    drop = _ko_context_words(words, previous)
    if drop:  # ellipsis of what the dialogue established; a lookup like the previous one shrinks to "X는요?"
        rest = " ".join(w for i, w in enumerate(words) if i not in drop)
        lookup = _KO_LOOKUP.match(rest)
        if lookup and _KO_LOOKUP.match(previous):
            return rng.choice(["", "그럼 ", "", "그러면 "]) + lookup.group(1) + "요?"
        return rest
    if len(words) >= 3:
        gen = _GENITIVE.match(words[0])
        if gen and _shares(gen.group(1), previous):
            return " ".join(words[1:])  # ellipsis of "X의"
        bare_noun = [p[0] for p in noun_phrases(words[0])] == [words[0]]
        if bare_noun and _shares(words[0], previous) and not words[1][0].isdigit():
            if _GENITIVE.match(words[1]):
                return _ko_colloquial(" ".join(["그"] + words[1:]), rng)  # "예금자보호 제도의 …" -> "그 제도의 …"
            if _TOPIC_PARTICLE.match(words[1]) or len(words) >= 4:
                return " ".join(words[1:])  # ellipsis of a bare modifier noun ("주택연금 수시인출금은")
        pro = _ko_proform(words, previous + " " + (previous_response or ""))
        if pro:
            return _ko_colloquial(pro, rng)
    if content_word_set(q) & content_word_set(previous):
        return _ko_colloquial(q, rng)  # same topic, nothing to elide: a plain follow-up
    return rng.choice(_KO_SHIFT) + _ko_colloquial(q, rng)


_EN_FORMS = [
    re.compile(r"^What was (?P<ent>.+?)'s (?P<item>.+?) for fiscal (?P<year>\d{4})\?$"),
    re.compile(r"^How much did (?P<ent>.+?) report as (?P<item>.+?) for fiscal (?P<year>\d{4})\?$"),
    re.compile(r"^According to (?P<ent>.+?)'s Form 10-K for fiscal (?P<year>\d{4}), (?P<rest>.+)$"),
]


def en_parts(question: str) -> dict | None:
    """A 10-K lookup's company, line item, fiscal year (or the rest of an "According to" question)."""
    for form in _EN_FORMS:
        m = form.match(question.strip())
        if m:
            return {"item": None, "rest": None, **m.groupdict()}
    return None


def _lower_first(text: str) -> str:
    return text if text[:2].isupper() else text[:1].lower() + text[1:]


def _en_rewrite(q: str, previous: str, rng: random.Random) -> str:
    cur, prev = en_parts(q), en_parts(previous) or {}
    if cur is None or cur["ent"] != prev.get("ent"):
        if cur and cur["rest"]:
            q = cur["rest"][0].upper() + cur["rest"][1:]
        return q if content_word_set(q) & content_word_set(previous) else rng.choice(_EN_SHIFT) + (_lower_first(q) if q else q)
    same_year = cur["year"] == prev.get("year")
    if cur["rest"]:  # "According to X's 10-K for fiscal Y, what was the Z?" -> "What was the Z[ that year / in Y]?"
        rest = cur["rest"].rstrip("?")
        tail = rng.choice(["", " that year"]) if same_year else f" in fiscal {cur['year']}"
        return rest[0].upper() + rest[1:] + tail + "?"
    item = _lower_first(cur["item"])
    if same_year:
        return rng.choice(
            [f"And {item}?", f"What about {item}?", f"How about {item} that year?", f"What did they report as {item}?"]
        )
    if cur["item"] == prev.get("item"):
        return rng.choice([f"And in fiscal {cur['year']}?", f"What was it in fiscal {cur['year']}?"])
    return rng.choice(
        [f"What was its {item} for fiscal {cur['year']}?", f"How much did it report as {item} for fiscal {cur['year']}?"]
    )


def rewrite_query(
    question: str, previous_question: str | None, lang: str, rng_seed: int, previous_response: str | None = None
) -> str:
    """Standalone -> context-dependent, the way a user continues a conversation: ellipsis of what
    the dialogue established (company, period, a leading modifier: "한강금융지주의 2024년 예수부채는
    얼마입니까?" -> "예수부채는요?"), coreference of a shared head noun ("예금보험금은 …" -> "그건 …",
    "What was its …"), a connector only on a topic shift, a colloquial ending. The standalone form
    stays the retrieval key."""
    rng = random.Random(rng_seed)
    q = question.strip()
    if not previous_question:
        return q
    if lang == "en":
        return _en_rewrite(q, previous_question, rng)
    return _ko_rewrite(q, previous_question, previous_response or "", rng)


_KO_RECONFIRM = [
    "아까 {topic}{eun} {answer}{ira} 하셨는데, 맞는지 다시 확인해 주시겠어요?",
    "앞에서 {topic}{i} {answer}{ira} 하신 게 맞나요?",
    "다시 한번 확인할게요. {topic}{eun} {answer}{ira} 하셨죠?",
]
# An answer that is a clause, not a noun ("계좌 지급정지를 요청"), is quoted, never made a predicate noun.
_KO_RECONFIRM_QUOTED = [
    "아까 {topic} 질문에 '{answer}'{ira} 답하셨는데, 맞는지 다시 확인해 주시겠어요?",
    "앞에서 {topic}에 대해 '{answer}'{ira} 하셨는데, 확실한가요?",
]
_KO_RECONFIRM_YESNO = [
    "앞에서 {topic}에 대해 '{answer}'{ira} 답하셨는데, 확실한가요?",
    "아까 {topic} 질문에 '{answer}'{ira} 하셨는데, 다시 확인해 주시겠어요?",
]
_EN_RECONFIRM = [
    "Earlier you said {topic} was {answer}. Can you double-check that?",
    "Just to confirm, {topic} was {answer}, right?",
]
_EN_RECONFIRM_PLAIN = [
    "Earlier you answered {answer}. Can you double-check that?",
    "Just to confirm, the answer was {answer}, right?",
]
_CLAUSE_ENDINGS = ("을", "를", "에", "에서", "으로", "로", "이", "가", "은", "는", "과", "와", "면", "고", "며", "서", "해", "다")


def _nominal(answer: str) -> bool:
    """A short noun phrase or quantity ("1억 원", "가지급금", "만 15세 이상"), not a clause."""
    words = answer.split()
    if len(words) > 4 or answer.endswith(("다", "요", ".")):
        return False
    return not any(w.endswith(_CLAUSE_ENDINGS) and not w[0].isdigit() and len(w) > 1 for w in words)


def _en_topic(question: str) -> str | None:
    """The subject a 10-K lookup asked about ("Hanriver Bancorp, Inc.'s net income for fiscal 2024")."""
    parts = en_parts(question)
    if parts is None:
        return None
    if parts["item"]:
        return f"{parts['ent']}'s {_lower_first(parts['item'])} for fiscal {parts['year']}"
    m = re.match(r"^what was (the .+?)\?$", parts["rest"], re.I)
    return f"{_lower_first(m.group(1))} for fiscal {parts['year']}" if m else None


@operation("reconfirm_turn", TextOut)
def reconfirm_query(earlier_question: str, earlier_answer: str, lang: str, rng_seed: int) -> TextOut:
    rng = random.Random(rng_seed)
    answer = earlier_answer.strip()
    if lang == "en":
        topic = _en_topic(earlier_question)
        bank = _EN_RECONFIRM if topic else _EN_RECONFIRM_PLAIN
        return TextOut(text=rng.choice(bank).format(topic=topic, answer=answer))
    topic = topic_of(earlier_question, lang)
    yesno = answer in ("예", "네", "아니오", "아니요")
    if yesno:
        answer = "네" if answer in ("예", "네") else "아니요"
    ira = "이라고" if has_final_consonant(answer) else "라고"
    bank = _KO_RECONFIRM_YESNO if yesno else _KO_RECONFIRM if _nominal(answer) else _KO_RECONFIRM_QUOTED
    return TextOut(
        text=rng.choice(bank).format(
            topic=topic, answer=answer, ira=ira, eun=particle(topic, "은/는"), i=particle(topic, "이/가")
        )
    )
