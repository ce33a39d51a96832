"""Parallel conditions of a clue, for Irrelevance / Condition Not Satisfied.

A clue that lists one quantity under several conditions ("은행권에서는 40%, 제2금융권에서는 50%",
"급여 의료비의 자기부담률이 20%, 비급여 의료비의 자기부담률이 30%", a table row under its header)
yields one Item per listed value: the value and the condition words it is listed under. The
injector answers with another item's value stated under that item's condition; a clue that does
not list its conditions cleanly yields nothing (the turn cannot carry the subtype).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from finhallu.text.numbers import NumberSpan, canon_unit, find_numbers, number_keys
from finhallu.text.sentences import split_sentences
from finhallu.text.words import strip_particle

_BOUND = re.compile(r"\s?(?:이상|이하|미만|초과|이내)")
# what may follow a listed value before the separator, and the separator itself
_LINK = re.compile(r"^(?:이며|이고|이나|이거나|로|으로|씩)?\s*[,;、]\s*(?P<cond>\S(?:[^,;、.|]{0,28}\S)?)\s*$")
_ENDINGS = ("의 경우", "인 경우", "인 경우에는", "경우에는", "경우", "에서는", "이라면", "이면", "하면", "라면", "면")
_MAX_COND_WORDS = 4


@dataclass(frozen=True)
class Item:
    span: NumberSpan  # the listed value (in the clue)
    end: int  # end of the value phrase (with a bound word: "7억 원 이하")
    cond: str  # the condition words it is listed under
    phrase: str  # the value phrase as the clue writes it

    @property
    def key(self) -> frozenset[str]:
        return number_keys(self.span.raw)


def _unit(s: NumberSpan) -> str:
    return canon_unit(s.unit)


def phrase_end(text: str, s: NumberSpan) -> int:
    m = _BOUND.match(text, s.end)
    return m.end() if m else s.end


def _first_cond(clue: str, start: int, n_words: int) -> str:
    """Condition words of a list's first item: as many words as the second item's condition,
    back from the value within its clause, never past the sentence's topic ("전세보증금은")."""
    clause = re.split(r"[,;.:()]\s|[,;:]", clue[:start])[-1]
    words = clause.split()
    out: list[str] = []
    for i, w in enumerate(reversed(words)):
        if len(out) == n_words or re.search(r"\d", w) or (i and w.endswith(("은", "는")) and not w.endswith("에서는")):
            break
        out.insert(0, w)
    return " ".join(out)


def _item(clue: str, s: NumberSpan, cond: str) -> Item:
    end = phrase_end(clue, s)
    return Item(s, end, cond, clue[s.start : end])


def list_items(clue: str) -> list[list[Item]]:
    """The parallel lists of a clue: runs of same-unit values, each after its own condition words."""
    nums = [s for s in find_numbers(clue) if number_keys(s.raw)]
    lists: list[list[Item]] = []
    for unit in {_unit(s) for s in nums}:
        same = [s for s in nums if _unit(s) == unit and not (unit == "년" or (not unit and 1900 <= s.value <= 2100))]
        run: list[Item] = []
        prevs: list[NumberSpan | None] = [None, *same[:-1]]
        for prev, cur in zip(prevs, same):
            m = _LINK.match(clue[phrase_end(clue, prev) : cur.start]) if prev is not None else None
            cond = m.group("cond").strip() if m else ""
            if m and prev is not None and len(cond.split()) <= _MAX_COND_WORDS and not any(n.unit for n in find_numbers(cond)):
                if not run:
                    first = _first_cond(clue, prev.start, len(cond.split()))
                    run = [_item(clue, prev, first)]
                run.append(_item(clue, cur, cond))
                continue
            if len(run) >= 2:
                lists.append(run)
            run = []
        if len(run) >= 2:
            lists.append(run)
    # every condition named, every value distinct: otherwise not a clean list
    return [r for r in lists if all(i.cond for i in r) and len({next(iter(number_keys(i.span.raw))) for i in r}) == len(r)]


def table_items(clue: str, passage: str | None) -> list[list[Item]]:
    """A table row clue ("DTI | 40% | 60%"): its value cells under their header cells."""
    if "|" not in clue or not passage:
        return []
    lines = passage.splitlines()
    row = next((i for i, ln in enumerate(lines) if ln.strip() == clue.strip()), None)
    if row is None:
        return []
    top = row
    while top > 0 and "|" in lines[top - 1]:
        top -= 1
    if top == row:
        return []
    header = [c.strip() for c in lines[top].split("|")]
    cells = clue.split("|")
    if len(header) != len(cells):
        return []
    items, pos = [], 0
    for k, cell in enumerate(cells):
        start = clue.index(cell, pos)
        pos = start + len(cell)
        nums = find_numbers(cell)
        if k == 0 or len(nums) != 1 or not header[k]:
            continue
        s = nums[0]
        span = NumberSpan(start + s.start, start + s.end, s.raw, s.value, s.unit, start + s.number_end)
        item = _item(clue, span, header[k])
        if clue[item.end : pos].strip() or clue[start : span.start].strip():  # "80%(수도권 70%)": no clean value cell
            continue
        items.append(item)
    return [items] if len(items) >= 2 and len({_unit(i.span) for i in items}) == 1 else []


def cond_key(words: str) -> str:
    """A condition's bare key: "은행권에서는" -> "은행권", "수도권의 경우" -> "수도권", "초과하면" -> "초과"."""
    w = words.strip()
    for e in _ENDINGS:
        if w.endswith(e) and len(w) > len(e) + 1:
            w = w[: -len(e)].rstrip()
            break
    parts = w.split()
    if parts:
        parts[-1] = strip_particle(parts[-1])
    return " ".join(parts)


def cond_diff(a: str, b: str) -> tuple[str, str] | None:
    """The words in which two conditions differ, as bare keys ("급여 의료비의 …" vs "비급여 의료비의 …")."""
    wa, wb = a.split(), b.split()
    while len(wa) > 1 and len(wb) > 1 and cond_key(wa[-1]) == cond_key(wb[-1]):
        wa, wb = wa[:-1], wb[:-1]
    while len(wa) > 1 and len(wb) > 1 and cond_key(wa[0]) == cond_key(wb[0]):
        wa, wb = wa[1:], wb[1:]
    ka, kb = cond_key(" ".join(wa)), cond_key(" ".join(wb))
    if len(ka) < 2 or not kb or ka == kb:
        return None
    return ka, kb


def standalone(text: str, key: str) -> list[int]:
    """Starts of `key` as a word of its own (not inside "비은행권" when looking for "은행권")."""
    out = []
    for m in re.finditer(re.escape(key), text):
        before = text[m.start() - 1 : m.start()] if m.start() else ""
        if not re.match(r"[가-힣A-Za-z0-9]", before):
            out.append(m.start())
    return out


def sentence_bounds(text: str, pos: int) -> tuple[int, int]:
    start = 0
    for s in split_sentences(text):
        i = text.find(s, start)
        if i <= pos < i + len(s):
            return i, i + len(s)
        start = i + len(s)
    return 0, len(text)


def value_counts(text: str) -> Counter:
    return Counter(next(iter(number_keys(s.raw))) for s in find_numbers(text) if number_keys(s.raw))
