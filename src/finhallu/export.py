"""Exports of a samples version, in a Hugging Face datasets layout:

    exports/samples@v<n>/
      README.md                         dataset card; its YAML `configs` map splits to files, so
                                        `datasets.load_dataset(<folder>)` reads it (`labels`, `sft` configs)
      data/<split>-00000-of-00001.parquet   what a detector may see (INPUT_COLUMNS): the context
                                        passages without their roles, history, query, response
      labels/<split>-00000-of-00001.parquet the labels and provenance (LABEL_COLUMNS), by sample_id
      jsonl/<split>.jsonl, jsonl/<split>.labels.jsonl   the same two as JSON lines
      sft/<split>.jsonl                 chat records for fine-tuning detectors: the assistant turn is
                                        a rationale (K-FinHallu App. E style: answerability, claims,
                                        verdict) in the sample's language, then the labels as JSON

Written once per samples version, atomically (temp dir, then rename); byte-identical on rerun.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import polars as pl

from finhallu.injectors import display_name, find_leaf
from finhallu.injectors.verify import word_diff
from finhallu.text.sentences import split_sentences
from finhallu.warehouse.store import TableRef, read_table

SFT_SYSTEM = {
    "ko": "당신은 금융 RAG 응답의 환각을 판정합니다. 검색 문서와 대화 기록만 근거로 1) 답변 가능성, 2) 응답의 주장, "
    "3) 판정을 차례로 설명한 뒤, 마지막 줄에 JSON으로 label_binary, label_4class, hallu_type, hallu_subtype을 답하세요.",
    "en": "You judge hallucinations in financial RAG answers. Using only the passages and the dialogue history, explain "
    "1) answerability, 2) the response's claims, 3) the verdict, then give label_binary, label_4class, hallu_type "
    "and hallu_subtype as JSON on the last line.",
}

# Rationale templates (App. E style), per language: answerability, claim check, verdict.
_ANSWERABLE = {
    "ko": "1) 답변 가능성: 검색 문서 [{k}]에 질문에 답할 근거가 있습니다.",
    "en": "1) Answerability: passage [{k}] holds the evidence to answer the question.",
}
_UNANSWERABLE = {
    "ko": "1) 답변 가능성: 검색 문서 어디에도 질문에 답할 근거가 없습니다.",
    "en": "1) Answerability: none of the passages holds the evidence to answer the question.",
}
# The faithful labels' claim lines; each hallucination leaf registers its own (injectors/).
_FAITHFUL_CLAIMS = {
    "ko": {
        "faithful_answer": "2) 주장: 응답의 내용은 문서 [{k}]와 일치하며 질문에 답합니다.",
        "true_refusal": "2) 주장: 응답은 근거가 없음을 밝히고 답변을 거절합니다.",
    },
    "en": {
        "faithful_answer": "2) Claims: the response agrees with passage [{k}] and answers the question.",
        "true_refusal": "2) Claims: the response says the evidence is missing and declines to answer.",
    },
}
_VERDICT = {"ko": "3) 판정: {verdict}", "en": "3) Verdict: {verdict}"}


def _short(text: str, limit: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rationale(s: dict, counterpart: str | None) -> str:
    """The three-step rationale of one sample, from its labels and the diff against its pair."""
    lang = s["lang"] if s["lang"] in _FAITHFUL_CLAIMS else "en"
    gold = next((i + 1 for i, p in enumerate(s["passages"]) if p["role"] == "gold"), 1)
    if s["hallu_type"]:
        leaf = find_leaf(s["hallu_type"], s["hallu_subtype"])
        assert leaf is not None, "a sample's type and subtype come from a registered injector"
        claim = leaf.rationale.get(lang, leaf.rationale["en"])
    else:
        claim = _FAITHFUL_CLAIMS[lang][s["label_4class"]]
    diff = word_diff(counterpart or "", s["response"]) if counterpart else []
    old, new = diff[0] if diff else ("", "")
    added = " ".join(x for x in split_sentences(s["response"]) if counterpart is None or x not in counterpart) or s["response"]
    lines = [
        (_ANSWERABLE if s["answerable"] else _UNANSWERABLE)[lang].format(k=gold),
        claim.format(k=gold, old=_short(old, 40), new=_short(new, 40), added=_short(added)),
    ]
    if s["hallu_type"]:
        name = display_name(s["hallu_type"], lang) + (
            f" / {display_name(s['hallu_subtype'], lang)}" if s["hallu_subtype"] else ""
        )
        verdict = f"hallucinated ({name})"
    else:
        verdict = f"faithful ({s['label_4class']})"
    lines.append(_VERDICT[lang].format(verdict=verdict))
    return "\n".join(lines)


def sft_record(s: dict, counterpart: str | None = None) -> dict:
    passages = "\n\n".join(f"[{i + 1}] {p['text']}" for i, p in enumerate(s["passages"]))
    history = "\n".join(f"{m['role']}: {m['content']}" for m in s["history"])
    user = f"# Passages\n{passages}\n\n# History\n{history}\n\n# Query\n{s['query']}\n\n# Response\n{s['response']}"
    labels = {k: s[k] for k in ("label_binary", "label_4class", "hallu_type", "hallu_subtype")}
    answer = rationale(s, counterpart) + "\n" + json.dumps(labels, ensure_ascii=False)
    return {
        "sample_id": s["sample_id"],
        "messages": [
            {"role": "system", "content": SFT_SYSTEM.get(s["lang"], SFT_SYSTEM["en"])},
            {"role": "user", "content": user},
            {"role": "assistant", "content": answer},
        ],
    }


# A detector sees the dialogue and the retrieved context, nothing of how the sample was made: passage
# roles (gold / hard_negative), `answerable`, the pair and dialogue ids (a sample's pair is its
# faithful twin) and the rewritten standalone query go to the labels files.
INPUT_COLUMNS = ("sample_id", "split", "source", "institution", "lang", "turn_index", "history", "query", "passages", "response")
LABEL_COLUMNS = (
    "sample_id",
    "pair_id",
    "dialogue_id",
    "label_binary",
    "label_4class",
    "hallu_type",
    "hallu_subtype",
    "answerable",
    "injector",
    "passage_roles",
    "standalone_query",
)


def detector_inputs(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        pl.col("passages").list.eval(pl.struct(pl.element().struct.field("passage_id"), pl.element().struct.field("text")))
    ).select(INPUT_COLUMNS)


def labels_and_provenance(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(passage_roles=pl.col("passages").list.eval(pl.element().struct.field("role"))).select(LABEL_COLUMNS)


def dataset_card(df: pl.DataFrame, version: int) -> str:
    splits = sorted(df["split"].unique().to_list())
    lines = ["---", "configs:", "- config_name: default", "  default: true", "  data_files:"]
    lines += [f"  - split: {s}\n    path: data/{s}-*.parquet" for s in splits]
    lines += ["- config_name: labels", "  data_files:"] + [f"  - split: {s}\n    path: labels/{s}-*.parquet" for s in splits]
    lines += ["- config_name: sft", "  data_files:"] + [f"  - split: {s}\n    path: sft/{s}.jsonl" for s in splits]
    lines += [
        "---",
        "",
        f"# finhallu samples v{version}",
        "",
        "Turn-level hallucination-detection samples for financial RAG (K-FinHallu construction): each "
        "hallucinated sample is paired (`pair_id`) with its faithful counterpart.",
        "",
        "| split | samples | pairs | hallucinated |",
        "|---|---|---|---|",
    ]
    for s in splits:
        part = df.filter(pl.col("split") == s)
        lines.append(
            f"| {s} | {part.height} | {part['pair_id'].n_unique()} | "
            f"{part.filter(pl.col('label_binary') == 'hallucinated').height} |"
        )
    lines += [
        "",
        "Files: `data/` Parquet (default config) holds only what a detector may see: the context passages "
        "(without their gold/hard-negative roles), the history, the query and the response. `labels/` (config "
        "`labels`) holds the labels and provenance by `sample_id`: labels, `answerable`, passage roles, the pair, "
        "the dialogue, the injector and the standalone query. `jsonl/` has both as JSON lines "
        "(`<split>.jsonl`, `<split>.labels.jsonl`); `sft/` chat records with rationales for fine-tuning detectors "
        "(config `sft`: training data, labels included).",
        "",
    ]
    return "\n".join(lines)


EXPORT_SLICE_ROWS = 1000  # rows turned into Python dicts at once: each holds its K passages' texts


def _write_jsonl(path: Path, frame: pl.DataFrame, record=lambda r: r) -> None:
    """`frame`'s rows as JSON lines, `record` applied to each; a slice at a time, so that a split's
    rows are never all Python dicts at once (the export at 3,060 documents: +0.86 -> +0.64 GB)."""
    with open(path, "w", encoding="utf-8") as fh:
        for part in frame.iter_slices(EXPORT_SLICE_ROWS):
            fh.writelines(json.dumps(record(r), ensure_ascii=False) + "\n" for r in part.to_dicts())


def export_files(home: Path, samples_ref: TableRef) -> Path:
    """Write exports/samples@v<n>/ once per samples version (atomic: temp dir, then rename)."""
    final = Path(home) / "exports" / f"samples@v{samples_ref.version}"
    if final.exists():
        return final
    df = read_table(samples_ref).sort("sample_id")
    tmp = final.parent / f".tmp-{uuid.uuid4().hex}"
    for sub in ("data", "labels", "jsonl", "sft"):
        (tmp / sub).mkdir(parents=True)
    faithful_rows = df.filter(pl.col("label_binary") == "faithful").select("pair_id", "response")
    faithful = dict(zip(faithful_rows["pair_id"].to_list(), faithful_rows["response"].to_list()))

    def sft(r: dict) -> dict:
        return sft_record(r, faithful.get(r["pair_id"]) if r["label_binary"] == "hallucinated" else None)

    for split in sorted(df["split"].unique().to_list()):
        part = df.filter(pl.col("split") == split)
        for sub, frame, jsonl in (
            ("data", detector_inputs(part), f"{split}.jsonl"),
            ("labels", labels_and_provenance(part), f"{split}.labels.jsonl"),
        ):
            frame.write_parquet(tmp / sub / f"{split}-00000-of-00001.parquet", statistics=False)
            _write_jsonl(tmp / "jsonl" / jsonl, frame)
        _write_jsonl(tmp / "sft" / f"{split}.jsonl", part, sft)
    (tmp / "README.md").write_text(dataset_card(df, samples_ref.version), encoding="utf-8")
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
