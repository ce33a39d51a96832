"""The fine-tuned encoder detector: its training time and its scores beside `learned` and the baselines.

For each dataset the encoder is fine-tuned on the train split from cold (a fresh weight cache), timed,
then every detector is scored on the evaluation split. Datasets: a built home's samples (test split;
`--build PROFILE` builds one first), and any `--external FORMAT:PATH` labelled set (its valid+test
rows; it trains on its own train rows). The packaged MiniLM reads English only (Hangul becomes
jamo pieces it was never trained on): on the Korean demo it is expected near chance; point
`--model` at a local multilingual encoder (`kure`, a folder) for Korean.

    .venv/bin/python benchmarks/encoder.py --home data [--external ragtruth:RAGTruth/dataset] [--model kure]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from conftest import run_cli  # noqa: E402
from detectors import home_samples, scores, show  # noqa: E402

from finhallu.detectors import DetectorContext  # noqa: E402


def run(title: str, samples, splits: tuple[str, ...], encoder: dict) -> None:
    import polars as pl

    counts = dict(samples.group_by("split").len().iter_rows())
    with tempfile.TemporaryDirectory() as cache:
        ctx = DetectorContext(seed=0, cache_dir=Path(cache))
        started = time.perf_counter()
        ctx.detections("encoder", samples.to_dicts(), encoder)  # trains (cold), memoized for the table below
        trained = time.perf_counter() - started
        table = scores(samples, splits, {"encoder": encoder, "learned": {}}, ctx)
    rows = samples.filter(pl.col("split") == "train").height
    print(f"-- {title}: encoder fine-tuned on {rows} train rows in {trained:.0f} s ({counts})")
    show(title, table)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, help="a built home: its samples' test split")
    ap.add_argument("--build", metavar="PROFILE", help="build PROFILE into a temporary home first")
    ap.add_argument("--external", action="append", default=[], metavar="FORMAT:PATH")
    ap.add_argument("--model", default="minilm", help="minilm (packaged) | kure | a local folder or cached hub id")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=256)
    args = ap.parse_args()
    from finhallu.external import load_external

    encoder = {"model": args.model, "epochs": args.epochs, "max_length": args.max_length}
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home
        if args.build:
            home = Path(tmp) / "home"
            proc = run_cli("build", "--profile", args.build, home=home, timeout=3600)
            if proc.returncode:
                print(proc.stderr[-3000:])
                return 1
        if home:
            run(f"benchmark {home} (test)", home_samples(home), ("test",), encoder)
    for spec in args.external:
        fmt, path = spec.split(":", 1)
        run(f"external {fmt} {path} (valid+test)", load_external(fmt, path), ("valid", "test"), encoder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
