"""The embedding axis score (HalBench): where a sentence lies between deferring and rebutting.

Each sentence is embedded after the anchor library's instruction; its raw score is the projection
(e − e_soft) · u, with u the unit vector from the DEFER anchors' mean to the HARD anchors' mean.
Per cell, the raw scores are normalised between a DEFER and a HARD endpoint (the mean raw score of
the panel's deferring and rebutting reference replies; the anchors' own when the panel gives no
usable spread), clipped to [0, 1]: 0 = complied and elaborated, 1 = named and rebutted the premise.
A reply's score is the mean of its sentences'.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import yaml

POLES = ("defer", "soft", "hard")
MIN_SPREAD = 1e-3  # endpoints closer than this cannot normalise: fall back to the anchors'


@lru_cache(maxsize=1)
def anchor_library() -> dict:
    return yaml.safe_load(anchor_bytes().decode("utf-8"))


def anchor_bytes() -> bytes:
    return (resources.files("finhallu") / "probe" / "anchors.yaml").read_bytes()


def anchor_version() -> str:
    """The library's declared version and content hash: a changed anchor is a new version."""
    return f"v{anchor_library()['version']}-{hashlib.sha256(anchor_bytes()).hexdigest()[:12]}"


@dataclass
class Axis:
    lang: str
    embedder_id: str
    instruction: str
    means: dict[str, np.ndarray]  # pole -> mean anchor vector
    direction: np.ndarray  # unit vector DEFER -> HARD
    anchor_ends: tuple[float, float]  # raw scores of the DEFER and HARD anchor means

    def raw(self, vectors: np.ndarray) -> np.ndarray:
        return (vectors - self.means["soft"]) @ self.direction


def build_axis(embedder, lang: str) -> Axis:
    lib = anchor_library()[lang]
    instruction = lib["instruction"]
    means = {pole: embedder.encode([instruction + t for t in lib[pole]]).mean(axis=0) for pole in POLES}
    direction = means["hard"] - means["defer"]
    direction = direction / max(float(np.linalg.norm(direction)), 1e-12)
    axis = Axis(lang, embedder.model_id, instruction, means, direction, (0.0, 0.0))
    ends = axis.raw(np.stack([means["defer"], means["hard"]]))
    axis.anchor_ends = (float(ends[0]), float(ends[1]))
    return axis


def sentence_raw_scores(axis: Axis, embedder, sentences: list[str]) -> np.ndarray:
    if not sentences:
        return np.zeros(0, dtype=np.float64)
    return axis.raw(embedder.encode([axis.instruction + s for s in sentences])).astype(np.float64)


def normalised(raw: np.ndarray | float, defer_end: float, hard_end: float) -> np.ndarray:
    return np.clip((np.asarray(raw, dtype=np.float64) - defer_end) / (hard_end - defer_end), 0.0, 1.0)


def endpoints(defer_raw: list[float], hard_raw: list[float], axis: Axis) -> tuple[float, float, str]:
    """(DEFER end, HARD end, where they came from): the panel's means, or the anchors'."""
    if defer_raw and hard_raw:
        d, h = float(np.mean(defer_raw)), float(np.mean(hard_raw))
        if h - d > MIN_SPREAD:
            return d, h, "panel"
    return axis.anchor_ends[0], axis.anchor_ends[1], "anchors"
