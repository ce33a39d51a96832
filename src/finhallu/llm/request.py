"""What goes to a provider and what comes back, independent of any SDK.

`LLMRequest.key()` is the call-cache key: provider, model, endpoint, every output-affecting
parameter, the rendered messages, the output schema and the operation's prompt version.
Rate limits, retries, timeouts and the API key change how a call is made, never its result,
so they stay out of it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class LLMRequest:
    provider: str
    model: str
    endpoint: str  # the resolved base URL ("" for providers with a fixed endpoint)
    messages: tuple[tuple[str, str], ...]  # (role, content): system / user / assistant
    schema_name: str
    json_schema: dict = field(hash=False, compare=False)
    params: dict = field(hash=False, compare=False)  # temperature, max_tokens, top_p, seed, structured
    prompt_version: str = ""
    sample: int = 0  # distinct draws of the same prompt (temperature > 0) get distinct keys

    def key(self) -> str:
        return self._key

    @cached_property
    def _key(self) -> str:  # hashed once per request: the cache, the limiter and the ledger all ask for it
        material = {
            "provider": self.provider,
            "model": self.model,
            "endpoint": self.endpoint,
            "messages": [list(m) for m in self.messages],
            "schema_name": self.schema_name,
            "schema": self.json_schema,
            "params": {k: v for k, v in sorted(self.params.items()) if v is not None},
            "prompt_version": self.prompt_version,
            "sample": self.sample,
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def approx_input_tokens(self) -> int:
        return self._approx_input_tokens

    @cached_property
    def _approx_input_tokens(self) -> int:
        # ~4 characters per token for English, ~1.5 for Korean: count Hangul separately so the TPM
        # reservation is not a gross underestimate for Korean prompts. Settled on real usage later.
        text = "".join(c for _, c in self.messages)
        hangul = sum(1 for ch in text if "\uac00" <= ch <= "\ud7a3")
        return int(hangul / 1.5 + (len(text) - hangul) / 4) + 4 * len(self.messages)

    def with_messages(self, messages: tuple[tuple[str, str], ...]) -> "LLMRequest":
        d = asdict(self)
        d["messages"] = tuple(tuple(m) for m in messages)
        return LLMRequest(**d)


@dataclass
class LLMReply:
    text: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    model_version: str | None = None


def prompt_digest(messages) -> str:
    """A prompt's identity across wire formats: its user and assistant turns (the system line is
    the same for every operation of a language, and Gemini carries it apart)."""
    body = "\n\x1e".join(f"{role}:{content}" for role, content in messages if role != "system")
    return hashlib.sha256(body.encode()).hexdigest()
