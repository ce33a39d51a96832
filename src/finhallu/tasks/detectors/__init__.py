"""Hallucination detectors, one module each, registered by decorator.

A detector sees what a deployed checker would: history, query, passages and response (never
labels or generation metadata) and returns a score (higher = more likely hallucinated) with
binary, 4-class and type predictions and a short rationale.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from finhallu.registry import lookup

DETECTORS: dict[str, "Detector"] = {}

# Generic refusal cues (not the generator's phrasing bank): a detector must not lean on it.
REFUSAL_CUES = re.compile(
    r"(없어|없습니다|어렵습니다|수 없|확인되지|알 수 없|모르|문의|"
    r"cannot|can't|unable|not (?:contain|address|provide|mention)|no (?:evidence|information)|could not find)",
    re.IGNORECASE,
)


@dataclass
class Detection:
    score: float
    pred_binary: str
    pred_4class: str
    pred_type: str | None
    rationale: str


@dataclass(frozen=True)
class Detector:
    name: str
    detect: Callable[[dict, dict], Detection]  # (sample, params)
    defaults: dict


def register_detector(name: str, **defaults):
    def deco(fn):
        DETECTORS[name] = Detector(name, fn, defaults)
        return fn

    return deco


def get_detector(name: str) -> Detector:
    return lookup(DETECTORS, name, __name__, "detector", helpers=("grounding",))


def looks_like_refusal(text: str) -> bool:
    # Short responses dominated by a refusal cue, without a concrete figure.
    return bool(REFUSAL_CUES.search(text or "")) and len(re.findall(r"\d", text or "")) == 0 and len(text) < 200
