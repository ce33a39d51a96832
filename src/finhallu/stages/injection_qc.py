"""injection_qc: the injection judge (K-FinHallu §4.4) and the label verifier, and their rules backends.

Injection judge (`judge_injection`, role injection_judge): appropriateness 1-3 (the intended
type really injected, checked by injectors/verify.py; 2 when a minimal-edit subtype
changed more than a few words) and naturalness 1-3; items below the thresholds are dropped.
"""

from __future__ import annotations

import re

import polars as pl
from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.llm.parallel import map_items
from finhallu.injectors import find_leaf
from finhallu.schemas.rows import InjectionQcRow
from finhallu.stages.base import Frames, Stage, StageContext, rows_frame
from finhallu.labelcheck import FAITHFUL_LABELS, fluency, leaf, verify_inputs
from finhallu.injectors.verify import naturalness, verify_label, word_edit_distance
from pydantic import Field
from finhallu.schemas.section import Section


class InjectionQCConfig(Section):
    min_naturalness: int = Field(2, ge=1, le=3)
    min_appropriateness: int = Field(2, ge=1, le=3)
    # Minimal-edit subtypes whose edit changes more words than this are rated less appropriate.
    max_minimal_edit_words: int = Field(4, ge=1)
    # Injector calls per dialogue before it is given up (its candidates in order: the best-suited
    # turn of each chosen subtype first). A model that keeps missing must not cost 20 calls a dialogue.
    max_attempts: int = Field(4, ge=1, le=50)
    # Every injected response and its faithful counterpart are re-checked by the label verifier
    # (operation verify_sample, role label_verifier); a pair either side of which fails is dropped.
    verify_labels: bool = True
    # A local NLI cross-encoder (folder or cached hub id; FINHALLU_NLI_PATH overrides) that also checks
    # faithful answers (entailed) and Contradictory edits (not entailed); None: the rules alone.
    verifier_nli_model: str | None = None
    verifier_nli_threshold: float = Field(0.5, gt=0, lt=1)


JUDGE = "rules-judge-v2"


class InjectionScores(BaseModel):
    appropriateness: int
    naturalness: int
    reasons: list[str] = []


# ---- injection judge -----------------------------------------------------------------------
@operation("judge_injection", InjectionScores)
def judge_injection(
    hallu_type: str,
    subtype: str | None,
    original: str,
    injected: str,
    evidence: list[str],
    history: str,
    turn: dict,
    lang: str,
    max_edit_words: int = 4,
) -> InjectionScores:
    inj = {"original_response": original, "injected_response": injected, "hallu_type": hallu_type, "hallu_subtype": subtype}
    ok, why = verify_label(inj, turn, evidence, history)
    nat, issues = naturalness(original, injected, hallu_type)
    reasons = [] if ok else [f"label not verified: {why}"]
    appropriateness = 3 if ok else 1
    leaf = find_leaf(hallu_type, subtype)
    if ok and leaf is not None and leaf.minimal_edit:
        words = word_edit_distance(original, injected)
        if words > max_edit_words:
            appropriateness = 2
            reasons.append(f"edit of {words} words is not minimal")
    reasons += [f"naturalness: {i}" for i in issues]
    return InjectionScores(appropriateness=appropriateness, naturalness=nat, reasons=reasons)


def _history(turns: list[dict], before: int) -> str:
    return "\n".join(f"{t['query']}\n{t['response']}" for t in turns if t["turn_index"] < before)


def _verifier_calls(inj: dict, turn: dict, evidence: list[str], history: str, lang: str) -> list[dict]:
    """The label verifier's two checks of a pair: the injected response against its leaf's rule,
    the counterpart against the faithful label it carries."""
    common = dict(
        evidence=evidence,
        history=history,
        question=turn["standalone_query"] or turn["query"],
        answer=turn["answer"],
        clue=turn["clue_text"],
        lang=lang,
    )
    return [
        verify_inputs(
            leaf(inj["hallu_type"], inj["hallu_subtype"], "hallucination"),
            inj["injected_response"],
            inj["counterpart_response"],
            **common,
        ),
        verify_inputs(inj["counterpart_label"], inj["counterpart_response"], inj["injected_response"], **common),
    ]


