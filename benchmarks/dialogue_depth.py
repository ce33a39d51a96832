"""Dialogue depth and the hallucination distribution of a built benchmark.

    .venv/bin/python benchmarks/dialogue_depth.py HOME
    .venv/bin/python benchmarks/dialogue_depth.py HOME --build demo [--scale 4]

--build PROFILE builds that profile into HOME first (offline, as `make demo`); --scale K multiplies
its dialogues per document and per filing by K. Printed (turn indices are 1-based, as in `samples`):

- mean sample turn (all samples) and, per type, the share of hallucinated samples at turn >= 2;
- follow-ups (user turns after the first, reconfirms apart): shares with a stock connector
  (그럼/그러면/추가로/그리고/참/And/Also/What about) pasted before the whole standalone question
  (>= 80 % of its content words kept), using coreference (그건/이건/그거/그 …/해당/거기/it/its/that/…
  absent from the standalone question), elided (fewer words than the standalone question, no
  pasted connector) and not rewritten (query == standalone question);
- repeated facts: follow-ups whose answer (>= 2 characters, not a yes/no) is already stated in an
  earlier assistant response of the same dialogue;
- language switches: turns whose query or response is written in another script than the
  dialogue's language (Hangul for ko, Latin for en), or whose gold passage's document is in
  another language;
- reconfirm turns; type shares of hallucinated samples; the unanswerable share of all samples.
Targets (issue 14): mean turn >= 3.5, every type >= 50 % at turn >= 2, repeats <= 5 %, 0 switches.
"""

from __future__ import annotations

import argparse
import glob
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from finhallu.config import load_config  # noqa: E402
from finhallu.text.normalize import contains_normalized  # noqa: E402
from finhallu.text.words import content_words  # noqa: E402

STOCK = ("그럼", "그러면", "추가로", "그리고", "참,", "and ", "also,", "what about")
COREF = re.compile(
    r"(^|\s)(그건|이건|그거|이거|그게|이게|그걸|그것|이것|그 |이 |해당|거기|그때|그 중|그중)"
    r"|\b(it|that|those|this|they|them|its|their|the same)\b",
    re.I,
)
YESNO = {"예", "네", "아니오", "아니요", "yes", "no"}


def table(home: Path, name: str) -> pl.DataFrame:
    files = sorted(
        glob.glob(str(home / "tables" / name / "version=*" / "*.parquet")),
        key=lambda f: int(re.search(r"version=(\d+)", f).group(1)),
    )
    if not files:
        raise SystemExit(f"{home}: no published {name} table")
    latest = re.search(r"version=\d+", files[-1]).group(0)
    return pl.concat([pl.read_parquet(f) for f in files if latest in f])


def script(text: str) -> str | None:
    hangul = len(re.findall(r"[가-힣]", text or ""))
    latin = len(re.findall(r"[A-Za-z]", text or ""))
    if hangul + latin < 8:
        return None
    return "ko" if hangul >= latin * 0.5 else "en"


def pasted_connector(q: str, s: str) -> bool:
    """A stock connector pasted before the whole standalone question (nothing elided or referred)."""
    head = next((c for c in STOCK if q.lower().startswith(c)), None)
    if head is None:
        return False
    want = set(content_words(s))
    return len(want & set(content_words(q[len(head) :]))) >= 0.8 * len(want)


def follow_up_kind(query: str, standalone: str) -> dict[str, bool]:
    q, s = query.strip(), standalone.strip()
    return {
        "stock": pasted_connector(q, s),
        "coreference": bool(COREF.search(q)) and not COREF.search(s),
        "ellipsis": len(q.split()) < len(s.split()) and not pasted_connector(q, s),
        "not_rewritten": q == s,
    }


def repeats(turn: dict, earlier: list[dict]) -> bool:
    ans = (turn["answer"] or "").strip()
    if turn["kind"] != "question" or not turn["answerable"] or len(ans) < 2 or ans.lower() in YESNO:
        return False
    return any(contains_normalized(e["response"], ans) for e in earlier)


