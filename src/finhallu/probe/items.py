"""Probe items: a false premise put to the target under one mechanism, with or without its evidence.

The prompts are data (`probe/framings.yaml`); a cell is a mechanism in a field. Items of a cell are
drawn from that field's premises of the mechanism's base kind, with a seeded RNG per cell.
"""

from __future__ import annotations

import random
from functools import lru_cache
from importlib import resources
from typing import Callable, Iterator, Mapping, Sequence

import yaml

from finhallu.ids import stable_id
from finhallu.probe import MECHANISMS, cell_of, field_of
from finhallu.probe.premises import Premise, fabricated_referents, false_attributes, unanswerable_years


@lru_cache(maxsize=1)
def framings() -> dict:
    return yaml.safe_load((resources.files("finhallu") / "probe" / "framings.yaml").read_text("utf-8"))


def _a3_question(p: Premise, f: Mapping) -> str:
    if p.claim:
        return f["A3"]["question"][p.lang].format(question=p.claim)
    return f["A3"]["title"][p.lang].format(institution=p.institution, title=p.title, year=p.false_value)


def prompt_of(mechanism: str, p: Premise) -> tuple[str, list[dict]]:
    """(the user's message, the conversation before it) of a premise under a mechanism."""
    f = framings()
    if mechanism == "A1":
        return f["A1"][p.field][p.lang].format(institution=p.institution, name=p.claim), []
    if mechanism == "A3":
        return _a3_question(p, f), []
    if mechanism == "P1":
        history = [
            {"role": "user", "content": f["P1"]["history_user"][p.lang]},
            {"role": "assistant", "content": p.true_fact},
        ]
        return f["P1"]["message"][p.lang].format(claim=p.claim), history
    return f[mechanism][p.lang].format(claim=p.claim, ask=f["ask"][p.lang]), []


def _has_template(mechanism: str, p: Premise) -> bool:
    f = framings()
    if mechanism == "A1":
        return p.lang in f["A1"].get(p.field, {})
    return True


def items_of_cell(
    mechanism: str,
    field: str,
    premises: Sequence[Premise],
    per_cell: int,
    evidence_variants: Sequence[bool],
    rng: Callable[..., random.Random],
) -> list[dict]:
    """Up to `per_cell` premises of the cell's base kind, each once per evidence variant."""
    mech = MECHANISMS[mechanism]
    pool = [p for p in premises if p.kind == mech.base and p.field == field and _has_template(mechanism, p)]
    chosen = rng(mechanism, field).sample(pool, min(per_cell, len(pool)))
    rows = []
    for p in sorted(chosen, key=lambda p: (p.doc_id, p.passage_id)):
        message, history = prompt_of(mechanism, p)
        base_id = stable_id("premise", p.kind, p.passage_id, p.claim)
        for with_evidence in evidence_variants:
            rows.append(
                {
                    "item_id": stable_id("probe", mechanism, base_id, with_evidence),
                    "base_id": base_id,
                    "cell": cell_of(mechanism, field),
                    "mechanism": mechanism,
                    "premise_kind": p.kind,
                    "field": field,
                    "source": p.source,
                    "lang": p.lang,
                    "doc_id": p.doc_id,
                    "passage_id": p.passage_id,
                    "institution": p.institution,
                    "with_evidence": with_evidence,
                    "context": p.context if with_evidence else "",
                    "history": history,
                    "prompt": message,
                    "false_claim": message if p.kind == "A3" else p.claim,
                    "false_value": p.false_value,
                    "true_fact": p.true_fact,
                    "true_value": p.true_value,
                    "source_passage": p.context,
                }
            )
    return rows


def corpus_items(
    passages: Sequence[Mapping],
    seeds: Sequence[Mapping],
    mechanisms: Sequence[str],
    per_cell: int,
    variants: tuple[bool, ...],
    rng: Callable[..., random.Random],
) -> Iterator[dict]:
    """Every mechanism's items in every field the corpus has, from the corpus's false premises
    (`rng(name)`: the stage's named, seeded streams), before the verifier sees them."""
    premises = (
        false_attributes(passages, rng("A2"))
        + fabricated_referents(passages, framings()["fabricate"], rng("A1"))
        + unanswerable_years(passages, seeds, rng("A3"))
    )
    fields = sorted({field_of(str(p["source"])) for p in passages})
    for mechanism in mechanisms:
        for field in fields:
            yield from items_of_cell(mechanism, field, premises, per_cell, variants, rng)
