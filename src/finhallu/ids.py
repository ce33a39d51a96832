"""Content-derived ids: the same parts give the same id in every build, on every machine."""

from __future__ import annotations

import hashlib


def stable_id(*parts: object, length: int = 16) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:length]
