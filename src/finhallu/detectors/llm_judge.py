"""llm_judge: an LLM reads passages, history, question and response and judges, with a rationale.

Three prompts (K-FinHallu §5): `binary` (operation detect_hallucination: faithful/hallucinated),
`4class` (detect_4class: faithful answer / hallucination / false refusal / true refusal) and
`multiclass` (detect_type: the hallucination type, or none). Every prompt asks for the rationale
first, in the step order of the paper's SFT-R targets (answerability -> claim check -> verdict),
then the label and a 0-1 hallucination score. The provider/model is the `detector_judge` role's
(any provider of the LLM layer); with the `offline` provider the rules backends below judge from
the shared grounding checks and write a rationale in the same three steps.
The labels a prompt does not ask for are implied (e.g. a hallucinated refusal is a false refusal).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from finhallu.llm.operations import operation, prompt_version
from finhallu.detectors import (
    Detection,
    labels_from_4class,
    labels_from_binary,
    labels_from_type,
    looks_like_refusal,
    register_detector,
)
from finhallu.detectors.grounding import findings

MODES = {"binary": "detect_hallucination", "4class": "detect_4class", "multiclass": "detect_type"}
COVERAGE = 0.5  # the rules judge's answerability cut (share of the question's words in the best passage)


class JudgeBinary(BaseModel):
    rationale: str
    label_binary: Literal["faithful", "hallucinated"]
    score: float = Field(ge=0.0, le=1.0)


class Judge4Class(BaseModel):
    rationale: str
    label_4class: Literal["faithful_answer", "hallucination", "false_refusal", "true_refusal"]
    score: float = Field(ge=0.0, le=1.0)


class JudgeType(BaseModel):
    rationale: str
    hallu_type: Literal["contradictory", "unverifiable", "irrelevance", "false_acceptance", "false_refusal", "none"]
    score: float = Field(ge=0.0, le=1.0)


# ---- the rules judge ------------------------------------------------------------------------------

_TEXT = {
    "en": {
        "answerable": "1) Answerability: the passages cover {cov:.0%} of the question's key terms, so {ans}.",
        "yes": "the question is answerable from them",
        "no": "they do not hold the evidence to answer it",
        "refusal": "2) Claims: the response declines to answer.",
        "contradicted": "2) Claims: the response says {said}, but the evidence says {ev} in the same wording.",
        "flip": "2) Claims: the response says '{said}' where the evidence it follows says '{ev}'.",
        "missing": "2) Claims: {what} in the response appear nowhere in the passages or the history.",
        "irrelevant": "2) Claims: the response is grounded but takes up only {rel:.0%} of the question: it answers something else.",
        "weak": '2) Claims: the sentence "{sent}" is only {sup:.0%} backed by any passage.',
        "unbacked": "2) Claims: the response states content ({sup:.0%} backed) the passages do not hold.",
        "ok": "2) Claims: every sentence is backed by the evidence (weakest {sup:.0%}), numbers and names included.",
        "verdict": "3) Verdict: {label}.",
    },
    "ko": {
        "answerable": "1) 답변 가능성: 검색 문단이 질문 핵심어의 {cov:.0%}를 포함하므로 {ans}.",
        "yes": "문단으로 답할 수 있는 질문입니다",
        "no": "문단에 답의 근거가 없습니다",
        "refusal": "2) 주장 검토: 응답은 답변을 거절했습니다.",
        "contradicted": "2) 주장 검토: 응답은 {said}(이)라고 하지만 근거에는 같은 문맥에서 {ev}(으)로 되어 있습니다.",
        "flip": "2) 주장 검토: 응답은 '{said}'(이)라고 하지만 따라 쓴 근거 문장에는 '{ev}'(으)로 되어 있습니다.",
        "missing": "2) 주장 검토: 응답의 {what}은(는) 문단과 대화 기록 어디에도 없습니다.",
        "irrelevant": "2) 주장 검토: 응답은 근거에 있으나 질문의 {rel:.0%}만 다루어 다른 내용에 답합니다.",
        "weak": '2) 주장 검토: "{sent}" 문장은 어떤 문단으로도 {sup:.0%}만 뒷받침됩니다.',
        "unbacked": "2) 주장 검토: 응답 내용({sup:.0%} 뒷받침)이 문단에 없습니다.",
        "ok": "2) 주장 검토: 숫자와 명칭을 포함해 모든 문장이 근거로 뒷받침됩니다(최소 {sup:.0%}).",
        "verdict": "3) 결론: {label}.",
    },
}


def _judged(passages: list[str], history: list[dict], query: str, response: str) -> dict:
    """The sample as the judge sees it (its prompt's fields: no standalone query, no passage roles)."""
    return {
        "passages": [{"text": p} for p in passages],
        "history": history or [],
        "query": query,
        "standalone_query": None,
        "response": response,
    }


def judge_rules(passages: list[str], history: list[dict], query: str, response: str, lang: str) -> tuple[str, float, list[str]]:
    """(hallu_type or 'none', hallucination score, three-step rationale) from the grounding checks."""
    t = _TEXT["ko" if lang == "ko" else "en"]
    f = findings(_judged(passages, history, query, response))
    answerable = f.coverage >= COVERAGE
    steps = [t["answerable"].format(cov=f.coverage, ans=t["yes"] if answerable else t["no"])]
    if f.refusal:
        steps.append(t["refusal"])
        verdict, score = ("false_refusal", 0.5 + 0.5 * f.coverage) if answerable else ("none", 0.5 * f.coverage)
    elif not answerable and f.mean_support < 0.6:
        steps.append(t["unbacked"].format(sup=f.mean_support))
        verdict, score = "false_acceptance", 0.75 + 0.25 * (1 - f.coverage)
    elif f.contradicted:
        said, ev = f.contradicted[0]
        steps.append(t["contradicted"].format(said=said, ev=ev))
        verdict, score = "contradictory", 0.92
    elif f.flips:
        said, ev = f.flips[0]
        steps.append(t["flip"].format(said=said, ev=ev))
        verdict, score = "contradictory", 0.85
    elif f.missing_numbers or f.missing_entities or f.missing_periods:
        what = ", ".join((f.missing_numbers + f.missing_periods + f.missing_entities)[:3])
        steps.append(t["missing"].format(what=what))
        verdict, score = "unverifiable", 0.8
    elif f.relevance < 0.2:
        steps.append(t["irrelevant"].format(rel=f.relevance))
        verdict, score = "irrelevance", 0.8
    elif f.min_support < 0.5:
        steps.append(t["weak"].format(sent=f.weakest[:60], sup=f.min_support))
        verdict, score = "unverifiable", 0.55 + 0.4 * (0.5 - f.min_support)
    else:
        steps.append(t["ok"].format(sup=f.min_support))
        verdict, score = "none", 0.4 * (1 - f.min_support)
    return verdict, round(min(1.0, max(0.0, score)), 4), steps


def _rationale(steps: list[str], label: str, lang: str) -> str:
    return " ".join(steps + [_TEXT["ko" if lang == "ko" else "en"]["verdict"].format(label=label)])


@operation("detect_hallucination", JudgeBinary)
def judge_binary(passages: list[str], history: list[dict], query: str, response: str, lang: str = "ko") -> JudgeBinary:
    verdict, score, steps = judge_rules(passages, history, query, response, lang)
    label = "faithful" if verdict == "none" else "hallucinated"
    return JudgeBinary(rationale=_rationale(steps, label, lang), label_binary=label, score=score)


@operation("detect_4class", Judge4Class)
def judge_4class(passages: list[str], history: list[dict], query: str, response: str, lang: str = "ko") -> Judge4Class:
    verdict, score, steps = judge_rules(passages, history, query, response, lang)
    label = labels_from_type(verdict, looks_like_refusal(response))[1]
    return Judge4Class(rationale=_rationale(steps, label, lang), label_4class=label, score=score)


@operation("detect_type", JudgeType)
def judge_type(passages: list[str], history: list[dict], query: str, response: str, lang: str = "ko") -> JudgeType:
    verdict, score, steps = judge_rules(passages, history, query, response, lang)
    return JudgeType(rationale=_rationale(steps, verdict, lang), hallu_type=verdict, score=score)


# ---- the detector ---------------------------------------------------------------------------------


def _describe(params: dict, ctx) -> dict:
    op = MODES[params["mode"]]
    return {"operation": op, "backend": ctx.router.backend(params["role"]), "prompt_version": prompt_version(op)}


def _call(sample: dict, params: dict) -> dict:
    """The judge's inputs for one sample (what its prompt shows)."""
    return {
        "lang": sample.get("lang") or "ko",
        "passages": [p["text"][: params["max_passage_chars"]] for p in (sample.get("passages") or [])[: params["max_passages"]]],
        "history": [{"role": m["role"], "content": m["content"]} for m in sample.get("history") or []],
        "query": sample.get("query") or "",
        "response": sample.get("response") or "",
    }


def _judge_findings_inputs(samples: list[dict], params: dict, ctx) -> list[tuple[dict, bool, int | None]]:
    """The rules backend's findings (a model judges for itself: none)."""
    if not ctx.router.is_offline(params["role"]):
        return []
    calls = [_call(s, params) for s in samples]
    return [(_judged(c["passages"], c["history"], c["query"], c["response"]), True, None) for c in calls]


@register_detector(
    "llm_judge",
    findings_inputs=_judge_findings_inputs,
    remote=lambda params, ctx: not ctx.router.is_offline(params["role"]),
    batch=True,
    version="2",
    describe=_describe,
    mode="multiclass",
    role="detector_judge",
    max_passages=10,
    max_passage_chars=4000,
)
def detect(samples: list[dict], params: dict, ctx) -> list[Detection | None]:
    """One judgement per sample, all in one concurrent pass within the judge model's limits
    (or one batch job). A call that fails for good (recorded in llm_calls) scores nothing."""
    mode = params["mode"]
    if mode not in MODES:
        raise ValueError(f"llm_judge: mode must be one of {sorted(MODES)}, got {mode!r}")
    outs = ctx.router.call_many(params["role"], MODES[mode], [_call(s, params) for s in samples])
    return [None if out is None else _detection(sample, out, mode) for sample, out in zip(samples, outs)]


def _detection(sample: dict, out, mode: str) -> Detection:
    refusal = looks_like_refusal(sample.get("response") or "")
    if mode == "binary":
        labels = labels_from_binary(out.label_binary == "hallucinated", refusal)
    elif mode == "4class":
        labels = labels_from_4class(out.label_4class)
    else:
        labels = labels_from_type(out.hallu_type, refusal)
    return Detection(float(out.score), *labels, out.rationale)
