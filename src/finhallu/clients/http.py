"""Shared HTTP plumbing for the source clients: per-host rate limits, retries, atomic downloads.

* `RateLimiter` is a thread-safe token bucket. With the default burst of 1 it spaces requests
  `1/rate` seconds apart, so no window of one second ever holds more than `rate` requests
  (a larger burst would allow `burst + rate - 1` in the first second).
* `RetryPolicy` retries 408/425/429/5xx answers, timeouts and connection errors with
  exponential backoff and jitter, honouring `Retry-After` (delta-seconds or an HTTP date),
  for a bounded number of attempts.
* `HttpClient` wraps an `httpx.Client`: every attempt takes a token from the limiter of the
  URL's host; failures raise `HttpError` subclasses whose message names the method, the URL
  (secrets masked) and the status. Clock, sleep, wall time and the jitter source are injectable
  so tests run without waiting.
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import random
import re
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar, overload
from urllib.parse import urlsplit

import httpx

log = logging.getLogger("finhallu.clients")

T = TypeVar("T")

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
MASK = "***"


# --------------------------------------------------------------------------- errors


class ClientError(Exception):
    """Base of every error the source clients raise."""


class HttpError(ClientError):
    """A request that did not succeed. `url` has secrets masked; `status` is None for transport errors."""

    def __init__(self, message: str, *, method: str, url: str, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.method = method
        self.url = url
        self.status = status
        self.attempts = attempts


class HttpStatusError(HttpError):
    """A non-retryable error status (4xx other than 408/425/429), or a 2xx body that cannot be used."""


class RetryError(HttpError):
    """Every attempt failed with a retryable status or transport error (or Retry-After was too long)."""


# --------------------------------------------------------------------------- rate limit


class RateLimiter:
    """Token bucket: `rate` tokens per second, at most `burst` stored.

    `acquire()` reserves a token and sleeps until it is due; reservations are made under a
    lock and the sleep happens outside it, so concurrent callers queue up fairly.
    """

    def __init__(
        self,
        rate: float,
        burst: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
    ):
        if not rate or rate <= 0 or not math.isfinite(rate):
            raise ValueError(f"rate must be a positive number of requests per second, got {rate!r}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst!r}")
        self.rate = float(rate)
        self.burst = int(burst)
        self.clock = clock
        self.sleep = sleep
        self._tokens = float(burst)
        self._stamp: float | None = None
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token now (the bucket may go negative); return how long to wait before using it."""
        with self._lock:
            now = self.clock()
            if self._stamp is not None:
                self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def acquire(self) -> float:
        wait = self.reserve()
        if wait > 0:
            self.sleep(wait)
        return wait

    def __repr__(self) -> str:
        return f"RateLimiter(rate={self.rate:g}/s, burst={self.burst})"


