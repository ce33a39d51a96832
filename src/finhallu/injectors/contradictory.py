"""Contradictory: the response conflicts with the evidence (or with the dialogue history)."""

from __future__ import annotations

import random
from functools import lru_cache
import re

from finhallu.injectors import Injected, TurnView, entities, register_leaf, register_type
from finhallu.injectors.edits import change_number, swap_first
from finhallu.injectors.lexicon import MODIFIER_SET, MODIFIERS, TERM_SET, TERMS
from finhallu.injectors.verify import Proposal, char_swap, pair_in
from finhallu.dialogue.assistant import OPENERS
from finhallu.text.normalize import contains_normalized
from finhallu.text.sentences import split_sentences
from finhallu.text.numbers import find_numbers, number_keys, number_keys_in


def _evidence_keys(view: TurnView) -> frozenset[str]:
    return number_keys_in(view.evidence)


def number_error(view: TurnView, rng: random.Random) -> Injected | None:
    resp = view.turn["response"]
    ev_keys = _evidence_keys(view)
    spans = [s for s in find_numbers(resp) if number_keys(s.raw) & ev_keys]
    # Prefer the number that is the answer itself.
    answer_keys = number_keys(view.turn.get("answer") or "")
    spans.sort(key=lambda s: (not (number_keys(s.raw) & answer_keys), s.start))
    for span in spans:
        new = change_number(resp, span, ev_keys | number_keys(view.history_text), rng)
        if new:
            new_span = new[span.start : span.start + len(new) - len(resp) + len(span.raw)]
            return Injected("number_error", new, f"{span.raw} -> {new_span}")
    return None


def _supported(evidence: list[str], text: str, start: int, end: int) -> bool:
    """Whether the evidence still states the edited sentence (its discourse opener aside), or the
    edited clause of it when that clause is a statement of its own (four words or more)."""
    lo = 0
    for sent in split_sentences(text):
        i = text.find(sent, lo)
        lo = i + len(sent)
        if not i <= start < lo:
            continue
        body = next((sent[len(o) :] for o in OPENERS.get("ko", []) + OPENERS.get("en", []) if o and sent.startswith(o)), sent)
        if contains_normalized(evidence, body):
            return True
        a = max(sent.rfind(",", 0, start - i), sent.rfind(";", 0, start - i)) + 1
        b = min([j for j in (sent.find(",", end - i), sent.find(";", end - i)) if j >= 0] or [len(sent)])
        clause = sent[a:b].strip()
        return len(clause.split()) >= 4 and contains_normalized(evidence, clause)
    return False


def _swap(view: TurnView, lexicon: dict, subtype: str) -> Injected | None:
    """Swap one lexicon entry; the first candidate whose edited sentence the evidence does not
    state (else it is no contradiction) and that reads well (see edits.swap_first)."""
    resp = view.turn["response"]
    out = swap_first(resp, lexicon[view.lang], view.lang, accept=lambda new, a, b: not _supported(view.evidence, new, a, b))
    if not out:
        return None
    new, old, repl = out
    return Injected(subtype, new, f"{old} -> {repl}")


def inconsistency(view: TurnView, rng: random.Random) -> Injected | None:
    """A turn that restates something the assistant said earlier (a reconfirm turn, or any turn
    repeating an earlier number or term) now states it differently: it contradicts the history."""
    if not view.history:
        return None
    resp = view.turn["response"]
    said_text = "\n".join(t["response"] for t in view.history)
    said = number_keys_in(t["response"] for t in view.history)
    forbidden = number_keys(view.history_text) | _evidence_keys(view)
    # Prefer the reconfirmed answer itself over incidental numbers ("1인당").
    answer_keys = number_keys(view.turn.get("answer") or "")
    spans = sorted(find_numbers(resp), key=lambda s: (not (number_keys(s.raw) & answer_keys), s.start))
    for span in spans:
        if number_keys(span.raw) & said:
            new = change_number(resp, span, forbidden, rng)
            if new:
                return Injected("inconsistency", new, f"{span.raw} (as said earlier) -> changed")
    out = swap_first(resp, TERMS[view.lang] + MODIFIERS[view.lang], view.lang)
    if out and out[1] in said_text:
        return Injected("inconsistency", out[0], f"{out[1]} (as said earlier) -> {out[2]}")
    return None


