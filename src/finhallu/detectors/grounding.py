"""Shared evidence measures for the offline detectors (and the LLM judge's rules backend).

Everything compares the response with the evidence a deployed checker has: the passages and,
unless disabled, the dialogue history (and the question itself, which may state a figure).
- question coverage: can the passages answer the question at all?
- answer coverage: how much of what the response adds to the question do the passages and the
  history hold? (A long analyst's question is half preamble: its coverage says little, the
  answer's says whether the evidence holds what was answered.)
- claim support: is each claim of the response (a sentence, or a clause of a long one) lexically
  backed by one evidence text? The weakest claim decides.
- numbers (value + unit), periods and named entities of the response absent from the evidence;
  a number *contradicts* the evidence when an evidence number of the same unit sits in the same
  wording ("...날부터 5개월 이내" vs "...날부터 3개월 이내").
- modifier flips: a response word whose antonym stands in the evidence sentence it copies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from finhallu.detectors.attribution import misattributed_figures
from finhallu.detectors.periods import misplaced_figures, years
from finhallu.codeversion import code_hash
from finhallu.fanout import Fanout
from finhallu.result_cache import CACHE_FILE as RESULTS_FILE, cached_map, open_result_cache
from finhallu.detectors import Detection, looks_like_refusal
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import find_numbers, number_keys
from finhallu.text.derived import derivation, restated_at_scale
from finhallu.text.quantities import quantities, states_value
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_word_set, content_words


def evidence_texts(sample: dict, use_history: bool = True, use_query: bool = True, max_passages: int | None = None) -> list[str]:
    texts = passage_texts(sample, max_passages)
    if use_history:
        texts += [m["content"] for m in sample.get("history") or []]
    if use_query and sample.get("query"):
        texts.append(sample["query"])
    return texts


def passage_texts(sample: dict, max_passages: int | None = None) -> list[str]:
    """The passages' texts in retrieval order, the first `max_passages` only when given."""
    return [p["text"] for p in (sample.get("passages") or [])[:max_passages]]


def question_of(sample: dict) -> str:
    return sample.get("standalone_query") or sample.get("query") or ""


words = content_word_set  # content words of a text, memoised in text.words (passages meet many responses)


@lru_cache(maxsize=1 << 14)
def sentences(text: str) -> tuple[str, ...]:
    return tuple(split_sentences(text))


def query_coverage(query: str, passages: list[str]) -> float:
    """Best share of the query's content words found in any one passage (can the evidence answer?)."""
    q = words(query)
    if not q or not passages:
        return 0.0
    return max(len(q & words(p)) / len(q) for p in passages)


_CLAUSE_BREAK = re.compile(
    r"(?:,\s+(?:and|but|while|whereas|which|although)\s+|;\s+|"
    r"(?<=[가-힣])(?:며|고|지만|는데|으며|으나|면서),\s+)"
)


def claims(text: str) -> list[str]:
    """The response's claims: its sentences, a long one split at clause boundaries where each side
    says something of its own (four content words or more), so one unbacked clause is not averaged
    away by a backed one."""
    out = []
    for sent in sentences(text):
        parts, start = [], 0
        for m in _CLAUSE_BREAK.finditer(sent):
            left = sent[start : m.start()]
            if len(words(left)) >= 4 and len(words(sent[m.end() :])) >= 4:
                parts.append(left)
                start = m.end()
        out += parts + [sent[start:]]
    return out


def sentence_support(response: str, sources: list[str]) -> list[tuple[str, float]]:
    """Per claim of the response: best share of its content words found in one source."""
    vocab = [words(s) for s in sources]
    out = []
    for claim in claims(response):
        words_ = words(claim)
        if not words_:
            continue
        out.append((claim, max((len(words_ & v) / len(words_) for v in vocab), default=0.0)))
    return out


def answer_coverage(question: str, response: str, sources: list[str]) -> float:
    """Share of the response's content words beyond the question's that some source holds
    (1.0 when the response adds no word of its own). Figures are left to the number checks: a
    computed or rescaled one is not written in the evidence as it is in the answer. One pseudo-word
    held smooths the share, so that one unmatched word of a three-word answer is not a verdict."""
    added = {w for w in words(response) - words(question) if not w[0].isdigit()}
    held = frozenset().union(*(words(s) for s in sources)) if sources else frozenset()
    return (len(added & held) + 1) / (len(added) + 1)


