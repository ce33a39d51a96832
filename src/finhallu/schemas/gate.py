"""Data-quality gates: one Great Expectations suite per published table.

Suites come from the table contracts (columns, value types, keys, nulls, allowed values,
referential integrity, non-empty) plus the rules the producing stage declares (`Stage.rules`) that check derived
frames. Validation runs through GX's pandas datasource (STACK-NOTES: the DuckDB SQL
datasource silently resolves no rows). An expectation that raised inside GX is an *error*,
never read as bad data.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from dataclasses import dataclass, field

import polars as pl

from finhallu.schemas.rules import Rule
from finhallu.schemas.contracts import CONTRACTS, Contract

# GX value-type names as GX reports them for Arrow-backed pandas columns.
_GX_TYPE = {
    pl.String: "str",
    pl.Int64: "int",
    pl.Float64: "float",
    pl.Boolean: "bool",
}

_lock = threading.Lock()
_ctx_cache: dict = {}


@dataclass
class GateResult:
    table: str
    rows: list[dict] = field(default_factory=list)  # one per expectation, dq_results layout

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.rows if r["outcome"] == "failed"]

    @property
    def errored(self) -> list[dict]:
        return [r for r in self.rows if r["outcome"] == "error"]

    @property
    def ok(self) -> bool:
        return not self.failed and not self.errored

    @property
    def outcome(self) -> str:
        return "error" if self.errored else ("failed" if self.failed else "passed")

    def message(self, limit: int = 5) -> str:
        lines = []
        for r in (self.errored + self.failed)[:limit]:
            what = r["expectation"] + (f" on column {r['column_name']!r}" if r["column_name"] else "")
            if r["outcome"] == "error":
                lines.append(f"  ERROR {what}: expectation raised inside Great Expectations: {r['detail']}")
            else:
                lines.append(
                    f"  FAILED {what}: {r['unexpected_count'] if r['unexpected_count'] is not None else '?'} "
                    f"unexpected; {r['detail'] or ''} offending rows: {r['sample']}"
                )
        return f"gate for table {self.table!r} {self.outcome}:\n" + "\n".join(lines)


class GateFailed(RuntimeError):
    def __init__(self, result: GateResult, stage: str):
        super().__init__(f"stage {stage!r}: " + result.message())
        self.result = result
        self.stage = stage


def _gx():
    """Ephemeral GX context, created once per process (GX import costs ~3 s: only when gating)."""
    with _lock:
        if "ctx" not in _ctx_cache:
            import great_expectations as gx
            from great_expectations.data_context.types.base import ProgressBarsConfig
            from great_expectations.execution_engine import pandas_execution_engine

            # GX fingerprints every pandas batch under 1 GB for its result metadata; a frame with
            # list columns it cannot hash it pickles whole: 0.9 s and +0.35 GB a validation of
            # `samples` at 3,060 documents, a gate validates 3-5 times. Nothing here reads it.
            pandas_execution_engine.HASH_THRESHOLD = 0

            for name in ("great_expectations", "great_expectations.data_context.types.base"):
                logging.getLogger(name).setLevel(logging.ERROR)
            ctx = gx.get_context(mode="ephemeral")
            ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
            asset = ctx.data_sources.add_pandas("finhallu").add_dataframe_asset("frame")
            _ctx_cache["ctx"] = ctx
            _ctx_cache["batch"] = asset.add_batch_definition_whole_dataframe("whole")
        return _ctx_cache["ctx"], _ctx_cache["batch"]


def prepare_gates() -> None:
    """Import Great Expectations and make its context now (a build does while its API server boots),
    not at the first gate."""
    _gx()


def _value_type(dtype: pl.DataType) -> str | None:
    if isinstance(dtype, pl.List):
        return "list"
    if isinstance(dtype, pl.Struct):
        return "dict"
    return _GX_TYPE.get(dtype.base_type())


def contract_expectations(contract: Contract, parents: dict[str, pl.DataFrame]) -> list:
    import great_expectations.expectations as gxe

    exps: list[gxe.Expectation] = [gxe.ExpectTableColumnsToMatchOrderedList(column_list=list(contract.columns))]
    if not contract.allow_empty:
        exps.append(gxe.ExpectTableRowCountToBeBetween(min_value=1))
    for col, dtype in contract.columns.items():
        vt = _value_type(dtype)
        if vt:
            exps.append(gxe.ExpectColumnValuesToBeOfType(column=col, type_=vt))
    key_cols = list(contract.key)
    for col in dict.fromkeys(key_cols + list(contract.not_null)):
        exps.append(gxe.ExpectColumnValuesToNotBeNull(column=col))
    if len(key_cols) == 1:
        exps.append(gxe.ExpectColumnValuesToBeUnique(column=key_cols[0]))
    elif len(key_cols) > 1:
        exps.append(gxe.ExpectCompoundColumnsToBeUnique(column_list=key_cols))
    for col, values in contract.allowed.items():
        exps.append(gxe.ExpectColumnValuesToBeInSet(column=col, value_set=list(values() if callable(values) else values)))
    return exps


def _by_need(expectations: list) -> tuple[list, list]:
    """(expectations a frame's schema decides, those that read its values)."""
    import great_expectations.expectations as gxe

    schema = (gxe.ExpectTableColumnsToMatchOrderedList, gxe.ExpectColumnValuesToBeOfType)
    return [e for e in expectations if isinstance(e, schema)], [e for e in expectations if not isinstance(e, schema)]


def _nulls_of_nested(df: pl.DataFrame, columns: list[str]) -> list[pl.Expr]:
    """`columns`, each List or Struct one as a boolean stand-in null where it is null."""
    return [
        pl.when(pl.col(c).is_null()).then(None).otherwise(True).alias(c)
        if isinstance(df.schema[c], (pl.List, pl.Struct))
        else pl.col(c)
        for c in columns
    ]


def _columns_of(expectation) -> list[str]:
    column = getattr(expectation, "column", None)
    return [column] if column else list(getattr(expectation, "column_list", None) or ())


_REF = "__references__"  # prefix of the derived membership columns


def reference_frame(contract: Contract, df: pl.DataFrame, parents: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame, list]:
    """Referential integrity as GX expectations over a derived frame: per referencing column, whether
    each value (nulls aside, as GX's own in-set check has it) is a key of the parent table, the
    membership computed by polars. Passing the parent's keys to GX as a value set instead cost time
    in proportion to the set: gating the 3,060-document home took 70 s, 21 s of it injections'
    turn_id against 76,000 turns; 16 s this way."""
    import great_expectations.expectations as gxe

    refs = {col: target for col, target in contract.parents.items() if target.split(".")[0] in parents}
    if not refs:
        return pl.DataFrame(), []
    flags = []
    for col, target in refs.items():
        table, pcol = target.split(".")
        keys = parents[table][pcol].drop_nulls().unique()
        flags.append((pl.col(col).is_in(pl.lit(keys.implode())) | pl.col(col).is_null()).alias(_REF + col))
    frame = df.select(*dict.fromkeys([*contract.key, *refs])).with_columns(flags)
    exps = [
        gxe.ExpectColumnValuesToBeInSet(column=_REF + col, value_set=[True], meta={"rule": f"references {target}"})
        for col, target in refs.items()
    ]
    return frame, exps


def _exception(info) -> str | None:
    """The message of an exception GX caught, or None. GX nests per-metric records
    ({metric id: {raised_exception, exception_message}}) for map metrics: check both shapes."""
    if not info:
        return None
    if isinstance(info, dict) and "raised_exception" in info:
        return (info.get("exception_message") or "exception inside Great Expectations") if info["raised_exception"] else None
    if isinstance(info, dict):
        for sub in info.values():
            msg = _exception(sub)
            if msg:
                return msg
    return None


def _validate(frame: pl.DataFrame, expectations: list, suite_name: str, sample_cols: list[str]) -> list[dict]:
    import great_expectations as gx
    from great_expectations.validator.v1_validator import Validator

    _, batch = _gx()
    pdf = frame.to_pandas(use_pyarrow_extension_array=True)
    suite = gx.ExpectationSuite(name=f"{suite_name}-{uuid.uuid4().hex[:8]}", expectations=expectations)
    # The suite straight through GX's validator, as `Batch.validate` does: a ValidationDefinition's
    # run saved the suite, itself and its result in the context's stores first (a fifth of a gate's
    # time, the same results). Under the lock: the validator loads the frame into the datasource's
    # one execution engine.
    with _lock:
        res = Validator(
            batch_definition=batch,
            batch_parameters={"dataframe": pdf},
            result_format={"result_format": "SUMMARY", "partial_unexpected_count": 5},
        ).validate_expectation_suite(suite)
    out = []
    for r in res.results:
        cfg = r.expectation_config
        assert cfg is not None  # a suite's results each carry their expectation
        column = cfg.kwargs.get("column")
        error = _exception(r.exception_info)
        raised = error is not None
        result = r.result or {}
        sample = None
        detail = (cfg.meta or {}).get("rule", "")
        if error is not None:  # raised
            detail = error[:500]
        elif not r.success:
            idx = result.get("partial_unexpected_index_list") or []
            cols = [c for c in sample_cols if c in frame.columns] + ([column] if column and column not in sample_cols else [])
            if idx and cols:
                sample = json.dumps(frame[[int(i) for i in idx[:5]]].select(cols).to_dicts(), ensure_ascii=False, default=str)[
                    :1500
                ]
            elif result.get("observed_value") is not None:
                sample = json.dumps({"observed_value": result.get("observed_value")}, ensure_ascii=False, default=str)[:500]
        out.append(
            {
                "suite": suite_name,
                "expectation": cfg.type,
                "column_name": column,
                "outcome": "error" if raised else ("passed" if r.success else "failed"),
                "unexpected_count": result.get("unexpected_count"),
                "sample": sample,
                "detail": detail,
            }
        )
    return out


def _error_row(suite: str, expectation: str, exc: Exception) -> dict:
    """A check that could not run, as a dq_results row (an error, never read as a pass)."""
    return {
        "suite": suite,
        "expectation": expectation,
        "column_name": None,
        "outcome": "error",
        "unexpected_count": None,
        "sample": None,
        "detail": f"{type(exc).__name__}: {exc}",
    }


def run_gate(table: str, df: pl.DataFrame, parents: dict[str, pl.DataFrame], rules: tuple[Rule, ...] = ()) -> GateResult:
    """Validate one output table: the contract suite, then each rule (declared by the stage that
    writes the table) on its derived frame."""
    contract = CONTRACTS[table]
    result = GateResult(table)
    key = list(contract.key)
    on_schema, on_values = _by_need(contract_expectations(contract, parents))
    # The column list and the Arrow-backed columns' types are the schema's: GX reads them off the dtypes,
    # so a frame of no rows gives their outcomes (failures too). The other checks get only the columns
    # they name, a nested one as its nulls (only not-null checks name them): the contract suite of
    # `samples` at 3,060 documents copied its passages and history to pandas, +0.6 GB.
    result.rows += _validate(df.clear(), on_schema, f"{table}.contract", key)
    named = list(dict.fromkeys([*key, *(c for e in on_values for c in _columns_of(e))]))
    result.rows += _validate(df.select(_nulls_of_nested(df, named)), on_values, f"{table}.contract", key)
    try:
        refs, ref_exps = reference_frame(contract, df, parents)
    except Exception as exc:  # e.g. a key column of another type than its parent's: an error, not a pass
        refs, ref_exps = pl.DataFrame(), []
        result.rows.append(_error_row(f"{table}.contract", "references", exc))
    if ref_exps:
        ref_rows = _validate(refs, ref_exps, f"{table}.contract", list(dict.fromkeys([*contract.key, *contract.parents])))
        for row in ref_rows:  # reported under the referencing column
            row["column_name"] = (row["column_name"] or "").removeprefix(_REF) or None
        result.rows += ref_rows
    for rule in rules:
        import great_expectations.expectations as gxe

        try:
            derived = rule.derive(df, parents)
        except Exception as exc:  # a rule that cannot run is an error, not a pass
            result.rows.append(_error_row(f"{table}.{rule.name}", rule.name, exc))
            continue
        exp = gxe.ExpectColumnValuesToBeInSet(column="ok", value_set=[True], meta={"rule": rule.description})
        rows = _validate(derived, [exp], f"{table}.{rule.name}", [c for c in derived.columns if c != "ok"])
        for row in rows:
            row["expectation"] = f"{rule.name} ({row['expectation']})"
        result.rows += rows
    return result
