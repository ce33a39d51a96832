"""Hand audit of labels: a seeded random draw of pairs as a review sheet, and the score of a reviewer's
verdicts (accuracy with a Wilson 95 % interval, per type).

    .venv/bin/python benchmarks/hand_audit.py sheet HOME --pairs 30 --seed 7 [--source sec10k --source dart] > sheet.md
    .venv/bin/python benchmarks/hand_audit.py score VERDICTS.csv [MORE.csv ...]

A sheet shows each pair as a reviewer needs it: the question (and the standalone question), the
last history turns, the evidence (the gold passage cut around the clue; for False Acceptance the
hard negatives the assistant saw), the gold answer, and both responses with their labels. The
reviewer writes one row per pair: `pair_id,type,source,verdict,note` with verdict `ok` (both labels
hold) or `wrong` (either side is mislabelled), and `score` prints the share of pairs whose labels
hold. Audits done so far are in benchmarks/audits/ (a `#` line names the build).
Aim (label integrity issue): >= 97 % on every build that is released.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from collections import Counter
from pathlib import Path

import duckdb


def _cut(text: str, around: str | None, width: int = 700) -> str:
    if around:
        at = text.find(around[:40])
        if at >= 0:
            start = max(0, at - width // 3)
            return ("…" if start else "") + text[start : start + width] + ("…" if start + width < len(text) else "")
    return text[:width] + ("…" if len(text) > width else "")


def sheet(home: Path, pairs: int, seed: int, sources: list[str] | None = None) -> str:
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute("""
            SELECT s.pair_id, s.label_binary, s.label_4class, s.hallu_type, s.hallu_subtype, s.source, s.lang, s.turn_index,
                   s.query, s.standalone_query, s.history, s.passages, s.response, t.clue_text, t.answer
            FROM samples s JOIN injections i ON i.injection_id = s.pair_id JOIN turns t ON t.turn_id = i.turn_id
            ORDER BY s.pair_id, s.label_binary""").fetchall()
        build = con.execute("SELECT max(build_id) FROM builds WHERE status = 'succeeded'").fetchone()[0]
    finally:
        con.close()
    by_pair: dict[str, list] = {}
    for r in rows:
        if not sources or r[5] in sources:
            by_pair.setdefault(r[0], []).append(r)
    chosen = random.Random(seed).sample(sorted(by_pair), min(pairs, len(by_pair)))
    out = [f"# Label audit sheet: {home} (build {build}), {len(chosen)} of {len(by_pair)} pairs, seed {seed}\n"]
    for n, pid in enumerate(chosen, 1):
        sides = {r[1]: r for r in by_pair[pid]}
        h = sides["hallucinated"]
        _, _, _, htype, sub, source, lang, turn, query, standalone, history, passages, _, clue, answer = h
        out.append(f"## {n}. {pid}: {htype}{'/' + sub if sub else ''} ({source}, {lang}, turn {turn})\n")
        for m in (history or [])[-4:]:
            out.append(f"- history {m['role']}: {m['content'][:300]}")
        out.append(f"- question: {query}" + (f"  (standalone: {standalone})" if standalone != query else ""))
        out.append(f"- gold answer: {answer!r}; clue: {(clue or '')[:200]!r}")
        shown = [p for p in passages if p["role"] == "gold"] or [p for p in passages if p["role"] == "hard_negative"][:3]
        for p in shown:
            out.append(f"- evidence [{p['role']}]: {_cut(p['text'], clue)}")
        for side in ("faithful", "hallucinated"):
            r = sides[side]
            out.append(f"- **{side}** ({r[2]}): {r[12]}")
        out.append("")
    return "\n".join(out)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if not n:
        return 0.0, 0.0
    p = k / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _verdicts(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:  # lines starting with # say which build was audited
        return [r for r in csv.DictReader(ln for ln in f if not ln.startswith("#")) if r.get("pair_id")]


def score(paths: list[Path]) -> None:
    rows = [r for p in paths for r in _verdicts(p)]
    path = ", ".join(str(p) for p in paths)
    bad = [r for r in rows if r["verdict"].strip() not in ("ok", "wrong")]
    if bad:
        raise SystemExit(f"{path}: verdict must be ok or wrong (pair {bad[0]['pair_id']}: {bad[0]['verdict']!r})")
    ok = sum(r["verdict"].strip() == "ok" for r in rows)
    lo, hi = wilson(ok, len(rows))
    print(f"{path}: {ok}/{len(rows)} pairs with both labels right = {ok / max(1, len(rows)):.1%} (Wilson 95 % {lo:.1%}-{hi:.1%})")
    per = Counter((r.get("type") or "?", r["verdict"].strip()) for r in rows)
    for t in sorted({t for t, _ in per}):
        print(f"  {t:<40} ok {per[(t, 'ok')]:>3}  wrong {per[(t, 'wrong')]:>3}")
    for r in rows:
        if r["verdict"].strip() == "wrong":
            print(f"  wrong: {r['pair_id']} {r.get('type', '')}: {r.get('note', '')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sheet")
    s.add_argument("home", type=Path)
    s.add_argument("--pairs", type=int, default=30)
    s.add_argument("--seed", type=int, default=7)
    s.add_argument("--source", action="append", help="only pairs of this source (repeatable)")
    c = sub.add_parser("score")
    c.add_argument("verdicts", type=Path, nargs="+", help="one or more verdict CSVs (scored together)")
    args = ap.parse_args()
    if args.cmd == "sheet":
        print(sheet(args.home, args.pairs, args.seed, args.source))
    else:
        score(args.verdicts)


if __name__ == "__main__":
    main()