def answer_relevance(question: str, response: str, enough: int = 6) -> float:
    """How much of the question the response takes up (does it answer *this* question?): shared
    content words over the question's, or over `enough` for a long question (an analyst's preamble
    is not repeated in an answer). A short answer (a span such as "$150 million") need not repeat
    the question: 1.0 below 5 content words."""
    q, r = words(question), words(response)
    if not q or len(r) < 5:
        return 1.0
    return min(1.0, len(q & r) / min(len(q), enough))


# ---- numbers ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnchoredNumber:
    key: str  # normalized value + unit
    unit: str
    raw: str
    anchors: frozenset  # content words around the number: what it is a number *of*


@lru_cache(maxsize=1 << 14)
def anchored_numbers(text: str) -> tuple[AnchoredNumber, ...]:
    out = []
    for span in find_numbers(text or ""):
        keys = number_keys(span.raw)
        if not keys:
            continue
        key = next(iter(keys))
        unit = re.sub(r"^[\d.]+", "", key)
        # the wording around it, within its line: a table row's figure is not of the next row's label
        before, after = text[max(0, span.start - 30) : span.start], text[span.end : span.end + 12]
        around = before.rsplit("\n", 1)[-1] + " " + after.split("\n", 1)[0]
        out.append(AnchoredNumber(key, unit, span.raw.strip(), frozenset(w for w in words(around) if not w[0].isdigit())))
    return tuple(out)


def number_findings(response: str, evidence: list[str], question: str = "") -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """(numbers absent from the evidence, [(response number, evidence number it contradicts)],
    [how each computed or rescaled figure follows from the evidence]).

    A response figure is present when an evidence text states it at its own scale (text/quantities:
    a table's "(단위: 백만원)" or "(in millions)" note, 억/조 and million/billion words, rounding
    to the stated precision), so "4조 1,500억 원" is found in "자본총계 | 4,150,000" under 백만원;
    or when it restates an evidence figure at another scale, digits kept, or computes it from the
    evidence figures the answer is about (text/derived). A figure that an evidence figure of the same
    unit in the same wording contradicts is never excused as computed; one the evidence states only
    for another year than the answer names (periods.py), or only as another metric's value where it
    gives the answer's metric another figure (attribution.py), is contradicted too. A bare answer
    ("About 6.5%.") is about the question: its words choose what a computed figure is computed from."""
    ev_numbers = [n for t in evidence for n in anchored_numbers(t)]
    ev_keys = {n.key for n in ev_numbers}
    ev_quantities = [q for t in evidence for q in quantities(t)]
    mine = {q.raw.strip(): q for q in quantities(response)}
    stated = {raw for raw, q in mine.items() if any(states_value(t, q) for t in evidence)}
    # the evidence figures the answer states itself: the operands an analyst's computation shows
    said = [q for raw, q in mine.items() if raw in stated]
    operands = [e for e in ev_quantities if any(e.same_as(q) for q in said)] if said else []
    missing: list[str] = []
    contradicted: list[tuple[str, str]] = []
    derived: list[str] = []
    figures: list | None = None  # (evidence figure, words of its line or sentence), read once when needed
    for n in anchored_numbers(response):
        if n.key in ev_keys or n.raw in stated or n.raw in [m for m, _ in contradicted] + missing:
            continue
        q = mine.get(n.raw)
        rescaled = restated_at_scale(q, ev_quantities) if q else None
        if rescaled is not None:  # before the rivals: the rescaled figure is one of them
            operands.append(rescaled)
            derived.append(f"{n.raw}: {rescaled.raw.strip()} at another scale")
            continue
        rivals = [e for e in ev_numbers if e.unit == n.unit and e.key != n.key and len(e.anchors & n.anchors) >= 2]
        if rivals:
            best = max(rivals, key=lambda e: len(e.anchors & n.anchors))
            contradicted.append((n.raw, best.raw))
            continue
        if q is not None and figures is None:
            figures = [(e, words(_clause(t, e.start, e.end))) for t in evidence for e in quantities(t)]
        how = None
        if q:
            assert figures is not None  # read just above for any q
            topic = words(_clause(response, q.start, q.end)) | words(question)
            how = derivation(q, operands + _about(topic, figures))
        if how:
            derived.append(f"{n.raw}: {how}")
        else:
            missing.append(n.raw)
    # a figure the evidence states, but only for another year than the answer gives it (periods.py)
    named = {raw for raw, _ in contradicted} | set(missing)
    contradicted += [
        (m.raw, f"{m.raw} of {'/'.join(sorted(m.stated))}")
        for m in misplaced_figures(response, evidence, question)
        if m.raw not in named
    ]
    named |= {raw for raw, _ in contradicted}
    contradicted += [
        (m.raw, f"{m.rival} ({m.label})") for m in misattributed_figures(response, evidence, question) if m.raw not in named
    ]
    return missing, contradicted, derived


