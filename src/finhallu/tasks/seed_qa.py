"""seed_qa: passages (+ shipped QA triplets) -> `qa_seeds`, `triplets`.

AI-Hub: the (question, answer, clue) triplets as given, re-anchored in their passage.
SEC/DART (rules backend): table cells become (row, column, value) triplets and a question
per sampled triplet that names the company and the period; the clue is the table row.
LLM-based triplet extraction and multi-LLM QA for filings extend this stage later.
"""

from __future__ import annotations

import re

import polars as pl

from finhallu.config import SeedQAConfig
from finhallu.tasks.base import Frames, StageContext, rows_frame, stable_id
from finhallu.tasks.sources.tables import parse_markdown_table
from finhallu.tasks.textnorm import find_numbers, particle, split_sentences


def _line_containing(text: str, start: int, length: int) -> tuple[int, str]:
    """The sentence (or line) of text that contains [start, start+length)."""
    pos = 0
    for sent in split_sentences(text):
        at = text.find(sent, pos)
        pos = at + len(sent)
        if at <= start and start + length <= at + len(sent):
            return at, sent
    return start, text[start:start + length]


def _aihub_seeds(qas: pl.DataFrame, passages: pl.DataFrame) -> list[dict]:
    by_block: dict[str, list[dict]] = {}
    for p in passages.filter(pl.col("source") == "aihub").iter_rows(named=True):
        by_block.setdefault(p["block_id"], []).append(p)
    seeds = []
    for qa in qas.iter_rows(named=True):
        parts = by_block.get(qa["block_id"])
        if not parts:
            continue
        if qa["is_impossible"]:
            p = parts[0]
            seeds.append(_seed(p, qa, None, None, None, answerable=False))
            continue
        anchor = qa["clue_start"] if qa["clue_start"] is not None else qa["answer_start"]
        if anchor is None:
            continue  # flagged at ingest: neither clue nor answer located in the context
        p = next((x for x in parts if x["char_start"] <= anchor < x["char_start"] + len(x["text"])), None)
        if p is None:
            continue
        text, off = p["text"], p["char_start"]
        if qa["clue_text"] and qa["clue_start"] is not None:
            clue, clue_start = qa["clue_text"], qa["clue_start"] - off
        else:  # the 행정문서 set ships no clue for spans: the answer's sentence is its evidence
            clue_start, clue = _line_containing(text, qa["answer_start"] - off, len(qa["answer"] or ""))
        if text[clue_start:clue_start + len(clue)] != clue:
            continue  # clue crosses a chunk boundary
        answer = qa["answer"]
        answer_start = None
        if qa["qa_kind"] not in ("yesno", "entailment") and answer:
            k = clue.find(answer)
            answer_start = clue_start + k if k >= 0 else (qa["answer_start"] - off if qa["answer_start"] is not None else None)
        seeds.append(_seed(p, qa, clue, clue_start, answer_start, answerable=True))
    return seeds


def _seed(p: dict, qa: dict, clue, clue_start, answer_start, answerable: bool) -> dict:
    kind = "yesno" if qa["qa_kind"] == "entailment" else qa["qa_kind"]
    answer = qa["answer"] or ""
    if kind == "yesno":
        answer = {"yes": "예", "no": "아니오"}.get(answer.strip().lower(), answer)
    return {
        "seed_id": f"s-{stable_id('aihub', qa['qa_id'])}", "passage_id": p["passage_id"], "doc_id": p["doc_id"],
        "source": p["source"], "institution": p["institution"], "lang": p["lang"], "split": p["split"],
        "question": qa["question"], "answer": answer, "clue_text": clue, "clue_start": clue_start,
        "answer_start": answer_start, "qa_kind": kind, "answerable": answerable, "method": "aihub_given",
        "origin_id": qa["qa_id"],
    }


def _company_period(p: dict) -> tuple[str, str]:
    title = p["title"]
    m = re.search(r"FY(\d{4})", title)
    return p["institution"], (m.group(1) if m else "")


def _table_seeds(p: dict, cfg: SeedQAConfig, ctx: StageContext) -> tuple[list[dict], list[dict]]:
    header, body = parse_markdown_table(p["text"])
    if len(header) < 2 or len(body) < cfg.min_table_rows:
        return [], []
    company, year = _company_period(p)
    triplets, seeds = [], []
    table_lines = [ln for ln in p["text"].splitlines() if ln.startswith("|")]
    body_lines = table_lines[2:] if len(table_lines) >= 2 and set(table_lines[1].replace("|", "").split()) <= {"---"} else table_lines[1:]
    for i, row in enumerate(body):
        label = row[0].strip()
        if not label or find_numbers(label) and len(label) < 6:
            continue
        row_line = body_lines[i] if i < len(body_lines) else None  # this row's own line, never a look-alike
        for j, cell in enumerate(row[1:], start=1):
            if j >= len(header) or not header[j] or not find_numbers(cell) or cell in ("-", "—"):
                continue
            tid = f"t-{stable_id(p['passage_id'], label, header[j], cell)}"
            triplets.append({"triplet_id": tid, "passage_id": p["passage_id"], "head": label,
                             "relation": header[j], "tail": cell, "origin": "table_rule"})
            if row_line and cell in row_line:
                triplets[-1]["_row_line"] = row_line
    rng = ctx.rng("table", p["passage_id"])
    picked = [t for t in triplets if "_row_line" in t]
    rng.shuffle(picked)
    seen_q = set()
    for t in picked[: cfg.max_table_questions_per_passage]:
        if p["lang"] == "ko":
            q = f"{company}의 {p['doc_type']}에 따르면 {t['relation']} 기준 {t['head']}{particle(t['head'], '은/는')} 얼마인가요?"
        else:
            period = f" for fiscal {year}" if year else ""
            q = f"According to {company}'s Form 10-K{period}, what was {t['head']} ({t['relation']})?"
        if q in seen_q:
            continue
        seen_q.add(q)
        clue = t["_row_line"]
        clue_start = p["text"].find(clue)
        seeds.append({
            "seed_id": f"s-{stable_id('table', t['triplet_id'])}", "passage_id": p["passage_id"], "doc_id": p["doc_id"],
            "source": p["source"], "institution": p["institution"], "lang": p["lang"], "split": p["split"],
            "question": q, "answer": t["tail"],
            "clue_text": clue, "clue_start": clue_start, "answer_start": clue_start + clue.find(t["tail"]),
            "qa_kind": "table", "answerable": True, "method": "table_rule", "origin_id": t["triplet_id"],
        })
    for t in triplets:
        t.pop("_row_line", None)
    return seeds, triplets


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: SeedQAConfig = ctx.config
    passages = inputs["passages"]
    seeds = _aihub_seeds(inputs["source_qas"], passages)
    triplets: list[dict] = []
    filings = passages.filter((pl.col("source") != "aihub") & (pl.col("kind") == "table"))
    for n, p in enumerate(filings.iter_rows(named=True)):
        s, t = _table_seeds(p, cfg, ctx)
        seeds += s
        triplets += t
        ctx.progress(n + 1, filings.height)
    first = {}
    for s in seeds:
        first.setdefault(s["seed_id"], s)
    seeds_df = rows_frame(list(first.values()), "seed_id")
    from finhallu.schemas.contracts import CONTRACTS

    trip_df = (pl.DataFrame(triplets).unique("triplet_id", keep="first").sort("triplet_id") if triplets
               else pl.DataFrame(schema=CONTRACTS["triplets"].schema))
    return {"qa_seeds": seeds_df, "triplets": trip_df}