# --------------------------------------------------------------------------- retry policy


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5  # total attempts, the first one included
    backoff_base: float = 0.5  # delay before the 2nd attempt; doubles each time
    backoff_max: float = 30.0
    jitter: float = 0.5  # the delay is drawn from [d * (1 - jitter), d]
    max_retry_after: float = 120.0  # a longer Retry-After is not waited for: RetryError at once
    retry_statuses: frozenset[int] = RETRY_STATUSES

    def __post_init__(self):
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be within [0, 1]")

    def backoff(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Delay after failed attempt number `attempt` (1-based)."""
        d = min(self.backoff_max, self.backoff_base * (2 ** (attempt - 1)))
        return d * (1.0 - self.jitter + self.jitter * rng())


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date; None if absent/invalid."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - now())


# --------------------------------------------------------------------------- client

_RETRYABLE_TRANSPORT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


class Closing:
    """`with client:` closes the client on exit."""

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class HttpClient(Closing):
    """A rate-limited, retrying GET client.

    rate_limits: host (``netloc`` with port, or bare hostname) -> RateLimiter or requests/second;
    one RateLimiter object may serve several hosts (SEC counts data.sec.gov and www.sec.gov together).
    default_rps: limit for any other host (None: unlimited).
    secrets / secret_params: literal values and query parameters masked in every message.
    status_hints: status -> sentence appended to the error message for that status.
    """

    def __init__(
        self,
        *,
        headers: Mapping[str, str] | None = None,
        rate_limits: Mapping[str, RateLimiter | float] | None = None,
        default_rps: float | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | httpx.Timeout = 30.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
        now: Callable[[], float] = time.time,
        rng: Callable[[], float] = random.random,
        secrets: Iterable[str] = (),
        secret_params: Iterable[str] = (),
        status_hints: Mapping[int, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        self.retry = retry or RetryPolicy()
        self.clock, self.sleep, self.now, self.rng = clock, sleep, now, rng
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        params = [re.escape(p) for p in secret_params]
        self._param_re = re.compile(rf"((?:^|[?&;])(?:{'|'.join(params)})=)[^&#\s]*") if params else None
        self.status_hints = dict(status_hints or {})
        self._limiters: dict[str, RateLimiter] = {}
        for host, lim in (rate_limits or {}).items():
            self._limiters[host.lower()] = lim if isinstance(lim, RateLimiter) else self._make_limiter(lim)
        self._default_limiter = self._make_limiter(default_rps) if default_rps else None
        self._client = httpx.Client(headers=dict(headers or {}), timeout=timeout, transport=transport, follow_redirects=True)

    # -- helpers

    def _make_limiter(self, rps: float) -> RateLimiter:
        return RateLimiter(rps, clock=self.clock, sleep=self.sleep)

    def limiter_for(self, url: str) -> RateLimiter | None:
        parts = urlsplit(url)
        netloc, host = parts.netloc.lower(), (parts.hostname or "").lower()
        return self._limiters.get(netloc) or self._limiters.get(host) or self._default_limiter

    def redact(self, text: str) -> str:
        """`text` with secret values and secret query parameters masked."""
        text = str(text)
        if self._param_re is not None:
            text = self._param_re.sub(lambda m: m.group(1) + MASK, text)
        for s in self._secrets:
            text = text.replace(s, MASK)
        return text

    @property
    def headers(self) -> httpx.Headers:
        return self._client.headers

    def close(self) -> None:
        self._client.close()

    def _status_message(self, method: str, url: str, resp: httpx.Response) -> str:
        msg = f"{method} {url} -> HTTP {resp.status_code} {resp.reason_phrase}".rstrip()
        hint = self.status_hints.get(resp.status_code)
        return f"{msg}. {hint}" if hint else msg

    # -- the retry loop

    @overload
    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        handle: None = None,
    ) -> httpx.Response: ...

    @overload
    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        handle: Callable[[httpx.Response], T],
    ) -> T: ...

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        handle: Callable[[httpx.Response], T] | None = None,
    ) -> T | httpx.Response:
        """Send with rate limiting and retries. `handle(resp)` consumes a successful streamed
        response (errors it raises while reading the body are retried like transport errors);
        without it the body is read and the response returned."""
        shown = self.redact(str(httpx.URL(url, params=params) if params else url))
        policy = self.retry
        last = ""
        for attempt in range(1, policy.max_attempts + 1):
            limiter = self.limiter_for(url)
            if limiter is not None:
                limiter.acquire()
            retry_after: float | None = None
            status: int | None = None
            try:
                with self._client.stream(method, url, params=params, headers=headers) as resp:
                    status = resp.status_code
                    if status in policy.retry_statuses:
                        retry_after = parse_retry_after(resp.headers.get("Retry-After"), self.now)
                        last = self._status_message(method, shown, resp)
                    elif status >= 400:
                        raise HttpStatusError(
                            self._status_message(method, shown, resp), method=method, url=shown, status=status, attempts=attempt
                        )
                    elif handle is None:
                        resp.read()
                        return resp
                    else:
                        return handle(resp)
            except _RETRYABLE_TRANSPORT as exc:
                status = None
                last = f"{method} {shown} failed: {type(exc).__name__}: {self.redact(str(exc)) or 'no detail'}"
            except httpx.HTTPError as exc:  # invalid URL, unsupported protocol, undecodable body ...
                raise HttpError(
                    f"{method} {shown} failed: {type(exc).__name__}: {self.redact(str(exc))}",
                    method=method,
                    url=shown,
                    status=status,
                    attempts=attempt,
                ) from None
            if attempt >= policy.max_attempts:
                break
            if retry_after is not None and retry_after > policy.max_retry_after:
                raise RetryError(
                    f"{last}; the server asked to retry after {retry_after:.0f} s, more than the "
                    f"{policy.max_retry_after:.0f} s this client waits",
                    method=method,
                    url=shown,
                    status=status,
                    attempts=attempt,
                )
            delay = retry_after if retry_after is not None else policy.backoff(attempt, self.rng)
            log.warning("%s; retry %d/%d in %.2f s", last, attempt + 1, policy.max_attempts, delay)
            if delay > 0:
                self.sleep(delay)
        raise RetryError(
            f"{last} (gave up after {policy.max_attempts} attempt{'s' * (policy.max_attempts > 1)})",
            method=method,
            url=shown,
            status=status,
            attempts=policy.max_attempts,
        )

    def get(
        self, url: str, *, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        return self.request("GET", url, params=params, headers=headers)

    def get_json(self, url: str, *, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None) -> Any:
        resp = self.get(url, params=params, headers=headers)
        try:
            return resp.json()
        except ValueError as exc:
            shown = self.redact(str(resp.request.url))
            raise HttpStatusError(
                f"GET {shown} -> HTTP {resp.status_code}: body is not JSON ({exc}; starts with "
                f"{self.redact(resp.content[:80].decode('utf-8', 'replace'))!r})",
                method="GET",
                url=shown,
                status=resp.status_code,
            ) from None

    def download(
        self,
        url: str,
        dest: str | os.PathLike,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> int:
        """Stream the (decoded) body to `dest` atomically: a temp file beside it, fsync, rename.
        Returns the number of bytes written. A body shorter than its Content-Length is retried."""
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)

        def write(resp: httpx.Response) -> int:
            fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
            try:
                size = 0
                with os.fdopen(fd, "wb") as fh:
                    for chunk in resp.iter_bytes():
                        fh.write(chunk)
                        size += len(chunk)
                    fh.flush()
                    os.fsync(fh.fileno())
                expected = resp.headers.get("Content-Length")
                if expected and expected.isdigit() and "Content-Encoding" not in resp.headers and size != int(expected):
                    raise httpx.RemoteProtocolError(f"body has {size} bytes, Content-Length says {expected}")
                os.replace(tmp, dest)
                return size
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

        return self.request("GET", url, params=params, headers=headers, handle=write)


class HttpBacked(Closing):
    """API clients that wrap an `HttpClient` in `self.http`."""

    http: "HttpClient"

    def close(self) -> None:
        self.http.close()
