"""dialogue_qc: the dialogue judge (K-FinHallu §4.2, Table 7) and its rules backend.

Dialogue judge (`judge_dialogue`, role dialogue_judge) scores the paper's rubric:
  answerability (0-1)  share of turns whose context really holds (answerable) or lacks
                       (unanswerable) the evidence for the question
  plausibility (1-3)   are the user's utterances plausible questions: well-formed, no broken
                       rewrites or leftover artifacts, no verbatim repeats, reconfirmations that
                       say what they reconfirm (3 all, 2 at most one in five flawed, 1 worse)
  correctness (0-1)    share of assistant turns that are right and supported by the gold passage:
                       the answer stated (yes/no with the right polarity), no number and no
                       sentence the gold passage (or the reconfirmed turn) does not support;
                       refusals exactly on unanswerable turns
  diversity (1-3)      reconfirm turns excluded: 1 if two questions ask for the same information,
                       3 if they also share little wording, else 2
  coherency (1-3)      1 if a question jumps to an unrelated topic (another document and no
                       specific term shared with the dialogue so far), 2 if it changes document
                       through a shared term, 3 if it stays on one document's thread
A dialogue below any configured threshold is dropped with the reasons recorded."""

from __future__ import annotations

import re
from itertools import combinations

import polars as pl
from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.schemas.rows import DialogueQcRow, TurnsRow
from finhallu.stages.base import Frames, Stage, StageContext, rows_frame, typed_rows
from finhallu.text.words import broken_particle
from finhallu.dialogue.assistant import OPENERS, is_refusal
from finhallu.text.normalize import contains_normalized, normalize
from finhallu.text.numbers import number_keys
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_words, has_final_consonant, jaccard
from pydantic import Field
from finhallu.schemas.section import Section


class DialogueQCConfig(Section):
    # Thresholds on the judge's scores (K-FinHallu Table 7); a dialogue below any is dropped.
    min_answerability: float = Field(1.0, ge=0.0, le=1.0)  # shares of turns
    min_plausibility: int = Field(2, ge=1, le=3)  # 1-3 scales
    min_correctness: float = Field(1.0, ge=0.0, le=1.0)
    min_diversity: int = Field(2, ge=1, le=3)
    min_coherency: int = Field(2, ge=1, le=3)


JUDGE = "rules-judge-v2"
CRITERIA = ("answerability", "plausibility", "correctness", "diversity", "coherency")


class DialogueScores(BaseModel):
    answerability: float
    plausibility: int
    correctness: float
    diversity: int
    coherency: int
    reasons: list[str] = []  # "criterion: finding" for every flaw seen


# ---- dialogue judge ----------------------------------------------------------------------
# A question ends in "?" or a Korean interrogative/request ending (…요, …까, …니, …나, …야, …지, …냐, …가, …죠, …래).
_QUESTION_END = re.compile(r"(\?|[요까니나야지냐가죠래][.!]?)\s*$")
_YES, _NO = {"예", "네", "yes"}, {"아니오", "아니요", "no"}
_YES_START = re.compile(r"^(네|예|맞습니다|yes|correct)\b", re.IGNORECASE)
_NO_START = re.compile(r"^(아니요|아닙니다|아니오|no)\b", re.IGNORECASE)
_PREFIX = re.compile(
    r"^(?:(?:네|예|아니요|아닙니다|맞습니다|다시 확인해 보니 맞습니다|Yes|No|Correct|that's right|"
    r"I double-checked)(?:[,.:]\s*|\s+|$))+",
    re.IGNORECASE,
)  # a whole word: not the 예 of 예금
_GLUED_PRONOUN = re.compile(r"[0-9A-Za-z가-힣](그건|그게|그걸)(?=\s|$)")
_ARTIFACT = re.compile(r"[|{}<>]|\s{2,}")


def _yesno(answer: str | None) -> str | None:
    a = (answer or "").strip().lower()
    return "yes" if a in _YES else "no" if a in _NO else None


def _body(response: str, lang: str) -> str:
    """The response without its yes/no or confirmation prefix and discourse opener."""
    text = _PREFIX.sub("", response.strip())
    for op in sorted(OPENERS.get(lang, OPENERS["en"]), key=len, reverse=True):
        if op and text.startswith(op):
            return text[len(op) :]
    return text


