"""False premises built from the corpus, one kind per function (A1, A2, A3).

A2 restates a real sentence of a passage with one figure changed to a value its document never
states; A1 names a product, subsidiary or program composed from name parts and kept only when no
passage of the corpus holds it; A3 asks for a figure of a year no passage of the document mentions.
Each premise carries the true fact it contradicts and its source passage. `probe/verify.py` checks
them again without this module's code.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable, Mapping, Sequence

from finhallu.probe import field_of
from finhallu.text.numbers import find_numbers, format_decimal, number_keys
from finhallu.text.sentences import split

_PLAIN = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
# A figure with one Korean scale word ("5천만", "1억"): its digits change, the word stays.
_SCALED = re.compile(r"(\d{1,3}(?:,\d{3})+|\d+)\s?(조|억|만|천만|백만|십만|천)")
_SMALL_SCALE = ("천만", "백만", "십만", "천")  # "15천만" is not Korean: their digits stay below 10
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d{2}(?!\d)")
FACTORS = (Decimal(2), Decimal(3), Decimal("0.5"))


@dataclass(frozen=True)
class Premise:
    kind: str  # A1 | A2 | A3
    source: str
    field: str
    lang: str
    doc_id: str
    passage_id: str
    institution: str
    context: str  # the source passage
    claim: str  # A2: the false statement; A1: the fabricated name; A3: the unanswerable question
    true_fact: str
    false_value: str
    true_value: str
    title: str = ""


def squash(text: str) -> str:
    """Text without spaces or thousands separators, for absence checks across spacing and formatting."""
    return re.sub(r"[\s,]", "", text or "").lower()


def _format_like(raw: str, value: Decimal) -> str:
    decimals = len(raw.split(".")[1]) if "." in raw else 0
    q = value.quantize(Decimal(1).scaleb(-decimals)) if decimals else value.to_integral_value()
    text = format(q, f",.{decimals}f") if "," in raw else format(q, f".{decimals}f")
    return text


def _digits_of(raw: str) -> tuple[str, str | None] | None:
    """(the digits to change, the Korean scale word after them or None) of a figure's number part."""
    if _PLAIN.fullmatch(raw):
        return raw, None
    m = _SCALED.fullmatch(raw)
    return (m.group(1), m.group(2)) if m else None


def _acceptable(new: Decimal, scale: str | None, unit: str) -> bool:
    if new <= 0 or (unit.startswith("%") and new > 100):
        return False
    if scale is None:
        return True
    return new == new.to_integral_value() and (scale not in _SMALL_SCALE or new < 10)


def _perturbed(sentence: str, doc_keys: set[str], rng: random.Random) -> tuple[str, str, str] | None:
    """(false sentence, false figure, true figure): one figure of the sentence scaled so that the
    document states the new value nowhere; None when no figure can be changed that way."""
    spans = [s for s in find_numbers(sentence) if _digits_of(sentence[s.start : s.number_end].strip())]
    spans = [s for s in spans if not (s.unit in ("", "년") and 1900 <= s.value <= 2100) and s.value > 0]
    # an amount, rate or count with its unit says more than a bare number ("1인당")
    spans = [s for s in spans if s.unit or s.raw != sentence[s.start : s.number_end]] or spans
    if not spans:
        return None
    span = spans[rng.randrange(len(spans))]
    digits, scale = _digits_of(sentence[span.start : span.number_end].strip()) or ("", None)
    value = Decimal(digits.replace(",", ""))
    if scale in _SMALL_SCALE:  # one digit before 천만/천: another digit, not a multiple
        candidates = [Decimal(d) for d in rng.sample(range(1, 10), 9)]
    else:
        candidates = [value * f for f in rng.sample(FACTORS, len(FACTORS))]
    for new in candidates:
        if not _acceptable(new, scale, span.unit):
            continue
        new_digits = _format_like(digits, new)
        if new_digits == digits or Decimal(new_digits.replace(",", "")) <= 0:
            continue
        false_sentence = sentence[: span.start] + new_digits + sentence[span.start + len(digits) :]
        false_figure = new_digits + sentence[span.start + len(digits) : span.end]
        if number_keys(false_figure) & doc_keys:
            continue
        return false_sentence, false_figure.strip(), sentence[span.start : span.end].strip()
    return None


