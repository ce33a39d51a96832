"""A `finhallu` command run in this process with its phases timed: what a build spends outside
its stages' work (the process's start, the API server's boot and what overlaps it, the flow's start
and end, the interpreter's exit) and, per stage, its run, gates and publishing.

    .venv/bin/python benchmarks/build_phases.py OUT.json build --profile demo --home HOME [...]

Writes OUT.json ({"phases": [[name, start_s, seconds], ...], "main_end_s": ...}; times from this
process's start) and prints the table. `benchmarks/llm_path.py --phases` runs its build through
this script and prints the same table for the LLM path. Exit time (main's end to the process's
end) is what a parent measures: `llm_path.py` prints it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

T0 = time.perf_counter()
PHASES: list[tuple[str, float, float]] = []


def _timed(owner: Any, attr: str, label: Callable[..., str]) -> None:
    fn = getattr(owner, attr)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            PHASES.append((label(*args, **kwargs), start - T0, time.perf_counter() - start))

    setattr(owner, attr, wrapper)


def instrument() -> None:
    import finhallu.flows.stage_task as stage_task
    import finhallu.schemas.gate as gate
    import finhallu.service.local_api as local_api
    import finhallu.text.sentences as sentences

    _timed(gate, "prepare_gates", lambda *a, **k: "start: Great Expectations' context")
    _timed(sentences, "_load_kiwi", lambda *a, **k: "start: Kiwi load")
    _timed(local_api.HomeAPI, "url", lambda *a, **k: "start: waiting for the API server")
    _timed(stage_task, "_execute", lambda stage, *a, **k: f"stage {stage.name}: whole")
    _timed(stage_task, "gate_conformed", lambda catalog, gated, *a, **k: f"stage {gated.step}: gates")


def table(phases: list[tuple[str, float, float]], main_end: float, exit_s: float | None = None) -> str:
    stages = sorted((p for p in phases if p[0].endswith(": whole")), key=lambda p: p[1])
    lines = [f"{'phase':<44} {'at s':>7} {'took s':>7}"]
    lines += [f"{name:<44} {start:>7.2f} {took:>7.2f}" for name, start, took in sorted(phases, key=lambda p: p[1])]
    main_start = next((start for name, start, _ in phases if name.startswith("main")), 0.0)
    if stages:
        first, last = stages[0][1], stages[-1][1] + stages[-1][2]
        gates = sum(took for name, _, took in phases if name.endswith(": gates"))
        lines.append(
            f"imports before the command {main_start:.2f} s; the command's start to the first stage "
            f"{first - main_start:.2f} s; the stages {last - first:.2f} s (their gates {gates:.2f} s); "
            f"the last stage's end to the command's {main_end - last:.2f} s"
            + (f"; the interpreter's exit {exit_s:.2f} s" if exit_s is not None else "")
        )
    return "\n".join(lines)


def main() -> int:
    out = Path(sys.argv[1])
    instrument()
    from finhallu.cli import main as cli_main

    start = time.perf_counter()
    try:
        code = cli_main(sys.argv[2:])
    finally:
        end = time.perf_counter()
        PHASES.append(("main (the command)", start - T0, end - start))
        record = {"phases": PHASES, "main_end_s": end - T0, "main_end_wall": time.time()}
        out.write_text(json.dumps(record), encoding="utf-8")
    print(table(PHASES, end - T0), file=sys.stderr)
    import gc

    gc.freeze()  # as the `finhallu` command exits (finhallu.cli.entry)
    return code


if __name__ == "__main__":
    sys.exit(main())
