"""Written, not copied: the offline assistant restates its clue in its own words.

K-FinHallu's assistant LLM writes its answers; a rules assistant that pastes the clue would make
"copied from the context = faithful" a shortcut that a string match exploits (DESIGN "No
shortcuts"). `paraphrase` rewrites sites of a text by seeded chance, each site with probability
`rate`, so that how much of an answer is copied varies from answer to answer as it does in
written ones. Every rewrite is local and keeps the meaning:

- Korean: connective endings (-며 <-> -고, -(으)므로 -> -기 때문에), synonyms (이내에 -> 안에,
  또는 -> 혹은, 반드시 -> 꼭, 즉시 -> 곧바로, 경우에는 -> 때에는, 초과하는 -> 넘는, A 및 B -> A와 B ...),
  amounts restated (1억 6,500만 원 <-> 165,000,000원);
- English: the filer's first person in the third (we/our -> the company/the company's),
  synonyms (increased -> rose, primarily -> mainly, approximately -> about ...), amounts restated
  ($1.1 billion <-> $1,100 million).

The register (합쇼체, the filer's tense) is left as it is: an added sentence in another register
would itself give a hallucination away. Figures keep their values in every form (text/quantities
reads both alike), so the label verifier's faithful-answer rule still holds.
"""

from __future__ import annotations

import random
import re
from decimal import Decimal
from typing import Callable

from finhallu.text.numbers import find_numbers
from finhallu.text.words import particle

_NOT_HANGUL_BEFORE = r"(?<![가-힣])"
_NOT_HANGUL_AFTER = r"(?![가-힣])"


def _word(w: str) -> str:
    return _NOT_HANGUL_BEFORE + w + _NOT_HANGUL_AFTER


# (pattern, replacement): plain substitutions that mean the same in any context they match.
_KO_SUBSTITUTIONS: list[tuple[str, str]] = [
    (r"이내에" + _NOT_HANGUL_AFTER, "안에"),
    (_word("또는"), "혹은"),
    (_word("혹은"), "또는"),
    (_word("반드시"), "꼭"),
    (_word("즉시"), "곧바로"),
    (_word("곧바로"), "즉시"),
    (r"경우에는" + _NOT_HANGUL_AFTER, "때에는"),
    (r"경우에도" + _NOT_HANGUL_AFTER, "때에도"),
    (r"초과하는" + _NOT_HANGUL_AFTER, "넘는"),
    (r"초과하면" + _NOT_HANGUL_AFTER, "넘으면"),
    (r"초과할" + _NOT_HANGUL_AFTER, "넘을"),
    (_word("모두"), "전부"),
    (_word("가장"), "제일"),
    (_word("먼저"), "우선"),
    (r"에 대해" + _NOT_HANGUL_AFTER, "에 관해"),
    (r"에 대한" + _NOT_HANGUL_AFTER, "에 관한"),
    (r"([을를]) 통해" + _NOT_HANGUL_AFTER, r"\1 거쳐"),
    (r"수 없습니다", "수가 없습니다"),
    (r"(있|없|되|하|않|이)(?:으)?므로" + _NOT_HANGUL_AFTER, r"\1기 때문에"),
    (r"(하|되|이)며(?=,|\s)", r"\1고"),
    (r"(있|없|않)으며(?=,|\s)", r"\1고"),
    (r"(하|되)고(?=,)", r"\1며"),
    (r"(있|없|않)고(?=,)", r"\1으며"),
]
_EN_SUBSTITUTIONS: list[tuple[str, str]] = [
    (r"\bincreased\b", "rose"),
    (r"\bdecreased\b", "declined"),
    (r"\bprimarily\b", "mainly"),
    (r"\bapproximately\b", "about"),
    (r"\bpartially offset\b", "partly offset"),
    (r"\btotaled\b", "amounted to"),
    (r"\bcompared to\b", "versus"),
    (r"\bcompared with\b", "versus"),
    (r"\bas a result of\b", "because of"),
    (r"\bdue to\b", "owing to"),
    (r"\bin addition\b", "also"),
    (r"\bhowever\b", "still"),
    # The filer's "we" in the third person, where the verb needs no agreement (past tense, modals).
    (r"\bWe (?=(?:\w+ed|had|could|would|will|may|might|can|should|must|did|made|paid|sold|spent|took)\b)", "The company "),
    (r"\bwe (?=(?:\w+ed|had|could|would|will|may|might|can|should|must|did|made|paid|sold|spent|took)\b)", "the company "),
    (r"\bWe were\b", "The company was"),
    (r"\bwe were\b", "the company was"),
    (r"\bOur\b", "The company's"),
    (r"\bour\b", "the company's"),
]


