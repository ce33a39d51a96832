"""The LLM layer's settings: one role (provider, model, request settings) and how calls are made."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from finhallu.schemas.section import Section


class RoleConfig(Section):
    """One LLM role (user LLM, assistant LLM, a judge, an injector, ...): provider, model and
    every output-affecting request setting. The whole role enters the cache keys."""

    provider: str = "offline"  # a registered provider (finhallu/llm/providers/)
    model: str = "rules"
    temperature: float = 0.0
    max_tokens: int = Field(1024, ge=1)
    top_p: float | None = None
    seed: int | None = None  # provider-side sampling seed where supported (OpenAI, Gemini)
    base_url: str | None = None  # OpenAI-compatible endpoint (vLLM, Ollama) or a proxy; OPENAI_BASE_URL otherwise
    # Structured output: `json_schema` (strict, OpenAI/vLLM/Ollama), `json_object` (servers without
    # schema support), `none` (plain text; the JSON is parsed from the reply).
    structured: Literal["json_schema", "json_object", "none"] = "json_schema"
    api_key_env: str | None = None  # env var holding the key (default: OPENAI_API_KEY / GEMINI_API_KEY)
    api_key_secret: str | None = None  # Prefect Secret block name holding the key
    batch: bool = False  # send bulk calls through the provider's batch API

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, name: str) -> str:
        from finhallu.llm.providers import PROVIDERS

        PROVIDERS.get(name)  # UnknownPluginError (a ValueError: a validation error) lists the registered ones
        return name


class ModelLimits(Section):
    rpm: float | None = Field(None, gt=0)  # requests per minute
    tpm: float | None = Field(None, gt=0)  # tokens per minute (prompt estimate + max_tokens, settled on usage)
    concurrency: int = Field(8, ge=1)  # requests in flight


class ModelPrice(Section):
    input_per_1m: float = Field(0.0, ge=0)  # USD per million input tokens
    output_per_1m: float = Field(0.0, ge=0)


class LLMConfig(Section):
    """How calls are made, not what they return: none of this enters a cache key."""

    cache: bool = True  # the SQLite call cache under <home>/cache/llm_calls.sqlite
    timeout_s: float = Field(60.0, gt=0)
    max_attempts: int = Field(6, ge=1, le=20)  # per request, the first included (429/5xx/timeouts are retried)
    # The stage's failure budget: once more than this share of its provider calls failed for good
    # (after at least `failed_share_min_calls` calls), the stage stops instead of hammering.
    max_failed_share: float = Field(0.5, ge=0.0, le=1.0)
    failed_share_min_calls: int = Field(20, ge=1)
    # Send requests recorded as failed by an earlier build again (`finhallu build --retry-failed`);
    # otherwise a rerun records them as failed again without a request.
    retry_failed: bool = False
    backoff_base_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)
    max_retry_after_s: float = Field(300.0, ge=0)
    default_limits: ModelLimits = ModelLimits()
    limits: dict[str, ModelLimits] = Field(
        default_factory=lambda: {
            "gpt-4o": ModelLimits(rpm=500, tpm=30000, concurrency=16),
            "gemini-2.5-flash": ModelLimits(rpm=1000, tpm=1000000, concurrency=16),
        }
    )
    # USD list prices per million tokens (config, so a price change is one line in a profile).
    prices: dict[str, ModelPrice] = Field(
        default_factory=lambda: {
            "gpt-4o": ModelPrice(input_per_1m=2.50, output_per_1m=10.00),
            "gpt-4o-mini": ModelPrice(input_per_1m=0.15, output_per_1m=0.60),
            "gemini-2.5-flash": ModelPrice(input_per_1m=0.30, output_per_1m=2.50),
        }
    )
    batch_poll_s: float = Field(30.0, gt=0)
    batch_max_wait_s: float = Field(86400.0, gt=0)  # then the build stops; a rerun resumes the same job
    batch_min_requests: int = Field(20, ge=1)  # fewer uncached requests than this go online
    # The estimate printed before a build with LLM roles (`finhallu build --dry-run` prints it
    # per stage): its latency floor assumes this many seconds per call.
    estimate_before_build: bool = True
    # A stage's gates run while the next stage works (flows/overlap.py): true, false, or `auto`: where a stage calls
    # a remote model (its waits leave the CPU idle); offline stages would only share the one CPU lock.
    overlap_gates: bool | Literal["auto"] = "auto"
    expected_latency_s: float = Field(2.0, gt=0)
