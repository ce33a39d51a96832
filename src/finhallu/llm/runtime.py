"""The per-stage LLM runtime: call cache, limits, retries, batch jobs and the cost ledger.

`execute()` is the one path every remote call takes:
cache lookup -> limiter (RPM/TPM/concurrency) -> provider attempt -> retry on 429/5xx/timeouts
(Retry-After honoured, exponential backoff with jitter otherwise, bounded attempts) -> cache
store -> ledger record. A request that fails for good is recorded in the call cache: a rerun
records it again without sending it, unless `llm.retry_failed` (`finhallu build --retry-failed`).
Past `llm.max_failed_share` failed calls a stage stops (FailureBudgetExceeded), and a 401/403
stops it at once (KeyRejected, naming the role and its key's variable). The runtime of the running stage is found through a context variable,
so stage code only ever needs `LLMRouter(ctx.roles)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import logging
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import NoReturn

from finhallu.clients.http import RetryPolicy
from finhallu.llm.cache import CallCache
from finhallu.result_cache import CACHE_FILE as RESULTS_FILE, ResultCache, open_result_cache
from finhallu.llm.errors import BatchPending, FailureBudgetExceeded, KeyRejected, LLMError, ProviderError
from finhallu.llm.keys import PLACEHOLDER_KEY, mask, resolve_key_source
from finhallu.llm.ledger import CallRecord, Ledger, cost_usd
from finhallu.llm.limits import LIMITERS, ModelLimiter
from finhallu.llm.request import LLMReply, LLMRequest, prompt_digest
from finhallu.llm.tokens import approx_prompt_tokens, approx_tokens

log = logging.getLogger("finhallu.llm")
BATCH_DISCOUNT = 0.5  # OpenAI Batch API and Gemini batch mode both bill half the online price


@dataclass
class _Call:
    """One request on its way to the provider: who asked for it, and its attempts so far."""

    request: LLMRequest
    role: str
    operation: str
    repair: bool
    chain: int = 0  # its round's position on the stage's longest sequential path of calls (parallel.call_round)
    ahead: float = 0.0  # the calls its item still has ahead of it, this one included (parallel.rounds_ahead)
    attempts: int = 0
    latency: float = 0.0  # time at the provider (all attempts), not time queued behind the limits
    failed_before: bool = False  # the cache holds a failure of its key (a --retry-failed rerun): cleared on success


OFFLINE_SAMPLE = 20  # rules answers timed before an operation may be judged too cheap to keep
OFFLINE_KEEP_MIN_S = 0.0005


class LLMRuntime:
    def __init__(
        self,
        settings=None,
        cache: CallCache | None = None,
        stage: str = "adhoc",
        sleep=asyncio.sleep,
        rng=random.random,
        estimating: bool = False,
    ):
        from finhallu.llm.config import LLMConfig

        self.settings = settings if settings is not None else LLMConfig()
        # A dry run: remote roles answer with their rules backend and the ledger records what the
        # call would have cost (approximate tokens, list prices); nothing is sent or cached.
        self.estimating = estimating
        self.estimated_prompts: dict[str, str] = {}  # a dry run's "call cache", shared by its stages: key -> answer
        self._estimate_lock = threading.Lock()
        self.estimated_answers: dict[str, str] | None = None  # prompt digest -> the rules' answer (replay)
        self.cache = cache
        # The rules backend's answers, kept across builds (finhallu.result_cache): set by for_home.
        self.offline_results: ResultCache | None = None
        self._offline_cost: dict[str, tuple[int, float]] = {}  # operation -> (answers computed, seconds)
        self.stage = stage
        self.ledger = Ledger()
        self.sleep, self.rng = sleep, rng
        self._keys: dict[str, str | None] = {}
        self._key_where: dict[str, str | None] = {}
        # `--retry-failed`: requests recorded as failed (in the call cache) are sent again; without
        # it they are recorded failures again, with no request (a rerun is what the first build was).
        self.retry_failed = bool(getattr(self.settings, "retry_failed", False))
        self.max_failed_share = float(getattr(self.settings, "max_failed_share", 1.0))
        self.failed_share_min_calls = int(getattr(self.settings, "failed_share_min_calls", 20))
        self.live_calls = 0  # calls that reached the provider (or a batch job) and finished
        self.live_failures = 0
        self._stop: LLMError | None = None  # a rejected key or a spent failure budget stops every call
        self._key_locks: dict[str, asyncio.Lock] = {}
        self.retry = RetryPolicy(
            max_attempts=self.settings.max_attempts,
            backoff_base=self.settings.backoff_base_s,
            backoff_max=self.settings.backoff_max_s,
            max_retry_after=self.settings.max_retry_after_s,
        )

    @classmethod
    def for_home(cls, home: Path, settings, stage: str) -> "LLMRuntime":
        cache = CallCache(Path(home) / "cache" / "llm_calls.sqlite") if settings.cache else None
        rt = cls(settings, cache, stage)
        if settings.cache:
            rt.offline_results = open_result_cache(Path(home) / "cache" / RESULTS_FILE, "offline-operations", "1", buffer=2000)
        return rt

    def offline_timed(self, op_name: str, seconds: float) -> None:
        n, total = self._offline_cost.get(op_name, (0, 0.0))
        self._offline_cost[op_name] = (n + 1, total + seconds)

    def offline_cheap(self, op_name: str) -> bool:
        """Whether an operation's rules answer faster than keeping the answer costs (digest, pickle,
        write: ~0.06 ms): after OFFLINE_SAMPLE answers computed in this stage at under
        OFFLINE_KEEP_MIN_S each on average, its answers are neither looked up nor kept (what is kept
        never changes an answer; this only decides what is worth keeping)."""
        n, total = self._offline_cost.get(op_name, (0, 0.0))
        return n >= OFFLINE_SAMPLE and total / n < OFFLINE_KEEP_MIN_S

    def close(self) -> None:
        """Write what the stage's caches still hold in memory (the end of a stage task)."""
        if self.offline_results is not None:
            self.offline_results.close()
            self.offline_results = None

    # ---- keys, limits, prices -----------------------------------------------------------
    def key_for(self, role: str, cfg: dict) -> str | None:
        if role not in self._keys:
            self._keys[role], self._key_where[role] = resolve_key_source(role, cfg)
        return self._keys[role]

    def key_rejected(self, role: str, request: LLMRequest, exc: ProviderError) -> KeyRejected:
        where = self._key_where.get(role)
        if where is None:
            where = (
                f"the key its endpoint expects (set roles.{role}.api_key_env)"
                if self._keys.get(role) in (None, PLACEHOLDER_KEY)
                else "its key"
            )
        return KeyRejected(
            mask(
                f"role {role!r} ({request.provider}:{request.model}): the provider refused the API "
                f"key (HTTP {exc.status}); check {where}",
                self._keys.get(role),
            )
        )

    def _stopped(self) -> LLMError:
        """A fresh copy of the error that stopped the stage, for one more call that it stops."""
        stop = self._stop
        assert stop is not None, "asked only once the stage has stopped"
        return type(stop)(str(stop))

    def _count(self, failed: bool) -> None:
        """Count a finished provider call; past the stage's failure budget every further call stops."""
        self.live_calls += 1
        self.live_failures += int(failed)
        if (
            failed
            and self._stop is None
            and self.live_calls >= self.failed_share_min_calls
            and self.live_failures > self.max_failed_share * self.live_calls
        ):
            self._stop = FailureBudgetExceeded(
                f"stage {self.stage!r}: {self.live_failures} of {self.live_calls} LLM calls failed after retries "
                f"(more than llm.max_failed_share={self.max_failed_share:g}); stopped instead of hammering the "
                "provider. Check the provider, then rerun with --retry-failed"
            )

    def mark_failed(self, request: LLMRequest, error: str) -> None:
        """Record a request as failed for good (invalid output after the repair, say): a rerun keeps the
        failure without a request unless it runs with --retry-failed."""
        if self.cache is not None:
            self.cache.put_failure(request.key(), request.provider, request.model, request.schema_name, error)

    def _key_lock(self, key: str) -> asyncio.Lock:
        lock = self._key_locks.get(key)
        if lock is None:
            lock = self._key_locks[key] = asyncio.Lock()
        return lock

    def limiter(self, provider: str, endpoint: str, model: str):
        lim = self.settings.limits.get(model) or self.settings.default_limits
        return LIMITERS.get(provider, endpoint, model, lim.rpm, lim.tpm, lim.concurrency)

    def price(self, model: str, input_tokens: int, output_tokens: int, batch: bool) -> float:
        c = cost_usd(self.settings.prices, model, input_tokens, output_tokens)
        return c * BATCH_DISCOUNT if batch else c

    def estimate_call(self, role: str, operation: str, cfg: dict, key: str, messages, answer, chain: int = 0) -> str:
        """A dry run's call that is not made: its ledger row (approximate tokens, list price) and the
        answer it gets. A prompt asked before gets the first asking's answer at no cost, as the call
        cache gives it in a build; `answer()` (the rules backend) runs only for a new prompt."""
        from finhallu.llm.providers import get_provider

        digest = hashlib.sha256(key.encode()).hexdigest()
        with self._estimate_lock:
            known = self.estimated_prompts.get(digest)
        if known is not None:
            self.ledger.add(
                CallRecord(
                    stage=self.stage,
                    role=role,
                    operation=operation,
                    provider=cfg["provider"],
                    model=cfg["model"],
                    request_key="(estimate)",
                    cache_hit=True,
                    chain=chain,
                )
            )
            return known
        text = answer()
        with self._estimate_lock:
            self.estimated_prompts[digest] = text
            if self.estimated_answers is not None:
                self.estimated_answers.setdefault(prompt_digest(messages), text)
        batch = bool(cfg.get("batch")) and getattr(get_provider(cfg["provider"]), "supports_batch", False)
        input_tokens, output_tokens = approx_prompt_tokens(messages), approx_tokens(text)
        output_tokens = min(output_tokens, cfg.get("max_tokens") or output_tokens)
        self.ledger.add(
            CallRecord(
                stage=self.stage,
                role=role,
                operation=operation,
                provider=cfg["provider"],
                model=cfg["model"],
                request_key="(estimate)",
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_usd=self.price(cfg["model"], input_tokens, output_tokens, batch),
                attempts=1,
                batch=batch,
                chain=chain,
                created_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            )
        )
        return text

    # ---- one call -----------------------------------------------------------------------
    def record(self, request: LLMRequest, role: str, operation: str, **fields) -> CallRecord:
        rec = CallRecord(
            stage=self.stage,
            role=role,
            operation=operation,
            provider=request.provider,
            model=request.model,
            request_key=request.key(),
            created_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            **fields,
        )
        self.ledger.add(rec)
        return rec

    async def execute(
        self,
        provider,
        client,
        request: LLMRequest,
        role: str,
        operation: str,
        *,
        repair: bool = False,
        batch_replies: dict | None = None,
        chain: int = 0,
        ahead: float = 0.0,
    ) -> tuple[LLMReply, CallRecord]:
        if self._stop is not None:
            raise self._stopped()
        key = request.key()
        if batch_replies and key in batch_replies:
            reply = batch_replies.pop(key)
            cost = self.price(request.model, reply.input_tokens, reply.output_tokens, batch=True)
            self._count(False)
            return reply, self.record(
                request,
                role,
                operation,
                input_tokens=reply.input_tokens,
                output_tokens=reply.output_tokens,
                cost_usd=cost,
                attempts=1,
                batch=True,
                repair=repair,
                chain=chain,
            )
        if self.cache is None:
            return await self._send(provider, client, _Call(request, role, operation, repair, chain, ahead))
        # One request per key at a time: a second caller of the same prompt waits for the first and
        # takes its answer (or its failure) from the cache instead of sending it again.
        async with self._key_lock(key):
            failed = self.cache.failure(key)
            if failed is not None and not self.retry_failed:
                error = f"recorded failure (not sent again; rerun with --retry-failed): {failed}"
                self.record(request, role, operation, cache_hit=True, repair=repair, error=error, chain=chain)
                raise ProviderError(error, retryable=False)
            hit = None if failed is not None else self.cache.get(key)  # a failed key's cached text was invalid
            if hit is not None:
                return hit, self.record(
                    request,
                    role,
                    operation,
                    input_tokens=hit.input_tokens,
                    output_tokens=hit.output_tokens,
                    cache_hit=True,
                    repair=repair,
                    chain=chain,
                )
            call = _Call(request, role, operation, repair, chain, ahead, failed_before=failed is not None)
            return await self._send(provider, client, call)

    async def _send(self, provider, client, call: _Call) -> tuple[LLMReply, CallRecord]:
        """Send a request through its model's limits, retrying as the retry policy allows."""
        request = call.request
        limiter = self.limiter(request.provider, request.endpoint, request.model)
        estimate = request.approx_input_tokens() + int(request.params.get("max_tokens") or 0)
        while True:
            if self._stop is not None:  # another call of the stage hit a rejected key or the failure budget
                raise self._stopped()
            call.attempts += 1
            try:
                reply = await self._attempt(provider, client, call, limiter, estimate)
                break
            except (KeyRejected, FailureBudgetExceeded):
                raise self._stopped() from None
            except Exception as raised:  # a provider maps its SDK's errors; anything else is recorded, not a crash
                await self._after_failed_attempt(call, limiter, raised)
        return reply, self._answered(call, reply)

    async def _attempt(self, provider, client, call: _Call, limiter: ModelLimiter, estimate: int) -> LLMReply:
        """One attempt at the provider; its time there is added to the call's latency."""
        # Concurrency slot first, then the rate slot: a request that waited for a slot must
        # not carry an old rate reservation (requests would bunch up at the provider).
        async with limiter.semaphore().slot(call.ahead):
            if self._stop is not None:  # it stopped while this call waited for a slot
                raise self._stop
            reservation = await limiter.acquire(estimate)
            sent = time.monotonic()
            try:
                reply = await provider.complete(client, call.request)
            except BaseException:
                reservation.settle(0)  # refused or lost: no tokens spent, but it did count as a request
                raise
            finally:
                call.latency += time.monotonic() - sent
        reservation.settle(reply.input_tokens + reply.output_tokens or estimate)
        return reply

    async def _after_failed_attempt(self, call: _Call, limiter: ModelLimiter, raised: Exception) -> None:
        """A refused key stops the stage and a final failure is recorded and raised; anything else
        waits (Retry-After, or backoff with jitter) before the next attempt."""
        from finhallu.llm.providers.base import unexpected_error

        request = call.request
        exc = raised if isinstance(raised, ProviderError) else unexpected_error(f"{request.provider} {request.model}", raised)
        if exc.status in (401, 403):
            self._reject_key(call, exc)
        # The backoff is drawn before the give-up check: a last attempt takes its number from rng too.
        delay = exc.retry_after if exc.retry_after is not None else self.retry.backoff(call.attempts, self.rng)
        give_up = (
            not exc.retryable or call.attempts >= self.retry.max_attempts or (exc.retry_after or 0) > self.retry.max_retry_after
        )
        if give_up:
            self._give_up(call, exc)
        if exc.status == 429 and exc.retry_after:
            limiter.pause(exc.retry_after)  # the provider said the whole model is over: everyone waits
        log.info(
            "%s %s: %s; retry %d/%d in %.2fs",
            request.provider,
            request.model,
            mask(str(exc), self._keys.get(call.role)),
            call.attempts + 1,
            self.retry.max_attempts,
            delay,
        )
        await self.sleep(delay)

    def _reject_key(self, call: _Call, exc: ProviderError) -> NoReturn:
        """HTTP 401/403: recorded, and the stage stops (every call of it) with KeyRejected."""
        self._record_call(call, error=mask(str(exc), self._keys.get(call.role)))
        if self._stop is None:
            self._stop = self.key_rejected(call.role, call.request, exc)
        raise self._stopped() from None

    def _give_up(self, call: _Call, exc: ProviderError) -> NoReturn:
        """A failure for good: recorded in the ledger and the call cache, and counted against the
        stage's failure budget (which may stop the stage)."""
        error = mask(f"{exc} (after {call.attempts} attempt(s))", self._keys.get(call.role))
        self._record_call(call, error=error)
        self.mark_failed(call.request, error)
        self._count(True)
        if self._stop is not None:
            raise self._stopped() from None
        raise ProviderError(error, status=exc.status, retryable=False) from None

    def _answered(self, call: _Call, reply: LLMReply) -> CallRecord:
        """A reply: counted, cached (when it has text) and recorded with its online price."""
        request = call.request
        self._count(False)
        if self.cache is not None and reply.text is not None:
            key = request.key()
            self.cache.put(key, request.provider, request.model, request.schema_name, reply)
            if call.failed_before:  # one write per reply otherwise: this runs on the LLM loop
                self.cache.clear_failure(key)
        cost = self.price(request.model, reply.input_tokens, reply.output_tokens, batch=False)
        return self._record_call(call, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens, cost_usd=cost)

    def _record_call(self, call: _Call, **fields) -> CallRecord:
        """The ledger record of a sent request: its attempts and its time at the provider."""
        return self.record(
            call.request,
            call.role,
            call.operation,
            attempts=call.attempts,
            repair=call.repair,
            chain=call.chain,
            latency_s=round(call.latency, 3),
            **fields,
        )

    # ---- batch --------------------------------------------------------------------------
    def run_batch(
        self, provider, client, requests: list[LLMRequest], role: str, operation: str, wall_sleep=time.sleep
    ) -> dict[str, LLMReply]:
        """Submit (or resume) one batch job for the uncached requests; return its replies by key.

        The job id is stored before the first poll, so an interrupted build resumes polling the
        same job on rerun instead of paying for a second one.
        """
        if self.cache is None or self._stop is not None:
            return {}
        failed = self.cache.failed_keys()
        # Not cached, and not a recorded failure (unless this run retries those).
        todo = [
            r
            for r in requests
            if (r.key() in failed and self.retry_failed) or (r.key() not in failed and self.cache.get(r.key()) is None)
        ]
        todo = list({r.key(): r for r in todo}.values())
        if len(todo) < self.settings.batch_min_requests:
            return {}
        try:
            return self._run_batch(provider, client, todo, role, operation, wall_sleep)
        except BatchPending:
            raise
        except Exception as exc:  # no /v1/files, a refused job, a poll that failed: the requests go online
            from finhallu.llm.providers.base import transport_error, unexpected_error

            who = f"{provider.name} {todo[0].model}"
            err = (
                exc
                if isinstance(exc, ProviderError)
                else (self._batch_api_error(who, exc) or transport_error(who, exc) or unexpected_error(who, exc))
            )
            if err.status in (401, 403):
                self._stop = self.key_rejected(role, todo[0], err)
                raise self._stopped() from None
            log.warning(
                "stage %s: the %s batch job for %d %s requests failed (%s); they go online instead",
                self.stage,
                provider.name,
                len(todo),
                operation,
                mask(str(err), self._keys.get(role)),
            )
            return {}

    @staticmethod
    def _batch_api_error(who: str, exc: Exception) -> ProviderError | None:
        """The HTTP status of an SDK's API error raised while submitting or polling a batch job."""
        status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
        if isinstance(status, int) and 100 <= status < 600:
            return ProviderError(f"{who}: HTTP {status}: {' '.join(str(exc).split())[:300]}", status=status)
        return None

    def _run_batch(self, provider, client, todo: list[LLMRequest], role: str, operation: str, wall_sleep) -> dict[str, LLMReply]:
        cache = self.cache
        assert cache is not None, "run_batch sends no batch without a call cache"
        keys = sorted(r.key() for r in todo)
        batch_key = hashlib.sha256("\n".join(keys).encode()).hexdigest()
        job = cache.batch_job(batch_key)
        if job is None or job["status"] in (
            "failed",
            "expired",
            "cancelled",
            "JOB_STATE_FAILED",
            "JOB_STATE_CANCELLED",
            "JOB_STATE_EXPIRED",
        ):
            job_id = provider.submit_batch(client, todo, f"finhallu-{self.stage}-{operation}-{batch_key[:12]}")
            cache.save_batch_job(batch_key, request_provider(todo), todo[0].model, job_id, keys, "submitted")
            log.info("submitted %s batch %s (%d requests)", provider.name, job_id, len(todo))
        else:
            job_id = job["job_id"]
            log.info("resuming %s batch %s (%d requests)", provider.name, job_id, len(todo))
        waited = 0.0
        while True:
            status, results = provider.poll_batch(client, job_id)
            cache.save_batch_job(batch_key, request_provider(todo), todo[0].model, job_id, keys, status)
            if results is not None:
                break
            if waited >= self.settings.batch_max_wait_s:
                raise BatchPending(
                    f"{provider.name} batch {job_id} for stage {self.stage!r} ({operation}) is still "
                    f"{status} after {waited:.0f}s; rerun the build to resume polling it"
                )
            wall_sleep(self.settings.batch_poll_s)
            waited += self.settings.batch_poll_s
        if "__batch__" in results:
            log.warning("stage %s: %s; its %d requests go online", self.stage, results["__batch__"], len(todo))
            return {}
        by_key = {r.key(): r for r in todo}
        replies = {}
        for key, res in results.items():
            if isinstance(res, LLMReply) and res.text is not None and key in by_key:
                cache.put(key, by_key[key].provider, by_key[key].model, by_key[key].schema_name, res)
                cache.clear_failure(key)
                replies[key] = res
            elif key in by_key:
                log.warning("batch item %s: %s; it goes online", key[:12], res)
        return replies


def request_provider(requests: list[LLMRequest]) -> str:
    return requests[0].provider


# ---- the runtime of the running stage -------------------------------------------------------
_CURRENT: contextvars.ContextVar[LLMRuntime | None] = contextvars.ContextVar("finhallu_llm_runtime", default=None)
_DEFAULT: LLMRuntime | None = None


def current_runtime() -> LLMRuntime:
    global _DEFAULT
    rt = _CURRENT.get()
    if rt is not None:
        return rt
    if _DEFAULT is None:
        _DEFAULT = LLMRuntime()  # outside a build (a notebook, a unit test): no cache, a throwaway ledger
    return _DEFAULT


@contextlib.contextmanager
def use_runtime(rt: LLMRuntime):
    token = _CURRENT.set(rt)
    try:
        yield rt
    finally:
        _CURRENT.reset(token)


__all__ = ["LLMRuntime", "current_runtime", "use_runtime", "LLMError", "BatchPending"]
