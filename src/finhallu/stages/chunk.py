"""chunk: documents -> passages, structure-aware.

Each block stays in its section; short neighbouring text blocks of one section are packed
together (a lone heading joins the paragraph after it); long text splits at sentence
boundaries; tables stay whole with their header, or split by row groups repeating it.
"""

from __future__ import annotations

import hashlib
from typing import Callable


from finhallu.schemas.rows import Block, DocumentsRow, PassagesRow
from finhallu.stages.base import Frames, Stage, StageContext, rows_frame, typed_rows
from finhallu.sources.tables import parse_markdown_table
from finhallu.text import sentences
from finhallu.text.tokenize import TOKENIZERS
from pydantic import Field
from finhallu.schemas.section import Section


class ChunkConfig(Section):
    max_tokens: int = Field(1000, ge=16)  # a chunk holds at least a sentence's worth of tokens
    # approx (offline XLM-R estimate) | kure (KURE-v1's tokenizer.json from $FINHALLU_KURE_PATH or the
    # local HF cache) | hf:<path> (any local tokenizer.json or folder holding one). See text/tokenize.py.
    tokenizer: str = Field(default="approx", pattern=r"^(approx|kure|hf:.+)$")


PACK_FRACTION = 0.4  # pack small blocks up to this share of max_tokens


def _split_text(text: str, max_tokens: int, count, lang: str) -> list[tuple[int, str]]:
    """(char offset, piece) pieces under max_tokens, cut at sentence boundaries."""
    if count(text) <= max_tokens:
        return [(0, text)]
    pieces, cur, cur_start, pos = [], "", 0, 0
    for sent in sentences.split(text, lang):
        at = text.find(sent, pos)
        if at < 0:  # the splitter normalized whitespace: fall back to the running position
            at = pos
        pos = at + len(sent)
        if cur and count(cur + " " + sent) > max_tokens:
            pieces.append((cur_start, cur))
            cur = ""
        if not cur:
            cur, cur_start = sent, at
        else:
            cur = text[cur_start:pos]
    if cur:
        pieces.append((cur_start, cur))
    return pieces


def _split_table(text: str, max_tokens: int, count, lang: str) -> list[tuple[int, str]]:
    if count(text) <= max_tokens:
        return [(0, text)]
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.startswith("|")), 0)
    caption, header = lines[:first], lines[first : first + 2]
    body = lines[first + 2 :]
    head = "\n".join(caption + header)
    out: list[tuple[int, str]] = []
    group: list[str] = []
    for row in body:
        if group and count(head + "\n" + "\n".join(group + [row])) > max_tokens:
            out.append((0, head + "\n" + "\n".join(group)))
            group = []
        group.append(row)
    if group:
        out.append((0, head + "\n" + "\n".join(group)))
    return out


def _packed_blocks(blocks: list[Block], budget: int, count: Callable[[str], int]) -> list[Block]:
    """Merge consecutive short text blocks of one section (and headings into what follows)."""
    out: list[Block] = []
    for b in blocks:
        prev = out[-1] if out else None
        if prev is not None and _mergeable(prev, b, budget, count):
            prev["text"] = prev["text"] + "\n" + b["text"]
        else:
            out.append(b.copy())
    return out


def _mergeable(prev: Block, b: Block, budget: int, count: Callable[[str], int]) -> bool:
    """Both text of one section and role, and short enough together (or `prev` a heading)."""
    return (
        prev["kind"] == "text"
        and b["kind"] == "text"
        and prev["section_path"] == b["section_path"]
        and prev.get("role") == b.get("role")
        and (count(prev["text"]) + count(b["text"]) <= budget or _is_heading(prev["text"]))
    )


def _is_heading(text: str) -> bool:
    return len(text) < 80 and "\n" not in text and not text.rstrip().endswith((".", "다", "요", ":"))


def run(inputs: Frames, ctx: StageContext[ChunkConfig]) -> Frames:
    cfg: ChunkConfig = ctx.config
    tok_name, count = TOKENIZERS[cfg.tokenizer]
    rows: list[PassagesRow] = []
    docs = inputs["documents"]
    for n, doc in enumerate(typed_rows(docs, DocumentsRow)):
        blocks = doc["blocks"]
        # AI-Hub paragraphs carry QA offsets: never merge them; structured filings pack small blocks.
        if doc["source"] != "aihub":
            blocks = _packed_blocks(blocks, int(cfg.max_tokens * PACK_FRACTION), count)
        for b in blocks:
            if not b["text"].strip():
                continue  # an empty section (kept in documents.blocks) has nothing to retrieve
            splitter = _split_table if b["kind"] == "table" and parse_markdown_table(b["text"])[0] else _split_text
            pieces = splitter(b["text"], cfg.max_tokens, count, doc["lang"])
            for i, (start, text) in enumerate(pieces):
                pid = hashlib.sha256(f"{doc['doc_id']}|{b['block_id']}|{i}|{text}".encode()).hexdigest()[:20]
                rows.append(
                    {
                        "passage_id": f"p-{pid}",
                        "doc_id": doc["doc_id"],
                        "block_id": b["block_id"],
                        "source": doc["source"],
                        "institution": doc["institution"],
                        "lang": doc["lang"],
                        "split": doc["split"],
                        "doc_type": doc["doc_type"],
                        "title": doc["title"],
                        "section_path": b["section_path"],
                        "section_role": b.get("role"),
                        "kind": b["kind"],
                        "chunk_index": i,
                        "chunk_total": len(pieces),
                        "char_start": start,
                        "text": text,
                        "token_count": count(text),
                        "tokenizer": tok_name,
                    }
                )
        ctx.progress(n + 1, docs.height)
    return {"passages": rows_frame(rows, ["doc_id", "block_id", "chunk_index"])}


STAGE = Stage("chunk", run, ChunkConfig, inputs=("documents",), outputs=("passages",), description="structure-aware passages")
