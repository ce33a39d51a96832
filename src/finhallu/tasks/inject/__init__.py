"""Hallucination injectors, one module per type, registered by decorator.

An injector gets a TurnView (the faithful turn, its history and evidence) and a seeded RNG
and returns an Injected edit for one of its subtypes, or None when the turn cannot carry it.
The inject stage reaches every injector through its LLM operation (`inject_<type>`, see
ops.py): the rules backend of that operation rebuilds the TurnView from the operation's plain
inputs (`TurnView.payload()`) and calls the registered injector.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

from finhallu.registry import load_plugins

INJECTORS: dict[str, "TypeInjector"] = {}


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

    _TURN_KEYS = ("turn_id", "turn_index", "kind", "response", "answerable", "answer", "clue_text", "standalone_query",
                  "query", "seed_id", "gold_passage_id")
    _SEED_KEYS = ("seed_id", "passage_id", "question", "answer", "clue_text", "qa_kind")

    def payload(self) -> dict:
        """The view as plain JSON-able operation inputs (what an LLM prompt and the cache key see)."""
        pick = lambda row, keys: {k: row.get(k) for k in keys}  # noqa: E731
        return {
            "turn": pick(self.turn, self._TURN_KEYS),
            "history": [{"query": t["query"], "response": t["response"], "standalone_query": t.get("standalone_query")}
                        for t in self.history],
            "evidence": list(self.evidence), "gold_text": self.gold_text,
            "other_context": [{"passage_id": p["passage_id"], "text": p["text"], "doc_id": p["doc_id"]}
                              for p in self.other_context],
            "sibling_seeds": [pick(s, self._SEED_KEYS) for s in self.sibling_seeds],
            "hard_negatives": list(self.hard_negatives), "seed": pick(self.seed, self._SEED_KEYS),
            "doc_id": self.doc_id, "variant": self.variant, "lang": self.lang, "donors": self.donor_claims(),
        }

    @classmethod
    def from_payload(cls, p: dict) -> "TurnView":
        return cls(turn=dict(p["turn"]), history=list(p["history"]), lang=p["lang"], evidence=list(p["evidence"]),
                   gold_text=p["gold_text"], other_context=list(p["other_context"]), sibling_seeds=list(p["sibling_seeds"]),
                   hard_negatives=list(p["hard_negatives"]), seed=dict(p["seed"]), doc_id=p["doc_id"],
                   variant=p["variant"], donors=list(p.get("donors") or []))


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
class TypeInjector:
    name: str
    subtypes: tuple[str, ...]
    inject: Callable[[TurnView, str | None, random.Random], Injected | None]  # (view, subtype, rng)
    prefers: Callable[[TurnView, str | None], float]  # how well a turn suits (type, subtype): turn choice by type


def register_injector(name: str, subtypes: tuple[str, ...], prefers):
    def deco(fn):
        INJECTORS[name] = TypeInjector(name, subtypes, fn, prefers)
        return fn

    return deco


def load_injectors() -> dict[str, TypeInjector]:
    load_plugins(__name__, helpers=("lexicon", "edits", "verify"))
    return INJECTORS
