"""One stage alone on a built home's current input tables: seconds, peak RSS, an output content
hash (to show a speed change left the output as it was), and optionally a cProfile of the run.

Outside Prefect and without gates or publishing: the stage function as `execute_stage` calls it,
with the home's caches (embeddings, FAISS indexes, LLM calls) as a build would find them.

    .venv/bin/python benchmarks/stage_alone.py HOME STAGE [--profile demo|PATH] [--cprofile N] [--tracemalloc N] [--gate]

--gate: then conform and gate the outputs as a build does (Great Expectations, nothing recorded),
printing each gate's seconds and the resident memory before, at its peak and after.

HOME: a home a build has filled (e.g. one `benchmarks/scale.py --keep DIR` left).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import pstats
import resource
import threading
import time
import tracemalloc
from pathlib import Path

from finhallu.config import load_config
from finhallu.flows.rss import RssWatch
from finhallu.flows.stage_task import inputs_for_gates, read_inputs, stage_run_context
from finhallu.schemas.contracts import CONTRACTS
from finhallu.schemas.gate import prepare_gates, run_gate
from finhallu.llm.runtime import LLMRuntime
from finhallu.stages.pipeline import STAGES_BY_NAME
from finhallu.warehouse import Catalog


def frame_hash(frame) -> str:
    """Content hash of a frame: its rows in order, but for code versions (`*_version` columns: the
    detectors' code hashes change with any edit of their modules, the outputs need not)."""
    h = hashlib.sha256()
    for col in frame.columns:
        if col.endswith("_version"):
            continue
        h.update(col.encode() + b"\0")
        h.update(frame[col].hash(seed=0).to_numpy().tobytes())
    return h.hexdigest()[:16]


class PeakSnapshot(threading.Thread):
    """Takes a tracemalloc snapshot whenever the traced heap first passes 1.1x the level of the last
    one, so the last snapshot shows what the heap held within 10 % of its peak."""

    def __init__(self, every_s: float = 0.25):
        super().__init__(daemon=True)
        self.every_s, self.level, self.snapshot = every_s, 0, None
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            current, _ = tracemalloc.get_traced_memory()
            if current > max(self.level * 1.1, 32 << 20):
                self.snapshot, self.level = tracemalloc.take_snapshot(), current


def show_heap(title: str, snapshot, top: int) -> None:
    print(title)
    for stat in snapshot.statistics("lineno")[:top]:
        print(f"  {stat.size / 2**20:8.1f} MB {stat.count:9d} blocks  {stat.traceback[0]}")


def gate_outputs(outputs: dict, inputs: dict, rules) -> None:
    """Each output conformed and gated as `flows.publish.gate_outputs` does, without recording."""
    prepare_gates()  # the GX import and context, which a build makes while its API server boots
    tables = {name: CONTRACTS[name].conform(frame) for name, frame in outputs.items()}
    neighbours = {**inputs, **tables}
    for name, frame in tables.items():
        t0 = time.perf_counter()
        with RssWatch(every_s=0.02) as memory:
            result = run_gate(name, frame, neighbours, tuple(rules.get(name, ())))
        print(f"  gate {name}: {result.outcome}, {time.perf_counter() - t0:.1f} s, {memory.line()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("home", type=Path)
    ap.add_argument("stage", choices=sorted(STAGES_BY_NAME))
    ap.add_argument("--profile", default="demo", help="the profile the home was built with")
    ap.add_argument("--cprofile", type=int, default=0, help="print the N costliest functions (cumulative)")
    ap.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="N",
        help="print the N source lines holding the most memory when the stage returns (slows the run 2-3x)",
    )
    ap.add_argument("--no-morpheme-cache", action="store_true", help="analyse every Korean text afresh (a cold build's cost)")
    ap.add_argument("--gate", action="store_true", help="then gate the outputs as a build does; print seconds and memory")
    args = ap.parse_args()
    stage = STAGES_BY_NAME[args.stage]
    cfg = load_config(args.profile)
    catalog = Catalog(args.home)
    refs = {name: catalog.store.current_ref(name) for name in stage.inputs}
    missing = [n for n, r in refs.items() if r is None]
    if missing:
        raise SystemExit(f"{args.home}: no published {', '.join(missing)}; build the home first")
    inputs = {name: ref for name, ref in refs.items() if ref is not None}
    frames = read_inputs(catalog, stage, inputs)
    inputs_size = sum(f.estimated_size() for f in frames.values())
    ctx = stage.context(cfg, input_hashes={n: r.content_hash for n, r in inputs.items()}, cache_dir=args.home / "cache")
    runtime = LLMRuntime.for_home(args.home, cfg.llm, stage.name)
    prof = cProfile.Profile() if args.cprofile else None
    watcher = PeakSnapshot() if args.tracemalloc else None
    if watcher:
        tracemalloc.start(1)
        watcher.start()
    t0 = time.perf_counter()
    with stage_run_context(stage, cfg, runtime, None if args.no_morpheme_cache else args.home / "cache"):
        if prof:
            prof.enable()
        outputs = stage.run(frames, ctx)
        if prof:
            prof.disable()
    seconds = time.perf_counter() - t0
    runtime.close()
    held = tracemalloc.take_snapshot() if watcher else None  # the stage's memos still live
    if watcher:
        watcher.done.set()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"{stage.name}: {seconds:.1f} s, peak RSS {peak / 2**30:.2f} GB (inputs {inputs_size / 2**30:.2f} GB)")
    for name, frame in outputs.items():
        print(f"  {name}: {frame.height} rows, content {frame_hash(frame)}")
    if watcher and held is not None:
        traced, traced_peak = tracemalloc.get_traced_memory()
        print(f"Python heap (tracemalloc): {traced / 2**30:.2f} GB held at the end, peak {traced_peak / 2**30:.2f} GB")
        if watcher.snapshot is not None:
            show_heap(f"-- near the peak ({watcher.level / 2**30:.2f} GB traced)", watcher.snapshot, args.tracemalloc)
        show_heap("-- at the end", held, args.tracemalloc)
    if args.gate:
        gate_outputs(outputs, inputs_for_gates(catalog, stage, inputs, frames), stage.rules)
    if prof:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(args.cprofile)
        print(out.getvalue())


if __name__ == "__main__":
    main()
