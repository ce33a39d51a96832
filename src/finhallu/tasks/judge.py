"""dialogue_qc and injection_qc: the judges (rules backends), K-FinHallu §4.2/§4.4, Table 7.

Dialogue judge: answerability (0-1), plausibility (1-3), correctness (0-1), diversity (1-3,
reconfirm turns excluded), coherency (1-3); a dialogue below any configured threshold is
dropped with its reasons. Injection judge: appropriateness = an independent check that the
injected sample really carries its label; naturalness 1-3 (keep >= 2).
"""

from __future__ import annotations

import difflib
import re

import polars as pl

from finhallu.config import DialogueQCConfig, InjectionQCConfig
from finhallu.tasks.base import Frames, StageContext, rows_frame
from finhallu.tasks.inject.lexicon import MODIFIER_SET, TERM_SET
from finhallu.tasks.responses import is_refusal
from finhallu.tasks.textnorm import (contains_normalized, content_words, has_final_consonant, jaccard, normalize, number_keys,
                                     split_sentences)

JUDGE = "rules-judge-v1"


# ---- dialogue judge ----------------------------------------------------------------------
# A question ends in "?" or a Korean interrogative/request ending (…요, …까, …니, …나, …야, …지, …냐, …가).
_QUESTION_END = re.compile(r"(\?|[요까니나야지냐가죠래][.!]?)\s*$")

def _supports(text: str, turn: dict) -> bool:
    if turn["clue_text"] and contains_normalized(text, turn["clue_text"]):
        return True
    return False


def judge_dialogue(turns: list[dict], passages: dict[str, str], doc_of: dict[str, str]) -> dict:
    answerable_ok, correct = [], []
    well_formed = []
    for t in turns:
        texts = [passages[c["passage_id"]] for c in t["context"]]
        if t["answerable"]:
            answerable_ok.append(any(_supports(x, t) for x in texts))
            if t["kind"] == "reconfirm" or (t["answer"] and t["clue_text"] and t["answer"] in ("예", "아니오")):
                correct.append(not is_refusal(t["response"]))
            else:
                ans = t["answer"] or ""
                correct.append(contains_normalized(t["response"], ans) or contains_normalized(t["response"], t["clue_text"]))
        else:
            answerable_ok.append(not any(_supports(x, t) for x in texts) and not any(
                contains_normalized(x, t["answer"]) for x in texts if len(normalize(t["answer"] or "")) >= 2))
            correct.append(is_refusal(t["response"]))
        q = t["query"].strip()
        well_formed.append(5 <= len(q) <= 300 and bool(_QUESTION_END.search(q)))
    plaus_share = sum(well_formed) / len(well_formed)
    plausibility = 3 if plaus_share == 1 else (2 if plaus_share >= 0.8 else 1)
    main = [t for t in turns if t["kind"] != "reconfirm"]
    # Diversity (Table 7): do the questions ask for different information? Same evidence asked
    # twice (paraphrases) scores 1; distinct information phrased alike (templated filings) 2.
    asked = [(t["clue_text"] or t["standalone_query"], t["answer"]) for t in main]
    distinct = len(set(asked)) == len(asked) and len({t["standalone_query"] for t in main}) == len(main)
    overlaps = [jaccard(a["standalone_query"], b["standalone_query"]) for a, b in zip(main, main[1:])]
    mean_overlap = sum(overlaps) / len(overlaps) if overlaps else 0.0
    diversity = 1 if not distinct else (3 if mean_overlap < 0.5 else 2)
    links = []
    for a, b in zip(turns, turns[1:]):
        same_doc = doc_of.get(a["seed_id"]) == doc_of.get(b["seed_id"])
        links.append(same_doc or jaccard(a["standalone_query"], b["standalone_query"]) > 0.1)
    link_share = sum(links) / len(links) if links else 1.0
    coherency = 3 if link_share >= 0.8 else 2 if link_share >= 0.5 else 1
    return {
        "answerability": sum(answerable_ok) / len(answerable_ok),
        "plausibility": plausibility,
        "correctness": sum(correct) / len(correct),
        "diversity": diversity,
        "coherency": coherency,
    }


