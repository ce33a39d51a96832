"""The stage contract: a pure function from input frames and a config to output frames.

No Prefect here. `flows/` wraps each Stage in a thin task (run -> gate -> publish -> TableRef).
"""

from __future__ import annotations

import hashlib
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar, cast

import polars as pl
from pydantic import BaseModel

from finhallu.codeversion import code_hash
from finhallu.fanout import Fanout, InProcess
from finhallu.llm.router import DeclaredCalls, LLMRouter
from finhallu.schemas.rules import Rule

Frames = dict[str, pl.DataFrame]


def rows_frame(rows: Sequence[Mapping[str, Any]], sort_by: str | list[str], **kw: Any) -> pl.DataFrame:
    """Rows -> a sorted frame; no rows -> an empty frame (the contract supplies the schema)."""
    return pl.DataFrame(rows, infer_schema_length=None, **kw).sort(sort_by) if rows else pl.DataFrame()


def typed_rows_frame(
    rows: Sequence[Mapping[str, Any]], schema: Mapping[str, pl.DataType], sort_by: str | list[str]
) -> pl.DataFrame:
    """Rows -> a sorted frame of `schema`'s columns and types, built column by column; a column of
    lists of structs goes to Arrow as flat field arrays and offsets (`list_of_structs`). Polars
    reading rows of dicts nested two deep held ~3x the frame at its peak: `samples` at 3,060
    documents, 0.3 GB, peaked at 1.0 GB more while being built this way took 0.35 GB; flat rows
    too: `hard_negatives`' 987,000 rows took 0.7 GB more, column by column 0.1 GB."""
    if not rows:
        return pl.DataFrame()
    columns = []
    for name, dtype in schema.items():
        try:
            cells = [r[name] for r in rows]
        except KeyError:
            raise ValueError(f"a row lacks column {name!r} of its table's schema ({', '.join(schema)})") from None
        nested = isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct)
        columns.append(list_of_structs(name, cells, dtype) if nested else pl.Series(name, cells, dtype=dtype))
    return pl.DataFrame(columns).sort(sort_by)


def list_of_structs(name: str, cells: Sequence[Sequence[Mapping[str, Any]] | None], dtype: pl.DataType) -> pl.Series:
    """A List(Struct) column from Python lists of dicts (None: a null cell), built from one flat
    array per struct field and the lists' offsets."""
    import pyarrow as pa

    assert isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct)
    fields = dtype.inner.fields
    values: dict[str, list[Any]] = {f.name: [] for f in fields}
    offsets, nulls = [0], []
    for cell in cells:
        for item in cell or ():
            for f in fields:
                values[f.name].append(item.get(f.name))
        offsets.append(offsets[-1] + len(cell or ()))
        nulls.append(cell is None)
    # Each field a Polars Series handed to Arrow as it is (string views: no copy), each list dropped
    # once converted. Exported as large_string, the passages' text was copied on the way to Arrow
    # and again on the way back (a List(Struct) like `samples`' passages, 320 MB: +716 -> +414 MB).
    arrays = []
    for f in fields:
        arrays.append(pl.Series(f.name, values.pop(f.name), dtype=f.dtype).to_arrow(compat_level=pl.CompatLevel.newest()))
    items = pa.StructArray.from_arrays(arrays, names=[f.name for f in fields])
    del arrays
    mask = pa.array(nulls, type=pa.bool_()) if any(nulls) else None
    lists = pa.LargeListArray.from_arrays(pa.array(offsets, type=pa.int64()), items, mask=mask)
    del items
    return pl.Series(name, lists).cast(dtype)


class OwnedFrames(dict):
    """A stage's input frames given for it to own (by the stage task): an input it hands back
    (`hand_back`) is dropped from them, and the stage task reads it again for the gates."""


def hand_back(inputs: Frames, name: str) -> pl.DataFrame:
    """inputs[name], dropped from `inputs` where the stage owns them (`OwnedFrames`), so that its
    memory goes once the stage holds what it needs of it as Python rows (detect's `samples`: 0.31 GB
    at 3,060 documents). Frames a caller keeps (tests, the dry run) stay as they are."""
    return inputs.pop(name) if isinstance(inputs, OwnedFrames) else inputs[name]


def shared_rows(frame: pl.DataFrame) -> Iterator[dict[str, Any]]:
    """The frame's rows as dicts, each distinct string one Python object however many cells hold
    it. Samples repeat their passages and their dialogue's earlier turns row after row; read plainly,
    each cell made its own copy (282 MB of the detect stage's 23,500 samples, most of it repeats)."""
    seen: dict[str, str] = {}

    def share(value: Any) -> Any:
        if isinstance(value, str):
            return seen.setdefault(value, value)
        if isinstance(value, list):
            return [share(v) for v in value]
        if isinstance(value, dict):
            return {k: share(v) for k, v in value.items()}
        return value

    for row in frame.iter_rows(named=True):
        yield {k: share(v) for k, v in row.items()}


R = TypeVar("R")


def typed_rows(frame: pl.DataFrame, row: type[R]) -> Iterator[R]:
    """A stage's input rows as the typed rows of their table (schemas/rows.py): the frame has passed
    that table's contract, so each row is one of them."""
    return cast(Iterator[R], frame.iter_rows(named=True))


