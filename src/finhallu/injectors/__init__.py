"""Hallucination injectors: one module per type, each registering the type (its turn choice) and its
leaves (subtypes) by decorator.

A leaf's maker gets a TurnView (the faithful turn, its history and evidence) and a seeded RNG and
returns an Injected edit, or None when the turn cannot carry it. Its registration also carries the
acceptance rule the injection judge applies (verify.py), its names, its SFT rationale line and its
LLM instruction, so adding a subtype is one module: `@register_leaf(type, subtype, ...)` on a maker.
The inject stage reaches every injector through its LLM operation (`inject_<type>`, see
ops.py): the rules backend of that operation rebuilds the TurnView from the operation's plain
inputs (`TurnView.payload()`) and calls the registered injector.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from finhallu.registry import Registry


@dataclass
class TurnView:
    turn: dict  # the faithful turn row
    history: list[dict]  # earlier turns of the dialogue
    lang: str
    evidence: list[str]  # texts of every passage in the turn's context
    gold_text: str | None
    other_context: list[dict]  # non-gold context passages: {passage_id, text, doc_id}
    sibling_seeds: list[dict]  # other answerable seeds of the same document
    hard_negatives: list[str]  # passage ids
    seed: dict
    doc_id: str
    variant: str  # injector name, e.g. rules_a / rules_b: selects phrasing banks
    passages: dict[str, dict] = field(default_factory=dict)
    entities: Any = None  # an entities.EntityInventory of the turn's split and language (entity_error)
    claims: Any = None  # a fabricate.ClaimInventory of the turn's split, source and language (fabricated_detail)
    donors: list[str] = field(default_factory=list)  # the corpus claims `claims` ranks for this turn, as plain data

    def donor_claims(self) -> list[str]:
        """Corpus claims on this turn's topic (fabricated_detail): ranked from the inventory, or as carried."""
        return self.claims.donors(self) if self.claims is not None else list(self.donors)

    @property
    def history_text(self) -> str:
        return "\n".join(f"{t['query']}\n{t['response']}" for t in self.history)

    @property
    def theme(self) -> str:
        """What the dialogue is about: its opening question and the current one."""
        first = self.history[0]["standalone_query"] if self.history and "standalone_query" in self.history[0] else ""
        return f"{first} {self.turn.get('standalone_query') or ''}".strip()

    _TURN_KEYS = (
        "turn_id",
        "turn_index",
        "kind",
        "response",
        "answerable",
        "answer",
        "clue_text",
        "standalone_query",
        "query",
        "seed_id",
        "gold_passage_id",
    )
    _SEED_KEYS = ("seed_id", "passage_id", "question", "answer", "clue_text", "qa_kind")

    def payload(self, donors: bool = True) -> dict:
        """The view as plain JSON-able operation inputs (what an LLM prompt and the cache key see).
        `donors=False`: without the donor claims (ranked over the split's claims: costly)."""
        pick = lambda row, keys: {k: row.get(k) for k in keys}  # noqa: E731
        return {
            "turn": pick(self.turn, self._TURN_KEYS),
            "history": [
                {"query": t["query"], "response": t["response"], "standalone_query": t.get("standalone_query")}
                for t in self.history
            ],
            "evidence": list(self.evidence),
            "gold_text": self.gold_text,
            "other_context": [
                {"passage_id": p["passage_id"], "text": p["text"], "doc_id": p["doc_id"]} for p in self.other_context
            ],
            "sibling_seeds": [pick(s, self._SEED_KEYS) for s in self.sibling_seeds],
            "hard_negatives": list(self.hard_negatives),
            "seed": pick(self.seed, self._SEED_KEYS),
            "doc_id": self.doc_id,
            "variant": self.variant,
            "lang": self.lang,
            **({"donors": self.donor_claims()} if donors else {}),
        }

    @classmethod
    def from_payload(cls, p: dict) -> "TurnView":
        return cls(
            turn=dict(p["turn"]),
            history=list(p["history"]),
            lang=p["lang"],
            evidence=list(p["evidence"]),
            gold_text=p["gold_text"],
            other_context=list(p["other_context"]),
            sibling_seeds=list(p["sibling_seeds"]),
            hard_negatives=list(p["hard_negatives"]),
            seed=dict(p["seed"]),
            doc_id=p["doc_id"],
            variant=p["variant"],
            donors=list(p.get("donors") or []),
        )


@dataclass
class Injected:
    subtype: str | None
    response: str
    edit: str
    context: list[dict] | None = None  # replaced context (False Acceptance)
    counterpart: str | None = None  # faithful counterpart response when it is not the original
    counterpart_label: str = "faithful_answer"
    strategy: str = "rules"  # how it was made (entity_error: "embedding/theme"; off_topic_drift: "same_document")