def _restated(view: TurnView) -> int:
    """How many of the response's numbers and lexicon terms the assistant already stated."""
    resp = view.turn["response"]
    said: frozenset[int] = frozenset().union(*(_lexicon_in(t["response"], view.lang) for t in view.history))
    return len(number_keys(resp) & number_keys_in(t["response"] for t in view.history)) + len(_lexicon_in(resp, view.lang) & said)


@lru_cache(maxsize=1 << 15)  # a turn's response is read again as history by its dialogue's later turns
def _lexicon_in(text: str, lang: str) -> frozenset[int]:
    """Positions in the lexicon (terms, then modifiers) of the entries the text contains (no entry
    holds a line break, so one in any of several texts is one in their join)."""
    return frozenset(i for i, (a, _) in enumerate(TERMS[lang] + MODIFIERS[lang]) if a in text)


@lru_cache(maxsize=1 << 14)  # asked of each turn once per subtype while a dialogue is planned
def _density(resp: str, lang: str) -> int:
    """How many numbers and financial terms a response states."""
    return len(find_numbers(resp)) + sum(1 for a, _ in TERMS[lang] if a in resp)


def _prefers(view: TurnView, subtype: str | None = None) -> float:
    """Turn choice by type: dense in numbers or financial terms; Inconsistency: turns restating
    earlier statements (reconfirm turns first); entity_error: turns naming entities."""
    resp = view.turn["response"]
    dense = _density(resp, view.lang)
    if subtype == "inconsistency":
        return 3 * (view.turn["kind"] == "reconfirm") + _restated(view)
    if subtype == "entity_error" and view.entities is not None:
        return len(view.entities.in_response(resp)) + 0.1 * dense
    return dense + (1 if view.turn["kind"] == "reconfirm" else 0)


register_type("contradictory", _prefers, applies=lambda view: view.turn["answerable"])


# ---- acceptance rules: the edit really contradicts what the evidence (or the history) says ---------------
def _accept_number_error(p: Proposal) -> tuple[bool, str]:
    return bool(p.added_keys) and not (p.added_keys & p.evidence_keys), f"new numbers {sorted(p.added_keys)} absent from evidence"


def _accept_modifier_change(p: Proposal) -> tuple[bool, str]:
    return pair_in(p.diff, MODIFIER_SET, p.wide_diff), f"modifier flipped: {p.diff[:2]}"


def _accept_term_swap(p: Proposal) -> tuple[bool, str]:
    return pair_in(p.diff, TERM_SET, p.wide_diff), f"term swapped: {p.diff[:2]}"


def _accept_inconsistency(p: Proposal) -> tuple[bool, str]:
    hist_keys = number_keys(p.history)
    changed_from_history = bool(p.removed_keys & hist_keys)
    flipped = any(
        a.lower() in p.history.lower() for old, _ in p.wide_diff for a, b in TERM_SET | MODIFIER_SET if a.lower() in old.lower()
    ) and pair_in(p.diff, TERM_SET | MODIFIER_SET, p.wide_diff)
    return (
        (bool(p.added_keys) and not (p.added_keys & hist_keys) and changed_from_history) or flipped,
        "restates an earlier statement differently",
    )


def _accept_entity_error(p: Proposal) -> tuple[bool, str]:
    swap = char_swap(p.orig, p.new)
    if not swap or not swap[0].strip() or not swap[1].strip() or re.search(r"\d", swap[0] + swap[1]):
        return False, "not a single entity swap"
    changed = p.new_sentences
    unsupported = bool(changed) and not any(contains_normalized(p.evidence, s) for s in changed)
    return unsupported, f"entity swapped: {swap[0]!r} -> {swap[1]!r}"


