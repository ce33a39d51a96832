"""Rules backends of the dialogue operations (K-FinHallu §4.2): the user side picks the next
question, writes a new one when no candidate fits, rewrites standalone questions into
context-dependent utterances and asks reconfirm questions; the assistant side answers from the
gold passage and clue only, or refuses.

Phrasing varies by seeded choice so that no fixed template marks any class of response.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.text import sentences
from finhallu.tasks.inject.edits import fix_particle
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import find_numbers
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_words, has_final_consonant, is_particle, jaccard, particle


class TextOut(BaseModel):
    text: str


class AnswerOut(BaseModel):
    response: str
    evidence: str  # the clue-derived core the response states


class ChoiceOut(BaseModel):
    index: int  # position in `candidates`; -1 = no candidate keeps the flow coherent
    reason: str = ""


class QuestionOut(BaseModel):
    question: str  # "" = the passage offers nothing new to ask
    answer: str = ""
    clue: str = ""


# ---- Korean noun phrases (topics, entities) ---------------------------------------------------
_NOUN_TAGS = ("NNG", "NNP", "SL", "SH")
_WH = {"얼마", "무엇", "어디", "언제", "누구", "이상", "이하", "미만", "초과", "경우", "기준", "내용", "최근", "현재"}


@lru_cache(maxsize=20000)
def noun_phrases(text: str, spaced: bool = False) -> tuple[tuple[str, int, int], ...]:
    """Runs of adjacent nouns (Kiwi NNG/NNP, Latin, Hanja) as (phrase, start, end) in `text`.

    Nouns joined without a space form one compound ("주택도시보증공사"); a single space joins a
    Latin acronym to the next noun ("HF 전세자금보증"), and with `spaced` any two nouns
    ("예금자보호 한도"). Verbal nouns (이용하다) are left out.
    """
    with sentences._lock:  # the shared Kiwi instance (sentences.py) is not documented as thread-safe
        toks = sentences.kiwi().tokenize(text or "")
    out, run = [], []

    def flush(nxt_tag: str | None):
        if run and not (nxt_tag or "").startswith(("XSV", "XSA")):
            start, end = run[0].start, run[-1].start + run[-1].len
            out.append((text[start:end], start, end))
        run.clear()

    for tok in toks:
        if tok.tag in _NOUN_TAGS:
            if run:
                gap = tok.start - (run[-1].start + run[-1].len)
                if gap > 1 or (gap == 1 and run[-1].tag != "SL" and not spaced):
                    flush(None)
            run.append(tok)
        else:
            flush(tok.tag)
    flush(None)
    return tuple(p for p in out if len(p[0]) >= 2 and p[0] not in _WH)


def topic_of(question: str, lang: str) -> str:
    """What a question is about, for refusals and reconfirmations ("상조회사 자본금")."""
    if lang == "en":
        words = [w for w in content_words(question) if not w[0].isdigit() and not is_particle(w)]
        return " ".join(words[:3]) or "this question"
    phrases = []
    for phrase, start, _ in noun_phrases(question, spaced=True):
        words = phrase.split()
        while words and words[0] in _WH:  # "초과 근로자" -> "근로자", "얼마 이상" -> ""
            start += len(words.pop(0)) + 1
        while words and words[-1] in _WH:
            words.pop()
        if words and len(" ".join(words)) >= 2 and not words[0][0].isdigit():
            phrases.append((" ".join(words), start))
    if not phrases:
        return "문의하신 내용"
    longest = sorted(phrases, key=lambda p: (-len(p[0]), p[1]))
    keep = [longest[0]] + [p for p in longest[1:2] if len(p[0]) >= 3]
    return " ".join(p[0] for p in sorted(keep, key=lambda p: p[1]))


# ---- the assistant: answers and refusals --------------------------------------------------------
OPENERS = {"ko": ["", "", "", "안내에 따르면 ", "자료에 따르면 ", "확인해 보니 ", "문서에 따르면 "],
           "en": ["", "", "According to the filing, ", "Per the report, ", "Based on the disclosure, "]}
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
_CONNECTIVE = re.compile(r"^(?:또한|다만|그러나|하지만|따라서|그리고|그럼에도|이에 따라|이때|한편|특히|아울러|마찬가지로|다음으로|마지막으로|"
                         r"첫째|둘째|셋째|넷째|다섯째|Also|However|In addition|Additionally|Moreover|Furthermore|"
                         r"Therefore)\s*,?\s+")
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
    block = [ln for ln in lines[start: idx + 1] if not set(ln.replace("|", "").split()) <= {"---"}]
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
        return " ".join(table_sentence(passage, ln, answer if contains_normalized(ln, answer) else "", lang)
                        for ln in lines)
    core = clean_sentence(clue)
    if core and not core.endswith((".", "다", "요", "!", "?")):
        core = core + ("." if lang == "en" else "")
    return core


def _next_sentence(passage: str, clue: str) -> str | None:
    sents = split_sentences(passage)
    for i, s in enumerate(sents):
        if clue in s or s in clue:
            for nxt in sents[i + 1:]:
                if ("|" not in nxt and len(nxt) > 15 and nxt not in clue
                        and not nxt.rstrip().endswith(("다음과 같습니다.", ":", "as follows:"))):
                    return nxt
            return None
    return None


@operation("answer_turn", AnswerOut)
def answer_turn(question: str, passage: str, clue: str, answer: str, qa_kind: str, lang: str,
                rng_seed: int, support_probability: float = 0.5) -> AnswerOut:
    rng = random.Random(rng_seed)
    core = _clue_core(passage, clue, answer, lang)
    if qa_kind == "yesno":
        yes = answer.strip() in ("예", "네", "Yes", "yes")
        prefix = rng.choice(["네, ", "예, "]) if yes else rng.choice(["아니요, ", "아닙니다. "])
        if lang == "en":
            prefix = "Yes, " if yes else "No, "
        response = prefix + core
    else:
        response = rng.choice(OPENERS[lang if lang in OPENERS else "en"]) + core
    if rng.random() < support_probability:
        extra = _next_sentence(passage, clue)
        if extra:
            response = response + " " + clean_sentence(extra)
    return AnswerOut(response=response.strip(), evidence=core)


@operation("refuse_turn", TextOut)
def refuse_turn(question: str, lang: str, rng_seed: int) -> TextOut:
    rng = random.Random(rng_seed)
    bank = _KO_REFUSALS if lang == "ko" else _EN_REFUSALS
    topic = topic_of(question, lang)
    return TextOut(text=rng.choice(bank).format(topic=topic, wa=particle(topic, "과/와")))


# ---- the user: next question, new question, rewrite, reconfirm ----------------------------------
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
