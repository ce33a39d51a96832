"""Gate rules: checks a per-column contract cannot express, run as GX suites on derived frames.

Each rule derives a frame with an `ok` column (one row per entity checked) from the table
and its neighbours (the stage's inputs and sibling outputs); the gate expects `ok` to be True.
A stage declares the rules of its outputs beside its code (`Stage.rules`); rules more than one
stage uses live here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import polars as pl


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    derive: Callable[[pl.DataFrame, dict[str, pl.DataFrame]], pl.DataFrame]


def _institution_one_split(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    return (
        df.group_by("source", "institution")
        .agg(pl.col("split").unique().sort().alias("splits"))
        .with_columns(ok=pl.col("splits").list.len() == 1)
        .sort("source", "institution")
    )


# Shared by ingest (documents) and assemble (samples): no institution straddles two splits.
INSTITUTION_IN_ONE_SPLIT = Rule("institution_in_one_split", "an institution's rows all sit in one split", _institution_one_split)