def _ko_and(m: re.Match) -> str:
    return f"{m.group(1)}{particle(m.group(1), '과/와')} "


def _won_words(v: Decimal) -> str | None:
    """165000000 -> "1억 6,500만 원" (whole 만 only)."""
    n = int(v)
    if n < 10**4 or n % 10**4:
        return None
    eok, man = divmod(n // 10**4, 10**4)
    parts = ([f"{eok:,}억"] if eok else []) + ([f"{man:,}만"] if man else [])
    return " ".join(parts) + " 원"


def _amount_sites(text: str, lang: str) -> list[tuple[int, int, str]]:
    """Amounts written another way: 만/억 words <-> digits for 원; million <-> billion for dollars."""
    out = []
    for n in find_numbers(text):
        raw = text[n.start : n.end]
        if lang == "ko" and n.unit == "원" and n.value >= 10**4:
            if re.search(r"[만억조]", raw):
                out.append((n.start, n.end, f"{int(n.value):,}원"))
            else:
                words = _won_words(n.value)
                if words:
                    out.append((n.start, n.end, words))
        elif lang == "en" and n.start and text[n.start - 1] == "$":
            m = re.fullmatch(r"([\d.,]+)\s+(million|billion)", raw.strip(), re.IGNORECASE)
            if m:
                value = Decimal(m.group(1).replace(",", ""))
                if m.group(2).lower() == "billion" and (value * 1000) == (value * 1000).to_integral_value():
                    out.append((n.start, n.end, f"{int(value * 1000):,} million"))
                elif m.group(2).lower() == "million" and value >= 1000 and value % 100 == 0:
                    out.append((n.start, n.end, f"{value / 1000:g} billion"))
    return out


def _sites(text: str, lang: str) -> list[tuple[int, int, str]]:
    subs: list[tuple[str, str | Callable]] = list(_KO_SUBSTITUTIONS if lang == "ko" else _EN_SUBSTITUTIONS)
    if lang == "ko":
        subs.append((r"([가-힣A-Za-z0-9·()]+) 및 ", _ko_and))
    out = []
    for pattern, repl in subs:
        for m in re.finditer(pattern, text):
            new = repl(m) if callable(repl) else m.expand(repl)
            if new != m.group(0):
                out.append((m.start(), m.end(), new))
    return out + _amount_sites(text, lang)


def _protected(text: str, keep: list[str]) -> list[tuple[int, int]]:
    spans = []
    for k in keep:
        k = (k or "").strip()
        if len(k) >= 2:
            spans += [(m.start(), m.end()) for m in re.finditer(re.escape(k), text)]
    return spans


def paraphrase(text: str, lang: str, rng: random.Random, rate: float, keep: list[str] | None = None) -> str:
    """text with each rewrite site rewritten with probability `rate` (non-overlapping, seeded);
    sites inside an occurrence of a `keep` string (the gold answer span) stay as written."""
    if not text or rate <= 0:
        return text
    chosen: list[tuple[int, int, str]] = [(s, e, text[s:e]) for s, e in _protected(text, keep or [])]
    for start, end, new in sorted(_sites(text, lang)):
        if rng.random() < rate and all(end <= s or start >= e for s, e, _ in chosen):
            chosen.append((start, end, new))
    for start, end, new in sorted(chosen, reverse=True):
        text = text[:start] + new + text[end:]
    return text
