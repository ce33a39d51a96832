"""RAGTruth (response.jsonl + source_info.jsonl): response-level labels from the annotated spans.

A response is hallucinated when it has a labelled span that is not marked `implicit_true`
(true but not in the context). Types: Conflict spans -> Contradictory, Baseless spans ->
Unverifiable (subtype = the span label, e.g. evident_conflict); quality `incorrect_refusal`
-> False Refusal. The prompt's own refusal ("Unable to answer based on given passages.") with
no span is a True Refusal. The generating model is recorded as `injector` (source of the
response), the task's source (MARCO, CNN/DM, Yelp) as `source`, RAGTruth's split as split.
QA: question + passages; Summary: instruction + article; Data2txt: instruction + the structured
data flattened into `key: value` lines.
"""

from __future__ import annotations

import re
from pathlib import Path

from finhallu.external import external_sample, read_records, register_loader

REFUSAL = "unable to answer based on given passages"


def _files(path: Path) -> tuple[Path, Path]:
    folder = path if path.is_dir() else path.parent
    responses = path if path.is_file() else folder / "response.jsonl"
    sources = folder / "source_info.jsonl"
    for p in (responses, sources):
        if not p.is_file():
            raise FileNotFoundError(f"ragtruth: {p} not found (expects response.jsonl and source_info.jsonl side by side)")
    return responses, sources


def _flatten(obj, prefix: str = "") -> list[str]:
    """`key: value` lines of nested structured data (Data2txt's business records)."""
    if isinstance(obj, dict):
        return [
            ln for k, v in obj.items() for ln in _flatten(v, f"{prefix}{k}." if isinstance(v, (dict, list)) else f"{prefix}{k}")
        ]
    if isinstance(obj, list):
        return [ln for i, v in enumerate(obj) for ln in _flatten(v, f"{prefix}{i}.")]
    return [] if obj is None else [f"{prefix.rstrip('.')}: {obj}"]


def _context(src: dict) -> tuple[str, list[str]]:
    """(question or instruction, passages) of one source record."""
    info, prompt = src.get("source_info"), src.get("prompt") or ""
    instruction = prompt.strip().splitlines()[0] if prompt.strip() else ""
    if src.get("task_type") == "QA" and isinstance(info, dict):
        parts = re.split(r"(?:^|\n)\s*passage \d+:", info.get("passages") or "")
        return info.get("question") or instruction, [p.strip() for p in parts if p.strip()]
    if isinstance(info, dict):
        return instruction, ["\n".join(_flatten(info))]
    return instruction, [p.strip() for p in re.split(r"\n\s*\n", str(info or "")) if p.strip()] or [str(info or "")]


def _type(spans: list[dict]) -> tuple[str | None, str | None]:
    kinds = [str(s.get("label_type") or "") for s in spans]
    conflict = [k for k in kinds if "conflict" in k.lower()]
    chosen = conflict[0] if conflict else (kinds[0] if kinds else "")
    if not chosen:
        return None, None
    return ("contradictory" if conflict else "unverifiable"), re.sub(r"\W+", "_", chosen.strip().lower())


@register_loader("ragtruth", dataset="ragtruth")
def load(path: Path):
    """RAGTruth: response-level labels from span annotations (response.jsonl + source_info.jsonl)."""
    responses, sources = _files(path)
    source_info = {str(s["source_id"]): s for s in read_records(sources)}
    for r in read_records(responses):
        sid = str(r["source_id"])
        if sid not in source_info:
            raise ValueError(f"ragtruth: response {r.get('id')} names source_id {sid} absent from {sources}")
        src = source_info[sid]
        query, passages = _context(src)
        spans = [s for s in r.get("labels") or [] if not s.get("implicit_true")]
        response = r.get("response") or ""
        quality = (r.get("quality") or "good").lower()
        htype, subtype = _type(spans)
        if quality == "incorrect_refusal":
            binary, four, htype, subtype = "hallucinated", "false_refusal", "false_refusal", None
        elif spans:
            binary, four = "hallucinated", "hallucination"
        else:
            binary, four = "faithful", ("true_refusal" if REFUSAL in response.lower() else "faithful_answer")
        yield external_sample(
            external_id=str(r["id"]),
            pair_id=sid,
            query=query,
            response=response,
            passages=passages,
            label_binary=binary,
            label_4class=four,
            hallu_type=htype,
            hallu_subtype=subtype,
            split=r.get("split"),
            source=str(src.get("source") or src.get("task_type") or "ragtruth"),
            injector=r.get("model"),
            lang="en",
            turn_index=1,
        )