C = TypeVar("C", bound=BaseModel)
# Roles a stage calls by the names its config gives them (seed generators, injectors, LLM-judge
# detectors): (the stage's config section, the configured roles) -> role names.
RolesOf = Callable[[Any, Mapping[str, Any]], Iterable[str]]


@dataclass(frozen=True)
class Stage(Generic[C]):
    """One stage of the DAG, declared beside its code: what it reads and writes, the config section it
    takes (`<name>:` in a profile), the LLM roles and operations it may call, and the gate rules its
    outputs must pass beyond their contracts. Its router refuses any call the declaration does not list."""

    name: str
    # run(inputs, ctx) -> outputs. It may `hand_back` an input it is done with.
    run: Callable[[Frames, "StageContext[C]"], Frames]
    config: type[C]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    description: str = ""
    # Input columns the stage never reads: left out of the frames it is given (samples' passages and
    # history are ~90 % of the table; metrics and report need its labels only)
    unread: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    roles: tuple[str, ...] = ()  # LLM roles the stage calls under fixed names (their config enters the cache key)
    configured_roles: RolesOf | None = None  # and those its config names
    operations: tuple[str, ...] = ()  # LLM operations (their prompt versions enter the cache key)
    rules: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)  # gate rules per output table
    resources: tuple[str, ...] = ()  # package files the stage reads (templates): their bytes enter the cache key
    reads: tuple[str, ...] = ()  # other config sections the stage reads (StageContext.sections; in the cache key)
    # What outside the config changes the stage's output (a local model it finds or not), as key material
    environment: Callable[[C], Mapping[str, Any]] | None = None
    # Modules the stage imports lazily that take a second or more (scikit-learn, SciPy): a build whose
    # stages call a remote model imports them while it waits for answers (flows/preload.py)
    imports: tuple[str, ...] = ()

    def roles_for(self, config: C, configured: Mapping[str, Any]) -> tuple[str, ...]:
        """Every role this stage may call under this config (`configured`: the profile's `roles`)."""
        named = tuple(self.configured_roles(config, configured)) if self.configured_roles else ()
        return tuple(dict.fromkeys(self.roles + named))

    def calls_roles(self, cfg: Any) -> tuple[str, ...]:
        """The roles this stage calls under a BuildConfig (none when it calls no operation)."""
        return self.roles_for(getattr(cfg, self.name), cfg.roles) if self.operations else ()

    def declared_calls(self, config: C, configured: Mapping[str, Any]) -> DeclaredCalls:
        return DeclaredCalls(self.name, frozenset(self.roles_for(config, configured)), frozenset(self.operations))

    def context(self, cfg: Any, **kw: Any) -> "StageContext[C]":
        """The stage's context under a BuildConfig: its section, the seed, the configured roles it
        declares (only what the cache key covers) and the other sections it reads."""
        section = getattr(cfg, self.name)
        declared = self.roles_for(section, cfg.roles)
        return StageContext(
            stage=self.name,
            config=section,
            seed=cfg.seed,
            roles={r: c.model_dump() for r, c in cfg.roles.items() if r in declared},
            sections={name: getattr(cfg, name) for name in self.reads},
            **kw,
        )

    @property
    def code_version(self) -> str:
        return code_hash(self.run.__module__)

    @property
    def resource_version(self) -> str:
        from importlib import resources as res

        h = hashlib.sha256()
        for rel in self.resources:
            h.update(rel.encode() + b"\0" + (res.files("finhallu") / rel).read_bytes())
        return h.hexdigest()


@dataclass
class StageContext(Generic[C]):
    stage: str
    config: C  # the stage's pydantic config section
    seed: int
    roles: dict[str, dict] = field(default_factory=dict)
    input_hashes: dict[str, str] = field(default_factory=dict)
    progress: Callable[[int, int], None] = lambda done, total: None
    # What a stage wants the people watching the run to know (a WARNING in the run's log).
    warn: Callable[[str], None] = lambda message: logging.getLogger("finhallu.stage").warning(message)
    # Content-addressed caches and artifacts under the home folder (embeddings by model and text
    # hash, FAISS indexes). Reading them never changes a stage's output, only its cost.
    cache_dir: Path | None = None
    # Other config sections the stage declares it reads (Stage.reads), by name; they enter its cache key.
    sections: dict[str, Any] = field(default_factory=dict)
    # How pure per-item work fans out (in process, or over a Dask cluster's workers): never the output.
    fanout: Fanout = field(default_factory=InProcess)

    @property
    def llm(self) -> LLMRouter:
        """A router for the roles this stage declares; a call of anything else raises."""
        from finhallu.stages.pipeline import STAGES_BY_NAME

        stage = STAGES_BY_NAME.get(self.stage)
        declared = stage.declared_calls(self.config, self.roles) if stage is not None else None
        return LLMRouter(self.roles, declared=declared)

    def rng(self, *salt: object) -> random.Random:
        """A seeded RNG per stage and salt, so results never depend on iteration order elsewhere."""
        h = hashlib.sha256(repr((self.seed, self.stage) + salt).encode()).digest()
        return random.Random(int.from_bytes(h[:8], "big"))