def turn_metrics(turns: pl.DataFrame, dialogues: pl.DataFrame, doc_lang: dict) -> dict:
    lang = dict(zip(dialogues["dialogue_id"], dialogues["lang"]))
    c, switches = Counter(), []
    for did, part in turns.sort("dialogue_id", "turn_index").group_by("dialogue_id", maintain_order=True):
        rows = list(part.iter_rows(named=True))
        for i, t in enumerate(rows):
            dl = lang.get(did[0])
            bad = {script(t["query"]), script(t["response"]), doc_lang.get(t["gold_passage_id"])} - {None, dl}
            if bad:
                switches.append((did[0], t["turn_index"], t["query"][:60]))
            c["reconfirm"] += t["kind"] == "reconfirm"
            if i == 0 or t["kind"] != "question":
                continue
            c["follow_ups"] += 1
            c.update(k for k, v in follow_up_kind(t["query"], t["standalone_query"]).items() if v)
            c["repeat"] += repeats(t, rows[:i])
    return {"counts": c, "switches": switches}


def sample_metrics(samples: pl.DataFrame) -> dict:
    hal = samples.filter(pl.col("label_binary") == "hallucinated")
    per_type = (
        hal.group_by("hallu_type")
        .agg(n=pl.len(), late=(pl.col("turn_index") >= 2).mean(), mean_turn=pl.col("turn_index").mean())
        .sort("hallu_type")
    )
    return {
        "n": samples.height,
        "mean_turn": samples["turn_index"].mean(),
        "turn1": (samples["turn_index"] == 1).mean(),
        "per_type": per_type,
        "n_hal": hal.height,
        "unanswerable": (~samples["answerable"]).mean(),
    }


def report(home: Path) -> dict:
    samples, turns, dialogues = table(home, "samples"), table(home, "turns"), table(home, "dialogues")
    docs, passages = table(home, "documents"), table(home, "passages")
    doc_lang = dict(zip(docs["doc_id"], docs["lang"]))
    p_lang = {p: doc_lang.get(d) for p, d in zip(passages["passage_id"], passages["doc_id"])}
    s, t = sample_metrics(samples), turn_metrics(turns, dialogues, p_lang)
    c, fu = t["counts"], max(t["counts"]["follow_ups"], 1)
    print(f"== {home}: {dialogues.height} dialogues, {turns.height} turns, {s['n']} samples")
    print(f"mean sample turn (1-based): {s['mean_turn']:.2f}   share at turn 1: {s['turn1']:.1%}")
    print(f"{'type':<18}{'n':>5}{'share':>8}{'turn>=2':>9}{'mean turn':>11}")
    for r in s["per_type"].iter_rows(named=True):
        print(f"{r['hallu_type']:<18}{r['n']:>5}{r['n'] / max(s['n_hal'], 1):>8.1%}{r['late']:>9.1%}{r['mean_turn']:>11.2f}")
    print(f"unanswerable share of samples: {s['unanswerable']:.1%}")
    print(
        f"follow-ups: {c['follow_ups']}  stock connector {c['stock'] / fu:.1%}  coreference {c['coreference'] / fu:.1%}"
        f"  ellipsis {c['ellipsis'] / fu:.1%}  not rewritten {c['not_rewritten'] / fu:.1%}"
    )
    print(f"follow-ups repeating an answered fact: {c['repeat']} ({c['repeat'] / fu:.1%})")
    print(f"language switches: {len(t['switches'])}   reconfirm turns: {c['reconfirm']}")
    for sw in t["switches"][:5]:
        print("  switch:", sw)
    return {"mean_turn": s["mean_turn"], "repeat_share": c["repeat"] / fu, "switches": len(t["switches"])}


def build(home: Path, profile: str, scale: int) -> None:
    cfg = load_config(profile).dialogues
    sets = (
        []
        if scale == 1
        else [
            "--set",
            f"dialogues.dialogues_per_document={cfg.dialogues_per_document * scale}",
            "--set",
            f"dialogues.dialogues_per_filing={cfg.dialogues_per_filing * scale}",
        ]
    )
    subprocess.run(
        [str(ROOT / ".venv" / "bin" / "finhallu"), "build", "--profile", profile, "--home", str(home), *sets],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def home_cli(description: str, report_fn) -> None:
    """`SCRIPT HOME [--build PROFILE [--scale K]]`: build first when asked, then report on HOME."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("home", type=Path)
    ap.add_argument("--build", metavar="PROFILE", help="build this profile into HOME first")
    ap.add_argument("--scale", type=int, default=1, help="with --build: K x dialogues per document and filing")
    args = ap.parse_args()
    if args.build:
        build(args.home, args.build, args.scale)
    report_fn(args.home)


if __name__ == "__main__":
    home_cli(__doc__.splitlines()[0], report)
