"""Generic JSONL / CSV: one record per response with context, question, answer and label.

Columns: `context` (a string, or a JSON list of strings for several passages), `question`,
`answer`, `label` in faithful | hallucinated | refusal (or a 4-class label: faithful_answer,
hallucination, false_refusal, true_refusal). `refusal` is a justified refusal (true refusal)
unless `answerable` is true, then a false refusal. Optional: `id`, `history` (a list of
{role, content} or a JSON string of one), `split`, `lang`, `answerable`, `hallu_type`, `source`.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from finhallu.external import external_sample, read_records, register_loader

_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _as_list(value) -> list:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return [value]
    return [value]


def _labels(raw: str, answerable) -> tuple[str, str]:
    label = str(raw or "").strip().lower()
    if label in ("faithful", "faithful_answer"):
        return "faithful", "faithful_answer"
    if label in ("hallucinated", "hallucination"):
        return "hallucinated", "hallucination"
    if label == "true_refusal" or (label == "refusal" and answerable is not True):
        return "faithful", "true_refusal"
    if label in ("false_refusal", "refusal"):
        return "hallucinated", "false_refusal"
    raise ValueError(f"label {raw!r}: expected faithful, hallucinated or refusal (or a 4-class label)")


def records_to_samples(records, where: str):
    for i, r in enumerate(records):
        missing = [k for k in ("question", "answer", "label") if k not in r]
        if missing:
            raise ValueError(f"{where}: record {i + 1} lacks {missing} (needs context, question, answer, label)")
        answerable = r.get("answerable")
        answerable = _BOOL.get(str(answerable).strip().lower()) if answerable not in (None, "") else None
        try:
            binary, four = _labels(r["label"], answerable)
        except ValueError as exc:
            raise ValueError(f"{where}: record {i + 1}: {exc}") from None
        history = [m if isinstance(m, dict) else {"role": "user", "content": str(m)} for m in _as_list(r.get("history"))]
        rid = str(r.get("id") or i)
        htype = r.get("hallu_type") or None
        yield external_sample(
            external_id=rid,
            pair_id=str(r.get("pair_id") or rid),
            query=str(r["question"]),
            response=str(r["answer"]),
            passages=[str(p) for p in _as_list(r.get("context"))],
            history=history,
            label_binary=binary,
            label_4class=four,
            hallu_type=htype if binary == "hallucinated" else None,
            split=r.get("split") or None,
            source=str(r.get("source") or "external"),
            lang=r.get("lang") or None,
            answerable=answerable,
            turn_index=len(history) // 2 + 1,
        )


@register_loader("jsonl", dataset="external-jsonl")
def load_jsonl(path: Path):
    """Generic JSON Lines: context, question, answer, label (faithful|hallucinated|refusal)."""
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    for f in files:
        yield from records_to_samples(read_records(f), str(f))


@register_loader("csv", dataset="external-csv")
def load_csv(path: Path):
    """Generic CSV with a header: context, question, answer, label (faithful|hallucinated|refusal)."""
    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    for f in files:
        with open(f, newline="", encoding="utf-8-sig") as fh:
            yield from records_to_samples(csv.DictReader(fh), str(f))
