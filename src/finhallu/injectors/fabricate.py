"""Fabricated details made from the corpus (Unverifiable / fabricated_detail).

A fabricated detail must read like the documents the turn is grounded in, or a detector learns
the injector's phrasing instead of the missing evidence. So the added claim is mined, not
written: the claim inventory holds the figure-bearing prose sentences of every passage of one
split, source (AI-Hub, 10-K, DART: one document type each) and language. For a turn, the donors
are the inventory's sentences on the turn's topic (they share its content words) that its
context does not hold; a donor becomes the fabricated detail once every figure in it is
changed to a value the evidence and history never state (a transplanted claim pattern, false by
construction). Donors that restate an evidence sentence are passed over: changing their figures
would contradict the evidence (a Contradictory label), not add to it.

A turn without donors (a split too small to have other passages on the topic) gets a
composed sentence instead: a short frame grammar whose subject is the question's topic and
whose figure is one of the evidence's quantities, changed (`compose`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Set as AbstractSet

import hashlib
import random
import re
from dataclasses import dataclass, field
from functools import lru_cache

from finhallu.result_cache import item_digest
from finhallu.injectors.edits import change_number, draw_move, impossible_date, is_year, malformed_numeral, number_token
from finhallu.text.normalize import contains_normalized, normalize, normalized_join
from finhallu.text.numbers import find_numbers, number_keys, number_keys_in
from finhallu.text.phrases import topic_of
from finhallu.text.quantities import quantities, states_value_in
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_words, particle

DONORS_PER_TURN = 12
_LENGTH = {"ko": (18, 140), "en": (40, 240)}
# Openers that point back at a sentence the donor no longer follows: dropped ("이후 ..." -> "...").
_KO_LEAD = re.compile(
    r"^(이후|또한|다만|한편|반면|그러나|하지만|이에 따라|이와 함께|이와 별도로|특히|아울러|따라서|그리고|이어|"
    r"그 결과|이 밖에|이밖에|그럼에도|나아가)\s*,?\s*"
)
_EN_LEAD = re.compile(
    r"^(However|In addition|Additionally|Also|As a result|Accordingly|Further|Furthermore|Moreover|"
    r"Similarly|In contrast|By contrast|Consequently|Therefore|Thus|Finally|Meanwhile|Overall),\s+"
)
# Sentences that lean on the one before ("이는 ...", "This ...") cannot stand alone elsewhere.
_DEPENDENT = re.compile(
    r"^(이는|이러한|이런|이에|이를|이와|그|해당|위의|아래|다음|상기|동|This|These|That|Those|It|Such|"
    r"The following|See|Refer)\b"
)
# Numbers that name rather than measure: form and item numbers, fiscal-term labels, "COVID-19".
_NAMING = re.compile(r"(Item|Section|Rule|Note|Form|Part|Schedule|Exhibit|Article|Regulation|Basel|Act of|제)\s?$", re.IGNORECASE)


@dataclass(frozen=True)
class Claim:
    text: str
    doc_id: str
    words: frozenset[str]


def _polite_ko(sentence: str) -> str | None:
    """A Korean sentence in the answers' register (-습니다/-ㅂ니다); None when its ending is not a
    plain declarative one can convert (a noun ending, a quotation)."""
    s = sentence.rstrip()
    if re.search(r"(니다|세요|어요|아요|해요|에요|예요)\.$", s):
        return s
    m = re.search(r"(.)다\.$", s)
    if not m or not "가" <= m.group(1) <= "힣":
        return None
    head, ch = s[: m.start()], m.group(1)
    if ch == "이" and head:  # 금리이다 -> 금리입니다
        return head + "입니다."
    code = ord(ch) - 0xAC00
    final = code % 28
    if final in (0, 4):  # 크다 -> 큽니다, 한다 -> 합니다 (the ㄴ of the plain present goes)
        return head + chr(0xAC00 + code - final + 17) + "니다."
    return head + ch + "습니다."  # 있다, 했다, 높다 -> -습니다


def _clean(sentence: str, lang: str) -> str | None:
    """A corpus sentence fit to stand alone in an answer, or None."""
    s = sentence.strip().strip("-•·* ")
    s = (_KO_LEAD if lang == "ko" else _EN_LEAD).sub("", s)
    lo, hi = _LENGTH[lang]
    if not lo <= len(s) <= hi or _DEPENDENT.match(s) or re.search(r"[|“”\"「」\[\]]|\(\s*\)|:$", s):
        return None
    if lang == "ko":
        if not re.search(r"[가-힣]", s):
            return None
        polite = _polite_ko(s)
        if polite is None:
            return None
        s = polite
    else:
        s = s[0].upper() + s[1:] if s[0].islower() else s
        if not s.endswith(".") or re.search(r"[가-힣]", s):
            return None
    return s if s and _variable_spans(s) else None


def _variable_spans(sentence: str) -> list:
    """The number spans of a sentence that measure something (a name's number stays put)."""
    out = []
    for span in find_numbers(sentence):
        before, after = sentence[: span.start], sentence[span.end : span.end + 1]
        if _NAMING.search(before) or re.match(r"[A-Za-z\-(]", after) or re.search(r"[A-Za-z\-]$", before):
            continue
        if re.match(r"\s?기", sentence[span.end : span.end + 2]):  # 제12기, 12기: a fiscal term's label
            continue
        out.append(span)
    return out


def claim_sentences(text: str, lang: str) -> list[str]:
    """The prose sentences of a passage that state a figure (table rows and notes left out)."""
    out = []
    for line in (text or "").splitlines():
        if "|" in line or line.strip().startswith("("):
            continue
        for sent in split_sentences(line):
            cleaned = _clean(sent, lang)
            if cleaned:
                out.append(cleaned)
    return out


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in content_words(text) if not w[0].isdigit())


