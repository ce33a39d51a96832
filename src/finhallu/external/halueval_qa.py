"""HaluEval QA (qa_data.json): each record gives a right and a hallucinated answer to one question.

Both become samples of one pair over the record's `knowledge` (the passage): right_answer ->
faithful, hallucinated_answer -> hallucinated (HaluEval does not label a type per sample).
"""

from __future__ import annotations

from pathlib import Path

from finhallu.ids import stable_id
from finhallu.external import external_sample, read_records, register_loader


def _file(path: Path, name: str) -> Path:
    return path / name if path.is_dir() else path


@register_loader("halueval-qa", dataset="halueval-qa")
def load(path: Path):
    """HaluEval QA pairs: knowledge, question, right_answer, hallucinated_answer."""
    for i, r in enumerate(read_records(_file(path, "qa_data.json"))):
        pair = f"qa-{i}-{stable_id(r['question'], length=8)}"
        for side, key, label in (("right", "right_answer", "faithful"), ("hallucinated", "hallucinated_answer", "hallucinated")):
            yield external_sample(
                external_id=f"{pair}:{side}",
                pair_id=pair,
                query=r["question"],
                response=r[key],
                passages=[r.get("knowledge") or ""],
                label_binary=label,
                source="hotpotqa",
                turn_index=1,
            )
