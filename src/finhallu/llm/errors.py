"""Errors of the LLM layer. Messages never contain an API key."""

from __future__ import annotations


class LLMError(Exception):
    """Base of every LLM-layer error."""


class MissingKeyError(LLMError):
    """A role the build needs has no API key: raised before any stage runs."""


class ProviderError(LLMError):
    """One failed attempt. `retryable` for 429/5xx/timeouts/connection errors; `retry_after` in seconds
    when the server said so."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class BatchPending(LLMError):
    """A batch job is still running after `batch_max_wait_s`; its id is persisted, a rerun resumes it."""


class KeyRejected(LLMError):
    """The provider refused a role's API key (HTTP 401/403): the build stops at once, naming the
    role and where its key came from, instead of running on without that role's outputs."""


class FailureBudgetExceeded(LLMError):
    """More than `llm.max_failed_share` of a stage's provider calls failed for good: the stage
    stops instead of hammering a provider that is down."""


class UndeclaredCallError(LLMError):
    """A stage called a role or operation its declaration does not list (a bug in the stage)."""