def _clause(text: str, start: int, end: int) -> str:
    """The line or sentence around text[start:end] (a table row is one line)."""
    left = max(text.rfind("\n", 0, start), text.rfind(". ", 0, start))
    right = [i for i in (text.find("\n", end), text.find(". ", end)) if i >= 0]
    return text[left + 1 : min(right) if right else len(text)]


def _about(topic: frozenset, figures: list, limit: int = 4) -> list:
    """Of (evidence figure, words of its line or sentence), the figures whose wording shares most
    content words with `topic` (at most `limit`, each sharing at least one): what a computed figure
    is computed from."""
    scored = [(-len(topic & ws), k, e) for k, (e, ws) in enumerate(figures) if topic & ws]
    return [e for _, _, e in sorted(scored, key=lambda x: x[:2])[:limit]]


# ---- periods and named entities -----------------------------------------------------------------

_PERIOD_RE = re.compile(
    r"(상반기|하반기|전년(?:도|\s?동기)?|직전\s?(?:연도|분기|사업연도)|당기|전기|연말|연초|"
    r"(?:first|second|third|fourth) (?:quarter|half)|year[- ]end|prior year|previous year|last year|next year|"
    r"year[- ]over[- ]year|fiscal (?:year )?\d{4})",
    re.IGNORECASE,
)
_ORG_SUFFIXES = (
    "은행",
    "공사",
    "공단",
    "보험",
    "증권",
    "카드",
    "캐피탈",
    "위원회",
    "협회",
    "센터",
    "재단",
    "거래소",
    "감독원",
    "소비자원",
    "공제회",
    "금고",
    "조합",
    "그룹",
    "지주",
)
_EN_ENTITY_RE = re.compile(
    r"\b(?:[A-Z][a-zA-Z&'\-]*[a-z][a-zA-Z&'\-]*|[A-Z]{2,}[a-z]?)(?:\s+(?:of|and|for|&)?\s*[A-Z][a-zA-Z&'\-]+)*"
)
_ACRONYM_RE = re.compile(r"\b[A-Z][A-Z0-9&]{1,7}s?\b")
_EN_COMMON = {
    "the",
    "this",
    "that",
    "these",
    "those",
    "in",
    "on",
    "at",
    "as",
    "however",
    "yes",
    "no",
    "according",
    "per",
    "based",
    "for",
    "it",
    "its",
    "we",
    "our",
    "they",
    "there",
    "if",
    "when",
    "while",
    "also",
    "to",
    "a",
    "an",
    "and",
    "but",
    "so",
    "i",
    "you",
    "he",
    "she",
    "total",
    "during",
    "after",
    "before",
    "since",
    "because",
    "although",
    "unfortunately",
    "sure",
    "here",
    "item",
    "note",
    "table",
    "part",
}


def periods(text: str) -> list[str]:
    return sorted({m.group(0) for m in _PERIOD_RE.finditer(text or "")})


# periods that count back from the one the evidence reports: held where the evidence reports two years
_BACKWARD = re.compile(
    r"^(?:전년(?:도|\s?동기)?|직전\s?(?:연도|사업연도)|전기|prior year|previous year|last year|year[- ]over[- ]year)$", re.I
)


def relative_period_held(period: str, evidence: list[str]) -> bool:
    """A backward relative period ("the previous year", 전년) the evidence words otherwise: it
    states figures for two years or more, so there is a year before the one answered about."""
    return bool(_BACKWARD.match(period)) and len(years("\n".join(evidence))) >= 2


def named_entities(text: str) -> list[str]:
    """Organization-like names (Korean suffixes), English proper-noun phrases and acronyms.
    A capitalized single word opening a sentence is skipped (it is capitalized for grammar), unless
    it is the whole answer ("Samil."): a bare name."""
    found: set[str] = set()
    for w in content_words(text):
        if w[0] >= "가" and len(w) >= 3 and w.endswith(_ORG_SUFFIXES) and w not in _ORG_SUFFIXES:
            found.add(w)
    for sent in split_sentences(text or ""):
        for m in _EN_ENTITY_RE.finditer(sent):
            phrase = m.group(0).strip()
            words = phrase.split()
            while words and words[0].lower() in _EN_COMMON:
                words = words[1:]
            if not words:
                continue
            phrase = " ".join(words)
            bare = phrase == sent.strip(" .!") and len(split_sentences(text or "")) == 1
            if len(words) == 1 and m.start() == 0 and not phrase.isupper() and not bare:
                continue
            found.add(phrase)
        found |= set(_ACRONYM_RE.findall(sent))
    return sorted(found)


