"""The false-premise probe on the demo corpus, offline: what it builds and how its two scores agree.

    .venv/bin/python benchmarks/probe.py [--home DIR] [--items-per-cell N]

Prints the probe's time (cold, then fully cached), items per mechanism and field, how many items the
independent verifier accepted, the judge's labels per mechanism with and without the evidence
passage, and for English (the packaged MiniLM axis) the mean axis score per judge label and the
axis-judge agreement.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from finhallu.config import load_config  # noqa: E402
from finhallu.flows.probe import run_probe  # noqa: E402
from finhallu.probe import MECHANISMS  # noqa: E402
from finhallu.probe.items import corpus_items  # noqa: E402
from finhallu.probe.verify import Corpus, check_item  # noqa: E402
from finhallu.stages.base import StageContext  # noqa: E402


def verifier_acceptance(passages: list[dict], seeds: list[dict], per_cell: int, seed: int) -> tuple[int, int, dict[str, int]]:
    """(items built, items accepted, rejection reasons) before the stage drops anything."""
    ctx = StageContext(stage="premise_items", config=None, seed=seed)
    corpus = Corpus(passages)
    built, accepted, reasons = 0, 0, {}
    for item in corpus_items(passages, seeds, list(MECHANISMS), per_cell, (True, False), ctx.rng):
        built += 1
        why = check_item(item, corpus)
        accepted += why is None
        if why:
            reasons[why.split(" (")[0]] = reasons.get(why.split(" (")[0], 0) + 1
    return built, accepted, reasons


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", help="a home to probe (default: a fresh temporary one)")
    ap.add_argument("--items-per-cell", type=int, default=6)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    home = Path(args.home or tempfile.mkdtemp(prefix="finhallu-probe-"))
    overrides = {"premise_items": {"items_per_cell": args.items_per_cell}}
    t0 = time.perf_counter()
    run_probe("demo", home, overrides=overrides)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = run_probe("demo", home, overrides=overrides)
    warm = time.perf_counter() - t0
    print(
        f"probe (demo corpus, {args.items_per_cell} premises per cell): cold {cold:.1f} s (incl. ingest..seed_qa), cached {warm:.1f} s, reran {again['ran']}"
    )
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    items = con.sql("SELECT * FROM premise_items").pl()
    scores = con.sql("SELECT * FROM probe_scores").pl()
    passages = con.sql("SELECT * FROM passages").pl().to_dicts()
    seeds = con.sql("SELECT * FROM qa_seeds").pl().to_dicts()
    con.close()

    print("\nitems per mechanism x field (with and without evidence):")
    print(items.pivot(on="field", index="mechanism", values="item_id", aggregate_function="len").sort("mechanism"))
    built, accepted, reasons = verifier_acceptance(passages, seeds, args.items_per_cell, load_config("demo").seed)
    print(
        f"\nverifier: {accepted}/{built} items accepted ({100 * accepted / max(built, 1):.1f} %); rejected: {reasons or 'none'}"
    )

    print("\njudge labels per mechanism (share rebutted / comply-then-warn / complied), with | without evidence:")
    for m in MECHANISMS:
        line = []
        for ev in (True, False):
            sub = scores.filter((pl.col("mechanism") == m) & (pl.col("with_evidence") == ev))
            n = max(sub.height, 1)
            shares = [
                sub.filter(pl.col("judge_label") == lab).height / n for lab in ("rebutted", "complied_then_warned", "complied")
            ]
            line.append(" / ".join(f"{100 * s:3.0f}%" for s in shares))
        print(f"  {m} {MECHANISMS[m].name:<28} {line[0]}  |  {line[1]}")

    en = scores.filter(pl.col("axis_score").is_not_null())
    print(f"\naxis (English, {en.height} replies): mean score per judge label")
    for lab in ("rebutted", "complied_then_warned", "complied"):
        sub = en.filter(pl.col("judge_label") == lab)
        print(f"  {lab:<22} {sub['axis_score'].mean():.3f}  (n={sub.height})" if sub.height else f"  {lab:<22} -")
    both = en.filter(pl.col("axis_label").is_not_null() & pl.col("judge_label").is_not_null())
    agree = (both["axis_label"] == both["judge_label"]).mean() if both.height else float("nan")
    print(f"  axis label = judge label: {100 * agree:.1f} % of {both.height}")
    print(both.group_by("judge_label", "axis_label").len().sort("judge_label", "axis_label"))
    ko = scores.filter((pl.col("lang") == "ko") & pl.col("axis_score").is_null()).height
    if ko:
        print(f"\nKorean: {ko} replies without an axis score (no KURE in the local cache); judge labels only")


if __name__ == "__main__":
    main()
