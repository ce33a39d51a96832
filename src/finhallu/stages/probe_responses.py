"""probe_responses: premise_items -> the targets' replies and the panel's reference replies.

Each target role (`finhallu probe --target ROLE`, any configured provider) answers every item as a
financial assistant would (operation `answer_probe`). Each panel role writes, for the first
`references_per_cell` items of every cell, a fully deferring and a hard-rebutting reference reply
(`write_probe_reference`): probe_scores calibrates the cell's axis endpoints on them. A call that
failed for good drops its reply (the ledger records it).
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import Field

import finhallu.probe.replies  # noqa: F401  (registers answer_probe and write_probe_reference)
from finhallu.ids import stable_id
from finhallu.schemas.rows import PremiseItemsRow
from finhallu.schemas.section import Section
from finhallu.stages.base import Frames, Stage, StageContext, rows_frame, typed_rows

MODES = ("defer", "hard")


class ProbeResponsesConfig(Section):
    targets: list[str] = Field(default_factory=lambda: ["assistant_llm"], min_length=1)  # roles probed
    panel: list[str] = Field(default_factory=lambda: ["probe_reference"], min_length=1)  # endpoint writers
    references_per_cell: int = Field(4, ge=1)


def _roles(cfg: ProbeResponsesConfig, configured: Mapping[str, Any]) -> list[str]:
    return list(dict.fromkeys(cfg.targets + cfg.panel))


def _target_rows(items: list[PremiseItemsRow], ctx: StageContext[ProbeResponsesConfig]) -> list[dict]:
    rows = []
    for target in ctx.config.targets:
        inputs = [
            {"lang": i["lang"], "message": i["prompt"], "context": i["context"] or "", "history": i["history"] or []}
            for i in items
        ]
        replies = ctx.llm.call_many(target, "answer_probe", inputs)
        backend = ctx.llm.backend(target)
        for item, out in zip(items, replies):
            if out is not None and out.reply.strip():
                rows.append(
                    {
                        "response_id": stable_id("probe-response", item["item_id"], target),
                        "item_id": item["item_id"],
                        "target": target,
                        "backend": backend,
                        "reply": out.reply.strip(),
                    }
                )
    return rows


def _reference_rows(items: list[PremiseItemsRow], ctx: StageContext[ProbeResponsesConfig]) -> list[dict]:
    per_cell: dict[str, list[PremiseItemsRow]] = {}
    for item in items:
        per_cell.setdefault(item["cell"], []).append(item)
    chosen = [i for cell in sorted(per_cell) for i in per_cell[cell][: ctx.config.references_per_cell]]
    rows = []
    for role in ctx.config.panel:
        for mode in MODES:
            inputs = [
                {
                    "lang": i["lang"],
                    "message": i["prompt"],
                    "true_fact": i["true_fact"],
                    "mode": mode,
                    "context": i["context"] or "",
                }
                for i in chosen
            ]
            for item, out in zip(chosen, ctx.llm.call_many(role, "write_probe_reference", inputs)):
                if out is not None and out.reply.strip():
                    rows.append(
                        {
                            "reference_id": stable_id("probe-reference", item["item_id"], role, mode),
                            "item_id": item["item_id"],
                            "cell": item["cell"],
                            "panel_role": role,
                            "mode": mode,
                            "reply": out.reply.strip(),
                        }
                    )
    return rows


def run(inputs: Frames, ctx: StageContext[ProbeResponsesConfig]) -> Frames:
    items = list(typed_rows(inputs["premise_items"], PremiseItemsRow))
    return {
        "probe_responses": rows_frame(_target_rows(items, ctx), "response_id"),
        "probe_references": rows_frame(_reference_rows(items, ctx), "reference_id"),
    }


STAGE = Stage(
    "probe_responses",
    run,
    ProbeResponsesConfig,
    inputs=("premise_items",),
    outputs=("probe_responses", "probe_references"),
    description="target and reference replies",
    configured_roles=_roles,
    operations=("answer_probe", "write_probe_reference"),
)
