"""Entity perturbation: Contradictory / entity_error (the "harmful factuality" strategies).

Inventory: the organisations, products and financial terms named in the corpus, by split,
language and type. Korean: Kiwi noun compounds typed by their head noun (…공사 an
organisation, …대출 a product, …금리 a term); English: capitalised names and noun phrases
typed by their head word; plus the curated term lexicon.

Selection (which mention of the response is perturbed):
  uniform   any mention, uniformly
  theme     the mention closest to the dialogue's theme (opening and current question)
  position  a segment drawn head 25 % / body 50 % / tail 25 % of the response, a mention in it

Replacement (another entity of the same type, so the statement stays fluent but turns false):
  embedding   the mention's vector (hashing v2 embedder) plus Gaussian noise; the nearest other
              inventory entity of the same type wins
  instructed  the `perturb_entity` operation (an LLM told to swap in a plausible same-type
              entity); its rules backend picks a candidate sharing the head noun, seeded
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
from pydantic import BaseModel

from finhallu.codeversion import code_hash
from finhallu.llm.operations import operation
from finhallu.result_cache import CACHE_FILE, ResultCache, cached_map, open_result_cache
from finhallu.text.morpheme_cache import analyser_id
from finhallu.injectors import Injected, TurnView
from finhallu.text.words import fix_particle
from finhallu.injectors.lexicon import TERMS
from finhallu.text.phrases import noun_phrases, prefetch_noun_phrases
from finhallu.text.normalize import contains_normalized, normalize
from finhallu.text.sentences import split_sentences
from finhallu.text.words import is_particle

ORG, PRODUCT, TERM = "organisation", "product", "term"
# Head nouns that type a Korean compound; organisations first ("예금보험공사" is an organisation).
_KO_HEADS = [
    (
        ORG,
        (
            "은행",
            "공사",
            "공단",
            "감독원",
            "위원회",
            "협회",
            "재단",
            "진흥원",
            "중앙회",
            "금고",
            "보증기금",
            "거래소",
            "금융지주",
            "카드사",
            "보험사",
            "증권사",
            "캐피탈",
            "소비자원",
            "공제회",
            "조합",
        ),
    ),
    (PRODUCT, ("예금", "적금", "대출", "보험", "카드", "펀드", "연금", "채권", "계좌", "통장", "신탁", "보증", "리볼빙")),
    (
        TERM,
        (
            "금리",
            "이율",
            "수수료",
            "한도",
            "비율",
            "공제",
            "세율",
            "이자",
            "환급금",
            "보험료",
            "보험금",
            "수익률",
            "지수",
            "원금",
            "충당금",
            "자본비율",
            "보증금",
            "부채",
            "자산",
        ),
    ),
]
_EN_PATTERNS = [
    (
        ORG,
        re.compile(
            r"\b(?:[A-Z][A-Za-z&\-]*\s){1,4}(?:Bank|Bancorp|Financial|Trust|Holdings|Group|Association|"
            r"Commission|Reserve|Corporation|Company|Bureau|Agency)\b(?!\s[A-Z])"
        ),
    ),
    (
        PRODUCT,
        re.compile(r"\b(?:[a-z][a-z\-]+\s){1,2}(?:loans|deposits|mortgages|securities|notes|bonds|cards|accounts|leases)\b"),
    ),
    (
        TERM,
        re.compile(
            r"\b(?:[a-z][a-z\-]+\s){1,2}(?:income|expense|ratio|margin|assets|liabilities|capital|charge-offs|"
            r"equity|revenue)\b"
        ),
    ),
]
_EN_DROP = {
    "the",
    "a",
    "an",
    "of",
    "our",
    "its",
    "their",
    "and",
    "or",
    "total",
    "for",
    "in",
    "on",
    "to",
    "by",
    "with",
    "as",
    "from",
    "before",
    "after",
    "at",
    "per",
    "than",
    "into",
    "over",
    "under",
    "other",
    "compete",
    "chief",
    "accompanying",
    "consolidated",
    "estimated",
    "such",
    "these",
    "those",
    "which",
    "that",
    "this",
    "is",
    "are",
    "maintain",
    "sell",
    "whose",
    "less",
    "higher",
    "lower",
    "related",
}
POSITION_SEGMENTS = (("head", 0.0, 0.25), ("body", 0.25, 0.75), ("tail", 0.75, 1.0))


@lru_cache(maxsize=1 << 16)  # asked for every phrase of every turn the rules read (~250k calls at 544 documents)
def entity_type(name: str, lang: str) -> str | None:
    if lang == "en":
        for etype, pat in _EN_PATTERNS:
            m = pat.fullmatch(name)
            if m:
                return etype
        return None
    if len(name) < 3 or not re.fullmatch(r"[가-힣]+", name):
        return None
    for etype, heads in _KO_HEADS:
        if any(name.endswith(h) and name != h for h in heads):
            return etype
    return None


def _mentions_ko(text: str) -> list[tuple[str, int, int]]:
    out = []
    for phrase, start, end in noun_phrases(text):
        if " " in phrase:
            continue
        # a compound must stand alone: not glued to a longer word on the left, a particle (or nothing) on the right
        if start and re.match(r"[가-힣]", text[start - 1]):
            continue
        m = re.match(r"[가-힣]*", text[end:])
        assert m is not None  # a starred pattern matches every string
        tail = m.group(0)
        if tail and not is_particle(tail):
            continue
        out.append((phrase, start, end))
    return out


def _mentions_en(text: str) -> list[tuple[str, int, int]]:
    out = []
    for _, pat in _EN_PATTERNS:
        for m in pat.finditer(text):
            words, start = m.group(0).split(), m.start()
            # keep the tail after the last function word: "compete for loans" -> "loans"
            cut = max((i + 1 for i, w in enumerate(words[:-1]) if w.lower() in _EN_DROP), default=0)
            start += sum(len(w) + 1 for w in words[:cut])
            words = words[cut:]
            if len(words) >= 2:
                out.append((" ".join(words), start, m.end()))
    return sorted(set(out), key=lambda x: x[1])


def _known_type(name: str, lang: str) -> str:
    """The type of a name already kept for having one (mentions() and the typed TERMS)."""
    etype = entity_type(name, lang)
    assert etype is not None, name
    return etype


def mentions(text: str, lang: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of every typed entity named in text."""
    return list(_typed_mentions(text, lang))


