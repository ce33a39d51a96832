"""The paper-scale call count: `finhallu build --dry-run` of the `paper` profile over an N-document
AI-Hub corpus (default 3,000, the paper's order), with the profile's dialogue settings (paper: K-FinHallu's
one dialogue per AI-Hub document).

The corpus is the bundled demo's AI-Hub documents copied until there are N (each copy its own
doc/context/question ids, institutions kept, so the split shares hold, and a copy line appended to
every context, so that a copy's prompts over its passages are no call-cache hits on another's; a
question repeated word for word in another copy can still be one, as in a real corpus). Copies repeat
facts, which retrieval sees as same-fact passages in other documents: step 1 drops most of them as
candidates, so this count is, if anything, low on hard-negative judgements; every other stage
counts per document, seed or dialogue. Target (issue "the LLM path at paper
scale"): <= 150,000 calls.

    .venv/bin/python benchmarks/paper_scale.py [--docs 3000] [--profile paper] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from finhallu.config import load_config  # noqa: E402
from finhallu.estimate import dry_run  # noqa: E402

DEMO = ROOT / "src" / "finhallu" / "demo" / "aihub"


def write_corpus(out: Path, n_docs: int) -> int:
    """N AI-Hub documents in the original JSON layout, copies of the demo's; returns the count written."""
    parts = [json.loads(p.read_text("utf-8")) for p in sorted(DEMO.glob("TL_*.json"))]
    docs = [d for part in parts for d in part["data"]]
    out.mkdir(parents=True, exist_ok=True)
    written, copy = 0, 0
    while written < n_docs:
        batch = []
        for doc in docs[: n_docs - written]:
            d = json.loads(json.dumps(doc))
            d["doc_id"] = f"{doc['doc_id']}-c{copy}"
            for p in d["paragraphs"]:
                p["context_id"] = f"{p['context_id']}-c{copy}"
                if copy:  # its own text, appended so that answer offsets hold
                    p["context"] = p["context"] + f"\n(사본 {copy}: {d['doc_id']})"
                for qa in p.get("qas", []):
                    qa["question_id"] = f"{qa.get('question_id', 'q')}-c{copy}"
            batch.append(d)
        (out / f"TL_scale_{copy:04d}.json").write_text(
            json.dumps({"Dataset": parts[0]["Dataset"], "data": batch}, ensure_ascii=False), "utf-8"
        )
        written += len(batch)
        copy += 1
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--keep", type=Path, help="write the corpus here (default: a temporary folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="finhallu-scale-") as tmp:
        corpus = args.keep or Path(tmp) / "aihub"
        n = write_corpus(corpus, args.docs)
        demo = yaml.safe_load((ROOT / "src" / "finhallu" / "profiles" / "demo.yaml").read_text("utf-8"))
        aihub = next(s for s in demo["ingest"]["sources"] if s["kind"] == "aihub")
        cfg = load_config(args.profile, {"ingest": {"sources": [{**aihub, "paths": [str(corpus)]}]}})
        started = time.perf_counter()
        est = dry_run(
            cfg,
            progress=lambda stage: print(
                f"  dry run: {stage} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True
            ),
        )
        print(f"== {args.profile} profile, {n} AI-Hub documents: dry run in {time.perf_counter() - started:.0f} s")
        print(est.table())
        print(f"total calls {est.calls:,}  (target <= 150,000: {'ok' if est.calls <= 150_000 else 'OVER'})")


if __name__ == "__main__":
    main()
