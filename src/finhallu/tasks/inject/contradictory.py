"""Contradictory: the response conflicts with the evidence (or with the dialogue history)."""

from __future__ import annotations

import random

from finhallu.tasks.inject import Injected, TurnView, register_injector
from finhallu.tasks.inject import entities
from finhallu.tasks.inject.edits import change_number, swap_first
from finhallu.tasks.inject.lexicon import MODIFIERS, TERMS
from finhallu.tasks.responses import OPENERS
from finhallu.text.normalize import contains_normalized
from finhallu.text.sentences import split_sentences
from finhallu.text.numbers import find_numbers, number_keys


def _evidence_keys(view: TurnView) -> set[str]:
    keys: set[str] = set()
    for text in view.evidence:
        keys |= number_keys(text)
    return keys


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
            new_span = new[span.start:span.start + len(new) - len(resp) + len(span.raw)]
            return Injected("number_error", new, f"{span.raw} -> {new_span}")
    return None


def _supported(evidence: str, text: str, start: int, end: int) -> bool:
    """Whether the evidence still states the edited sentence (its discourse opener aside), or the
    edited clause of it when that clause is a statement of its own (four words or more)."""
    lo = 0
    for sent in split_sentences(text):
        i = text.find(sent, lo)
        lo = i + len(sent)
        if not i <= start < lo:
            continue
        body = next((sent[len(o):] for o in OPENERS.get("ko", []) + OPENERS.get("en", []) if o and sent.startswith(o)), sent)
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
    evidence = "\n".join(view.evidence)
    out = swap_first(resp, lexicon[view.lang], view.lang,
                     accept=lambda new, a, b: not _supported(evidence, new, a, b))
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
    said = number_keys(said_text)
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


_SUBTYPES = {
    "number_error": number_error,
    "modifier_change": lambda v, rng: _swap(v, MODIFIERS, "modifier_change"),
    "financial_term_misunderstanding": lambda v, rng: _swap(v, TERMS, "financial_term_misunderstanding"),
    "inconsistency": inconsistency,
    # direct use (tests, feasibility): embedding-space replacement, uniform selection; the inject
    # stage calls entities.perturb with the configured strategy and selection itself
    "entity_error": lambda v, rng: entities.perturb(v, rng),
}


def _restated(view: TurnView) -> int:
    """How many of the response's numbers and lexicon terms the assistant already stated."""
    said = "\n".join(t["response"] for t in view.history)
    resp = view.turn["response"]
    return len(number_keys(resp) & number_keys(said)) + sum(1 for a, _ in TERMS[view.lang] + MODIFIERS[view.lang]
                                                            if a in resp and a in said)


def _prefers(view: TurnView, subtype: str | None = None) -> float:
    """Turn choice by type: dense in numbers or financial terms; Inconsistency: turns restating
    earlier statements (reconfirm turns first); entity_error: turns naming entities."""
    resp = view.turn["response"]
    dense = len(find_numbers(resp)) + sum(1 for a, _ in TERMS[view.lang] if a in resp)
    if subtype == "inconsistency":
        return 3 * (view.turn["kind"] == "reconfirm") + _restated(view)
    if subtype == "entity_error" and view.entities is not None:
        return len(view.entities.in_response(resp)) + 0.1 * dense
    return dense + (1 if view.turn["kind"] == "reconfirm" else 0)


@register_injector("contradictory", tuple(_SUBTYPES), _prefers)
def inject(view: TurnView, subtype: str | None, rng: random.Random) -> Injected | None:
    if not view.turn["answerable"]:
        return None
    return _SUBTYPES[subtype](view, rng)