@lru_cache(maxsize=1 << 12)  # a response is read by every leaf's turn choice and again as history
def _typed_mentions(text: str, lang: str) -> tuple[tuple[str, int, int], ...]:
    found = _mentions_en(text) if lang == "en" else _mentions_ko(text)
    return tuple(m for m in found if entity_type(m[0], lang))


def named_in(texts: list[str], lang: str, cache: ResultCache | None = None) -> list[tuple[str, ...]]:
    """The typed entity names each text mentions. `cache` (a result cache versioned by this module's
    code and the analyser, `mentions_cache`): texts an earlier build read are not analysed again."""

    def read(todo: list[str]) -> list[tuple[str, ...]]:
        if lang == "ko":
            prefetch_noun_phrases(todo)
        return [tuple(sorted({m[0] for m in mentions(t, lang)})) for t in todo]

    return cached_map(read, texts, cache, keys=lambda t: (lang, t))[0]


def mentions_cache(cache_dir: Path | None) -> ResultCache | None:
    """The home's cache of `named_in` results (None: no home, or its file unusable)."""
    if cache_dir is None:
        return None
    return open_result_cache(cache_dir / CACHE_FILE, "entity-mentions", f"{code_hash(__name__)}/{analyser_id()}", buffer=2000)


@dataclass
class EntityInventory:
    """Typed entities of one split and language, with their embeddings."""

    lang: str
    names: list[str]
    types: list[str]
    vectors: np.ndarray
    index: dict[str, int] = field(default_factory=dict)
    embed: Callable[[list[str]], np.ndarray] | None = None
    _by_type: dict[str, list[int]] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, texts: list[str], lang: str, embedder=None, cache: ResultCache | None = None) -> "EntityInventory":
        """`cache`: each text's names kept across builds (see `named_in`)."""
        found: set[str] = set().union(*named_in(texts, lang, cache))
        found |= {a for a, _ in TERMS[lang] if entity_type(a, lang)}
        names = sorted(found)
        if embedder is None:
            from finhallu.embedders.hashing import HashingEmbedder  # what embedder_class("hashing") returns

            embedder = HashingEmbedder(dim=1024, ngrams=[2, 3], version=2)
        vectors = embedder.encode(names) if names else np.zeros((0, 1), np.float32)
        return cls(
            lang, names, [_known_type(n, lang) for n in names], vectors, {n: i for i, n in enumerate(names)}, embedder.encode
        )

    def in_response(self, text: str) -> list[tuple[str, int, int]]:
        return [m for m in mentions(text, self.lang) if m[0] in self.index]

    def _of_type(self, entity_type: str) -> list[int]:
        """Indices of the entities of a type, in name order (asked for every perturbed turn)."""
        if self._by_type is None:
            self._by_type = {}
            for j, t in enumerate(self.types):
                self._by_type.setdefault(t, []).append(j)
        return self._by_type.get(entity_type, [])

    def same_type(self, name: str) -> list[str]:
        t = self.types[self.index[name]]
        return [n for n, tt in zip(self.names, self.types) if tt == t and n != name]

    def nearest_with_noise(self, name: str, rng: random.Random, sigma: float, exclude: set[str]) -> str | None:
        """Gaussian noise (norm ~ sigma) on the entity's unit vector; the nearest other same-type entity."""
        i = self.index[name]
        cands = [j for j in self._of_type(self.types[i]) if j != i and self.names[j] not in exclude]
        if not cands:
            return None
        dim = self.vectors.shape[1]
        scale = sigma / np.sqrt(dim)  # once, not per draw (numpy scalar arithmetic: ~1 µs a time)
        noise = np.array([rng.gauss(0.0, scale) for _ in range(dim)], dtype=np.float32)
        probe = self.vectors[i] + noise
        scores = self.vectors[cands] @ probe
        best = int(np.argmax(scores))  # first maximum: deterministic ties
        return self.names[cands[best]]

    def similarity(self, names: list[str], text: str) -> list[float]:
        if not names or self.embed is None:
            return [0.0] * len(names)
        theme = self.embed([text])[0]
        return [float(self.vectors[self.index[n]] @ theme) for n in names]


