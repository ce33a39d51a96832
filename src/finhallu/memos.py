"""The per-text memo caches (text analyses, grounding findings, noun phrases) emptied between stages.

They are bounded per cache (up to 65,536 entries each), but a build holds a dozen of them in one
process: at 544 documents they kept the build's peak RSS at 3.9 GB although no single stage needed
more than 1.8 GB. A stage's memos serve the items of that stage; what the next stage reads again
(the passages) it analyses again. Caches of loaded resources (Kiwi, tokenizers, models: maxsize
below 64) are kept.
"""

from __future__ import annotations

import sys

MEMO_MIN_SIZE = 64  # an lru_cache this large or unbounded memoizes per-text results, not a resource
# Where per-text memos live (code hashes, prompt templates and schemas elsewhere stay cached)
PER_TEXT_PACKAGES = (
    "finhallu.text.",
    "finhallu.detectors.",
    "finhallu.injectors.",
    "finhallu.labelcheck.",
    "finhallu.stages.",
    "finhallu.embedders.",  # the hashing embedder's feature buckets
)


def clear_memos() -> int:
    """Empty every per-text memo of the loaded finhallu modules; returns how many were emptied."""
    emptied = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith(PER_TEXT_PACKAGES) or module is None:
            continue
        for obj in list(vars(module).values()):
            params = getattr(obj, "cache_parameters", None)
            if callable(params) and getattr(obj, "__module__", None) == name:
                size = params().get("maxsize")
                if size is None or size >= MEMO_MIN_SIZE:
                    obj.cache_clear()
                    emptied += 1
        clear = getattr(module, "clear_memo", None)
        if callable(clear):
            clear()
            emptied += 1
    release_free_heap()
    return emptied  # their entries hold no cycles: freed at once, no gc pass (0.3 s a stage)


def release_free_heap() -> bool:
    """Hand the free pages of the C heap (glibc's malloc_trim) and of Arrow's memory pool back to
    the system. glibc keeps what a stage freed, so without it a build's RSS stays near the
    high-water mark of every stage before (4x corpus: 1.31 -> 1.21 GB peak); Arrow's pool (mimalloc)
    keeps what the gates' pandas frames took (gating `samples` at 3,060 documents: 0.31 GB).
    False where the C library has no malloc_trim (musl, macOS)."""
    import ctypes

    arrow = sys.modules.get("pyarrow")  # only if something loaded it: not imported for this
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True
