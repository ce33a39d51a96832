"""Surface defects an edit leaves behind: what a human annotator would reject on sight.

Each check names what it found, so injection QC can record why a sample was dropped.
"""

from __future__ import annotations

import re
from typing import Iterable

from finhallu.text.quantities import impossible_dates
from finhallu.text.sentences import tokenize_korean, tokenize_korean_many
from finhallu.text.words import has_final_consonant

# Nouns of comparison and bound take 이다, never 하다: "이하이면", not "이하하면" (초과하다 is a verb).
_BOUND_NOUNS = {"이하", "미만", "이내", "이후", "가량", "이상"}  # not 이전/전후: 이전하다, 전후하여 are words
# 이상하다 is a word ("odd"), so 이상 is a bound only right after a figure or a unit ("19세 이상하여").
_FIGURE_TAGS = {"SN", "NR", "NNB", "SW"}
# English: "a" before a vowel-initial word ("a increase"); u/o words vary ("a unit", "a one-time").
_EN_ARTICLE = re.compile(r"(?<![\w.])a (?=[aei][a-z])(?!eu|ew)")
# Korean numerals group by 만: "2만 7천", never "27천" (a digit run of two or more before 천/백/십).
_MALFORMED_NUMERAL = re.compile(r"(?<![\d,.])\d{2,}(?:,\d{3})*\s?(천|백|십)(?!만|억|조)")
_DOUBLED_PARTICLE = re.compile(r"(을를|를을|은는|는은|가이)(?![가-힣])")


def _repeated_span(text: str) -> str | None:
    """A word (or two-word run) stated twice in a row, joined by 나/과/와/or/and or parentheses:
    "월세나 월세로", "순증가(증가)", "increase or increase"."""
    m = re.search(r"([가-힣A-Za-z]{2,})(?:이?나|과|와|\s*\(|\s+(?:or|and)\s+)\s*\1(?![가-힣A-Za-z]{2})", text)
    if m:
        return m.group(0)
    m = re.search(r"([가-힣]{2,})\(\s*([가-힣]{2,})\s*\)", text)
    if m and (m.group(1).endswith(m.group(2)) or m.group(2).endswith(m.group(1))):
        return m.group(0)
    m = re.search(r"\b(\w+(?:\s\w+)?)\s+\1\b", text)
    return m.group(0) if m and not m.group(1).isdigit() else None


_BOUND_FOUND: dict[str, tuple[str, ...]] = {}  # per text: Kiwi's analysis is the costly part of a check


def clear_memo() -> None:
    _BOUND_FOUND.clear()


def prefetch(texts: Iterable[str]) -> None:
    """Analyse many Korean texts known ahead (a stage's injected responses) in one Kiwi batch (its
    worker threads, outside the GIL); the checks then find them."""
    todo = [t for t in dict.fromkeys(texts) if t and t not in _BOUND_FOUND]
    for text, toks in zip(todo, tokenize_korean_many(todo)):
        _BOUND_FOUND[text] = _bound_in(text, toks)


def _bound_noun_verbs(text: str) -> tuple[str, ...]:
    """Kiwi analysis: a bound noun (이하, 미만, ...) directly followed by the 하 of 하다."""
    found = _BOUND_FOUND.get(text)
    if found is None:
        if len(_BOUND_FOUND) >= 50_000:  # a long-lived process between stages' clear_memos
            _BOUND_FOUND.clear()
        found = _BOUND_FOUND[text] = _bound_in(text, tokenize_korean(text))
    return found


def _bound_in(text: str, toks) -> tuple[str, ...]:
    out = []
    for i, (prev, tok) in enumerate(zip(toks, toks[1:])):
        if (
            tok.form == "하"
            and tok.tag in ("XSV", "XSA", "VV")
            and prev.form in _BOUND_NOUNS
            and tok.start == prev.start + prev.len
        ):
            if prev.form == "이상" and not (i and toks[i - 1].tag in _FIGURE_TAGS):
                continue
            out.append(text[prev.start : tok.start + tok.len + 2].strip())
    return tuple(out)


def fluency_issues(text: str, lang: str) -> list[str]:
    issues = [f"impossible date {d!r}" for d in impossible_dates(text)]
    span = _repeated_span(text or "")
    if span:
        issues.append(f"repeated span {span!r}")
    if lang == "ko":
        for found in _bound_noun_verbs(text or "")[:1]:
            issues.append(f"comparison noun used as a verb {found!r}")
        m = _MALFORMED_NUMERAL.search(text or "")
        if m:
            issues.append(f"malformed numeral {m.group(0)!r}")
        if _DOUBLED_PARTICLE.search(text or "") or any(
            has_final_consonant(m.group(1)) for m in re.finditer(r"([가-힣])이가(?![가-힣])", text or "")
        ):
            issues.append("doubled particle")
    elif _EN_ARTICLE.search(text or ""):
        issues.append("article 'a' before a vowel")
    if re.search(r"\s{2,}\S", (text or "").strip()):
        issues.append("double space")
    return issues