def absent(items: list[str], evidence: list[str]) -> list[str]:
    """Items no evidence text holds (each text normalised once, however many samples it serves)."""
    return [x for x in items if not contains_normalized(evidence, x)] if items else []


# ---- modifier flips -----------------------------------------------------------------------------

# Generic opposites (written for the detector, not the injectors' phrasing banks).
_OPPOSITES = [
    ("이상", "미만"),
    ("이하", "초과"),
    ("이상", "이하"),
    ("증가", "감소"),
    ("상승", "하락"),
    ("인상", "인하"),
    ("확대", "축소"),
    ("가능", "불가능"),
    ("허용", "금지"),
    ("포함", "제외"),
    ("의무", "선택"),
    ("이전", "이후"),
    ("최대", "최소"),
    ("높", "낮"),
    ("increase", "decrease"),
    ("increased", "decreased"),
    ("higher", "lower"),
    ("more", "less"),
    ("above", "below"),
    ("before", "after"),
    ("maximum", "minimum"),
    ("gain", "loss"),
    ("included", "excluded"),
    ("required", "optional"),
    ("rose", "fell"),
]
OPPOSITE: dict[str, set[str]] = {}
for _a, _b in _OPPOSITES:
    OPPOSITE.setdefault(_a, set()).add(_b)
    OPPOSITE.setdefault(_b, set()).add(_a)


@lru_cache(maxsize=1 << 14)
def _modifiers(ws: frozenset) -> frozenset:
    out = set()
    for w in ws:
        for m in OPPOSITE:
            if w == m or (m[0] >= "가" and w.startswith(m) and len(w) <= len(m) + 2):
                out.add(m)
    return frozenset(out)


def modifier_flips(response: str, evidence: list[str]) -> list[tuple[str, str]]:
    """[(response modifier, evidence opposite)] where a response sentence copies an evidence sentence
    (most of its words) but carries a modifier whose opposite stands there instead."""
    flips = []
    for sent in sentences(response):
        ws = words(sent)
        mods = _modifiers(ws)
        if not mods:
            continue
        ev_sents = [words(x) for t in evidence for x in sentences(t)]
        best = max(ev_sents, key=lambda v: len(ws & v), default=frozenset())
        if len(ws & best) < max(3, 0.5 * len(ws)):
            continue
        ev_mods = _modifiers(best)
        for m in mods - ev_mods:
            rival = OPPOSITE[m] & ev_mods
            if rival:
                flips.append((m, sorted(rival)[0]))
    return flips


# ---- everything at once -------------------------------------------------------------------------


@dataclass
class Findings:
    refusal: bool
    coverage: float  # question coverage by the best passage
    answer_coverage: float = 1.0  # share of the response's own words the passages and history hold
    support: list[tuple[str, float]] = field(default_factory=list)  # (sentence, best lexical support)
    missing_numbers: list[str] = field(default_factory=list)
    contradicted: list[tuple[str, str]] = field(default_factory=list)
    derived_numbers: list[str] = field(default_factory=list)  # figures computed or rescaled from the evidence
    missing_entities: list[str] = field(default_factory=list)
    missing_periods: list[str] = field(default_factory=list)
    flips: list[tuple[str, str]] = field(default_factory=list)
    n_numbers: int = 0
    relevance: float = 1.0  # share of the question's content words the response takes up

    @property
    def min_support(self) -> float:
        return min((v for _, v in self.support), default=1.0)

    @property
    def mean_support(self) -> float:
        return sum(v for _, v in self.support) / len(self.support) if self.support else 1.0

    @property
    def weakest(self) -> str:
        return min(self.support, key=lambda x: x[1])[0] if self.support else ""


def findings(sample: dict, use_history: bool = True, max_passages: int | None = None) -> Findings:
    """All checks for one sample (memoized on its content: several detectors ask for the same).
    `use_history` / `max_passages` restrict the evidence (conditions for helped/hurt comparisons)."""
    key = _findings_key(sample, use_history, max_passages)
    found = _FINDINGS.get(key)
    if found is None:
        found = _remember(key, _findings(*key))
    return found


