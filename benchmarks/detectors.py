"""Detectors beside the trivial baselines, on the benchmark's test split and on external labelled sets.

For each dataset: every offline detector and every baseline (length, novel-token share, verbatim
copy: fit on train, threshold on valid), scored on the evaluation split, with accuracy, F1, ROC-AUC
and the share flagged; then the best detector against the best baseline by accuracy and by F1.
The external sets default to the project's fixtures of every format (tests/fixtures/external);
`--external FORMAT:PATH` adds (or, with --no-fixtures, replaces them with) a real one.

    .venv/bin/python benchmarks/detectors.py [--home HOME | --build demo] [--external halueval-dialogue:PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import run_cli  # noqa: E402

from finhallu.stages.detect import run_detectors  # noqa: E402
from finhallu.detectors import DetectorContext  # noqa: E402
from finhallu.detectors.baselines import BASELINES  # noqa: E402

DETECTORS = ("numeric_grounding", "lexical_support", "embedding_similarity", "refusal_answerability", "llm_judge", "learned")
FIXTURES = ROOT / "tests" / "fixtures" / "external"
FIXTURE_SETS = [
    ("halueval-dialogue", FIXTURES / "halueval" / "dialogue_data.json"),
    ("halueval-qa", FIXTURES / "halueval" / "qa_data.json"),
    ("halueval-general", FIXTURES / "halueval" / "general_data.json"),
    ("ragtruth", FIXTURES / "ragtruth"),
    ("jsonl", FIXTURES / "generic" / "samples.jsonl"),
    ("csv", FIXTURES / "generic" / "samples.csv"),
]


def home_samples(home: Path) -> pl.DataFrame:
    import duckdb

    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    cur = con.execute("SELECT * FROM samples")
    cols = [d[0] for d in cur.description]
    return pl.DataFrame([dict(zip(cols, r)) for r in cur.fetchall()], infer_schema_length=None)


def scores(
    samples: pl.DataFrame, splits: tuple[str, ...], detectors: dict[str, dict] | None = None, ctx: DetectorContext | None = None
) -> dict[str, dict[str, float]]:
    """Accuracy, F1, ROC-AUC and share flagged of each detector (default: every offline one) and each
    baseline on the evaluation splits."""
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    chosen = detectors if detectors is not None else {n: {} for n in DETECTORS}
    names = [*chosen, *BASELINES]
    found = run_detectors(samples, {**chosen, **{b: {} for b in BASELINES}}, "benchmark", ctx or DetectorContext(seed=0))
    meta = samples.select("sample_id", "split", "label_binary")
    out = {}
    for name in names:
        part = found.filter(pl.col("detector") == name).join(meta, on="sample_id").filter(pl.col("split").is_in(splits))
        if not part.height:
            continue
        y = (part["label_binary"] == "hallucinated").to_numpy()
        pred = (part["pred_binary"] == "hallucinated").to_numpy()
        auc = roc_auc_score(y, part["score"].to_numpy()) if len(np.unique(y)) == 2 else float("nan")
        out[name] = {
            "n": part.height,
            "accuracy": accuracy_score(y, pred),
            "f1": f1_score(y, pred, zero_division=0),
            "roc_auc": auc,
            "flagged": float(pred.mean()),
        }
    return out


def show(title: str, table: dict[str, dict[str, float]]) -> None:
    print(f"== {title}")
    print(f"  {'detector':<24} {'n':>5} {'accuracy':>9} {'F1':>6} {'ROC-AUC':>8} {'flagged':>8}")
    for name, m in table.items():
        print(f"  {name:<24} {m['n']:>5} {m['accuracy']:>9.3f} {m['f1']:>6.3f} {m['roc_auc']:>8.3f} {m['flagged']:>8.0%}")
    for metric in ("accuracy", "f1"):
        det = max((n for n in table if n not in BASELINES), key=lambda n: table[n][metric], default=None)
        base = max((n for n in table if n in BASELINES), key=lambda n: table[n][metric], default=None)
        if det and base:
            d, b = table[det][metric], table[base][metric]
            verdict = "beats" if d > b else ("ties" if d == b else "BELOW")
            print(f"  best {metric}: {det} {d:.3f} {verdict} the best baseline {base} {b:.3f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, help="a built home: its samples' test split")
    ap.add_argument("--build", metavar="PROFILE", help="build PROFILE into a temporary home first")
    ap.add_argument("--external", action="append", default=[], metavar="FORMAT:PATH")
    ap.add_argument("--no-fixtures", action="store_true")
    ap.add_argument("--splits", default="test", help="evaluation splits of the benchmark (comma-separated)")
    args = ap.parse_args()
    from finhallu.external import load_external

    with tempfile.TemporaryDirectory() as tmp:
        home = args.home
        if args.build:
            home = Path(tmp) / "home"
            proc = run_cli("build", "--profile", args.build, home=home, timeout=3600)
            if proc.returncode:
                print(proc.stderr[-3000:])
                return 1
        if home:
            show(f"benchmark {home} (split {args.splits})", scores(home_samples(home), tuple(args.splits.split(","))))
    sets = [] if args.no_fixtures else [(f, p, "fixture") for f, p in FIXTURE_SETS]
    sets += [(*e.split(":", 1), "external") for e in args.external]
    for fmt, path, kind in sets:
        samples = load_external(fmt, path)
        # external sets: valid + test (the deterministic 60/20/20 split; train fits learned and the baselines)
        show(f"{kind} {fmt} {path} (valid+test)", scores(samples, ("valid", "test")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
