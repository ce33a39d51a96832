"""Hallucination detectors, one module each, registered by decorator.

A detector sees what a deployed checker would: history, query, passages and response (never
labels or generation metadata; the `learned` detector alone fits on the train split's labels)
and returns a score in [0, 1] (higher = more likely hallucinated) with binary, 4-class and type
predictions and a short rationale. Each records its version and configuration with its
detections.

Two shapes: a per-sample function `fn(sample, params, ctx) -> Detection`, or, registered with
`batch=True`, `fn(samples, params, ctx) -> list[Detection | None]` (None = not scored, e.g. the
learned detector on its own training rows) for detectors that encode or fit over all samples.

A configured name may carry a variant, `base:variant` (e.g. `numeric_grounding:no_history`),
so one detector runs under several configurations side by side (conditions for helped/hurt).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from finhallu.fanout import Fanout, InProcess
from finhallu.registry import Registry

DETECTORS: Registry["Detector"] = Registry("detector", __name__)

# Generic refusal cues (not the generator's phrasing bank): a detector must not lean on it.
REFUSAL_CUES = re.compile(
    r"(없어|없습니다|어렵습니다|수 없|확인되지|알 수 없|모르|문의|"
    r"cannot|can't|unable|not (?:contain|address|provide|mention)|no (?:evidence|information)|could not find|"
    r"don't have (?:enough )?information|insufficient information)",
    re.IGNORECASE,
)


@dataclass
class Detection:
    score: float
    pred_binary: str
    pred_4class: str
    pred_type: str | None
    rationale: str


@dataclass
class DetectorContext:
    """What a detector may use besides the sample: the LLM roles (through a router), seeded
    randomness, the home's cache folder, and the detections of detectors computed earlier in
    this run (memoized by name and parameters, so `learned` reuses them as features)."""

    seed: int = 0
    roles: dict[str, dict] = field(default_factory=dict)
    cache_dir: Path | None = None
    fanout: Fanout = field(default_factory=InProcess)  # where per-sample work runs (never changes results)
    # Each (detector, parameters)'s detections, as a future: a remote detector runs on its own thread
    # (`run_detectors`), and a detector reading it as a feature waits for that run, not a second one.
    _memo: dict[tuple[str, str], Future] = field(default_factory=dict, repr=False)
    _memo_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _router: object = field(default=None, repr=False)

    @property
    def router(self):
        if self._router is None:
            from finhallu.llm.router import LLMRouter

            self._router = LLMRouter(self.roles)
        return self._router

    def rng(self, *salt: object) -> random.Random:
        h = hashlib.sha256(repr((self.seed, "detect") + salt).encode()).digest()
        return random.Random(int.from_bytes(h[:8], "big"))

    def detections(self, name: str, samples: list[dict], params: dict | None = None) -> list["Detection | None"]:
        """Detections of detector `name` (a registered base name or `base:variant`) over `samples`."""
        det = get_detector(base_name(name))
        full = det.params(params or {})
        key = (base_name(name), canonical_json(full))
        with self._memo_lock:
            first = key not in self._memo
            pending = self._memo.setdefault(key, Future())
        if first:
            try:
                pending.set_result(det.run(samples, full, self))
            except BaseException as exc:
                pending.set_exception(exc)
        return pending.result()


@dataclass(frozen=True)
class Detector:
    name: str
    fn: Callable
    defaults: dict
    batch: bool = False
    version: str = "1"
    describe: Callable[[dict, DetectorContext], dict] | None = None  # extra config to record (e.g. LLM backend)
    # What the detector needs that the data does not carry (a local model, a parameter in range),
    # checked before any work: returns a one-line problem or None.
    preflight: Callable[[dict], str | None] | None = None
    # The (sample, use_history, max_passages) whose grounding findings the detector will read, so the
    # run computes them first, in partitions (grounding.prefetch_findings); None: it reads none.
    findings_inputs: Callable[[list[dict], dict, "DetectorContext"], list[tuple[dict, bool, int | None]]] | None = None
    # Whether this configuration waits on a remote model: such a detector runs on a thread of its own,
    # its calls in flight while the offline detectors compute (`run_detectors`); None: never.
    remote: Callable[[dict, "DetectorContext"], bool] | None = None

    def params(self, overrides: dict) -> dict:
        """The defaults with these overrides, each checked against its default's type."""
        unknown = set(overrides) - set(self.defaults)
        if unknown:
            raise ValueError(f"detector {self.name!r} has no parameter(s) {sorted(unknown)}; known: {sorted(self.defaults)}")
        merged = {**self.defaults, **overrides}
        try:
            self.params_model.model_validate(merged)
        except ValidationError as exc:
            bad = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e['input']!r})" for e in exc.errors())
            raise ValueError(f"detector {self.name!r}: {bad}") from None
        return merged  # as given (an int stays an int): the parameters enter the detections' config

    @cached_property
    def params_model(self) -> type[BaseModel]:
        """The parameters as a pydantic model typed by their defaults (None: any value)."""
        fields: dict[str, Any] = {k: (Any if v is None else type(v), v) for k, v in self.defaults.items()}
        return create_model(f"{self.name}_params", __config__=ConfigDict(extra="forbid"), **fields)

    def run(self, samples: list[dict], params: dict, ctx: DetectorContext) -> list[Detection | None]:
        out = self.fn(samples, params, ctx) if self.batch else [self.fn(s, params, ctx) for s in samples]
        if len(out) != len(samples):
            raise RuntimeError(f"detector {self.name!r} returned {len(out)} detections for {len(samples)} samples")
        return out

    @property
    def code_version(self) -> str:
        """Declared version + hash of the detector's source closure: changes whenever its code does."""
        from finhallu.codeversion import code_hash

        return f"v{self.version}-{code_hash(self.fn.__module__)[:10]}"

    def config(self, params: dict, ctx: DetectorContext) -> dict:
        return {"detector": self.name, "params": params, **(self.describe(params, ctx) if self.describe else {})}


