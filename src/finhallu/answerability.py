"""Answerability of a candidate passage for a seed question: step 1 (lexical) and step 2 (the
`judge_answerability` operation), asked lazily in rank order. The retrieve stage judges its seeds'
candidates with it, the inject stage the answerable seeds' candidates that False Acceptance needs
(`retrieve.judge_answerable_seeds: on_demand`).
"""

from __future__ import annotations

from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.llm.router import LLMRouter
from finhallu.taxonomy import answer_is_checkable
from finhallu.text.normalize import contains_normalized
from finhallu.text.quantities import quantities, states_value
from finhallu.text.words import content_word_set
from typing import Literal
from pydantic import Field
from finhallu.schemas.section import Section


class HardNegativeConfig(Section):
    """Step 2 of the hard-negative filter (`retrieve:` in a profile; the inject stage reads it too)."""

    # A candidate still "covers" the clue if this share of the clue's content words occurs in it;
    # such passages are not hard negatives.
    max_clue_coverage: float = Field(0.6, ge=0.0, le=1.0)
    # Step 2 judges a seed's candidates lazily, in rank order, until it has top_k hard negatives
    # (an answerable context holds K-1 beside the gold passage, False Acceptance swaps in K): the
    # stages read no more than the first K. Each round asks for what is missing plus this many
    # more, so few seeds need another round. False: every candidate that passed step 1 is judged.
    judge_lazily: bool = True
    judge_round_margin: int = Field(2, ge=0)
    # An answerable seed's hard negatives serve only False Acceptance (its context swapped for them),
    # which takes about one turn in ten: `on_demand` leaves them to the inject stage, which judges the
    # candidates of the turns it picks (same rank order, same laziness); `in_retrieve` judges every
    # seed's here. Unanswerable seeds are always judged here (the dialogues' refusal contexts).
    judge_answerable_seeds: Literal["on_demand", "in_retrieve"] = "on_demand"


JUDGE = "answerability_judge"


def clue_coverage(passage: str, clue: str | None) -> float:
    words = content_word_set(clue or "")
    if not words:
        return 0.0
    have = content_word_set(passage)
    return len(words & have) / len(words)


class AnswerabilityOut(BaseModel):
    answerable: bool
    reason: str


@operation("judge_answerability", AnswerabilityOut)
def judge_answerability(
    question: str, passage: str, clue: str | None, answer: str | None, lang: str, max_coverage: float = 0.6
) -> AnswerabilityOut:
    """Step 2, rules backend: a passage that still holds most of the clue's content words could
    answer the question (paraphrased evidence), so it is no hard negative."""
    cov = clue_coverage(passage, clue)
    return AnswerabilityOut(answerable=cov >= max_coverage, reason=f"clue content-word coverage {cov:.2f}")


def step1_verdicts(text: str, seed: dict) -> tuple[bool, bool]:
    """Step 1 (lexical): (clue absent, answer absent) after number/unit/spacing normalization. An
    answer amount counts as present at any scale the passage could state it in ("4조 1,500억 원" is
    "4,150,000" under "(단위 : 백만원)", or in a table cut from its note)."""
    clue_absent = not (seed["clue_text"] and contains_normalized(text, seed["clue_text"]))
    checkable = answer_is_checkable(seed)
    answer_absent = not (
        checkable
        and (
            contains_normalized(text, seed["answer"])
            or any(states_value(text, q, unknown_scale=True) for q in _answer_amounts(seed["answer"]))
        )
    )
    return clue_absent, answer_absent


def _answer_amounts(answer: str) -> list:
    """The amounts of an answer that identify it (money, or a bare figure of 4+ digits)."""
    return [q for q in quantities(answer or "") if q.unit in ("KRW", "USD") or (not q.unit and abs(q.value) >= 1000)]


def judge_lazily(
    step2: list[tuple[dict, dict]], llm: LLMRouter, judge_name: str, top_k: int, lazily: bool = True, margin: int = 2
) -> None:
    """Step 2 on the candidates that passed step 1 (rows in rank order per seed), in concurrent (or
    batch) rounds: lazily, each round asks per seed for the hard negatives it still lacks (plus a
    margin); rows never asked keep `unanswerable` None ("not needed"), which is no hard negative.
    The retrieve stage calls it for its seeds, the inject stage for the answerable seeds it needs."""
    queues: dict[str, list[tuple[dict, dict]]] = {}
    for row, kw in step2:
        queues.setdefault(row["seed_id"], []).append((row, kw))
    found = dict.fromkeys(queues, 0)
    while True:
        wave = []
        for sid, queue in queues.items():
            want = len(queue) if not lazily else max(0, top_k - found[sid])
            if want:
                take = want + margin if lazily else want
                wave += queue[:take]
                del queue[:take]
        if not wave:
            for row, _ in step2:
                if row["unanswerable"] is None:
                    row["judge"] = "not asked (the seed had its hard negatives)"
            return
        verdicts = llm.call_many(JUDGE, "judge_answerability", [kw for _, kw in wave])
        for (row, _), verdict in zip(wave, verdicts):
            if verdict is None:  # the judge failed for good (recorded in llm_calls): when in doubt, no hard negative
                row["unanswerable"], row["judge"] = False, f"{judge_name} (failed)"
            else:
                row["unanswerable"] = not verdict.answerable
            row["is_hard_negative"] = row["unanswerable"]
            found[row["seed_id"]] += row["unanswerable"]


def judge_kwargs(seed: dict, passage: str, cfg: HardNegativeConfig) -> dict:
    """What `judge_answerability` is asked about one (question, candidate passage) pair."""
    return {
        "question": seed["question"],
        "passage": passage,
        "clue": seed["clue_text"],
        "answer": seed["answer"],
        "lang": seed["lang"],
        "max_coverage": cfg.max_clue_coverage,
    }


DEFERRED = "deferred: judged by inject if False Acceptance needs it"
