"""Exports of a samples version: JSONL per split (DESIGN columns) and an SFT chat file per split."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import polars as pl

from finhallu.warehouse.store import TableRef

SFT_SYSTEM = {
    "ko": "당신은 금융 RAG 응답의 환각을 판정합니다. 검색 문서와 대화 기록만 근거로, 응답이 faithful인지 hallucinated인지 답하세요.",
    "en": "You judge hallucinations in financial RAG answers. Using only the passages and the dialogue history, "
          "answer whether the response is faithful or hallucinated.",
}


def sft_record(s: dict) -> dict:
    passages = "\n\n".join(f"[{i + 1}] {p['text']}" for i, p in enumerate(s["passages"]))
    history = "\n".join(f"{m['role']}: {m['content']}" for m in s["history"])
    user = f"# Passages\n{passages}\n\n# History\n{history}\n\n# Query\n{s['query']}\n\n# Response\n{s['response']}"
    label = s["label_binary"] + (f" ({s['hallu_type']}/{s['hallu_subtype']})" if s["hallu_type"] else "")
    return {"sample_id": s["sample_id"], "messages": [{"role": "system", "content": SFT_SYSTEM.get(s["lang"], SFT_SYSTEM["en"])},
                                                     {"role": "user", "content": user},
                                                     {"role": "assistant", "content": label}]}


def export_files(home: Path, samples_ref: TableRef) -> Path:
    """Write exports/samples@v<n>/ once per samples version (atomic: temp dir, then rename)."""
    final = Path(home) / "exports" / f"samples@v{samples_ref.version}"
    if final.exists():
        return final
    df = pl.read_parquet(Path(samples_ref.path) / "part-0.parquet")
    tmp = final.parent / f".tmp-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    for split in sorted(df["split"].unique().to_list()):
        rows = df.filter(pl.col("split") == split).sort("sample_id").to_dicts()
        with open(tmp / f"{split}.jsonl", "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        with open(tmp / f"{split}.sft.jsonl", "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(sft_record(r), ensure_ascii=False) + "\n")
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
