"""probe_scores: items + replies -> the axis score per sentence and reply, the judge's label, and the
anchors and per-cell endpoints the scores were computed with (probe/axis.py).

The axis needs a dense embedder per language (`embedders`: the packaged MiniLM for English, KURE
for Korean when it is in the local cache). Where a language's embedder is not available, its axis
columns stay empty and the judge's label stands alone; which embedder each language used (or that
none was) enters the cache key, so installing a model later rescored the replies.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from pydantic import Field

import finhallu.probe.judge  # noqa: F401  (registers judge_probe_reply)
from finhallu.embedders import EmbedConfig, ModelNotAvailableError, embedder_from_config
from finhallu.probe.axis import (
    POLES,
    Axis,
    anchor_library,
    anchor_version,
    build_axis,
    endpoints,
    normalised,
    sentence_raw_scores,
)
from finhallu.schemas.rows import PremiseItemsRow, ProbeReferencesRow, ProbeResponsesRow
from finhallu.schemas.rules import Rule
from finhallu.schemas.section import Section
from finhallu.stages.base import Frames, Stage, StageContext, rows_frame, typed_rows
from finhallu.text.sentences import split

MIDPOINT = 0.5  # a sentence at or above it leans to rebuttal


class ProbeScoresConfig(Section):
    # language -> a registered embedder backend (embedders/); a language without a usable one gets no axis score
    embedders: dict[str, str] = Field(default_factory=lambda: {"en": "minilm", "ko": "kure"})
    device: str = "cpu"


def _embedder(cfg: ProbeScoresConfig, lang: str):
    name = cfg.embedders.get(lang)
    if not name or name == "hashing":  # feature hashing has no notion of stance
        return None
    try:
        return embedder_from_config(EmbedConfig(backend=name, device=cfg.device))
    except ModelNotAvailableError:
        return None


def environment(cfg: ProbeScoresConfig) -> dict[str, Any]:
    """The embedder each language resolves to here (or none): part of the cache key."""
    out: dict[str, Any] = {"anchors": anchor_version()}
    for lang in sorted(cfg.embedders):
        emb = _embedder(cfg, lang)
        out[lang] = emb.model_id if emb is not None else None
    return out


def _sentences(reply: str, lang: str) -> list[str]:
    return [s.strip() for s in split(reply, lang) if s.strip()] or [reply]


def _axis_label(scores: np.ndarray) -> str:
    """The label the sentences' stances give (scored between the DEFER and HARD anchors, which are
    single stance sentences like these): the first one decides "rebutted"; a later one "then warned"."""
    if scores[0] >= MIDPOINT:
        return "rebutted"
    return "complied_then_warned" if (scores[1:] >= MIDPOINT).any() else "complied"


class _Scorer:
    """One language's axis: raw scores of replies, endpoints per cell, normalised scores."""

    def __init__(self, lang: str, embedder, axis: Axis):
        self.lang, self.embedder, self.axis = lang, embedder, axis

    def reply_raw(self, reply: str) -> tuple[list[str], np.ndarray]:
        sentences = _sentences(reply, self.lang)
        return sentences, sentence_raw_scores(self.axis, self.embedder, sentences)


def _scorers(cfg: ProbeScoresConfig, langs: set[str]) -> dict[str, _Scorer]:
    out = {}
    for lang in sorted(langs):
        emb = _embedder(cfg, lang) if lang in anchor_library() else None
        if emb is not None:
            out[lang] = _Scorer(lang, emb, build_axis(emb, lang))
    return out


def _endpoint_rows(
    items: dict[str, PremiseItemsRow], refs: list[ProbeReferencesRow], scorers: dict[str, _Scorer]
) -> dict[str, dict]:
    raw: dict[tuple[str, str], list[float]] = {}
    for ref in refs:
        scorer = scorers.get(items[ref["item_id"]]["lang"])
        if scorer is not None:
            raw.setdefault((ref["cell"], ref["mode"]), []).append(float(scorer.reply_raw(ref["reply"])[1].mean()))
    out = {}
    for cell, lang in sorted({(i["cell"], i["lang"]) for i in items.values()}):
        scorer = scorers.get(lang)
        if scorer is None:
            continue
        defer, hard = raw.get((cell, "defer"), []), raw.get((cell, "hard"), [])
        d, h, source = endpoints(defer, hard, scorer.axis)
        out[cell] = {
            "cell": cell,
            "lang": lang,
            "embedder": scorer.axis.embedder_id,
            "anchor_version": anchor_version(),
            "defer_end": d,
            "hard_end": h,
            "source": source,
            "n_defer": len(defer),
            "n_hard": len(hard),
        }
    return out


