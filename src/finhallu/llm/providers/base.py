"""What a remote provider implements. One module per provider registers a subclass."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import threading

from finhallu.clients.http import parse_retry_after
from finhallu.llm.errors import ProviderError
from finhallu.llm.request import LLMReply, LLMRequest

RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504}


def short(s: str, n: int = 300) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[:n] + "…"


def retry_after_from(headers) -> float | None:
    """Seconds from `retry-after-ms` (OpenAI) or `Retry-After` (delta-seconds or HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


# One wording per failure kind, whatever SDK raised it (`who` = "<provider> <model>").
def http_error(who: str, status: int, message: str, headers) -> ProviderError:
    return ProviderError(
        f"{who}: HTTP {status}: {short(message)}",
        status=status,
        retryable=status in RETRY_STATUSES,
        retry_after=retry_after_from(headers),
    )


def timeout_error(who: str) -> ProviderError:
    return ProviderError(f"{who}: request timed out", retryable=True)


def connection_error(who: str, exc: Exception) -> ProviderError:
    return ProviderError(f"{who}: connection error: {short(str(exc))}", retryable=True)


def unreadable_error(who: str, exc: Exception) -> ProviderError:
    # a 200 whose body is not the API's JSON (a proxy or gateway page): retried like a 5xx
    return ProviderError(f"{who}: unreadable response body: {short(str(exc))}", retryable=True)


def _http_modules() -> list:
    """The httpx packages the SDKs may sit on: httpx and its fork httpx2 (google-genai and openai use
    it when installed, for their sync clients: batch jobs)."""
    mods = []
    for name in ("httpx", "httpx2"):
        try:
            mods.append(__import__(name))
        except ImportError:
            pass
    return mods


def transport_error(who: str, exc: BaseException) -> ProviderError | None:
    """A ProviderError for an exception of the transport under an SDK (or None if it is not one):
    timeouts and connection errors are retryable, so are broken bodies (a truncated reply, a bad
    encoding); anything else of the HTTP package is a recorded failure."""
    import asyncio

    for m in _http_modules():
        if isinstance(exc, m.TimeoutException):
            return timeout_error(who)
        if isinstance(exc, m.TransportError):
            return connection_error(who, exc)
        if isinstance(exc, m.DecodingError):
            return unreadable_error(who, exc)
        if isinstance(exc, (m.HTTPError, m.StreamError, m.InvalidURL)):
            return ProviderError(f"{who}: {type(exc).__name__}: {short(str(exc))}")
    import aiohttp  # both SDKs' transport here (their `aiohttp` extras)

    if isinstance(exc, aiohttp.ServerTimeoutError):
        return timeout_error(who)
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ContentTypeError)):
        return unreadable_error(who, exc)
    if isinstance(exc, aiohttp.ClientError):
        return connection_error(who, exc)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return timeout_error(who)
    if isinstance(exc, (ConnectionError, OSError)):
        return connection_error(who, exc)
    if isinstance(exc, (ValueError, UnicodeError)):  # JSONDecodeError, pydantic's ValidationError, ...
        return unreadable_error(who, exc)
    return None


def unexpected_error(who: str, exc: BaseException) -> ProviderError:
    """Whatever else an SDK raised: a recorded failure (not retried), never a crash of the build."""
    return ProviderError(f"{who}: unexpected {type(exc).__name__}: {short(str(exc))}")


def not_api_body(who: str, what) -> ProviderError:
    """A 200 that is not the API's JSON (an HTML gateway page, a captive portal): retried like a 5xx."""
    return ProviderError(f"{who}: unreadable response body: not the API's JSON ({short(str(what), 120)})", retryable=True)


_OPENED: list[tuple["RemoteProvider", object]] = []  # every SDK client made in this process
_OPENED_LOCK = threading.Lock()


async def aclose_clients() -> None:
    """Close every SDK client opened so far, on the event loop that used them: an aiohttp session
    still open when the process exits prints "Unclosed client session" to stderr."""
    with _OPENED_LOCK:
        opened = list(_OPENED)
        _OPENED.clear()
    for provider, client in opened:
        try:
            await provider.aclose_client(client)
        except Exception:  # closing a client that already lost its connections: nothing to keep
            pass


class RemoteProvider:
    name = "remote"
    offline = False
    supports_batch = False
    key_envs: tuple[str, ...] = ()  # where its API key is looked for, in order (a role's api_key_env overrides)
    key_optional = False  # True: a server that accepts any key (vLLM, Ollama) gets a placeholder when none is set
    sdk_modules: tuple[str, ...] = ()  # what its clients import (`import_sdk`)

    def __init__(self) -> None:
        self._clients: dict[tuple, object] = {}
        self._lock = threading.Lock()

    # ---- configuration ------------------------------------------------------------------
    def endpoint(self, role: str, cfg: dict) -> str:
        raise NotImplementedError

    def params(self, cfg: dict) -> dict:
        """Output-affecting request parameters (they enter the cache key)."""
        return {
            "temperature": cfg.get("temperature"),
            "max_tokens": cfg.get("max_tokens"),
            "top_p": cfg.get("top_p"),
            "seed": cfg.get("seed"),
            "structured": cfg.get("structured", "json_schema"),
        }

    def client(self, endpoint: str, key: str, timeout: float):
        """An SDK client per (endpoint, key, timeout); the key is hashed so it never sits in a dict key."""
        ck = (endpoint, hashlib.sha256(key.encode()).hexdigest(), timeout)
        with self._lock:
            c = self._clients.get(ck)
            if c is None:
                c = self._clients[ck] = self._make_client(endpoint, key, timeout)
                with _OPENED_LOCK:
                    _OPENED.append((self, c))
            return c

    def _make_client(self, endpoint: str, key: str, timeout: float):
        raise NotImplementedError

    def import_sdk(self) -> None:
        """Import the SDK now (~0.4 s each), e.g. while a build's API server boots; a missing SDK is
        left for the client's own import to report."""
        for name in self.sdk_modules:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)

    async def aclose_client(self, client) -> None:
        await client.close()

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
