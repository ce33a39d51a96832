"""Irrelevance: a fluent, often true answer that does not answer *this* question."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import random
from functools import lru_cache
import re
from decimal import Decimal
from itertools import combinations, permutations

from finhallu.injectors import Injected, TurnView, register_leaf, register_type
from finhallu.dialogue.assistant import OPENERS, answer_turn, clean_sentence, is_lead_in
from finhallu.text.normalize import contains_normalized
from finhallu.injectors.conditions import (
    Item,
    phrase_end,
    cond_diff,
    list_items,
    sentence_bounds,
    standalone,
    table_items,
    value_counts,
)
from finhallu.text.words import fix_particle
from finhallu.injectors.verify import Proposal
from finhallu.text.numbers import canon_unit, find_numbers, number_keys, number_keys_in
from finhallu.text.sentences import split_sentences


def _restated_list(resp: str, items: list[Item], mine: Item) -> str | None:
    """The response restates the clue's list: drop the asked item, keep the others under their own
    conditions ("은행권에서는 40%, 제2금융권에서는 50%를" -> "제2금융권에서는 50%를")."""
    spans = find_numbers(resp)
    at: list[tuple[int, int]] = []  # (condition start, value phrase end) of each item in the response
    for item in items:
        hits = [s for s in spans if number_keys(s.raw) == item.key]
        if len(hits) != 1:
            return None
        before = resp[: hits[0].start].rstrip()
        if not before.endswith(item.cond) or (at and hits[0].start < at[-1][1]):
            return None
        at.append((len(before) - len(item.cond), phrase_end(resp, hits[0])))
    k = items.index(mine)
    if sentence_bounds(resp, at[0][0]) != sentence_bounds(resp, at[-1][1] - 1):
        return None
    if k + 1 < len(items):  # drop "<condition> <value>, " up to the next item's condition
        return resp[: at[k][0]] + resp[at[k + 1][0] :]
    return resp[: at[k - 1][1]] + resp[at[k][1] :]  # the last item: drop ", <condition> <value>"


def _condition_swap(resp: str, span, mine: Item, other: Item) -> str | None:
    """The response states only the asked item: state the other item's value under its condition
    ("은행권에서 … 40%가" -> "비은행권에서 … 50%가")."""
    if other.key & number_keys(resp):
        return None
    diff = cond_diff(mine.cond, other.cond)
    if diff is None:
        return None
    asked, instead = diff
    lo, hi = sentence_bounds(resp, span.start)
    end = phrase_end(resp, span)
    at = [lo + i for i in standalone(resp[lo:hi], asked)]
    at = [i for i in at if i + len(asked) <= span.start or i >= end]
    if len(at) != 1:
        return None
    edits = sorted([(at[0], at[0] + len(asked), instead), (span.start, end, other.phrase)], reverse=True)
    out = resp
    for a, b, repl in edits:  # right to left: earlier offsets stay valid
        rest = out[b:]
        if re.match(r"[가-힣]", repl[-1]):
            rest = fix_particle(repl, rest)
        out = out[:a] + repl + rest
    return out


def _cns_ok(view: TurnView, new: str, mine: Item, other: Item, ev_keys: AbstractSet[str]) -> bool:
    """One sentence changed; the asked value gone everywhere; the other value stated once, under its
    condition, a condition the question does not ask about."""
    resp, answer = view.turn["response"], view.turn.get("answer") or ""
    diff = cond_diff(mine.cond, other.cond)
    question = f"{view.turn.get('query') or ''} {view.turn.get('standalone_query') or ''}"
    if diff is None or standalone(question, diff[1]):
        return False
    old_s, new_s = split_sentences(resp), split_sentences(new)
    changed = [b for a, b in zip(old_s, new_s) if a != b]
    if len(old_s) != len(new_s) or len(changed) != 1 or contains_normalized(new, answer):
        return False
    if number_keys(answer) & number_keys(new) or not number_keys(new) <= ev_keys:
        return False
    was = next(a for a, b in zip(old_s, new_s) if a != b)
    now, before = value_counts(changed[0]), value_counts(was)
    return (
        now[next(iter(other.key))] == 1
        and all(n <= max(1, before[k]) for k, n in now.items())
        and bool(standalone(changed[0], diff[1]))
    )


def condition_not_satisfied(view: TurnView, rng: random.Random) -> Injected | None:
    """The clue lists the asked value beside values for other conditions: answer with another
    condition's value, stated under that condition, and the asked value nowhere. None when the
    clue does not list parallel conditions cleanly or the response cannot be edited locally."""
    clue, resp = view.turn.get("clue_text") or "", view.turn["response"]
    answer = view.turn.get("answer") or ""
    answer_keys = number_keys(answer)
    if not answer_keys:
        return None
    lists = list_items(clue) + table_items(clue, view.gold_text)
    ev_keys = number_keys_in([*view.evidence, clue])
    for span in find_numbers(resp):
        key = number_keys(span.raw)
        if not span.unit or not key or not (key & answer_keys):
            continue  # only the asked value itself, with its unit (years and counts of other things stay)
        for items in lists:
            mine = next((i for i in items if i.key == key), None)
            if mine is None:
                continue
            k = items.index(mine)
            # the adjacent conditions first (ties broken by the seed)
            others = sorted((i for i in items if i is not mine), key=lambda i: (abs(items.index(i) - k), rng.random()))
            restated = _restated_list(resp, items, mine)
            for other in others:
                new = restated or _condition_swap(resp, span, mine, other)
                if new and _cns_ok(view, new, mine, other, ev_keys):
                    return Injected(
                        "condition_not_satisfied",
                        new,
                        f"{mine.cond} {mine.phrase} -> {other.cond} {other.phrase} "
                        "(another condition's value, under that condition)",
                    )
    return None


_SCALE = {
    "조": 10**12,
    "억": 10**8,
    "천만": 10**7,
    "백만": 10**6,
    "십만": 10**5,
    "만": 10**4,
    "천": 10**3,
    "thousand": 10**3,
    "million": 10**6,
    "billion": 10**9,
    "trillion": 10**12,
}
_LAST_TOKEN = re.compile(r"(\d[\d,]*)(?:\.(\d+))?\s?(천만|백만|십만|조|억|만|천|thousand|million|billion|trillion)?", re.I)


def _tolerance(raw: str) -> Decimal:
    """Half a unit of the last stated place ("$0.2 billion" -> 0.05 billion, "1억 5천만" -> 5백만)."""
    last = list(_LAST_TOKEN.finditer(raw))[-1]
    scale = _SCALE.get((last.group(3) or "").lower(), 1)
    return Decimal("0.5") * Decimal(10) ** -len(last.group(2) or "") * scale


def _family(s) -> str:
    u = canon_unit(s.unit)
    return "%" if u in ("%", "%p", "percentage point", "percentage points") else u


def answer_derivable(answer: str, text: str) -> bool:
    """Whether text states the answer's value (after unit and scale normalisation) or lets it be
    derived from two stated numbers of its unit: their difference or sum, or (for a percentage or a
    multiple) their ratio or change rate, all within the rounding of the answer as written."""
    ops = find_numbers(text)
    for a in find_numbers(answer):
        if not number_keys(a.raw):
            continue
        tol, fam = _tolerance(a.raw), _family(a)
        if any(abs(o.value - a.value) <= tol and (not fam or not o.unit or _family(o) == fam) for o in ops):
            return True
        same = [o.value for o in ops if _family(o) == fam]
        if any(abs(abs(x - y) - a.value) <= tol or abs(x + y - a.value) <= tol for x, y in combinations(same, 2)):
            return True
        if fam in ("%", "배"):
            factor = 100 if fam == "%" else 1
            pairs = [(x, y) for x, y in permutations(ops, 2) if _family(x) == _family(y) != "%" and y.value]
            rates = [r for x, y in pairs for r in (x.value / y.value * factor, abs(x.value - y.value) / y.value * factor)]
            if any(abs(r - a.value) <= tol for r in rates):
                return True
    return False


def question_misunderstanding(view: TurnView, rng: random.Random) -> Injected | None:
    """Answer a different question about the same passage (a sibling QA), phrased like the original;
    never one whose answer states the asked answer or lets it be derived from its numbers."""
    answer = view.turn.get("answer") or ""
    gold = view.seed["passage_id"]
    answers = lambda text: contains_normalized(text, answer) or answer_derivable(answer, text)  # noqa: E731
    siblings = [
        s
        for s in view.sibling_seeds
        if s["passage_id"] == gold
        and s["answer"] != answer
        and s["qa_kind"] != "yesno"
        and not answers(s["clue_text"])
        and not answers(s["answer"])
    ]
    if not siblings or view.gold_text is None:
        return None
    # a supporting sentence when the original has one, so the length does not give the label away
    support = 1.0 if len(split_sentences(view.turn["response"])) >= 2 else 0.0
    for s in rng.sample(siblings, len(siblings)):
        out = answer_turn(
            question=s["question"],
            passage=view.gold_text,
            clue=s["clue_text"],
            answer=s["answer"],
            qa_kind=s["qa_kind"],
            lang=view.lang,
            rng_seed=rng.randrange(2**31),
            support_probability=support,
        )
        if not answers(out.response):
            return Injected("question_misunderstanding", out.response, f"answers instead: {s['question']}")
    return None


@lru_cache(maxsize=1 << 14)  # a passage is in many turns' contexts
def _statements(text: str) -> tuple[str, ...]:
    """The text's standalone statements, as an answer states its clue (no leading connective, no
    list lead-in, no table row)."""
    sents = [clean_sentence(s) for s in split_sentences(text)]
    return tuple(s for s in sents if "|" not in s and 20 <= len(s) <= 200 and not is_lead_in(s))


def _drift_sentences(text: str, view: TurnView) -> list[str]:
    answer, clue = view.turn.get("answer") or "", view.turn.get("clue_text")
    return [
        s
        for s in _statements(text)
        if not contains_normalized(s, answer)
        and not contains_normalized(s, clue)
        and not contains_normalized(view.turn["response"], s)
    ]


def off_topic_drift(view: TurnView, rng: random.Random) -> Injected | None:
    """Start on the question's topic, then drift: to another document's content, or (the hard
    variant) to adjacent information of the same document that does not answer the question."""
    others = [p for p in view.other_context if p["doc_id"] != view.doc_id]
    same = [p for p in view.other_context if p["doc_id"] == view.doc_id]
    pools = {
        "other_document": [(p["passage_id"], s) for p in others for s in _drift_sentences(p["text"], view)],
        "same_document": [(p["passage_id"], s) for p in same for s in _drift_sentences(p["text"], view)]
        + [(view.seed.get("passage_id"), s) for s in _drift_sentences(view.gold_text or "", view)],
    }
    kinds = [k for k in ("same_document", "other_document") if pools[k]]
    if not kinds:
        return None
    kind = rng.choice(kinds)
    pid, drift = rng.choice(pools[kind])
    if len(split_sentences(view.turn["response"])) >= 2:  # drift as long as the original runs
        more = [s for p, s in pools[kind] if p == pid and s != drift]
        if more:
            drift = drift + " " + more[0]
    # keep the original's discourse opener so only the content drifts
    lead = next((o for o in OPENERS[view.lang] if o and view.turn["response"].startswith(o)), "")
    return Injected("off_topic_drift", (lead + drift).strip(), f"drifts to {pid}: {drift}", strategy=kind)


_CONDITION_WORDS = ("경우", "이상", "이하", "미만", "초과", "다만", "단,", "if ", "unless", "except")


def _prefers(view: TurnView, subtype: str | None = None) -> float:
    """Turns with conditions or multi-aspect answers: several values, condition words, several sentences."""
    clue = view.turn.get("clue_text") or ""
    resp = view.turn["response"]
    return (
        len(find_numbers(clue))
        + 2 * any(w in clue for w in _CONDITION_WORDS)
        + 0.5 * (len(split_sentences(resp)) - 1)
        + 0.5 * clue.count(",")
    )


register_type("irrelevance", _prefers, applies=lambda view: view.turn["answerable"] and view.turn["kind"] != "reconfirm")


# ---- acceptance rules: fluent and grounded, but not the answer to the question asked -------------------
def _accept_condition_not_satisfied(p: Proposal) -> tuple[bool, str]:
    """The asked value is gone from the edited sentence, which now states one the evidence gives (for another condition)."""
    changed = p.new_sentences
    return (
        bool(p.removed_keys)
        and bool(changed)
        and number_keys(p.new) <= p.evidence_keys
        and not any(contains_normalized(x, p.turn["answer"]) for x in changed),
        "states a value the evidence gives for another condition",
    )


def _accept_not_the_answer(p: Proposal) -> tuple[bool, str]:
    return (
        not contains_normalized(p.new, p.turn["answer"]) and not contains_normalized(p.new, p.turn["clue_text"]),
        "does not answer the question asked",
    )


register_leaf(
    "irrelevance",
    "condition_not_satisfied",
    accept=_accept_condition_not_satisfied,
    minimal_edit=True,
    names={"en": "Condition Not Satisfied", "ko": "조건 불충족"},
    rationale={
        "ko": "2) 주장: 응답은 질문한 조건이 아닌 다른 조건의 값 '{new}'를 제시합니다.",
        "en": "2) Claims: the response gives '{new}', the value for another condition than the one asked.",
    },
    instruction={
        "ko": "질문한 조건 대신 근거가 다른 조건(다른 대상, 기간, 기준)에 대해 밝힌 값을 답하기",
        "en": "give the value the evidence states for another condition (another group, period or "
        "threshold) instead of the one asked",
    },
)(condition_not_satisfied)
register_leaf(
    "irrelevance",
    "question_misunderstanding",
    accept=_accept_not_the_answer,
    names={"en": "Question Misunderstanding", "ko": "질문 오해"},
    rationale={
        "ko": "2) 주장: 응답은 질문과 다른 내용('{added}')에 답하고 있습니다.",
        "en": "2) Claims: the response answers a different question ('{added}').",
    },
    instruction={"ko": "같은 문단에 대한 다른 질문에 답하기", "en": "answer a different question about the same passage"},
)(question_misunderstanding)
register_leaf(
    "irrelevance",
    "off_topic_drift",
    accept=_accept_not_the_answer,
    names={"en": "Off-topic Drift", "ko": "주제 이탈"},
    rationale={
        "ko": "2) 주장: 응답은 질문의 주제에서 벗어난 내용('{added}')을 말합니다.",
        "en": "2) Claims: the response drifts away from the question ('{added}').",
    },
    instruction={
        "ko": "주제로 시작해 다른 내용으로 흘러가기 (어려운 변형: 같은 문서의 인접한 정보로 답하기)",
        "en": "start on the topic, then drift to other content; the hard variant uses adjacent "
        "information from the same document that does not answer the question",
    },
)(off_topic_drift)
