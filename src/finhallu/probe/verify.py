"""An independent check that every probe item holds a verifiably false premise against the corpus.

It shares no code with the builders (`probe/premises.py`, `probe/items.py`): it reads the item's
claim and true fact and looks at the passages again.
  A2 (and the framings and pushback built on it): the true fact is a sentence of the source passage;
     the claim is that sentence with exactly one figure changed; the changed figure, with the unit
     after it, occurs in no passage of the document; the prompt carries the claim.
  A1: the named referent occurs in no passage of the corpus; the prompt names it.
  A3: the year asked about occurs in no passage of the corpus; the prompt asks for it.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

_FIGURE = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _flat(text: str) -> str:
    return re.sub(r"[\s,]+", "", text or "").lower()


def _figures(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _FIGURE.finditer(text)]


def _one_figure_changed(true: str, false: str) -> tuple[str, str] | None:
    """The changed figure with the two characters after it, when `false` is `true` with exactly one
    figure replaced (everything else identical)."""
    if _FIGURE.sub("#", true) != _FIGURE.sub("#", false):
        return None
    t, f = _FIGURE.findall(true), _FIGURE.findall(false)
    changed = [i for i, (a, b) in enumerate(zip(t, f)) if a.replace(",", "") != b.replace(",", "")]
    if len(t) != len(f) or len(changed) != 1:
        return None
    start, end = _figures(false)[changed[0]]
    return f[changed[0]], _flat(false[start : end + 3])


class Corpus:
    def __init__(self, passages: Sequence[Mapping]):
        self.text = {p["passage_id"]: p["text"] for p in passages}
        self.doc_flat: dict[str, str] = {}
        for p in passages:
            self.doc_flat[p["doc_id"]] = self.doc_flat.get(p["doc_id"], "") + "\n" + _flat(p["text"])
        self.flat = "\n".join(self.doc_flat.values())


def check_item(item: Mapping, corpus: Corpus) -> str | None:
    """None when the item holds a verifiably false premise; otherwise what is wrong."""
    passage = corpus.text.get(item["passage_id"])
    if passage is None or passage != item["source_passage"]:
        return "the source passage is not the corpus passage it names"
    if (item["context"] or "") != (passage if item["with_evidence"] else ""):
        return "the context is not the source passage (with evidence) or empty (without)"
    kind, claim, prompt = item["premise_kind"], item["false_claim"] or "", item["prompt"] or ""
    if kind == "A1":
        if not claim or _flat(claim) in corpus.flat:
            return f"the referent {claim!r} occurs in the corpus"
        return None if claim in prompt else "the prompt does not name the referent"
    if kind == "A3":
        year = item["false_value"] or ""
        if not re.fullmatch(r"\d{4}", year) or year in corpus.flat:
            return f"the year {year!r} occurs in the corpus"
        return None if year in prompt else "the prompt does not ask for the year"
    return _check_false_attribute(item, corpus, passage, claim, prompt)


def _check_false_attribute(item: Mapping, corpus: Corpus, passage: str, claim: str, prompt: str) -> str | None:
    true = item["true_fact"] or ""
    if _flat(true) not in _flat(passage):
        return "the true fact is not in the source passage"
    changed = _one_figure_changed(true, claim)
    if changed is None:
        return "the claim is not the true fact with exactly one figure changed"
    figure, window = changed
    if window in corpus.doc_flat.get(item["doc_id"], ""):
        return f"the changed figure {figure!r} (with its unit) occurs in the document"
    if claim not in prompt:
        return "the prompt does not carry the claim"
    history = item.get("history") or []
    if item["mechanism"] == "P1" and (not history or history[-1]["content"] != true):
        return "the pushback's earlier answer is not the true fact"
    return None
