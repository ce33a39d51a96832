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
from finhallu.warehouse.store import Written


@dataclass
class Gated:
    step: str  # the stage (or tool step) that made the tables
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)  # conformed outputs
    results: dict[str, GateResult] = field(default_factory=dict)
    written: dict[str, Written] = field(default_factory=dict)  # tables written ahead of their gates

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
    return gate_conformed(catalog, conform_outputs(step, outputs), inputs, rules, build_id)


def conform_outputs(step: str, outputs: Mapping[str, pl.DataFrame]) -> Gated:
    """Each output cast to its contract; one that cannot be is a failed contract check."""
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
    return gated


def gate_conformed(
    catalog: Catalog,
    gated: Gated,
    inputs: Mapping[str, pl.DataFrame],
    rules: Mapping[str, tuple[Rule, ...]],
    build_id: str,
) -> Gated:
    """Gate the conformed outputs (neighbours: the inputs and sibling outputs); every outcome recorded."""
    neighbours = {**inputs, **gated.tables}
    found = {name: run_gate(name, frame, neighbours, tuple(rules.get(name, ()))).rows for name, frame in gated.tables.items()}
    return record_gates(catalog, gated, found, build_id)


def record_gates(catalog: Catalog, gated: Gated, found: Mapping[str, list[dict]], build_id: str) -> Gated:
    """Each gated table's outcomes (rows, by table) kept on `gated` and recorded in dq_results."""
    for name, rows in found.items():
        gated.results[name] = GateResult(name, rows)
    for name in gated.results:
        catalog.record_dq(build_id, gated.step, name, gated.results[name].rows)
    return gated


def write_ahead(catalog: Catalog, gated: Gated) -> dict[str, TableRef]:
    """Write the conformed outputs before their gates (unpublished: see `TableStore.write_version`),
    so that a later stage may read them while the gates run; `publish_gated` then only commits."""
    gated.written = {name: catalog.store.write_version(name, frame) for name, frame in gated.tables.items()}
    return {name: w.ref for name, w in gated.written.items()}


def publish_gated(
    catalog: Catalog, gated: Gated, parents: list[TableRef], build_id: str, flow_run_id: str | None = None
) -> dict[str, TableRef]:
    """Publish every gated table, or nothing (GateFailed) when one of them failed its gate."""
    if gated.failed:
        raise GateFailed(gated.failed[0], gated.step)
    store = catalog.store
    return {
        name: store.commit_version(
            gated.written.get(name) or store.write_version(name, frame),
            parents=parents,
            build_id=build_id,
            flow_run_id=flow_run_id,
            stage=gated.step,
            gate="passed",
        )
        for name, frame in gated.tables.items()
    }
