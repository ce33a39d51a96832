"""The cost ledger: one record per LLM call (cache hits included, at zero cost).

Records go to `catalog/llm_calls/<build>__<stage>.jsonl` (the `llm_calls` view) and a
per-stage summary becomes a Prefect table artifact. Never the key, never the prompt.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass


@dataclass
class CallRecord:
    stage: str
    role: str
    operation: str
    provider: str
    model: str
    request_key: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 0
    cache_hit: bool = False
    batch: bool = False
    repair: bool = False  # the one repair attempt after output that failed to parse or validate
    error: str | None = None
    created_at: str = ""
    # The call's round on the stage's longest sequential path of calls (1 = nothing before it):
    # rounds of one chain wait for each other, so max(chain) x latency bounds the stage's time.
    chain: int = 0


def cost_usd(prices: dict, model: str, input_tokens: int, output_tokens: int) -> float:
    p = prices.get(model)
    if p is None:  # dated snapshots ("gpt-4o-2024-08-06") fall back to their family's price
        fam = max((m for m in prices if model.startswith(m)), key=len, default=None)
        p = prices.get(fam) if fam else None
    if p is None:
        return 0.0
    get = (lambda k: p[k]) if isinstance(p, dict) else (lambda k: getattr(p, k))
    return (input_tokens * get("input_per_1m") + output_tokens * get("output_per_1m")) / 1e6


class Ledger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: list[CallRecord] = []

    def add(self, rec: CallRecord) -> None:
        with self._lock:
            self.records.append(rec)

    def rows(self) -> list[dict]:
        with self._lock:
            return [asdict(r) for r in self.records]

    def summary(self) -> list[dict]:
        """Per (stage, role, provider, model, operation): calls, cache hits, failures, tokens, cost."""
        groups: dict[tuple, dict] = {}
        for r in self.rows():
            k = (r["stage"], r["role"], r["provider"], r["model"], r["operation"])
            g = groups.setdefault(
                k,
                {
                    "stage": k[0],
                    "role": k[1],
                    "provider": k[2],
                    "model": k[3],
                    "operation": k[4],
                    "calls": 0,
                    "provider_calls": 0,
                    "cache_hits": 0,
                    "repairs": 0,
                    "failures": 0,
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cost_usd": 0.0,
                    "latency_s": 0.0,
                },
            )
            g["calls"] += 1
            g["cache_hits"] += int(r["cache_hit"])
            g["provider_calls"] += r["attempts"]
            g["repairs"] += int(r["repair"])
            g["failures"] += int(r["error"] is not None)
            g["input_tokens"] += r["input_tokens"]
            g["output_tokens"] += r["output_tokens"]
            g["cost_usd"] += r["cost_usd"]
            g["latency_s"] += r["latency_s"]
        out = []
        for g in groups.values():
            g["cost_usd"] = round(g["cost_usd"], 6)
            g["latency_s"] = round(g["latency_s"], 3)
            out.append(g)
        return sorted(out, key=lambda g: (g["stage"], g["role"], g["operation"]))