def register_detector(
    name: str,
    *,
    batch: bool = False,
    version: str = "1",
    describe: Callable[[dict, DetectorContext], dict] | None = None,
    preflight: Callable[[dict], str | None] | None = None,
    findings_inputs: Callable[[list[dict], dict, DetectorContext], list[tuple[dict, bool, int | None]]] | None = None,
    remote: Callable[[dict, DetectorContext], bool] | None = None,
    **defaults,
):
    def deco(fn):
        det = Detector(name, fn, defaults, batch, version, describe, preflight, findings_inputs, remote)
        DETECTORS.add(name, det, fn.__module__)
        return fn

    return deco


def detector_problem(name: str, params: dict | None) -> str | None:
    """One line on what keeps a configured detector from running (unknown name, unknown parameter,
    a missing requirement); None when it can run."""
    try:
        det = get_detector(base_name(name))
        full = det.params(params or {})
    except (KeyError, ValueError) as exc:
        return str(exc).strip("'\"")
    return det.preflight(full) if det.preflight else None


def base_name(name: str) -> str:
    return name.split(":", 1)[0]


def get_detector(name: str) -> Detector:
    return DETECTORS.get(name)


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)


def looks_like_refusal(text: str) -> bool:
    # Short responses dominated by a refusal cue, without a concrete figure.
    return bool(REFUSAL_CUES.search(text or "")) and len(re.findall(r"\d", text or "")) == 0 and len(text) < 200


def labels_from_binary(hallucinated: bool, refusal: bool) -> tuple[str, str, str | None]:
    """(pred_binary, pred_4class, pred_type) implied by a binary verdict and whether the response refuses."""
    if hallucinated:
        return ("hallucinated", "false_refusal", "false_refusal") if refusal else ("hallucinated", "hallucination", None)
    return "faithful", ("true_refusal" if refusal else "faithful_answer"), None


def labels_from_4class(label: str) -> tuple[str, str, str | None]:
    binary = "hallucinated" if label in ("hallucination", "false_refusal") else "faithful"
    return binary, label, ("false_refusal" if label == "false_refusal" else None)


def labels_from_type(hallu_type: str | None, refusal: bool) -> tuple[str, str, str | None]:
    """Labels implied by a type verdict (None/"none" = faithful)."""
    if hallu_type in (None, "none"):
        return "faithful", ("true_refusal" if refusal else "faithful_answer"), None
    return "hallucinated", ("false_refusal" if hallu_type == "false_refusal" else "hallucination"), hallu_type