@dataclass(frozen=True)
class Leaf:
    """One leaf of the taxonomy an injector makes (a type's subtype, or a type without subtypes),
    registered with everything the pipeline needs of it: how to make it from a faithful turn, the
    acceptance rule the injection judge applies to what was made (verify.Proposal -> (ok, why)), its
    display name, the claim line of the SFT rationale (placeholders {old} {new} {added} {k}) and the
    instruction an LLM injector gets, per language."""

    hallu_type: str
    subtype: str | None
    make: Callable[[TurnView, random.Random], Injected | None]
    accept: Callable[[Any], tuple[bool, str]]
    names: Mapping[str, str]
    rationale: Mapping[str, str]
    instruction: Mapping[str, str]
    minimal_edit: bool = False  # made by a minimal edit of the faithful response (its edit size is judged)

    @property
    def key(self) -> str:
        return leaf_key(self.hallu_type, self.subtype)


@dataclass(frozen=True)
class TypeInjector:
    """A hallucination type: the turns it can be injected in (`applies`) and how well a turn suits
    each of its leaves (`prefers`: turn choice by type); its leaves register themselves."""

    name: str
    prefers: Callable[[TurnView, str | None], float]
    applies: Callable[[TurnView], bool] = lambda view: True

    @property
    def leaves(self) -> list[Leaf]:
        return [leaf for leaf in LEAVES.in_order() if leaf.hallu_type == self.name]

    @property
    def subtypes(self) -> tuple[str, ...]:
        return tuple(leaf.subtype for leaf in self.leaves if leaf.subtype is not None)

    def inject(self, view: TurnView, subtype: str | None, rng: random.Random) -> Injected | None:
        leaf = find_leaf(self.name, subtype)
        return leaf.make(view, rng) if leaf is not None and self.applies(view) else None


INJECTORS: Registry[TypeInjector] = Registry("injector", __name__)
LEAVES: Registry[Leaf] = Registry("injector leaf", __name__)


def leaf_key(hallu_type: str, subtype: str | None) -> str:
    return f"{hallu_type}/{subtype}" if subtype else hallu_type


def register_type(
    name: str, prefers: Callable[[TurnView, str | None], float], applies: Callable[[TurnView], bool] = lambda view: True
) -> TypeInjector:
    """Register a hallucination type (one of taxonomy.HALLU_TYPES) with its turn choice."""
    return INJECTORS.add(name, TypeInjector(name, prefers, applies), prefers.__module__)


def register_leaf(
    hallu_type: str,
    subtype: str | None,
    *,
    accept: Callable[[Any], tuple[bool, str]],
    names: Mapping[str, str],
    rationale: Mapping[str, str],
    instruction: Mapping[str, str],
    minimal_edit: bool = False,
):
    """Register the decorated `make(view, rng) -> Injected | None` as the maker of one taxonomy leaf."""

    def deco(fn):
        LEAVES.add(
            leaf_key(hallu_type, subtype),
            Leaf(hallu_type, subtype, fn, accept, names, rationale, instruction, minimal_edit),
            fn.__module__,
        )
        return fn

    return deco


def find_leaf(hallu_type: str, subtype: str | None) -> Leaf | None:
    key = leaf_key(hallu_type, subtype)
    return LEAVES.get(key) if key in LEAVES else None


def subtypes_by_type() -> dict[str, tuple[str, ...]]:
    """Every registered type's subtypes, in registration order (() for a type without subtypes)."""
    return {name: inj.subtypes for name, inj in INJECTORS.items()}


def hallu_subtypes() -> tuple[str, ...]:
    """Every registered subtype, in registration order: the open leaves of the taxonomy."""
    return tuple(leaf.subtype for leaf in LEAVES.in_order() if leaf.subtype)


def display_name(key: str, lang: str) -> str:
    """The paper's name of a type or subtype in `lang` (reports, SFT rationales)."""
    from finhallu.taxonomy import NAMES

    names = NAMES.get(lang, NAMES["en"])
    if key in names:
        return names[key]
    leaf = next((x for x in LEAVES.in_order() if x.subtype == key), None)
    return leaf.names.get(lang, leaf.names["en"]) if leaf else key


def minimal_edit_subtypes() -> tuple[str, ...]:
    return tuple(leaf.subtype for leaf in LEAVES.in_order() if leaf.minimal_edit and leaf.subtype)


def load_injectors() -> dict[str, TypeInjector]:
    """Every registered injector, by hallucination type."""
    return dict(INJECTORS.items())