@dataclass
class ClaimInventory:
    """Figure-bearing claims of one split, source and language, with donor lists cached per turn."""

    lang: str
    claims: list[Claim]
    _cache: dict = field(default_factory=dict, repr=False)
    _postings: dict[str, list[int]] | None = field(default=None, repr=False)
    _digest: bytes | None = field(default=None, repr=False)

    @classmethod
    def build(cls, rows: list[dict], lang: str) -> "ClaimInventory":
        seen, claims = set(), []
        for row in sorted(rows, key=lambda r: r["passage_id"]):
            for sent in claim_sentences(row["text"], lang):
                key = normalize(sent)
                if key not in seen:
                    seen.add(key)
                    claims.append(Claim(sent, row["doc_id"], _words(sent)))
        return cls(lang, claims)

    def digest(self) -> bytes:
        """A digest of the claims (all `rank_donors` reads of the inventory): equal digests, equal donors."""
        if self._digest is None:
            self._digest = item_digest([(self.lang, c.text, c.doc_id) for c in self.claims])
        return self._digest

    def donors(self, view, k: int = DONORS_PER_TURN) -> list[str]:
        key = (view.turn.get("turn_id"), view.turn.get("response"))
        if key not in self._cache:
            self._cache[key] = rank_donors(self.claims, view, k, self.postings())
        return self._cache[key]

    def postings(self) -> dict[str, list[int]]:
        """Each content word's claims (indices in order): a turn's donors are looked up by its topic's
        words, not by scanning every claim of the split (turns x claims grew with the square of the corpus)."""
        if self._postings is None:
            self._postings = {}
            for i, c in enumerate(self.claims):
                for w in c.words:
                    self._postings.setdefault(w, []).append(i)
        return self._postings


def inventories(passages, splits: list[str]) -> dict[tuple[str, str, str], ClaimInventory]:
    """One claim inventory per (split, source, language) of the passages frame, for the given splits:
    a claim never crosses a split (no test text in a train sample) nor a document type."""
    out = {}
    part = passages.filter(passages["split"].is_in(splits)).select("passage_id", "text", "doc_id", "split", "source", "lang")
    for (split, source, lang), rows in sorted(part.group_by("split", "source", "lang"), key=lambda g: g[0]):
        out[(split, source, lang)] = ClaimInventory.build(list(rows.iter_rows(named=True)), lang)
    return out


def _topic_words(view) -> frozenset[str]:
    t = view.turn
    return _words(
        " ".join(
            [
                t.get("standalone_query") or "",
                t.get("query") or "",
                t.get("response") or "",
                topic_of(t.get("standalone_query") or t.get("query") or "", view.lang),
            ]
        )
    )


