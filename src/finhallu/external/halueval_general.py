"""HaluEval general (general_data.json): ChatGPT responses to user queries with a human yes/no label.

There is no knowledge: samples carry no passages, so evidence-based detectors have nothing to
ground against (they see the query alone). Labels come from `hallucination` or, in the
released file, `hallucination_label` ("yes" = hallucinated).
"""

from __future__ import annotations

from pathlib import Path

from finhallu.external import external_sample, read_records, register_loader


@register_loader("halueval-general", dataset="halueval-general")
def load(path: Path):
    """HaluEval general: ID, user_query, chatgpt_response, hallucination (yes/no)."""
    file = path / "general_data.json" if path.is_dir() else path
    for i, r in enumerate(read_records(file)):
        raw = r.get("hallucination", r.get("hallucination_label"))
        label = str(raw).strip().lower()
        if label not in ("yes", "no"):
            raise ValueError(f"halueval-general: record {r.get('ID', i)} has hallucination={raw!r}; expected yes or no")
        rid = str(r.get("ID", i))
        yield external_sample(
            external_id=rid,
            pair_id=f"general-{rid}",
            query=r.get("user_query") or "",
            response=r.get("chatgpt_response") or "",
            passages=[],
            label_binary="hallucinated" if label == "yes" else "faithful",
            source="alpaca",
            turn_index=1,
        )
