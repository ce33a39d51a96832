"""What one stage did, for the people watching the run: an INFO line in the Prefect run log and a
keyed markdown artifact per stage (`stage-<name>`, so the UI keeps its history across builds):
rows in and out, time and rows/s, resident memory, the gate outcome with the failing expectations, QC drops by
reason, and the stage's LLM calls."""

from __future__ import annotations

import re
from collections import Counter

import polars as pl


def _qc_drops(df: pl.DataFrame) -> list[tuple[str, int]]:
    """Reasons of the rows a QC table did not pass, by their criterion ("coherency 1 < 2: ..." -> "coherency")."""

    def why(reason: str) -> str:
        parts = [p.strip() for p in reason.split(":")]
        if parts[0] in ("hallucinated", "counterpart", "label not verified") and len(parts) > 1:
            return f"{parts[0]}: {parts[1]}"  # the label verifier: which side, which rule
        head = re.match(r"[^\d<(]*", parts[0])
        assert head is not None  # `*` matches at least the empty string
        return head.group(0).strip() or parts[0]  # "naturalness 1 < 2" -> "naturalness"

    reasons = df.filter(~pl.col("passed"))["reasons"].to_list()
    counts = Counter(why(r) for rs in reasons for r in (rs or []))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:6]


def summary_line(stage: str, rows_in: dict[str, int], rows_out: dict[str, int], seconds: float, gates: dict[str, bool]) -> str:
    total_out = sum(rows_out.values())
    rate = total_out / seconds if seconds > 0 else 0.0
    ok = all(gates.values())
    return (
        f"stage {stage}: {sum(rows_in.values())} rows in, {total_out} out "
        f"({', '.join(f'{n} {v}' for n, v in rows_out.items())}) in {seconds:.1f} s ({rate:.0f} rows/s); "
        f"gates {'passed' if ok else 'FAILED: ' + ', '.join(n for n, g in gates.items() if not g)}"
    )


def summary_markdown(
    stage: str,
    rows_in: dict[str, int],
    outputs: dict[str, pl.DataFrame],
    seconds: float,
    gate_rows: dict[str, list[dict]],
    llm: list[dict],
    estimate: dict | None = None,
    memory: str | None = None,
) -> str:
    gates = {n: not any(r["outcome"] != "passed" for r in rows) for n, rows in gate_rows.items()}
    lines = [
        f"### Stage `{stage}`",
        "",
        summary_line(stage, rows_in, {n: d.height for n, d in outputs.items()}, seconds, gates),
        "",
        *([memory, ""] if memory else []),
        "| table | rows | gate | failing expectations |",
        "|---|---|---|---|",
    ]
    for name, df in outputs.items():
        failing = [
            f"{r['expectation']}({r.get('column_name') or ''})" for r in gate_rows.get(name, []) if r["outcome"] != "passed"
        ]
        lines.append(f"| {name} | {df.height} | {'passed' if gates.get(name, True) else 'failed'} | {', '.join(failing[:5])} |")
    lines += ["", "Inputs: " + (", ".join(f"{n} {v}" for n, v in rows_in.items()) or "raw files")]
    for name, df in outputs.items():
        if {"passed", "reasons"} <= set(df.columns):  # a QC table: what it kept, and why it dropped the rest
            drops = _qc_drops(df)
            why = "dropped by " + ", ".join(f"{r} ({n})" for r, n in drops) if drops else "dropped none"
            lines += ["", f"QC `{name}`: kept {int(df['passed'].sum())} of {df.height}; {why}"]
    if llm:
        calls, hits = sum(r["calls"] for r in llm), sum(r["cache_hits"] for r in llm)
        failed, cost = sum(r["failures"] for r in llm), sum(r["cost_usd"] for r in llm)
        lines += ["", f"LLM: {calls} calls, {hits} cache hits, {failed} failed, ${cost:.4f}"]
    if estimate:  # the dry run's estimate made before the build (finhallu.estimate), against what happened
        tokens = sum(r["input_tokens"] + r["output_tokens"] for r in llm)
        lines += [
            "",
            "| | LLM calls | tokens | cost $ | seconds |",
            "|---|---|---|---|---|",
            f"| estimated (cold) | {estimate['calls']} | {estimate['input_tokens'] + estimate['output_tokens']} | "
            f"{estimate['cost_usd']:.4f} | at least {estimate['floor_s']:.0f} |",
            f"| actual | {sum(r['calls'] - r['cache_hits'] for r in llm)} (+{sum(r['cache_hits'] for r in llm)} cached) | "
            f"{tokens} | {sum(r['cost_usd'] for r in llm):.4f} | {seconds:.0f} |",
        ]
    return "\n".join(lines)


def publish_stage_summary(
    stage: str,
    rows_in: dict[str, int],
    outputs: dict[str, pl.DataFrame],
    seconds: float,
    gate_rows: dict[str, list[dict]],
    llm: list[dict],
    estimate: dict | None = None,
    memory: str | None = None,
) -> None:
    """The INFO line and the `stage-<name>` artifact, inside a Prefect run (nothing outside one).
    `rows_in`: each input's rows; `memory`: the stage's resident-memory line (flows/rss.py), when measured."""
    try:
        from prefect.context import get_run_context
        from prefect.logging import get_run_logger

        get_run_context()
    except Exception:  # run outside Prefect (tests calling execute_stage directly)
        return
    from prefect.artifacts import create_markdown_artifact

    gates = {n: not any(r["outcome"] != "passed" for r in rows) for n, rows in gate_rows.items()}
    line = summary_line(stage, rows_in, {n: d.height for n, d in outputs.items()}, seconds, gates)
    get_run_logger().info(line + (f"; {memory}" if memory else ""))
    try:
        create_markdown_artifact(
            summary_markdown(stage, rows_in, outputs, seconds, gate_rows, llm, estimate, memory),
            key=f"stage-{stage.replace('_', '-')}",
            description=f"what stage {stage} did",
        )
    except Exception as exc:  # the run goes on without its artifact
        get_run_logger().warning(f"could not create the stage-{stage} artifact: {type(exc).__name__}: {exc}")
