"""Token counting for passage sizing.

`approx` approximates an XLM-R SentencePiece vocabulary (KURE-v1 is XLM-R based): Hangul
runs cost about one piece per 1.5 syllables, Latin words one per 4 letters, digits one per
3. It is an estimate, recorded by name with every passages version; issue-level KURE
tokenizer support replaces it when the model is available locally.
"""

from __future__ import annotations

import math
import re

_TOKEN = re.compile(r"[가-힣]+|[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9가-힣]")


def approx_count(text: str) -> int:
    n = 0
    for tok in _TOKEN.findall(text or ""):
        c = tok[0]
        if "가" <= c <= "힣":
            n += max(1, math.ceil(len(tok) / 1.5))
        elif c.isalpha():
            n += max(1, math.ceil(len(tok) / 4))
        elif c.isdigit():
            n += max(1, math.ceil(len(tok) / 3))
        else:
            n += 1
    return n


TOKENIZERS = {"approx": ("approx-xlmr-v1", approx_count)}
