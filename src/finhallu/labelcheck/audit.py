"""Re-check a published benchmark with the label verifier: every pair of `samples`, both sides.

Reads what a detector would be scored on (the samples' own responses and passages) plus the
turn's reference answer and clue, so a mismatch between what QC checked and what assemble
published shows up here too.
"""

from __future__ import annotations

import polars as pl

from finhallu.labelcheck import leaf, verify_inputs, verify_sample


def _history(messages: list[dict]) -> str:
    return "\n".join(m["content"] for m in messages or [])


def audit_samples(samples: pl.DataFrame, injections: pl.DataFrame, turns: pl.DataFrame) -> pl.DataFrame:
    """One row per sample: pair_id, label leaf, ok, reasons (rules backend)."""
    refs = (
        injections.select("injection_id", "turn_id")
        .rename({"injection_id": "pair_id"})
        .join(turns.select("turn_id", "answer", "clue_text"), on="turn_id")
    )
    rows = samples.join(refs, on="pair_id", how="left").sort("sample_id").to_dicts()
    by_pair: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_pair.setdefault(r["pair_id"], {})[r["label_binary"]] = r
    out = []
    for pair_id, sides in sorted(by_pair.items()):
        for side, r in sides.items():
            other = sides.get("faithful" if side == "hallucinated" else "hallucinated", {})
            label = leaf(r["hallu_type"], r["hallu_subtype"], r["label_4class"])
            v = verify_sample(
                **verify_inputs(
                    label,
                    r["response"],
                    other.get("response", ""),
                    [p["text"] for p in r["passages"]],
                    _history(r["history"]),
                    r["standalone_query"] or r["query"],
                    r["answer"],
                    r["clue_text"],
                    r["lang"],
                )
            )
            out.append({"pair_id": pair_id, "sample_id": r["sample_id"], "label": label, "ok": v.ok, "reasons": v.reasons})
    return pl.DataFrame(
        out,
        schema={
            "pair_id": pl.String,
            "sample_id": pl.String,
            "label": pl.String,
            "ok": pl.Boolean,
            "reasons": pl.List(pl.String),
        },
    )