def run_dialogue_qc(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: DialogueQCConfig = ctx.config
    passages = dict(zip(inputs["passages"]["passage_id"], inputs["passages"]["text"]))
    doc_of = dict(zip(inputs["qa_seeds"]["seed_id"], inputs["qa_seeds"]["doc_id"]))
    by_dlg: dict[str, list[dict]] = {}
    for t in inputs["turns"].sort("dialogue_id", "turn_index").iter_rows(named=True):
        by_dlg.setdefault(t["dialogue_id"], []).append(t)
    rows = []
    ids = inputs["dialogues"]["dialogue_id"].to_list()
    for n, did in enumerate(ids):
        s = judge_dialogue(by_dlg.get(did, []), passages, doc_of)
        reasons = [f"{k} {s[k]:.2f} < {v}" if isinstance(s[k], float) else f"{k} {s[k]} < {v}"
                   for k, v in (("answerability", cfg.min_answerability), ("plausibility", cfg.min_plausibility),
                                ("correctness", cfg.min_correctness), ("diversity", cfg.min_diversity),
                                ("coherency", cfg.min_coherency)) if s[k] < v]
        rows.append({"dialogue_id": did, **s, "passed": not reasons, "reasons": reasons, "judge": JUDGE})
        ctx.progress(n + 1, len(ids))
    return {"dialogue_qc": rows_frame(rows, "dialogue_id", schema_overrides={"reasons": pl.List(pl.String)})}


# ---- injection judge -----------------------------------------------------------------------
def _word_diff(a: str, b: str, context: int = 0) -> list[tuple[str, str]]:
    """Changed word runs of a -> b, each widened by `context` neighbouring words on both sides."""
    wa, wb = a.split(), b.split()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes():
        if op != "equal":
            out.append((" ".join(wa[max(0, i1 - context):i2 + context]), " ".join(wb[max(0, j1 - context):j2 + context])))
    return out


def _pair_in(diff: list[tuple[str, str]], lexicon: set[tuple[str, str]],
             wide: list[tuple[str, str]] = ()) -> bool:
    for old, new in diff:
        for a, b in lexicon:
            if a.lower() in old.lower() and b.lower() in new.lower():
                return True
    # Multi-word entries share words with their counterpart, which the bare diff leaves out
    # ("net interest income" -> "noninterest income", "more than" -> "less than"): in the widened
    # runs the edit must remove an occurrence of a and add one of b.
    for old, new in wide:
        o, n = old.lower(), new.lower()
        for a, b in lexicon:
            a, b = a.lower(), b.lower()
            if o.count(a) > n.count(a) and n.count(b) > o.count(b):
                return True
    return False


_OPINION_MARKERS = re.compile(r"(가장|추천|유리한|걱정하지|안전하고|괜찮은|생각합니다|볼 수 있습니다|In my view|Frankly|clearly|Honestly|excellent)",
                              re.IGNORECASE)


def verify_label(inj: dict, turn: dict, evidence: list[str], history: str) -> tuple[bool, str]:
    """Does the injected response really carry the hallucination its label claims?"""
    orig, new = inj["original_response"], inj["injected_response"]
    ev = "\n".join(evidence)
    ev_keys = number_keys(ev)
    added_keys = number_keys(new) - number_keys(orig)
    diff = _word_diff(orig, new)
    wide = _word_diff(orig, new, context=3)
    sub, typ = inj["hallu_subtype"], inj["hallu_type"]
    if typ == "false_refusal":
        return (is_refusal(new) and turn["answerable"] and any(contains_normalized(x, turn["clue_text"]) for x in evidence),
                "refusal over evidence that holds the clue")
    if typ == "false_acceptance":
        lacks = not any(contains_normalized(x, turn["clue_text"]) for x in evidence) if turn["clue_text"] else True
        return (lacks and not is_refusal(new), "an answer over evidence that lacks the clue")
    if sub == "number_error":
        return (bool(added_keys) and not (added_keys & ev_keys), f"new numbers {sorted(added_keys)} absent from evidence")
    if sub == "inconsistency":
        hist_keys = number_keys(history)
        changed_from_history = bool(number_keys(orig) & hist_keys - number_keys(new))
        return ((bool(added_keys) and not (added_keys & hist_keys) and changed_from_history) or _pair_in(diff, TERM_SET | MODIFIER_SET, wide),
                "restates an earlier statement differently")
    if sub == "modifier_change":
        return (_pair_in(diff, MODIFIER_SET, wide), f"modifier flipped: {diff[:2]}")
    if sub == "financial_term_misunderstanding":
        return (_pair_in(diff, TERM_SET, wide), f"term swapped: {diff[:2]}")
    if sub == "fabricated_detail":
        added = [s for s in split_sentences(new) if s not in orig]
        unsupported = [s for s in added if not contains_normalized(ev, s) and (number_keys(s) - ev_keys or not content_words(s))]
        return (bool(unsupported), "adds a specific detail the evidence lacks")
    if sub == "subjective_opinion":
        added = [s for s in split_sentences(new) if s not in orig]
        return (any(_OPINION_MARKERS.search(s) and not contains_normalized(ev, s) for s in added), "adds an opinion")
    if sub == "condition_not_satisfied":
        # The answer's value is gone and every number now stated is one the evidence gives (for another condition).
        gone = number_keys(orig) - number_keys(new)
        return (bool(gone) and number_keys(new) <= ev_keys and not contains_normalized(new, turn["answer"]),
                "states a value the evidence gives for another condition")
    if sub in ("question_misunderstanding", "off_topic_drift"):
        return (not contains_normalized(new, turn["answer"]) and not contains_normalized(new, turn["clue_text"]),
                "does not answer the question asked")
    return False, f"no check for {typ}/{sub}"


def _broken_particle(text: str) -> bool:
    """A doubled particle (원금을를, 한도는은). 이가 only after a batchim syllable (원금이가), since
    a noun ending in 이 takes 가 naturally (금리 차이가, 나이가)."""
    if re.search(r"(을를|를을|은는|는은|가이)\b", text):
        return True
    return any(has_final_consonant(m.group(1)) for m in re.finditer(r"([가-힣])이가\b", text))


def naturalness(orig: str, new: str, hallu_type: str) -> tuple[int, list[str]]:
    issues = []
    if re.search(r"\s{2,}", new):
        issues.append("double space")
    if _broken_particle(new):
        issues.append("broken particle")
    if not new.strip().endswith((".", "다", "요", "!", "?", ")")):
        issues.append("no sentence ending")
    if hallu_type not in ("false_refusal", "false_acceptance"):
        ratio = len(new) / max(1, len(orig))
        if not 0.4 <= ratio <= 2.5:
            issues.append(f"length ratio {ratio:.2f}")
    return max(1, 3 - len(issues)), issues


def run_injection_qc(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: InjectionQCConfig = ctx.config
    passages = dict(zip(inputs["passages"]["passage_id"], inputs["passages"]["text"]))
    turns = {t["turn_id"]: t for t in inputs["turns"].iter_rows(named=True)}
    history: dict[str, list[dict]] = {}
    for t in inputs["turns"].sort("dialogue_id", "turn_index").iter_rows(named=True):
        history.setdefault(t["dialogue_id"], []).append(t)
    rows = []
    inj_rows = list(inputs["injections"].iter_rows(named=True))
    for n, inj in enumerate(inj_rows):
        turn = turns[inj["turn_id"]]
        evidence = [passages[c["passage_id"]] for c in inj["injected_context"]]
        hist = "\n".join(f"{t['query']}\n{t['response']}" for t in history[inj["dialogue_id"]] if t["turn_index"] < inj["turn_index"])
        ok, why = verify_label(inj, turn, evidence, hist)
        nat, issues = naturalness(inj["original_response"], inj["injected_response"], inj["hallu_type"])
        reasons = ([] if ok else [f"label not verified: {why}"]) + ([f"naturalness {nat}: {', '.join(issues)}"] if nat < cfg.min_naturalness else [])
        rows.append({"injection_id": inj["injection_id"], "appropriate": ok, "naturalness": nat,
                     "passed": ok and nat >= cfg.min_naturalness, "reasons": reasons, "judge": JUDGE})
        ctx.progress(n + 1, len(inj_rows))
    return {"injection_qc": rows_frame(rows, "injection_id", schema_overrides={"reasons": pl.List(pl.String)})}
