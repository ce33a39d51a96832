"""What a remote provider implements. One module per provider registers a subclass."""

from __future__ import annotations

import hashlib
import threading

from finhallu.llm.request import LLMReply, LLMRequest


class RemoteProvider:
    name = "remote"
    offline = False
    supports_batch = False

    def __init__(self):
        self._clients: dict[tuple, object] = {}
        self._lock = threading.Lock()

    # ---- configuration ------------------------------------------------------------------
    def endpoint(self, role: str, cfg: dict) -> str:
        raise NotImplementedError

    def params(self, cfg: dict) -> dict:
        """Output-affecting request parameters (they enter the cache key)."""
        return {"temperature": cfg.get("temperature"), "max_tokens": cfg.get("max_tokens"), "top_p": cfg.get("top_p"),
                "seed": cfg.get("seed"), "structured": cfg.get("structured", "json_schema")}

    def client(self, endpoint: str, key: str, timeout: float):
        """An SDK client per (endpoint, key, timeout); the key is hashed so it never sits in a dict key."""
        ck = (endpoint, hashlib.sha256(key.encode()).hexdigest(), timeout)
        with self._lock:
            c = self._clients.get(ck)
            if c is None:
                c = self._clients[ck] = self._make_client(endpoint, key, timeout)
            return c

    def _make_client(self, endpoint: str, key: str, timeout: float):
        raise NotImplementedError

    # ---- calls --------------------------------------------------------------------------
    async def complete(self, client, request: LLMRequest) -> LLMReply:
        """One attempt. Raise ProviderError (retryable or not) on failure."""
        raise NotImplementedError

    # ---- batch (optional) ---------------------------------------------------------------
    def submit_batch(self, client, requests: list[LLMRequest], display_name: str) -> str:
        raise NotImplementedError

    def poll_batch(self, client, job_id: str) -> tuple[str, dict[str, LLMReply | str] | None]:
        """(status, results): results maps request key -> reply or an error string, once finished."""
        raise NotImplementedError