def false_attributes(passages: Sequence[Mapping], rng: random.Random) -> list[Premise]:
    """A2: every prose passage's first sentence with a changeable figure."""
    doc_keys: dict[str, set[str]] = {}
    for p in passages:
        doc_keys.setdefault(p["doc_id"], set()).update(number_keys(p["text"]))
    out = []
    for p in passages:
        if p["kind"] != "text":
            continue
        for sentence in split(p["text"], p["lang"]):
            sentence = sentence.strip()
            if not (15 <= len(sentence) <= 320) or sentence.startswith("|") or "\n" in sentence:
                continue
            changed = _perturbed(sentence, doc_keys[p["doc_id"]], rng)
            if changed:
                claim, false_value, true_value = changed
                out.append(_premise("A2", p, claim, sentence, false_value, true_value))
                break
    return out


def _premise(kind: str, p: Mapping, claim: str, true_fact: str, false_value: str, true_value: str) -> Premise:
    return Premise(
        kind,
        p["source"],
        field_of(p["source"]),
        p["lang"],
        p["doc_id"],
        p["passage_id"],
        p["institution"],
        p["text"],
        claim,
        true_fact,
        false_value,
        true_value,
        p.get("title") or "",
    )


def _names(field: str, institution: str, parts: Mapping, rng: random.Random) -> Iterable[str]:
    if field == "consumer_finance":
        for _ in range(20):
            yield f"{rng.choice(parts['prefix'])} {rng.choice(parts['core'])} {rng.choice(parts['kind'])}"
    elif field == "dart":
        stem = re.sub(r"\s*(주식회사|\(주\))\s*", "", institution)
        for suffix in rng.sample(parts["suffix"], len(parts["suffix"])):
            yield f"{stem}{suffix}"
    else:
        stem = re.sub(r",?\s+(Inc|Corp|Corporation|Co|Ltd|plc|N\.A)\.?$", "", institution)
        for _ in range(20):
            yield f"{stem} {rng.choice(parts['adjective'])} {rng.choice(parts['noun'])}"


def _first_prose(passages: Sequence[Mapping]) -> dict[str, Mapping]:
    first: dict[str, Mapping] = {}
    for p in passages:
        if p["kind"] == "text" and len(p["text"]) >= 80:
            first.setdefault(p["doc_id"], p)
    return first


def fabricated_referents(passages: Sequence[Mapping], fabricate: Mapping, rng: random.Random) -> list[Premise]:
    """A1: per document, one fabricated name of its field that no passage of the corpus holds."""
    corpus = "\n".join(squash(p["text"]) for p in passages)
    out = []
    for doc_id, p in sorted(_first_prose(passages).items()):
        field = field_of(p["source"])
        if field not in fabricate:
            continue
        name = next((n for n in _names(field, p["institution"], fabricate[field], rng) if squash(n) not in corpus), None)
        if name is None:
            continue
        fact = (
            f'"{name}"은(는) 말뭉치의 어느 문서에도 나오지 않는, 존재하지 않는 대상입니다.'
            if p["lang"] == "ko"
            else f'"{name}" appears in no document of the corpus: it does not exist.'
        )
        out.append(_premise("A1", p, name, fact, name, ""))
    return out


def _years(text: str) -> set[int]:
    return {int(y) for y in _YEAR.findall(text or "")}


def unanswerable_years(passages: Sequence[Mapping], seeds: Sequence[Mapping], rng: random.Random) -> list[Premise]:
    """A3: per document, a question for a year later than every year the corpus mentions: a seed's
    question with its year moved there, or (no seed names a year) a question on the document's title."""
    years = set().union(*(_years(p["text"]) for p in passages)) or {2024}
    by_doc: dict[str, list[Mapping]] = {}
    for s in seeds:
        if s.get("answerable") and _years(s["question"]):
            by_doc.setdefault(s["doc_id"], []).append(s)
    out = []
    for doc_id, p in sorted(_first_prose(passages).items()):
        year = max(years) + 2 + rng.randrange(3)
        asked = by_doc.get(doc_id)
        if asked:
            seed = asked[rng.randrange(len(asked))]
            question = _YEAR.sub(str(year), seed["question"])
        else:
            question = ""  # asked about the document's title (framings.yaml A3.title)
        fact = (
            f"어느 문서도 {year}년 수치를 보고하지 않습니다 (문서가 다루는 가장 늦은 해: {max(_years(p['text']) or years)}년)."
            if p["lang"] == "ko"
            else f"No document reports a figure for {year} (the latest year the documents mention: "
            f"{max(_years(p['text']) or years)})."
        )
        out.append(_premise("A3", p, question, fact, str(year), format_decimal(Decimal(max(years)))))
    return out
