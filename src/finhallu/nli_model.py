"""A local NLI cross-encoder (sentence-transformers CrossEncoder) as a scorer of (premise, hypothesis)
pairs. Used by the `nli` detector and, when configured, by the label verifier of injection QC.

Loaded from local files only: $FINHALLU_NLI_PATH when set, else the given spec (a folder, or a hub
id found in the local Hugging Face cache), else DEFAULT_MODEL from the cache. Nothing is downloaded;
a missing model raises ModelNotAvailableError naming what is missing. The label order comes from the
model's config (id2label: entailment / neutral / contradiction).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Callable

import numpy as np

from finhallu.local_models import ModelNotAvailableError, resolve_model_dir

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder

DEFAULT_MODEL = "cross-encoder/nli-deberta-v3-xsmall"
ENV = "FINHALLU_NLI_PATH"
# A scorer maps (premise, hypothesis) pairs to an (n, 3) array of probabilities: entailment, neutral, contradiction.
Scorer = Callable[[list[tuple[str, str]]], np.ndarray]


def _label_columns(id2label: dict) -> list[int]:
    """Column of entailment, neutral, contradiction in the model's output."""
    names = {int(i): str(n).lower() for i, n in id2label.items()}
    order = []
    for want in ("entail", "neutral", "contradict"):
        hit = [i for i, n in names.items() if n.startswith(want)]
        if len(hit) != 1:
            raise ModelNotAvailableError(f"NLI model labels {names} do not name entailment/neutral/contradiction")
        order.append(hit[0])
    return order


def missing_model(spec: str | None) -> str | None:
    """One line on why the NLI model cannot be loaded; None when its files are there."""
    try:
        resolve_model_dir(spec or DEFAULT_MODEL, "config.json", env_var=ENV, what="NLI cross-encoder")
    except ModelNotAvailableError as exc:
        return " ".join(str(exc).split())
    return None


@lru_cache(maxsize=2)
def _load(spec: str, device: str) -> tuple[CrossEncoder, list[int], str]:
    folder, revision = resolve_model_dir(spec, "config.json", env_var=ENV, what="NLI cross-encoder")
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(folder), device=device)
    id2label = getattr(model.model.config, "id2label", None) or {}
    if len(id2label) != 3:
        raise ModelNotAvailableError(f"NLI cross-encoder {folder} has {len(id2label)} output labels; an NLI model has 3")
    return model, _label_columns(id2label), f"{spec}@{revision}"


def load_scorer(params: dict) -> tuple[Scorer, str]:
    """(scorer, model id) of the configured cross-encoder (params: model, device, batch_size);
    raises ModelNotAvailableError when absent."""
    model, cols, model_id = _load(params.get("model") or DEFAULT_MODEL, params.get("device", "cpu"))

    def score(pairs: list[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros((0, 3))
        logits = np.asarray(
            model.predict(pairs, batch_size=params.get("batch_size", 16), apply_softmax=False, show_progress_bar=False),
            dtype=float,
        ).reshape(len(pairs), -1)
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (z / z.sum(axis=1, keepdims=True))[:, cols]

    return score, model_id
