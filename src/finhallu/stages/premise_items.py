"""premise_items: passages + qa_seeds -> `premise_items`, the false-premise probe's prompts.

Every mechanism (probe/__init__.py) in every field the corpus has, `items_per_cell` premises each,
with and without the evidence passage in context. An item the independent verifier
(probe/verify.py) does not accept is dropped and counted in a warning: every published item holds a
premise that is false against the corpus.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field

from finhallu.probe import MECHANISMS
from finhallu.probe.items import corpus_items
from finhallu.probe.verify import Corpus, check_item
from finhallu.schemas.rows import PassagesRow, QaSeedsRow
from finhallu.schemas.rules import Rule
from finhallu.schemas.section import Section
from finhallu.stages.base import Frames, Stage, StageContext, rows_frame, typed_rows


class PremiseItemsConfig(Section):
    items_per_cell: int = Field(6, ge=1)  # premises per mechanism and field (HalBench: 100)
    mechanisms: list[str] = Field(default_factory=lambda: list(MECHANISMS))
    with_and_without_evidence: bool = True  # False: only without the passage (the plain HalBench setting)


def run(inputs: Frames, ctx: StageContext[PremiseItemsConfig]) -> Frames:
    cfg = ctx.config
    unknown = sorted(set(cfg.mechanisms) - set(MECHANISMS))
    if unknown:
        raise ValueError(f"premise_items.mechanisms: unknown {unknown}; known: {list(MECHANISMS)}")
    passages = [dict(p) for p in typed_rows(inputs["passages"], PassagesRow)]
    seeds = [dict(s) for s in typed_rows(inputs["qa_seeds"], QaSeedsRow)]
    variants = (True, False) if cfg.with_and_without_evidence else (False,)
    corpus = Corpus(passages)
    rows, rejected = [], 0
    for item in corpus_items(passages, seeds, cfg.mechanisms, cfg.items_per_cell, variants, ctx.rng):
        if check_item(item, corpus) is None:
            rows.append(item)
        else:
            rejected += 1
    if rejected:
        ctx.warn(f"premise_items: {rejected} items dropped: the verifier found their premise not false against the corpus")
    return {"premise_items": rows_frame(rows, "item_id")}


# Beyond the contract: the claim is never the fact itself, and an item with evidence carries its source passage.
CLAIM_IS_NOT_THE_FACT = Rule(
    "claim_is_not_the_fact",
    "every item's false claim differs from the true fact it contradicts",
    lambda df, _: df.select("item_id", ok=pl.col("false_claim") != pl.col("true_fact")),
)
EVIDENCE_IS_THE_SOURCE = Rule(
    "evidence_is_the_source_passage",
    "with evidence, the context is the source passage; without, it is empty",
    lambda df, _: df.select(
        "item_id",
        ok=pl.when(pl.col("with_evidence"))
        .then(pl.col("context") == pl.col("source_passage"))
        .otherwise(pl.col("context") == ""),
    ),
)

STAGE = Stage(
    "premise_items",
    run,
    PremiseItemsConfig,
    inputs=("passages", "qa_seeds"),
    outputs=("premise_items",),
    description="false-premise probe items",
    resources=("probe/framings.yaml",),
    rules={"premise_items": (CLAIM_IS_NOT_THE_FACT, EVIDENCE_IS_THE_SOURCE)},
)
