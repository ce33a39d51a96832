"""`openai_compatible`: any server speaking OpenAI's chat completions (vLLM, Ollama, llama.cpp,
a gateway). Same wire format as `openai`; the endpoint is required, the key optional, and
`max_tokens` is sent under its classic name, which those servers all accept.
"""

from __future__ import annotations

import os

from finhallu.llm.providers import register_provider
from finhallu.llm.providers.openai import OpenAIProvider


@register_provider("openai_compatible")
class OpenAICompatibleProvider(OpenAIProvider):
    name = "openai_compatible"
    max_tokens_param = "max_tokens"
    key_optional = True

    def endpoint(self, role: str, cfg: dict) -> str:
        url = cfg.get("base_url") or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise ValueError(
                f"role {role!r} uses provider openai_compatible but has no endpoint: set "
                f"roles.{role}.base_url (e.g. http://localhost:8000/v1 for vLLM, "
                "http://localhost:11434/v1 for Ollama) or OPENAI_BASE_URL"
            )
        return url.rstrip("/")