def _unsupported_numbers(response: str, support: str) -> list[str]:
    """Numbers of the response that the supporting text does not hold."""
    return [f"states {k} absent from the gold passage" for k in sorted(number_keys(response) - number_keys(support))]


def _unsupported_sentences(response: str, support: list[str], lang: str) -> list[str]:
    """Sentences of the response most of whose content words the supporting texts do not hold."""
    out = []
    for sent in split_sentences(_body(response, lang)):
        words = content_words(sent)
        if len(words) >= 3:
            covered = sum(contains_normalized(support, w) for w in words) / len(words)
            if covered < 0.5:
                out.append(f"sentence not supported by the gold passage ({covered:.0%}): {sent[:60]}")
    return out


def _copula_error(query: str) -> bool:
    """ "무엇예요", "대출예요" (예요 after a batchim) or "얼마이에요" (이에요 without one)."""
    return any(has_final_consonant(m.group(1)) for m in re.finditer(r"([가-힣])예요", query)) or any(
        not has_final_consonant(m.group(1)) for m in re.finditer(r"([가-힣])이에요", query)
    )


def _specific_terms(text: str) -> set[str]:
    return {w for w in content_words(text) if len(w) >= 3 and not w[0].isdigit()}


@operation("judge_dialogue", DialogueScores)
def judge_dialogue(turns: list[dict], lang: str) -> DialogueScores:
    """turns: [{turn_index, kind, reconfirms_turn, query, standalone_query, response, answerable,
    clue, answer, gold_passage, doc, context: [passage texts]}] in order. Each criterion appends
    its findings to `reasons`, prefixed by the criterion's name."""
    reasons: list[str] = []
    answerability = _answerability(turns, reasons)
    correctness = _correctness(turns, lang, reasons)
    plausibility = _plausibility(turns, reasons)
    diversity = _diversity(turns, reasons)
    coherency = _coherency(turns, reasons)
    return DialogueScores(
        answerability=answerability,
        plausibility=plausibility,
        correctness=correctness,
        diversity=diversity,
        coherency=coherency,
        reasons=reasons,
    )


def _answerability(turns: list[dict], reasons: list[str]) -> float:
    """Share of turns whose context holds the evidence (answerable) or holds none of it (unanswerable)."""
    ans_ok = []
    for t in turns:
        answer = t["answer"] if _yesno(t["answer"]) is None and len(normalize(t["answer"] or "")) >= 2 else None
        holds = [
            bool((t["clue"] and contains_normalized(x, t["clue"])) or (answer and contains_normalized(x, answer)))
            for x in t["context"]
        ]
        if t["answerable"]:
            ok = (
                bool(t["gold_passage"])
                and t["gold_passage"] in t["context"]
                and (
                    (t["clue"] and contains_normalized(t["gold_passage"], t["clue"]))
                    or bool(answer and contains_normalized(t["gold_passage"], answer))
                )
            )
            if not ok:
                reasons.append(f"answerability: turn {t['turn_index']} context does not hold the evidence")
        else:
            ok = not any(holds)
            if not ok:
                reasons.append(f"answerability: turn {t['turn_index']} is labelled unanswerable but a passage holds the evidence")
        ans_ok.append(ok)
    return sum(ans_ok) / len(ans_ok)


def _correctness(turns: list[dict], lang: str, reasons: list[str]) -> float:
    """Share of responses that answer (or refuse) as the gold passage allows, with every claim supported."""
    by_index = {t["turn_index"]: t for t in turns}
    correct = []
    for t in turns:
        resp, flaws = t["response"], []
        if not t["answerable"]:
            if not is_refusal(resp):
                flaws.append("answers an unanswerable question")
        elif is_refusal(resp):
            flaws.append("refuses although the gold passage answers")
        else:
            support = t["gold_passage"] or ""
            if t["kind"] == "reconfirm":
                earlier = by_index.get(t["reconfirms_turn"])
                support += "\n" + (earlier["response"] if earlier else "")
                if not _YES_START.search(resp):
                    flaws.append("does not confirm the earlier statement")
            polarity = _yesno(t["answer"])
            if t["kind"] != "reconfirm" and polarity:
                said = "yes" if _YES_START.search(resp) else "no" if _NO_START.search(resp) else None
                if said != polarity:
                    flaws.append(f"answers {said or 'neither yes nor no'} where the passage says {polarity}")
            elif t["kind"] != "reconfirm" and not (
                contains_normalized(resp, t["answer"]) or contains_normalized(resp, t["clue"])
            ):
                flaws.append("does not state the answer")
            # An answer may restate the question's own terms ("예금자보호 한도는 1억 원입니다."): they
            # support its words, never its numbers (a figure must come from the passage).
            question = t.get("standalone_query") or t.get("query") or ""
            flaws += _unsupported_sentences(resp, [support, question], lang)
            flaws += _unsupported_numbers(resp, support)
        correct.append(not flaws)
        reasons += [f"correctness: turn {t['turn_index']} {f}" for f in flaws]
    return sum(correct) / len(correct)