def prefetch_findings(requests: list[tuple[dict, bool, int | None]], fanout: Fanout, cache_dir: Path | None = None) -> int:
    """The findings of each (sample, use_history, max_passages), those not yet memoized computed in
    partitions by `fanout` (over a Dask cluster's workers when the build runs on one) and memoized
    for the detectors that ask. With `cache_dir` (the home's cache folder), findings an earlier
    build computed with this code are read from its result cache (finhallu.result_cache), and the
    new ones added: a rebuild after new filings computes those of new or changed samples only.
    Returns how many came from that cache."""
    keys = list(dict.fromkeys(_findings_key(s, h, m) for s, h, m in requests))
    todo = [k for k in keys if k not in _FINDINGS]
    cache = (
        open_result_cache(cache_dir / RESULTS_FILE, "findings", code_hash(__name__)) if cache_dir is not None and todo else None
    )
    try:
        found, reused = cached_map(lambda part: fanout.map(findings_of_keys, part, name="findings"), todo, cache)
    finally:
        if cache is not None:
            cache.close()
    for key, f in zip(todo, found):
        _remember(key, f)
    return reused


_FindingsKey = tuple[str, tuple[str, ...], tuple[str, ...], str]
# Bounded (cleared when full), not an LRU: a batch prefetch fills it for a whole evaluation.
_FINDINGS: dict[_FindingsKey, Findings] = {}
_FINDINGS_MAX = 100_000


def clear_memo() -> None:
    _FINDINGS.clear()


def _findings_key(sample: dict, use_history: bool, max_passages: int | None) -> _FindingsKey:
    return (
        sample.get("response") or "",
        tuple(passage_texts(sample, max_passages)),
        tuple(evidence_texts(sample, use_history=use_history, max_passages=max_passages)),
        question_of(sample),
    )


def _remember(key: _FindingsKey, found: Findings) -> Findings:
    if len(_FINDINGS) >= _FINDINGS_MAX:
        _FINDINGS.clear()
    _FINDINGS[key] = found
    return found


def evidence_findings_inputs(samples: list[dict], params: dict, ctx=None) -> list[tuple[dict, bool, int | None]]:
    """What a detector reading `findings(sample, use_history, max_passages)` from its parameters
    (defaults: the history, every passage) will ask for (its Detector.findings_inputs)."""
    return [(s, params.get("use_history", True), params.get("max_passages")) for s in samples]


def findings_of_keys(keys: list[_FindingsKey]) -> list[Findings]:
    """A partition's findings (module level, so a Dask worker can run it)."""
    return [_findings(*k) for k in keys]


def _findings(response: str, passages: tuple[str, ...], evidence: tuple[str, ...], question: str) -> Findings:
    passage_list, evidence_list = list(passages), list(evidence)
    # Answerability: does H ∪ P hold the evidence (the question itself does not count)?
    sources = passage_list + [t for t in evidence_list[len(passage_list) :] if t != question]
    f = Findings(refusal=looks_like_refusal(response), coverage=query_coverage(question, sources))
    if f.refusal:
        return f
    f.support = sentence_support(response, evidence_list)
    f.missing_numbers, f.contradicted, f.derived_numbers = number_findings(response, evidence_list, question)
    f.n_numbers = len(number_keys(response))
    f.missing_entities = absent(named_entities(response), evidence_list)
    f.missing_periods = [p for p in absent(periods(response), evidence_list) if not relative_period_held(p, evidence_list)]
    f.flips = modifier_flips(response, evidence_list)
    f.relevance = answer_relevance(question, response)
    f.answer_coverage = answer_coverage(question, response, sources)
    return f


def unanswerable_answer(f: Findings, coverage_threshold: float, answer_threshold: float) -> bool:
    """An answer to a question the passages do not cover, saying what they do not hold (False
    Acceptance): both, since a long question's coverage is low even where the passages answer it."""
    return f.coverage < coverage_threshold and f.answer_coverage < answer_threshold


def refusal_detection(f: Findings, coverage_threshold: float) -> Detection:
    """The verdict on a refusal: justified (true refusal) when the passages do not cover the question."""
    if f.coverage >= coverage_threshold:
        return Detection(
            0.5 + 0.5 * f.coverage,
            "hallucinated",
            "false_refusal",
            "false_refusal",
            f"refusal although the passages cover {f.coverage:.0%} of the question",
        )
    return Detection(
        0.5 * f.coverage, "faithful", "true_refusal", None, f"refusal; the passages cover only {f.coverage:.0%} of the question"
    )