def run(inputs: Frames, ctx: StageContext[InjectionQCConfig]) -> Frames:
    cfg: InjectionQCConfig = ctx.config
    llm = ctx.llm
    passages = dict(zip(inputs["passages"]["passage_id"], inputs["passages"]["text"]))
    # One dict per turn, indexed by id and grouped by dialogue, without its context: two copies with
    # their contexts were 163 MB of Python heap at 544 documents, this is 30 MB
    turns: dict[str, dict] = {}
    history: dict[str, list[dict]] = {}
    for t in inputs["turns"].sort("dialogue_id", "turn_index").iter_rows(named=True):
        turns[t["turn_id"]] = t
        history.setdefault(t["dialogue_id"], []).append(t)
    rows: list[InjectionQcRow] = []
    inj_rows = list(inputs["injections"].sort("injection_id").iter_rows(named=True))
    judge = JUDGE if llm.is_offline("injection_judge") else llm.backend("injection_judge")
    calls, checks = [], []
    for inj in inj_rows:
        turn = turns[inj["turn_id"]]
        hist = _history(history[inj["dialogue_id"]], inj["turn_index"])
        evidence = [passages[c["passage_id"]] for c in inj["injected_context"]]
        lang = "ko" if re.search("[가-힣]", inj["original_response"]) else "en"
        calls.append(
            dict(
                hallu_type=inj["hallu_type"],
                subtype=inj["hallu_subtype"],
                original=inj["original_response"],
                injected=inj["injected_response"],
                evidence=evidence,
                history=hist,
                turn={k: turn[k] for k in ("answerable", "clue_text", "answer")},
                lang=lang,
                max_edit_words=cfg.max_minimal_edit_words,
            )
        )
        checks += _verifier_calls(inj, turn, evidence, hist, lang)
    if cfg.verify_labels and llm.is_offline("label_verifier"):
        # its fluency check reads each Korean hallucinated response with Kiwi: in one batch first
        fluency.prefetch(c["response"] for c in checks if c["lang"] == "ko" and c["label"] not in FAITHFUL_LABELS)
    # The judge and the label verifier read the same injections apart: both passes at once.
    passes = [
        lambda: llm.call_many("injection_judge", "judge_injection", calls),
        lambda: llm.call_many("label_verifier", "verify_sample", checks) if cfg.verify_labels else [None] * len(checks),
    ]
    verdicts, label_checks = map_items(lambda run: run(), passes, llm, ("injection_judge", "label_verifier"))
    if cfg.verify_labels and cfg.verifier_nli_model:
        label_checks = _with_nli(label_checks, checks, cfg)
    for n, (inj, s) in enumerate(zip(inj_rows, verdicts)):
        rows.append(_qc_row(inj, s, label_checks[2 * n : 2 * n + 2], cfg, judge))
        ctx.progress(n + 1, len(inj_rows))
    return {
        "injection_qc": rows_frame(
            rows, "injection_id", schema_overrides={"reasons": pl.List(pl.String), "verify_reasons": pl.List(pl.String)}
        )
    }


def _with_nli(verdicts: list, checks: list[dict], cfg: InjectionQCConfig) -> list:
    """The verifier's verdicts with the NLI model's rejections added (labelcheck/entailment.py)."""
    from finhallu.nli_model import load_scorer
    from finhallu.labelcheck import SampleVerdict
    from finhallu.labelcheck.entailment import nli_reasons

    scorer, _ = load_scorer({"model": cfg.verifier_nli_model})
    out = []
    for v, extra in zip(verdicts, nli_reasons(checks, scorer, cfg.verifier_nli_threshold)):
        out.append(v if v is None or not extra else SampleVerdict(ok=False, reasons=list(v.reasons) + extra))
    return out


def _qc_row(inj: dict, s: InjectionScores | None, checks: list, cfg: InjectionQCConfig, judge: str) -> InjectionQcRow:
    if s is None:  # no valid judgement (recorded in llm_calls): scored lowest, so the item is dropped
        s = InjectionScores(appropriateness=1, naturalness=1, reasons=["judge: no valid judgement (LLM call failed)"])
    appropriate = s.appropriateness >= cfg.min_appropriateness
    natural = s.naturalness >= cfg.min_naturalness
    reasons = ([] if appropriate else [f"appropriateness {s.appropriateness} < {cfg.min_appropriateness}"]) + (
        [] if natural else [f"naturalness {s.naturalness} < {cfg.min_naturalness}"]
    )
    if reasons:
        reasons += s.reasons
    verify_reasons: list[str] = []
    if cfg.verify_labels:
        for side, v in zip(("hallucinated", "counterpart"), checks):
            if v is None:
                verify_reasons.append(f"{side}: no valid verdict (LLM call failed; see llm_calls)")
            elif not v.ok:
                verify_reasons += [f"{side}: {r}" for r in (v.reasons or ["rejected"])]
    verified = not verify_reasons
    return {
        "injection_id": inj["injection_id"],
        "appropriate": appropriate,
        "naturalness": s.naturalness,
        "appropriateness": s.appropriateness,
        "verified": verified,
        "verify_reasons": verify_reasons,
        "passed": appropriate and natural and verified,
        "reasons": reasons + verify_reasons,
        "judge": judge,
    }


STAGE = Stage(
    "injection_qc",
    run,
    InjectionQCConfig,
    inputs=("injections", "turns", "passages"),
    outputs=("injection_qc",),
    description="injection judge and label verifier",
    unread={"turns": ("context",)},  # an injection carries the context it was judged in
    roles=("injection_judge", "label_verifier"),
    operations=("judge_injection", "verify_sample"),
)
