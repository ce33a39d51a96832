"""Seed alignment over the shared fixtures: does a generated seed's question name the period and
the line item (table row) its answer is stated for?

Builds the benchmark up to `seed_qa` from examples/shared-fixtures.yaml into a temporary home (or
reads the tables of a home folder given as the argument) and counts, over the SEC 10-K and DART
seeds:

  period mismatch  the question names a period (a year, or 제N기/반기 resolved to one) and the answer
                   is stated for another: for a table row, the period of the answer's column; for a
                   sentence, the years the sentence names
  period unchecked a table answer whose column names no period ("3개월", a spanned sub-header) or a
                   sentence that names no year: its period is the filing's own, or unknown
  row mismatch     a table answer whose row label the question does not name (its content words
                   are not all in the question)

The check reads only the seed rows, their passages and the documents (the column of a table
answer from tables.table_cells, periods from values.period_in), not the seed stage's own checks.

    .venv/bin/python benchmarks/seed_alignment.py [HOME] [--show N]
"""

from __future__ import annotations

import argparse
import glob
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import polars as pl

from finhallu.stages.seed_qa.common import document_contexts
from finhallu.stages.seed_qa.tables import _PERIOD_LABEL, clean_label, split_row, table_cells
from finhallu.stages.seed_qa.values import DocPeriods, period_in
from finhallu.text.normalize import contains_normalized
from finhallu.text.words import content_words

ROOT = Path(__file__).resolve().parents[1]
_YEAR = re.compile(r"(?:(?<![\d,.$])|(?<=[A-Za-z]\s\d,)|(?<=[A-Za-z]\s\d\d,))((?:19|20)\d{2})(?!\d|,\d)")
_TERM = re.compile(r"제\s?(\d{1,3})\s?기")


def build(home: Path) -> None:
    cmd = [
        str(ROOT / ".venv/bin/finhallu"),
        "stage",
        "seed_qa",
        "--profile",
        str(ROOT / "examples/shared-fixtures.yaml"),
        "--home",
        str(home),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def latest(home: Path, table: str) -> pl.DataFrame:
    versions = sorted(glob.glob(str(home / "tables" / table / "version=*")), key=lambda p: int(p.rsplit("=", 1)[1]))
    return pl.read_parquet(glob.glob(f"{versions[-1]}/*.parquet"))


def stated_years(text: str, doc: DocPeriods) -> set[int]:
    """Years a sentence or header names: 4-digit years and 제N기 terms (resolved by the filing's term)."""
    years = {int(y) for y in _YEAR.findall(text)}
    for m in _TERM.finditer(text):
        p = doc.term_period(int(m.group(1)))
        if p:
            years.add(p.year)
    return years


def answer_periods(s: dict, text: str, doc: DocPeriods) -> tuple[set, bool]:
    """(the periods / years the answer is stated for, whether the seed could be checked)."""
    if s["clue_text"].startswith("|"):
        cells = [c for c in table_cells(text, doc, s["lang"]) if c.line_start == s["clue_start"] and c.amount.raw == s["answer"]]
        periods = {c.period for c in cells if c.period}
        return periods, bool(periods)
    years = stated_years(s["clue_text"], doc)
    return years, bool(years)


def period_mismatch(s: dict, text: str, doc: DocPeriods) -> bool | None:
    """True / False, or None when the seed cannot be checked (no period in question or evidence)."""
    stated, checked = answer_periods(s, text, doc)
    if not checked:
        return None
    if s["clue_text"].startswith("|"):
        asked = period_in(s["question"], doc, s["lang"])
        if asked is None:  # the question names several years (one in its line item): one must be the column's
            asked_years = stated_years(s["question"], doc)
            return not asked_years & {p.year for p in stated} if asked_years else None
        return asked not in stated
    asked_years = stated_years(s["question"], doc)
    return bool(asked_years) and not asked_years <= stated


def row_mismatch(s: dict) -> bool | None:
    if not s["clue_text"].startswith("|"):
        return None
    label = clean_label(split_row(s["clue_text"])[0])
    if not label or _PERIOD_LABEL.fullmatch(label):
        return None  # a transposed table: the column names the metric
    if contains_normalized(s["question"], label):
        return False
    return not set(content_words(label)) <= set(content_words(s["question"]))


def measure(home: Path, show: int) -> Counter:
    seeds = latest(home, "qa_seeds").filter(pl.col("method") != "aihub_given")
    passages = latest(home, "passages")
    documents = latest(home, "documents")
    texts = dict(zip(passages["passage_id"], passages["text"]))
    docs = {d.doc_id: d for d in document_contexts(documents, passages, None, {"sec10k", "dart"})}
    n: Counter = Counter()
    shown = 0
    for s in seeds.iter_rows(named=True):
        doc = docs[s["doc_id"]].periods
        kind = "table" if s["clue_text"].startswith("|") else "sentence"
        n["seeds"] += 1
        n[f"seeds_{kind}"] += 1
        pm, rm = period_mismatch(s, texts[s["passage_id"]], doc), row_mismatch(s)
        n["period_checked"] += pm is not None
        n[f"period_unchecked_{kind}"] += pm is None
        n["period_mismatch"] += bool(pm)
        n[f"period_mismatch_{kind}"] += bool(pm)
        n["row_checked"] += rm is not None
        n["row_mismatch"] += bool(rm)
        if (pm or rm) and shown < show:
            shown += 1
            print(
                f"  [{'period' if pm else ''}{' row' if rm else ''}] {s['doc_id']}\n    Q: {s['question']}\n"
                f"    A: {s['answer']}\n    C: {s['clue_text'][:300]}"
            )
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("home", nargs="?", help="a home folder built up to seed_qa (default: build one)")
    ap.add_argument("--show", type=int, default=0, help="print up to N mismatched seeds")
    args = ap.parse_args()
    if args.home:
        n = measure(Path(args.home), args.show)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp))
            n = measure(Path(tmp), args.show)
    print(f"generated seeds: {n['seeds']} ({n['seeds_table']} table rows, {n['seeds_sentence']} sentences)")
    print(
        f"period mismatch: {n['period_mismatch']} of {n['period_checked']} checkable "
        f"(table {n['period_mismatch_table']}, sentence {n['period_mismatch_sentence']})"
    )
    print(
        f"period unchecked (a table answer's column names no period / a sentence no year): "
        f"table {n['period_unchecked_table']}, sentence {n['period_unchecked_sentence']}"
    )
    print(f"row mismatch:    {n['row_mismatch']} of {n['row_checked']} table seeds")
    if args.home:
        stats = latest(Path(args.home), "seed_qa_stats").filter(pl.col("metric").str.contains("mismatch|xbrl"))
        for r in stats.iter_rows(named=True):
            print(f"  stats {r['source']}/{r['method']} {r['metric']} = {r['value']:g}")


if __name__ == "__main__":
    sys.exit(main())