def select_mention(
    view: TurnView, found: list[tuple[str, int, int]], selection: str, rng: random.Random
) -> tuple[tuple[str, int, int], str]:
    """The mention to perturb and a label of how it was chosen."""
    if selection == "theme":
        sims = view.entities.similarity([m[0] for m in found], view.theme)
        best = max(range(len(found)), key=lambda k: (sims[k], -k))
        return found[best], "theme"
    if selection == "position":
        r, length = rng.random(), max(1, len(view.turn["response"]))
        seg = next(s for s in POSITION_SEGMENTS if r < s[2] or s[0] == "tail")
        inside = [m for m in found if seg[1] <= (m[1] + m[2]) / 2 / length < seg[2]]
        if inside:
            return rng.choice(inside), f"position:{seg[0]}"
        centre = (seg[1] + seg[2]) / 2 * length
        return min(found, key=lambda m: (abs((m[1] + m[2]) / 2 - centre), m[1])), f"position:{seg[0]}~nearest"
    return rng.choice(found), "uniform"


class EntityOut(BaseModel):
    response: str  # "" = no plausible replacement
    replacement: str = ""


def _replace_at(text: str, start: int, end: int, new: str, lang: str) -> str:
    rest = text[end:]
    if lang == "ko":
        rest = fix_particle(new, rest)
    return text[:start] + new + rest


@operation("perturb_entity", EntityOut)
def perturb_entity(
    response: str, entity: str, entity_type: str, start: int, candidates: list[str], lang: str, rng_seed: int
) -> EntityOut:
    """Instructed replacement (rules backend): a same-type candidate sharing the entity's head noun
    (a plausible confusion: 주택도시보증공사 -> 한국주택금융공사), else any candidate."""
    rng = random.Random(rng_seed)
    head = entity.split()[-1] if lang == "en" else entity[-2:]
    pool = [c for c in candidates if c != entity and (c.split()[-1] if lang == "en" else c[-2:]) == head] or [
        c for c in candidates if c != entity
    ]
    if not pool or response[start : start + len(entity)] != entity:
        return EntityOut(response="")
    new = rng.choice(sorted(pool))
    return EntityOut(response=_replace_at(response, start, start + len(entity), new, lang), replacement=new)


def perturb(
    view: TurnView,
    rng: random.Random,
    strategy: str = "embedding",
    selection: str = "uniform",
    sigma: float = 0.5,
    instruct: Callable[..., EntityOut] | None = None,
    max_candidates: int = 12,
) -> Injected | None:
    """One entity of the response swapped for another of its type; None when the turn names no
    inventory entity or no replacement makes the statement unsupported by the evidence."""
    inv: EntityInventory | None = view.entities
    if inv is None or not view.turn["answerable"]:
        return None
    resp = view.turn["response"]
    found = inv.in_response(resp)
    if not found:
        return None
    (name, start, end), how = select_mention(view, found, selection, rng)
    in_response = {m[0] for m in found}
    if strategy == "instructed":
        cands = [c for c in inv.same_type(name) if c not in in_response]
        cands = sorted(cands, key=lambda c: rng.random())[:max_candidates]
        out = (instruct or perturb_entity)(
            response=resp,
            entity=name,
            entity_type=inv.types[inv.index[name]],
            start=start,
            candidates=sorted(cands),
            lang=view.lang,
            rng_seed=rng.randrange(2**31),
        )
        if out is None:  # the call failed for good (recorded in llm_calls)
            return None
        new_resp, new = out.response, out.replacement
    else:
        new = inv.nearest_with_noise(name, rng, sigma, exclude=in_response)
        new_resp = _replace_at(resp, start, end, new, view.lang) if new else ""
    if not new_resp or new_resp == resp or not new:
        return None
    changed = next((s for s in split_sentences(new_resp) if new in s), new_resp)
    if contains_normalized(view.evidence, changed) or normalize(new) == normalize(name):
        return None  # the evidence states the edited sentence too: no contradiction
    return Injected("entity_error", new_resp, f"{name} -> {new}", strategy=f"{strategy}/{how}")
