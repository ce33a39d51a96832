"""The partitioned stages in process and on local Dask clusters of 1 and N workers (issue "paper scale
and beyond": local vs Dask time).

On a built home (e.g. one `benchmarks/scale.py --keep DIR` left), each setting rebuilds the stages
from detect on: lexical_support's threshold moves by 1e-6 per setting, so the cached results do not
serve and every setting does the same work. Prints each stage's seconds per setting, the time of
its partitions (task runs on the workers) and the speed-up of N workers over one.

    .venv/bin/python benchmarks/dask_runner.py --home DIR/home-136 --profile DIR/scale-aihub-136.yaml [--workers 2]

Target (issue 19): the CPU stages on 2 workers >= 1.6x faster than on 1 worker, same cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale import build, stage_stats  # noqa: E402

STAGES = ("detect", "metrics")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="a built home")
    ap.add_argument("--profile", type=Path, required=True, help="the profile it was built with")
    ap.add_argument("--workers", type=int, default=2, help="workers of the larger cluster")
    args = ap.parse_args()
    settings = [("in process", []), ("dask, 1 worker", ["--runner", "dask", "--dask-workers", "1"])]
    settings.append((f"dask, {args.workers} workers", ["--runner", "dask", "--dask-workers", str(args.workers)]))
    results: dict[str, dict[str, float]] = {}
    for k, (label, extra) in enumerate(settings, 1):
        nudge = ["--set", f"detect.detectors.lexical_support.threshold={0.6 + k * 1e-6}"]
        wall, _, summary = build(args.profile, args.home, *extra, *nudge)
        stats = stage_stats(args.home, summary["build_id"])
        ran = [s for s in STAGES if s in summary["ran"]]
        if ran != list(STAGES):
            raise SystemExit(f"{label}: expected {STAGES} to run, ran {summary['ran']}")
        parts = {s: sum(sec for name, (sec, _) in stats.items() if name.startswith(("findings[", "metrics["))) for s in ("all",)}
        results[label] = {s: stats[s][0] for s in STAGES} | {"partitions": parts["all"], "build": wall}
        row = "  ".join(f"{s} {stats[s][0]:6.1f} s" for s in STAGES)
        print(f"{label:<18} {row}  partitions {parts['all']:6.1f} s (worker time)  whole build {wall:5.0f} s")
    one, many = results[settings[1][0]], results[settings[2][0]]
    cpu_one, cpu_many = sum(one[s] for s in STAGES), sum(many[s] for s in STAGES)
    print(
        f"{' + '.join(STAGES)}: 1 worker {cpu_one:.1f} s, {args.workers} workers {cpu_many:.1f} s: "
        f"{cpu_one / cpu_many:.2f}x (in process {sum(results[settings[0][0]][s] for s in STAGES):.1f} s)"
    )


if __name__ == "__main__":
    main()
