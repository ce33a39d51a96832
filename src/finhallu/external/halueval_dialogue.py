"""HaluEval dialogue (dialogue_data.json): a right and a hallucinated response to one dialogue.

`dialogue_history` ("[Human]: ... [Assistant]: ... [Human]: ...") becomes the history; its last
human turn is the query. The record's `knowledge` is the passage.
"""

from __future__ import annotations

import re
from pathlib import Path

from finhallu.ids import stable_id
from finhallu.external import external_sample, read_records, register_loader

_TURN = re.compile(r"\[(Human|Assistant|User|System)\]\s*:\s*", re.IGNORECASE)


def parse_history(text: str) -> list[dict]:
    parts = _TURN.split(text or "")
    turns = []
    for speaker, content in zip(parts[1::2], parts[2::2]):
        role = "user" if speaker.lower() in ("human", "user") else "assistant"
        if content.strip():
            turns.append({"role": role, "content": content.strip()})
    if not turns and (text or "").strip():
        turns = [{"role": "user", "content": text.strip()}]
    return turns


@register_loader("halueval-dialogue", dataset="halueval-dialogue")
def load(path: Path):
    """HaluEval dialogue pairs: knowledge, dialogue_history, right_response, hallucinated_response."""
    file = path / "dialogue_data.json" if path.is_dir() else path
    for i, r in enumerate(read_records(file)):
        turns = parse_history(r.get("dialogue_history") or "")
        last_user = max((j for j, t in enumerate(turns) if t["role"] == "user"), default=None)
        query = turns[last_user]["content"] if last_user is not None else ""
        history = turns[:last_user] if last_user is not None else turns
        pair = f"dialogue-{i}-{stable_id(r.get('dialogue_history') or '', length=8)}"
        for side, key, label in (
            ("right", "right_response", "faithful"),
            ("hallucinated", "hallucinated_response", "hallucinated"),
        ):
            yield external_sample(
                external_id=f"{pair}:{side}",
                pair_id=pair,
                query=query,
                response=r[key],
                passages=[r.get("knowledge") or ""],
                history=history,
                label_binary=label,
                source="opendialkg",
            )
