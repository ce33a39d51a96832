"""Shortcut checks of a built benchmark: response-only classifier, length-only threshold, verbatim-copy
rule, turn depth per type (stages/assemble/validity.py), recomputed from the published `samples` of any home.

    .venv/bin/python benchmarks/validity.py HOME
    .venv/bin/python benchmarks/validity.py HOME --build demo [--scale 4]

--build PROFILE builds that profile into HOME first (offline, as `make demo`); --scale K multiplies
its dialogues per document and per filing by K (benchmarks/dialogue_depth.py builds alike).
Targets (issue "no shortcut"): every accuracy <= 0.60, response-only recall <= 0.65 for every type,
mean sample turn >= 3.5, every type at turn >= 2 at least half of the time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from dialogue_depth import home_cli  # noqa: E402
from finhallu.stages.assemble.validity import TARGET_ACCURACY, TARGET_TYPE_RECALL, fingerprint_scores, shortcut_scores  # noqa: E402


def report(home: Path, folds: int = 5, seed: int = 1) -> list[tuple[str, str, float]]:
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        samples = con.sql("SELECT * FROM samples").pl()
    finally:
        con.close()
    rows = fingerprint_scores(samples, folds, seed) + shortcut_scores(samples)
    print(f"== {home}: {samples.height} samples, {samples['pair_id'].n_unique()} pairs")
    for metric, slice_, value in rows:
        target = ""
        if metric.endswith("_accuracy"):
            target = f"target <= {TARGET_ACCURACY}: {'ok' if value <= TARGET_ACCURACY else 'OVER'}"
        elif metric == "fingerprint_tfidf_lr_recall":
            target = f"target <= {TARGET_TYPE_RECALL}: {'ok' if value <= TARGET_TYPE_RECALL else 'OVER'}"
        elif metric == "shortcut_turn2plus_share":
            target = f"target >= 0.5: {'ok' if value >= 0.5 else 'UNDER'}"
        elif metric == "shortcut_mean_turn":
            target = f"target >= 3.5: {'ok' if value >= 3.5 else 'UNDER'}"
        print(f"  {metric:<34} {slice_:<18} {value:8.3f}  {target}")
    return rows


if __name__ == "__main__":
    home_cli(__doc__.splitlines()[0], report)