def _plausibility(turns: list[dict], reasons: list[str]) -> int:
    """1-3: how many user utterances are well-formed, unbroken, not repeated, reconfirms that say what."""
    by_index = {t["turn_index"]: t for t in turns}
    plausible, seen = [], set()
    for t in turns:
        q, flaws = t["query"].strip(), []
        if not 5 <= len(q) <= 250 or not _QUESTION_END.search(q):
            flaws.append("not a well-formed question")
        if _ARTIFACT.search(q) or broken_particle(q) or _GLUED_PRONOUN.search(q) or _copula_error(q):
            flaws.append("broken wording")
        if normalize(q) in seen:
            flaws.append("repeats an earlier utterance verbatim")
        if t["kind"] == "reconfirm":
            earlier = by_index.get(t["reconfirms_turn"])
            said = earlier and (contains_normalized(q, earlier["answer"]) or _yesno(earlier["answer"]) is not None)
            if not earlier or t["reconfirms_turn"] >= t["turn_index"] or not said:
                flaws.append("does not say which earlier statement it reconfirms")
        seen.add(normalize(q))
        plausible.append(not flaws)
        reasons += [f"plausibility: turn {t['turn_index']} {f}: {q[:50]}" for f in flaws]
    share = sum(plausible) / len(plausible)
    plausibility = 3 if share == 1 else 2 if share >= 0.8 else 1
    return plausibility


def _diversity(turns: list[dict], reasons: list[str]) -> int:
    """1-3: no question asked twice, and little overlap between the main questions (reconfirms excluded)."""
    main = [t for t in turns if t["kind"] != "reconfirm"]
    overlaps, repeats = [], []
    for a, b in combinations(main, 2):
        ov = jaccard(a["standalone_query"], b["standalone_query"])
        overlaps.append(ov)
        same_info = (a["clue"] or a["standalone_query"], a["answer"]) == (b["clue"] or b["standalone_query"], b["answer"])
        if same_info or normalize(a["standalone_query"]) == normalize(b["standalone_query"]) or ov >= 0.7:
            repeats.append(f"diversity: turn {b['turn_index']} asks again what turn {a['turn_index']} asked")
    mean_overlap = sum(overlaps) / len(overlaps) if overlaps else 0.0
    diversity = 1 if repeats else 3 if mean_overlap < 0.3 else 2
    reasons += repeats
    return diversity


def _coherency(turns: list[dict], reasons: list[str]) -> int:
    """1-3: each turn stays in a document already discussed or moves on through a shared specific term."""
    jumps, soft = [], []
    for i, t in enumerate(turns[1:], start=1):
        if t["kind"] == "reconfirm":
            if not t["reconfirms_turn"] or t["reconfirms_turn"] >= t["turn_index"]:
                jumps.append(f"coherency: turn {t['turn_index']} reconfirms nothing said before")
            continue
        before = turns[:i]
        if t["doc"] in {b["doc"] for b in before}:
            continue
        said = set().union(*(_specific_terms(b["standalone_query"] + " " + b["response"]) for b in before))
        shared = _specific_terms(t["standalone_query"]) & said
        if shared:
            soft.append(f"coherency: turn {t['turn_index']} moves to another document via {sorted(shared)[:3]}")
        else:
            jumps.append(f"coherency: turn {t['turn_index']} jumps to an unrelated topic: {t['standalone_query'][:50]}")
    coherency = 1 if jumps else 2 if soft else 3
    reasons += jumps + soft
    return coherency


