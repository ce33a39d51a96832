"""Minimal edits shared by injectors: change one number, swap one lexicon entry (fixing particles)."""

from __future__ import annotations

import random
import re
from decimal import Decimal

from finhallu.text.numbers import NumberSpan, number_keys
from finhallu.text.words import has_final_consonant

_NUM_TOKEN = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_FACTORS = [Decimal(x) for x in ("0.5", "0.6", "0.75", "0.8", "1.2", "1.25", "1.5", "2", "3")]


def _format_like(template: str, value: Decimal) -> str:
    decimals = len(template.split(".")[1]) if "." in template else 0
    q = value.quantize(Decimal(1).scaleb(-decimals)) if decimals else value.to_integral_value()
    s = f"{q:,.{decimals}f}" if "," in template else f"{q:.{decimals}f}"
    return s


def perturb_token(token: str, unit: str, rng: random.Random) -> str:
    """A plausible wrong value for one numeric token, formatted like the original."""
    v = Decimal(token.replace(",", ""))
    decimals = len(token.split(".")[1]) if "." in token else 0
    step = Decimal(1).scaleb(-decimals) if decimals else Decimal(1)
    if unit in ("년",) or (decimals == 0 and 1990 <= v <= 2100):
        new = v + rng.choice([-3, -2, -1, 1, 2])
    elif decimals == 0 and v <= 12:
        new = v + rng.choice([d for d in (-2, -1, 1, 2, 3) if v + d >= 1])
    else:
        new = v * rng.choice(_FACTORS)
        if decimals == 0 and v >= 10:  # keep the original's round-number grain
            step = Decimal(10) ** (len(str(int(v))) - len(str(int(v)).rstrip("0")))
            new = (new / step).to_integral_value() * step
    if new == v or new <= 0:
        # rounding to the grain undid the change: step by whole grains (1,000 -> 3,000, not 1,003)
        new = v + step * rng.choice([2, 3, 5])
    return _format_like(token, new)


def change_number(text: str, span: NumberSpan, forbidden: set[str], rng: random.Random, tries: int = 8) -> str | None:
    """Replace the first numeric token of span with a value whose key is not in `forbidden`."""
    raw = text[span.start:span.number_end]
    m = _NUM_TOKEN.search(raw)
    if not m:
        return None
    for _ in range(tries):
        new_tok = perturb_token(m.group(0), span.unit, rng)
        new_raw = raw[: m.start()] + new_tok + raw[m.end():]
        candidate = text[: span.start] + new_raw + text[span.number_end:]
        new_keys = number_keys(candidate[span.start:span.start + len(new_raw) + (span.end - span.number_end)])
        if new_keys and not (new_keys & forbidden):
            return candidate
    return None


_PARTICLE_PAIRS = [("은", "는"), ("이", "가"), ("을", "를"), ("과", "와"), ("으로", "로")]


def fix_particle(replacement: str, following: str) -> str:
    """Re-pick the particle that follows a swapped Korean word (원금을 -> 이자를)."""
    for with_b, without in _PARTICLE_PAIRS:
        for p in (with_b, without):
            nxt = following[len(p):len(p) + 1]
            if following.startswith(p) and not ("가" <= nxt <= "힣"):
                right = with_b if has_final_consonant(replacement) else without
                return right + following[len(p):]
    return following


def swap_first(text: str, pairs: list[tuple[str, str]], lang: str, skip: set[str] | None = None) -> tuple[str, str, str] | None:
    """Swap the first lexicon entry found in text; returns (new_text, old, new)."""
    best = None
    for old, new in pairs:
        if skip and old in skip:
            continue
        pattern = (r"\b" + re.escape(old) + r"\b") if lang == "en" else re.escape(old)
        for m in re.finditer(pattern, text, re.IGNORECASE if lang == "en" else 0):
            # Korean: never split a longer word (가능 inside 불가능); a later standalone one may follow
            if lang == "ko" and old == "가능" and text[max(0, m.start() - 1):m.start()] == "불":
                continue
            if best is None or m.start() < best[0].start():
                best = (m, old, new)
            break
    if not best:
        return None
    m, old, new = best
    repl = new if lang == "ko" or not m.group(0)[0].isupper() else new[0].upper() + new[1:]
    rest = text[m.end():]
    if lang == "ko":
        rest = fix_particle(repl, rest)
    return text[: m.start()] + repl + rest, m.group(0), repl

