"""What the label checks ask of a response and its evidence: is the answer stated, is a claim
supported, is it a refusal, which parts changed. Written apart from the injectors on purpose:
a verifier that reused the injector's own notion of an edit would accept its mistakes."""

from __future__ import annotations

import difflib
import re
from decimal import Decimal
from typing import Sequence

from finhallu.text.normalize import contains_normalized, normalize
from finhallu.text.quantities import Quantity, quantities, states_value, states_value_in
from finhallu.text.sentences import split_sentences
from finhallu.text.words import content_word_set, content_words

# A refusal declines for lack of evidence. Kept independent of the phrasings the assistant uses.
_REFUSAL = re.compile(
    r"(찾을 수 없|찾지 못|확인(할|되지|이) ?(수 ?)?(없|않)|확인하기 어렵|답변(을)? ?(드리기|드릴 수|하기) ?(어렵|없)|말씀드리기 어렵|"
    r"확답을 드리기|알 수 없|나와 있지 않|포함되어 있지 않|언급되어 있지 않|(자료|문서|근거)[^.]{0,30}(정보|근거|내용)[이가]? ?(없습니다|없어)|"
    r"cannot (answer|find|determine|confirm)|can't (answer|find|tell)|unable to|do(es)? not (contain|include|mention|"
    r"provide|state|say|address|cover)|no (information|evidence|mention)|not (stated|mentioned|provided|available) in|"
    r"could not find|isn't (stated|mentioned))",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    return bool(_REFUSAL.search(text or ""))


def money_or_ratio(text: str) -> list[Quantity]:
    """The figures of a text that identify a fact: amounts and ratios, not years or small counts."""
    return [
        q
        for q in quantities(text)
        if q.unit in ("KRW", "USD", "%", "%p", "bps") or (not q.unit and abs(q.value) >= 100 and not _year_like(q))
    ]


def _year_like(q: Quantity) -> bool:
    return "," not in q.raw and "." not in q.raw and 1900 <= q.value <= 2100


# Answer framing that carries no claim: yes/no, "as the document says", "on checking again".
FRAMING = re.compile(
    r"^(네|예|아니요|아니오|아닙니다|맞습니다|그렇습니다|다시|확인해|확인한|보니|결과|안내에|자료에|문서에|"
    r"따르면|yes|no|that's|right|correct|according|to|the|document|filing)$"
)


def coverage(text: str, source: str) -> float:
    """Share of text's claim words found in source (substring match tolerates Korean endings)."""
    words = [w for w in content_words(text) if not FRAMING.match(w)]
    if not words:
        return 1.0
    src = normalize(source)
    return sum(1 for w in words if normalize(w) in src) / len(words)


def states_answer(text: str, answer: str | None) -> bool:
    """Whether text states the answer: verbatim after normalisation, or its figures (any scale or
    rounding), or nearly all of its content words."""
    if not answer:
        return False
    if contains_normalized(text, answer):
        return True
    figures = money_or_ratio(answer)
    if figures:
        return all(states_value(text, q) for q in figures)
    return len(content_words(answer)) >= 2 and coverage(answer, text) >= 0.8


def identifying(answer: str | None) -> bool:
    """Whether an answer identifies its evidence: "예", "no" or one character occur anywhere."""
    a = normalize(answer or "").rstrip(".")
    return len(a) >= 2 and a not in ("네", "예", "아니요", "아니오", "아닙니다", "맞습니다", "yes", "no")


def may_state_answer(text: str, answer: str | None, clue: str | None) -> bool:
    """The cautious reading for "does this context lack the evidence?": an answer figure under any
    plausible table scale, the answer verbatim, or most of the clue's content words."""
    if not identifying(answer):
        answer = None
    if answer and contains_normalized(text, answer):
        return True
    figures = money_or_ratio(answer or "")
    if figures and any(states_value(text, q, unknown_scale=True) for q in figures):
        return True
    if not clue:
        return False
    return holds_clue(text, clue)


def holds_clue(text: str, clue: str, share: float = 0.8) -> bool:
    """Most of the clue's content words occur in text as words (not inside longer words)."""
    words = content_word_set(clue)
    return len(words) >= 3 and len(words & content_word_set(text)) / len(words) >= share


def unsupported_figures(text: str, sources: Sequence[str]) -> list[Quantity]:
    """Figures of text (years included) that no source states (each source read with its own scale
    notes)."""
    return [q for q in quantities(text) if not states_value_in(sources, q)]


def derivable(answer: str, text: str) -> bool:
    """Whether an answer figure is the sum, difference or ratio of two figures the text states
    ("$3.0 billion compared to $3.2 billion" answers "by how much did it fall?": $0.2 billion)."""
    targets = money_or_ratio(answer)
    figures = [q for q in money_or_ratio(text) if q.value]
    for t in targets:
        tol = max(t.precision, abs(t.value) * Decimal("0.005"))
        for i, a in enumerate(figures):
            for b in figures[i + 1 :]:
                candidates = [a.value + b.value, abs(a.value - b.value)]
                if t.unit in ("%", "%p", ""):
                    candidates += [
                        a.value / b.value * 100,
                        b.value / a.value * 100,
                        (b.value - a.value) / a.value * 100,
                        (a.value - b.value) / b.value * 100,
                    ]
                if any(abs(abs(c) - abs(t.value)) <= tol + max(a.precision, b.precision) for c in candidates):
                    return True
    return False


def changed_spans(before: str, after: str) -> list[tuple[str, str]]:
    """The word runs that differ between two responses, as (before, after) pairs."""
    a, b = before.split(), after.split()
    ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    return [(" ".join(a[i1:i2]), " ".join(b[j1:j2])) for op, i1, i2, j1, j2 in ops if op != "equal"]


def new_sentences(before: str, after: str) -> list[str]:
    """Sentences of `after` that `before` does not have."""
    old = {normalize(s) for s in split_sentences(before)}
    return [s for s in split_sentences(after) if normalize(s) not in old]
