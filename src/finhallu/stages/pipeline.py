"""The DAGs: every stage's declaration, in the order the build (and the probe) runs them."""

from __future__ import annotations

from finhallu.schemas.rules import Rule
from finhallu.stages import (
    assemble,
    chunk,
    detect,
    dialogue_qc,
    dialogues,
    embed,
    ingest,
    inject,
    injection_qc,
    metrics,
    premise_items,
    probe_report,
    probe_responses,
    probe_scores,
    report,
    retrieve,
    seed_qa,
)
from finhallu.stages.base import Stage

STAGES: list[Stage] = [
    m.STAGE
    for m in (
        ingest,
        chunk,
        embed,
        seed_qa,
        retrieve,
        dialogues,
        dialogue_qc,
        inject,
        injection_qc,
        assemble,
        detect,
        metrics,
        report,
    )
]
# The false-premise probe (`finhallu probe`): its own flow over the build's passages and seeds.
PROBE_STAGES: list[Stage] = [m.STAGE for m in (premise_items, probe_responses, probe_scores, probe_report)]
PROBE_INPUT_STAGES = ("ingest", "chunk", "embed", "seed_qa")  # the build stages it reads from (cached)
ALL_STAGES: list[Stage] = STAGES + PROBE_STAGES
STAGES_BY_NAME = {s.name: s for s in ALL_STAGES}
PRODUCER = {table: s for s in ALL_STAGES for table in s.outputs}  # output table -> the stage that writes it


def table_rules(table: str) -> tuple[Rule, ...]:
    """The gate rules of a table, as its producing stage declares them."""
    stage = PRODUCER.get(table)
    return tuple(stage.rules.get(table, ())) if stage else ()
