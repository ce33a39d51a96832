"""Hallucination injectors, one module per type, registered by decorator.

An injector gets a TurnView (the faithful turn, its history and evidence) and a seeded RNG
and returns an Injected edit for one of its subtypes, or None when the turn cannot carry it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

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

    @property
    def history_text(self) -> str:
        return "\n".join(f"{t['query']}\n{t['response']}" for t in self.history)


@dataclass
class Injected:
    subtype: str | None
    response: str
    edit: str
    context: list[dict] | None = None  # replaced context (False Acceptance)
    counterpart: str | None = None  # faithful counterpart response when it is not the original
    counterpart_label: str = "faithful_answer"


@dataclass(frozen=True)
class TypeInjector:
    name: str
    subtypes: tuple[str, ...]
    inject: Callable[[TurnView, str | None, random.Random], Injected | None]  # (view, subtype, rng)
    prefers: Callable[[TurnView], float]  # how well a turn suits this type (turn choice by type)


def register_injector(name: str, subtypes: tuple[str, ...], prefers):
    def deco(fn):
        INJECTORS[name] = TypeInjector(name, subtypes, fn, prefers)
        return fn

    return deco


def load_injectors() -> dict[str, TypeInjector]:
    load_plugins(__name__, helpers=("lexicon", "edits"))
    return INJECTORS