# ---- the leaves ----------------------------------------------------------------------------------------
register_leaf(
    "contradictory",
    "number_error",
    accept=_accept_number_error,
    minimal_edit=True,
    names={"en": "Number Error", "ko": "수치 오류"},
    rationale={
        "ko": "2) 주장: 응답의 '{new}'는 문서에 적힌 '{old}'와 다른 수치입니다.",
        "en": "2) Claims: the response's '{new}' differs from the '{old}' the passage states.",
    },
    instruction={
        "ko": "근거에 있는 수치·단위·기간 하나를 근거 어디에도 없는 그럴듯한 값으로 바꾸기",
        "en": "change one number, unit or period taken from the evidence to a plausible wrong value "
        "that appears nowhere in the evidence",
    },
)(number_error)
register_leaf(
    "contradictory",
    "modifier_change",
    accept=_accept_modifier_change,
    minimal_edit=True,
    names={"en": "Modifier Change", "ko": "수식어 변경"},
    rationale={
        "ko": "2) 주장: 응답은 문서의 '{old}'를 '{new}'(으)로 뒤집어 말합니다.",
        "en": "2) Claims: the response flips the passage's '{old}' into '{new}'.",
    },
    instruction={
        "ko": "이상↔미만, 증가↔감소, 만↔도 같은 수식어 하나를 반대로 바꾸기",
        "en": "flip one modifier (increased/decreased, at least/less than, only/also, ...)",
    },
)(lambda v, rng: _swap(v, MODIFIERS, "modifier_change"))
register_leaf(
    "contradictory",
    "financial_term_misunderstanding",
    accept=_accept_term_swap,
    minimal_edit=True,
    names={"en": "Financial Term Misunderstanding", "ko": "금융 용어 오해"},
    rationale={
        "ko": "2) 주장: 응답은 '{old}'를 '{new}'(으)로 혼동했습니다.",
        "en": "2) Claims: the response confuses '{old}' with '{new}'.",
    },
    instruction={
        "ko": "전세↔월세, 영업이익↔당기순이익, 원금↔이자, 예금자보호 한도↔보장 대상처럼 혼동하기 쉬운 금융 용어 하나를 바꾸기",
        "en": "swap one financial term for one it is easily confused with (net income/operating "
        "income, principal/interest, deposits/loans, ...)",
    },
)(lambda v, rng: _swap(v, TERMS, "financial_term_misunderstanding"))
register_leaf(
    "contradictory",
    "inconsistency",
    accept=_accept_inconsistency,
    minimal_edit=True,
    names={"en": "Inconsistency", "ko": "대화 내 불일치"},
    rationale={
        "ko": "2) 주장: 응답의 '{new}'는 앞선 대화에서 말한 '{old}'와 어긋납니다.",
        "en": "2) Claims: the response's '{new}' contradicts the '{old}' stated earlier in the dialogue.",
    },
    instruction={
        "ko": "어시스턴트가 앞 턴에서 한 말을 어긋나게 다시 말하기",
        "en": "restate something the assistant said in an earlier turn so that it contradicts it",
    },
)(inconsistency)
# direct use (tests, feasibility): embedding-space replacement, uniform selection; the inject stage calls
# entities.perturb with the configured strategy and selection itself
register_leaf(
    "contradictory",
    "entity_error",
    accept=_accept_entity_error,
    minimal_edit=True,
    names={"en": "Entity Error", "ko": "개체 오류"},
    rationale={
        "ko": "2) 주장: 응답은 '{old}' 대신 '{new}'를 말하지만 문서에는 '{old}'로 되어 있습니다.",
        "en": "2) Claims: the response names '{new}' where the passage says '{old}'.",
    },
    instruction={
        "ko": "문서의 기관·상품·용어 하나를 같은 종류의 다른 것으로 바꾸기",
        "en": "replace one organisation, product or term with another of the same type",
    },
)(lambda v, rng: entities.perturb(v, rng))
