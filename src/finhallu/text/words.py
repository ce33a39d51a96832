"""Content words, Korean particles and word overlap."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_PARTICLES = sorted(
    [
        "은",
        "는",
        "이",
        "가",
        "을",
        "를",
        "의",
        "에",
        "에서",
        "에게",
        "께",
        "으로",
        "로",
        "와",
        "과",
        "도",
        "만",
        "까지",
        "부터",
        "보다",
        "이나",
        "나",
        "이며",
        "며",
        "이고",
        "고",
        "으로는",
        "로는",
        "에는",
        "에서는",
        "이란",
        "란",
        "입니다",
        "이다",
        "인가요",
        "인가",
        "인지",
        "일까요",
        "나요",
        "까요",
        "가요",
        "요",
    ],
    key=len,
    reverse=True,
)
_WORD_RE = re.compile(r"[0-9]+(?:[.,][0-9]+)*%?|[a-z]+(?:'[a-z]+)?|[가-힣]+")
STOPWORDS = {
    "the",
    "a",
    "an",
    "of",
    "to",
    "in",
    "and",
    "or",
    "for",
    "on",
    "by",
    "is",
    "are",
    "was",
    "were",
    "be",
    "with",
    "as",
    "at",
    "that",
    "this",
    "it",
    "its",
    "what",
    "which",
    "how",
    "did",
    "does",
    "do",
    "및",
    "등",
    "수",
    "것",
    "있습니다",
    "합니다",
    "있는",
    "하는",
    "대한",
    "경우",
    "때",
    "얼마",
    "무엇",
    "어떻게",
    "몇",
}


_PARTICLE_SET = frozenset(_PARTICLES)


def is_particle(word: str) -> bool:
    return word in _PARTICLE_SET


@lru_cache(maxsize=1 << 17)  # a corpus has few distinct words; each is stripped millions of times
def strip_particle(word: str) -> str:
    for p in _PARTICLES:
        if len(word) > len(p) + 1 and word.endswith(p):
            return word[: -len(p)]
    return word


def content_words(text: str) -> list[str]:
    return list(_content_words(text or ""))


# Texts (questions, passages, responses) are compared with many others: each is read once.
@lru_cache(maxsize=1 << 16)
def _content_words(text: str) -> tuple[str, ...]:
    t = unicodedata.normalize("NFKC", text).lower()
    out = []
    for w in _WORD_RE.findall(t):
        w = strip_particle(w) if w[0] >= "가" else w.replace(",", "")
        if len(w) >= 2 and w not in STOPWORDS and w not in _PARTICLE_SET:
            out.append(w)
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def content_word_set(text: str) -> frozenset[str]:
    return frozenset(_content_words(text or ""))


def jaccard(a: str, b: str) -> float:
    """Jaccard overlap of two texts' content words."""
    x, y = content_word_set(a), content_word_set(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def has_final_consonant(word: str) -> bool:
    """Whether a Korean word ends in a batchim (to pick 은/는, 이/가, 을/를); digits read aloud."""
    if not word:
        return False
    ch = word[-1]
    if "가" <= ch <= "힣":
        return (ord(ch) - 0xAC00) % 28 != 0
    return ch in "0136781lmnLMN"  # 영,일,삼,육,칠,팔 / l m n sounds


def particle(word: str, pair: str) -> str:
    """particle('예금', '은/는') -> '은'."""
    with_batchim, without = pair.split("/")
    return with_batchim if has_final_consonant(word) else without


_PARTICLE_PAIRS = [("은", "는"), ("이", "가"), ("을", "를"), ("과", "와"), ("으로", "로")]


def fix_particle(replacement: str, following: str) -> str:
    """Re-pick the particle that follows a swapped Korean word (원금을 -> 이자를)."""
    for with_b, without in _PARTICLE_PAIRS:
        for p in (with_b, without):
            nxt = following[len(p) : len(p) + 1]
            if following.startswith(p) and not ("가" <= nxt <= "힣"):
                right = with_b if has_final_consonant(replacement) else without
                return right + following[len(p) :]
    return following


def broken_particle(text: str) -> bool:
    """A doubled particle (원금을를, 한도는은). 이가 only after a batchim syllable (원금이가), since
    a noun ending in 이 takes 가 naturally (금리 차이가, 나이가)."""
    if re.search(r"(을를|를을|은는|는은|가이)\b", text):
        return True
    return any(has_final_consonant(m.group(1)) for m in re.finditer(r"([가-힣])이가\b", text))
