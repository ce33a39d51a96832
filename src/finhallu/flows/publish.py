"""The one gated publish path: conform each output to its contract, gate it (contract suite and the
rules its stage declares), record every outcome in `dq_results`, and publish only when every output
of the step passed. Used by the stage task and by `eval-external`'s dataset tables alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import polars as pl

from finhallu.schemas.contracts import CONTRACTS, ContractError
from finhallu.schemas.gate import GateFailed, GateResult, run_gate
from finhallu.schemas.rules import Rule
from finhallu.warehouse import Catalog, TableRef


@dataclass
class Gated:
    step: str  # the stage (or tool step) that made the tables
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)  # conformed outputs
    results: dict[str, GateResult] = field(default_factory=dict)

    @property
    def failed(self) -> list[GateResult]:
        return [r for r in self.results.values() if not r.ok]


def gate_outputs(
    catalog: Catalog,
    step: str,
    outputs: Mapping[str, pl.DataFrame],
    inputs: Mapping[str, pl.DataFrame],
    rules: Mapping[str, tuple[Rule, ...]],
    build_id: str,
) -> Gated:
    """Conform and gate every output (neighbours: the step's inputs and sibling outputs); outcomes recorded."""
    gated = Gated(step)
    for name, frame in outputs.items():
        try:
            gated.tables[name] = CONTRACTS[name].conform(frame)
        except ContractError as exc:
            gated.results[name] = GateResult(
                name,
                [
                    {
                        "suite": f"{name}.contract",
                        "expectation": "conforms_to_contract",
                        "column_name": None,
                        "outcome": "failed",
                        "unexpected_count": None,
                        "sample": None,
                        "detail": str(exc),
                    }
                ],
            )
    neighbours = {**inputs, **gated.tables}
    for name, frame in gated.tables.items():
        gated.results[name] = run_gate(name, frame, neighbours, tuple(rules.get(name, ())))
    for name in outputs:
        catalog.record_dq(build_id, step, name, gated.results[name].rows)
    return gated


def publish_gated(
    catalog: Catalog, gated: Gated, parents: list[TableRef], build_id: str, flow_run_id: str | None = None
) -> dict[str, TableRef]:
    """Publish every gated table, or nothing (GateFailed) when one of them failed its gate."""
    if gated.failed:
        raise GateFailed(gated.failed[0], gated.step)
    return {
        name: catalog.store.publish(
            name, frame, parents=parents, build_id=build_id, flow_run_id=flow_run_id, stage=gated.step, gate="passed"
        )
        for name, frame in gated.tables.items()
    }
