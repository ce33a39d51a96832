"""Noun phrases and question topics (Kiwi for Korean, content words for English)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from finhallu.text.sentences import tokenize_korean, tokenize_korean_many
from finhallu.text.words import content_words, is_particle

if TYPE_CHECKING:
    from kiwipiepy import Token

_NOUN_TAGS = ("NNG", "NNP", "SL", "SH")
_WH = {"얼마", "무엇", "어디", "언제", "누구", "이상", "이하", "미만", "초과", "경우", "기준", "내용", "최근", "현재"}


_PHRASES: dict[tuple[str, bool], tuple[tuple[str, int, int], ...]] = {}
_PHRASES_MAX = 50_000  # texts remembered (phrases are small; a stage asks about the same texts often)


def clear_memo() -> None:
    _PHRASES.clear()


def _remember(key: tuple[str, bool], phrases: tuple[tuple[str, int, int], ...]) -> None:
    if len(_PHRASES) >= _PHRASES_MAX:
        _PHRASES.clear()  # rare (a stage's texts fit); simpler than LRU order on every hit
    _PHRASES[key] = phrases


def noun_phrases(text: str, spaced: bool = False) -> tuple[tuple[str, int, int], ...]:
    """Runs of adjacent nouns (Kiwi NNG/NNP, Latin, Hanja) as (phrase, start, end) in `text`.

    Nouns joined without a space form one compound ("주택도시보증공사"); a single space joins a
    Latin acronym to the next noun ("HF 전세자금보증"), and with `spaced` any two nouns
    ("예금자보호 한도"). Verbal nouns (이용하다) are left out.
    """
    hit = _PHRASES.get((text, spaced))
    if hit is None:
        hit = _phrases(text, tokenize_korean(text), spaced)
        _remember((text, spaced), hit)
    return hit


def prefetch_noun_phrases(texts: Iterable[str], spaced: bool = False) -> None:
    """`noun_phrases` of many texts known ahead (a stage's turns, a split's passages), analysed in
    one batch (see `tokenize_korean_many`); later calls find them."""
    todo = [t for t in dict.fromkeys(texts) if t and (t, spaced) not in _PHRASES]
    for text, toks in zip(todo, tokenize_korean_many(todo)):
        _remember((text, spaced), _phrases(text, toks, spaced))


def _phrases(text: str, toks, spaced: bool) -> tuple[tuple[str, int, int], ...]:
    out: list[tuple[str, int, int]] = []
    run: list[Token] = []  # the nouns of the phrase being read

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


# English questions: the source frame ("According to Apple Inc.'s Form 10-K for fiscal 2023,"), the
# wh-head ("what was the", "how much did"), "X report as", and the period go; the rest is the topic.
_EN_FRAME = re.compile(
    r"^(?:according to|per|based on)\s+.{2,120}?,\s*(?=(?:what|how|which|who|when|where|by|did|does|do|is|are|was|were)\b)",
    re.IGNORECASE,
)
_EN_ASK = re.compile(
    r"^(?:by\s+)?(?:(?:how|what)\s+about|what|how\s+much|how\s+many|which|who|when|where|why|how)\b\s*"
    r"(?:(?:was|were|is|are|did|does|do|has|have|had|will)\b\s*)?(the\s+)?",
    re.IGNORECASE,
)
_EN_REPORTED = re.compile(r"^.{2,80}?\s+report(?:ed|s)?\s+as\s+(?:the\s+)?", re.IGNORECASE)
_EN_PERIOD = re.compile(
    r"\s*(?:\b(?:in|for|during|at|as of)\s+(?:the\s+)?(?:fiscal\s+)?(?:year\s+)?\d{4}\b.*|"
    r"\bthat year\b.*|\b(?:increase|decrease|change|grow|rise|fall)\b\s*|\b(?:were|was|are|is) there\b.*)$",
    re.IGNORECASE,
)
_EN_AUX = {"did", "does", "do", "is", "are", "was", "were", "can", "could", "will", "would", "has", "have", "had", "should"}


def _english_topic(question: str) -> str:
    q = _EN_FRAME.sub("", question.strip()).rstrip("?.! ")
    m = _EN_ASK.match(q)
    lower = bool(m and m.group(1))  # "the Total net sales": a line item, not a name
    q = q[m.end() :] if m else q
    reported = _EN_REPORTED.match(q)
    if reported:  # "... report as Net income": the line item
        q, lower = q[reported.end() :], True
    q = _EN_PERIOD.sub("", q).strip(" ,")
    words = q.split()
    if not words or len(words) > 8 or words[0].lower() in _EN_AUX:  # a yes/no question: its content words
        words = [
            w
            for w in content_words(_EN_FRAME.sub("", question))
            if not w[0].isdigit() and not is_particle(w) and w not in _EN_AUX
        ][:3]
        return " ".join(words) or "this question"
    if lower and not words[0].isupper():
        words[0] = words[0].lower()
    return " ".join(words)


def topic_of(question: str, lang: str) -> str:
    """What a question is about, for refusals and reconfirmations ("상조회사 자본금", "total net sales")."""
    if lang == "en":
        return _english_topic(question)
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