def dialogue_payload(turns: list[TurnsRow], passages: dict[str, str], doc_of: dict[str, str]) -> list[dict]:
    """The judge's view of a dialogue: utterances, responses and the passages each turn saw."""
    return [
        {
            "turn_index": t["turn_index"],
            "kind": t["kind"],
            "reconfirms_turn": t["reconfirms_turn"],
            "query": t["query"],
            "standalone_query": t["standalone_query"],
            "response": t["response"],
            "answerable": t["answerable"],
            "clue": t["clue_text"],
            "answer": t["answer"],
            "gold_passage": passages[t["gold_passage_id"]] if t["gold_passage_id"] else None,
            "doc": doc_of.get(t["seed_id"]),
            "context": [passages[c["passage_id"]] for c in t["context"]],
        }
        for t in turns
    ]


def threshold_failures(s: DialogueScores | dict, cfg: DialogueQCConfig) -> list[str]:
    """One reason per criterion below its threshold, with the judge's findings for it."""
    scores = s if isinstance(s, dict) else s.model_dump()
    out = []
    for crit in CRITERIA:
        need = getattr(cfg, f"min_{crit}")
        if scores[crit] < need:
            value = f"{scores[crit]:.2f}" if isinstance(scores[crit], float) else str(scores[crit])
            why = [r.split(": ", 1)[1] for r in scores.get("reasons", []) if r.startswith(crit + ":")]
            out.append(f"{crit} {value} < {need}" + (f": {'; '.join(why[:3])}" if why else ""))
    return out


def run(inputs: Frames, ctx: StageContext[DialogueQCConfig]) -> Frames:
    cfg: DialogueQCConfig = ctx.config
    llm = ctx.llm
    passages = dict(zip(inputs["passages"]["passage_id"], inputs["passages"]["text"]))
    doc_of = dict(zip(inputs["qa_seeds"]["seed_id"], inputs["qa_seeds"]["doc_id"]))
    by_dlg: dict[str, list[TurnsRow]] = {}
    for t in typed_rows(inputs["turns"].sort("dialogue_id", "turn_index"), TurnsRow):
        by_dlg.setdefault(t["dialogue_id"], []).append(t)
    rows: list[DialogueQcRow] = []
    dlgs = inputs["dialogues"].select("dialogue_id", "lang").sort("dialogue_id").to_dicts()
    judge = JUDGE if llm.is_offline("dialogue_judge") else llm.backend("dialogue_judge")
    # Independent judgements: one concurrent pass within the judge model's limits.
    verdicts: list[DialogueScores | None] = llm.call_many(
        "dialogue_judge",
        "judge_dialogue",
        [{"turns": dialogue_payload(by_dlg.get(d["dialogue_id"], []), passages, doc_of), "lang": d["lang"]} for d in dlgs],
    )
    for n, (d, s) in enumerate(zip(dlgs, verdicts)):
        if s is None:  # no valid judgement after retries and one repair (recorded in llm_calls): dropped
            s = DialogueScores(answerability=0.0, plausibility=1, correctness=0.0, diversity=1, coherency=1)
            reasons = ["judge: no valid judgement (LLM call failed; see llm_calls)"]
        else:
            reasons = threshold_failures(s, cfg)
        rows.append(
            {
                "dialogue_id": d["dialogue_id"],
                # the scores as s.model_dump(exclude={"reasons"}) gives them, in field order
                "answerability": s.answerability,
                "plausibility": s.plausibility,
                "correctness": s.correctness,
                "diversity": s.diversity,
                "coherency": s.coherency,
                "passed": not reasons,
                "reasons": reasons,
                "judge": judge,
            }
        )
        ctx.progress(n + 1, len(dlgs))
    return {"dialogue_qc": rows_frame(rows, "dialogue_id", schema_overrides={"reasons": pl.List(pl.String)})}


STAGE = Stage(
    "dialogue_qc",
    run,
    DialogueQCConfig,
    inputs=("dialogues", "turns", "passages", "qa_seeds"),
    outputs=("dialogue_qc",),
    description="dialogue judge",
    roles=("dialogue_judge",),
    operations=("judge_dialogue",),
)