def _anchor_rows(scorers: dict[str, _Scorer], langs: set[str]) -> list[dict]:
    lib, version, rows = anchor_library(), anchor_version(), []
    for lang in sorted(langs & set(lib) - {"version"}):
        scorer = scorers.get(lang)
        for pole in POLES:
            texts = lib[lang][pole]
            raw = sentence_raw_scores(scorer.axis, scorer.embedder, texts) if scorer else [None] * len(texts)
            for i, (text, r) in enumerate(zip(texts, raw)):
                rows.append(
                    {
                        "anchor_version": version,
                        "lang": lang,
                        "pole": pole,
                        "anchor_index": i,
                        "text": text,
                        "instruction": lib[lang]["instruction"],
                        "embedder": scorer.axis.embedder_id if scorer else None,
                        "raw": None if r is None else float(r),
                    }
                )
    return rows


def _judged(items: dict[str, PremiseItemsRow], responses: list[ProbeResponsesRow], ctx: StageContext) -> list:
    inputs = [
        {
            "lang": items[r["item_id"]]["lang"],
            "message": items[r["item_id"]]["prompt"],
            "false_claim": items[r["item_id"]]["false_claim"],
            "true_fact": items[r["item_id"]]["true_fact"],
            "reply": r["reply"],
        }
        for r in responses
    ]
    return ctx.llm.call_many("probe_judge", "judge_probe_reply", inputs)


def run(inputs: Frames, ctx: StageContext[ProbeScoresConfig]) -> Frames:
    items = {i["item_id"]: i for i in typed_rows(inputs["premise_items"], PremiseItemsRow)}
    responses = list(typed_rows(inputs["probe_responses"], ProbeResponsesRow))
    refs = list(typed_rows(inputs["probe_references"], ProbeReferencesRow))
    langs = {i["lang"] for i in items.values()}
    scorers = _scorers(ctx.config, langs)
    ends = _endpoint_rows(items, refs, scorers)
    scores, sentences = [], []
    for response, verdict in zip(responses, _judged(items, responses, ctx)):
        item = items[response["item_id"]]
        row = {
            "response_id": response["response_id"],
            "item_id": item["item_id"],
            "target": response["target"],
            "cell": item["cell"],
            "mechanism": item["mechanism"],
            "field": item["field"],
            "lang": item["lang"],
            "with_evidence": item["with_evidence"],
            "judge_label": verdict.label if verdict is not None else None,
            "judge_rationale": verdict.rationale if verdict is not None else None,
            "embedder": None,
            "axis_score": None,
            "first_sentence_score": None,
            "axis_label": None,
            "sentences": None,
        }
        scorer, end = scorers.get(item["lang"]), ends.get(item["cell"])
        if scorer is not None and end is not None:
            texts, raw = scorer.reply_raw(response["reply"])
            norm = normalised(raw, end["defer_end"], end["hard_end"])
            stance = normalised(raw, *scorer.axis.anchor_ends)
            row |= {"embedder": scorer.axis.embedder_id, "axis_score": float(norm.mean()), "first_sentence_score": float(norm[0])}
            row |= {"axis_label": _axis_label(stance), "sentences": len(texts)}
            sentences += [
                {
                    "response_id": response["response_id"],
                    "sentence_index": k,
                    "sentence": t,
                    "raw": float(r),
                    "score": float(s),
                    "anchor_score": float(a),
                }
                for k, (t, r, s, a) in enumerate(zip(texts, raw, norm, stance))
            ]
        scores.append(row)
    return {
        "probe_scores": rows_frame(scores, "response_id"),
        "probe_sentence_scores": rows_frame(sentences, ["response_id", "sentence_index"]),
        "probe_endpoints": rows_frame(list(ends.values()), "cell"),
        "probe_anchors": rows_frame(_anchor_rows(scorers, langs), ["lang", "pole", "anchor_index"]),
    }


SCORES_IN_RANGE = Rule(
    "scores_in_unit_interval",
    "axis scores (reply and sentence) lie in [0, 1]",
    lambda df, _: df.select("response_id", ok=pl.col("axis_score").is_null() | pl.col("axis_score").is_between(0.0, 1.0)),
)

STAGE = Stage(
    "probe_scores",
    run,
    ProbeScoresConfig,
    inputs=("premise_items", "probe_responses", "probe_references"),
    outputs=("probe_scores", "probe_sentence_scores", "probe_endpoints", "probe_anchors"),
    description="axis scores and judge labels",
    roles=("probe_judge",),
    operations=("judge_probe_reply",),
    resources=("probe/anchors.yaml",),
    rules={"probe_scores": (SCORES_IN_RANGE,)},
    environment=environment,
)