def _tie(text: str, salt: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{salt}|{text}".encode()).digest()[:4], "big")


def rank_donors(claims: list[Claim], view, k: int, postings: dict[str, list[int]] | None = None) -> list[str]:
    """The k claims most on the turn's topic that its context and history do not hold and that
    restate no sentence of them; ties broken by a hash of the turn (no corpus order).
    `postings`: the claims' word index (ClaimInventory.postings), else every claim is looked at."""
    if k <= 0:
        return []
    topic = _topic_words(view)
    # Each text normalized on its own (passages recur across turns: cached) and kept apart, so a
    # claim counts as held only when one text holds it, not a join across two of them.
    sources = normalized_join([*view.evidence, view.history_text])
    if postings is None:
        shared_by = {i: len(c.words & topic) for i, c in enumerate(claims)}
    else:
        shared_by = Counter(i for w in topic for i in postings.get(w, ()))
    # Best first: most topic words shared, then the turn's hash; equal keys in claim order. Built a
    # group of equal sharing at a time: the k donors are nearly always in the first groups, and the
    # held and restated checks and the hashes of the rest are never needed.
    groups: dict[int, list[int]] = {}
    for i, shared in shared_by.items():
        if shared:
            groups.setdefault(shared, []).append(i)
    turn = str(view.turn.get("turn_id"))
    restated = _restatement_checker(view)
    out: list[str] = []
    for shared in sorted(groups, reverse=True):
        held_apart = [i for i in sorted(groups[shared]) if normalize(claims[i].text) not in sources]
        for _, i in sorted((_tie(claims[i].text, turn), i) for i in held_apart):
            if not restated(claims[i].words):
                out.append(claims[i].text)
                if len(out) == k:
                    return out
    return out


@lru_cache(maxsize=1 << 14)  # a passage is in many turns' contexts
def _sentence_words(text: str) -> tuple[frozenset[str], ...]:
    """The content words of each sentence of a text that has any."""
    return tuple(w for w in (_words(s) for s in split_sentences(text)) if w)


def _restatement_checker(view):
    """Whether a claim's words mostly repeat one sentence of the evidence, history or response:
    such a claim with other figures would contradict that sentence instead of adding to it."""
    # The history's turns one text each: their sentences are the joined history's (a line break
    # always ends one), and each turn's are memoised for the dialogue's later turns.
    history = [part for t in view.history for part in (t["query"], t["response"])]
    texts = view.evidence + history + [view.turn.get("response") or ""]
    sets = [w for t in texts for w in _sentence_words(t)]
    union = frozenset().union(*sets)

    def restated(words: frozenset[str]) -> bool:
        # No sentence can share more of the claim's words than all of them together.
        if not words or len(words & union) / len(words) < 0.6:
            return False
        return any(len(words & s) / len(words) >= 0.6 for s in sets)

    return restated


# ---- turning a donor into a fabricated detail ----------------------------------------------------


def _sources(view) -> list[str]:
    """What the turn's reader has: its passages, the history, the question and the response."""
    t = view.turn
    return view.evidence + [view.history_text, t.get("query") or "", t.get("standalone_query") or "", t.get("response") or ""]


_EN_GENERIC = {
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Company",
    "Bank",
    "Federal",
    "Reserve",
    "Board",
    "Treasury",
    "Tier",
    "Common",
    "Equity",
    "We",
    "Our",
    "The",
}


def _names_ok(sentence: str, view, lang: str) -> bool:
    """No proper name the turn never mentions: another filer's or institution's claim would drift off
    the dialogue's subject (Korean names are checked as organisations, English as capitalised words)."""
    known = "\n".join(_sources(view))
    if lang == "en":
        names = re.findall(r"(?<!^)(?<![.:] )\b[A-Z][a-z]+(?:\s[A-Z][a-z]+)*", sentence)
        return all(n in known or n in _EN_GENERIC for n in names)
    return all(name in known for name in _ko_orgs(sentence))


@lru_cache(maxsize=20000)
def _ko_orgs(sentence: str) -> tuple[str, ...]:
    from finhallu.injectors.entities import ORG, entity_type, mentions

    return tuple(m[0] for m in mentions(sentence, "ko") if entity_type(m[0], "ko") == ORG)


def perturb_figures(sentence: str, forbidden: AbstractSet[str], rng: random.Random, tries: int = 8) -> str | None:
    """Every measuring figure of the sentence changed to a value whose key is not forbidden, by one
    move per unit (the same offset or factor for all its figures: edits.draw_move; years apart), so that the
    sentence's own relations hold (a list stays ordered, equal figures equal, a range lo < hi:
    "1년, 4년, 8년" never becomes "1년, 4년, 4년"); last figure first, so earlier offsets hold. None
    when no move changes every figure."""
    spans = _variable_spans(sentence)
    groups: dict[tuple[str, bool], list[str]] = {}  # (unit, a year?): "$800 million ... during 2026" move apart
    keys = []
    for span in spans:
        token = number_token(sentence, span)
        if token is None:
            return None
        keys.append((span.unit, is_year(token)))
        groups.setdefault(keys[-1], []).append(token)
    for _ in range(tries if spans else 0):
        moves = {key: draw_move(tokens, key[0], rng) for key, tokens in groups.items()}
        cur = sentence
        out: str | None = sentence
        for span, key in reversed(list(zip(spans, keys))):
            out = change_number(cur, span, forbidden, rng, tries=1, move=moves[key])
            if out is None:
                break
            cur = out
        if out is not None and out != sentence:
            return out
    return None


def unsupported(sentence: str, view) -> bool:
    """The sentence states a figure the evidence, history and question lack, and is not itself in
    the evidence."""
    sources = _sources(view)
    if contains_normalized(view.evidence, sentence):
        return False
    return any(not states_value_in(sources, q) for q in quantities(sentence))


def from_donor(donor: str, view, rng: random.Random) -> str | None:
    if not _names_ok(donor, view, view.lang):
        return None
    forbidden = number_keys_in(_sources(view)) | number_keys(donor)
    new = perturb_figures(donor, forbidden, rng)
    if new is None or impossible_date(new, donor) or malformed_numeral(new, donor) or not unsupported(new, view):
        return None
    return new


def fabricated_detail(view, donors: list[str], rng: random.Random) -> str | None:
    """A fabricated detail for the turn: a changed donor (one of the best few, seeded, so no single
    donor dominates), else a composed sentence."""
    pool = list(donors[:6])
    rng.shuffle(pool)
    for donor in pool + list(donors[6:]):
        made = from_donor(donor, view, rng)
        if made:
            return made
    return compose(view, rng)


# ---- composed details (no donor on the topic) ------------------------------------------------------
# Frames: a time or condition clause, the question's topic as subject, a predicate around one
# figure. The figure is one of the evidence's own quantities (unit and grain kept) with a new value.
_KO_WHEN = ["{y}년 {m}월부터 ", "{y}년 하반기부터 ", "올해 {m}월 이후 ", "지난 {m}월부터 ", "{y}년 상반기 중 ", "", ""]
_KO_PRED = {
    "amount": [
        "최대 {q}까지 추가로 인정됩니다.",
        "{q}{eul} 넘는 부분에는 별도 심사가 적용됩니다.",
        "건당 {q}의 별도 비용이 부과됩니다.",
        "{q} 이하인 경우에만 같은 기준이 적용됩니다.",
        "{q} 규모의 예외 한도가 따로 운영됩니다.",
    ],
    "ratio": [
        "{q} 범위에서 추가로 조정될 예정입니다.",
        "{q}의 가산 조건이 덧붙습니다.",
        "최고 {q}까지 우대가 적용됩니다.",
        "{q}{eul} 넘으면 적용 대상에서 빠집니다.",
    ],
    "period": [
        "신청 후 {q} 이내에 처리가 끝납니다.",
        "{q}의 유예 기간이 별도로 주어집니다.",
        "{q}{i} 지나면 다시 심사를 받아야 합니다.",
    ],
    "count": ["{q} 이상이 이 기준의 적용을 받았습니다.", "현재 {q}{i} 이 방식으로 처리되고 있습니다."],
}
_EN_WHEN = ["Beginning in {month} {y}, ", "Since {month} {y}, ", "As of the {nth} quarter, ", "Later in {y}, ", "", ""]
_EN_PRED = {
    "amount": [
        "{topic} included roughly {q} attributable to a single transaction.",
        "about {q} of {topic} related to a subsidiary acquired that year.",
        "{topic} was expected to rise by a further {q}.",
        "{topic} excluded a one-time item of {q}.",
    ],
    "ratio": [
        "{topic} was expected to move by about {q}.",
        "roughly {q} of {topic} came from a single segment.",
        "{topic} reflected a {q} increase in one operating segment.",
    ],
}
_MONTHS = ["January", "March", "April", "June", "July", "September", "October", "December"]
_FAMILY = {
    "%": "ratio",
    "%p": "ratio",
    "퍼센트": "ratio",
    "bp": "ratio",
    "bps": "ratio",
    "percent": "ratio",
    "원": "amount",
    "달러": "amount",
    "억": "amount",
    "일": "period",
    "개월": "period",
    "년": "period",
    "시간": "period",
    "명": "count",
    "건": "count",
    "회": "count",
}


def _evidence_figures(view) -> list[tuple[str, str]]:
    """(figure with a changed value, unit family) for the evidence's measured quantities, the gold
    passage first; a bare number counts only as a dollar amount."""
    forbidden = number_keys_in(_sources(view))
    out = []
    for text in ([view.gold_text] if view.gold_text else []) + view.evidence:
        for span in find_numbers(text or ""):
            dollars = text[span.start - 1 : span.start] == "$"
            fam = "amount" if dollars else _FAMILY.get(span.unit)
            if not fam or (span.unit == "년" and span.value >= 1900):  # a year dates, it does not measure
                continue
            piece = ("$" if dollars else "") + text[span.start : span.end]
            spans = find_numbers(piece)
            new = change_number(piece, spans[0], forbidden, random.Random(_tie(piece, text[:40]))) if spans else None
            if new:
                out.append((new, fam))
    return out[:8]


def _durations(lang: str, forbidden: AbstractSet[str], rng: random.Random) -> list[tuple[str, str]]:
    """Last resort when the evidence measures nothing: a period (or amount) the sources never state."""
    unit = rng.choice(["일", "영업일", "개월"])
    days = [n for n in (3, 5, 7, 10, 14, 20, 30, 45, 60, 90) if f"{n}일" not in forbidden and f"{n}개월" not in forbidden]
    rng.shuffle(days)
    if lang == "ko":
        return [(f"{n}{unit}", "period") for n in days[:3]]
    return [(f"${n} million", "amount") for n in days[:3]]


def _when(frames: list[str], forbidden: AbstractSet[str], rng: random.Random) -> str:
    """A time clause whose year and month the sources never state (else none)."""
    for _ in range(6):
        when = rng.choice(frames).format(
            y=rng.choice([2025, 2026, 2027]),
            m=rng.randint(1, 12),
            month=rng.choice(_MONTHS),
            nth=rng.choice(["first", "third", "fourth"]),
        )
        if not number_keys(when) & forbidden:
            return when
    return ""


def compose(view, rng: random.Random) -> str | None:
    topic = topic_of(view.turn.get("standalone_query") or view.turn.get("query") or "", view.lang)
    forbidden = number_keys_in(_sources(view))
    figures = _evidence_figures(view)
    rng.shuffle(figures)
    figures += _durations(view.lang, forbidden, rng)
    for fig, fam in figures:
        if view.lang == "ko" and fam in _KO_PRED:
            pred = rng.choice(_KO_PRED[fam]).format(q=fig, eul=particle(fig, "을/를"), i=particle(fig, "이/가"))
            sent = f"{_when(_KO_WHEN, forbidden, rng)}{topic}{particle(topic, '은/는')} {pred}"
        elif view.lang == "en" and fam in _EN_PRED:
            when = _when(_EN_WHEN, forbidden, rng)
            body = rng.choice(_EN_PRED[fam]).format(topic=topic, q=fig)
            sent = when + body if when else body[0].upper() + body[1:]
        else:
            continue
        if (
            unsupported(sent, view)
            and not number_keys(sent) & forbidden
            and not malformed_numeral(sent)
            and not impossible_date(sent)
        ):
            return sent
    return None
