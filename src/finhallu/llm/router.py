"""Route an operation call for a role to its backend (config `roles.<role>`).

`offline` runs the operation's rules backend. Remote providers: render the prompt, call
(through the runtime's cache, limits and retries), parse the JSON, validate it against the
operation's output model; output that fails gets one repair attempt (the error is shown to
the model), then the call is a recorded failure: `None` is returned, the ledger row carries
the error, and the stage decides what a missing output means (drop the item, record it).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from finhallu.codeversion import code_hash
from finhallu.result_cache import item_digest
from finhallu.llm.errors import ProviderError, UndeclaredCallError
from finhallu.llm.operations import OPERATIONS
from finhallu.llm.parallel import call_round, old_objects_frozen, rounds_ahead, sending
from finhallu.llm.providers import get_provider
from finhallu.llm.request import LLMRequest
from finhallu.llm.runtime import LLMRuntime, current_runtime
from finhallu.llm.schema import strict_json_schema

REPAIR = {
    "ko": "이전 답변은 요구한 JSON 형식에 맞지 않았습니다: {error}\n스키마에 맞는 JSON 객체 하나만 다시 답하세요.",
    "en": "Your previous reply did not match the required JSON format: {error}\n"
    "Reply again with only one JSON object that matches the schema.",
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


class OutputError(ValueError):
    pass


def parse_output(text: str | None, model):
    """Reply text -> validated output model; OutputError says what is wrong (for the repair prompt)."""
    if text is None or not text.strip():
        raise OutputError("the reply was empty")
    body = _FENCE.sub("", text.strip())
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        start, end = body.find("{"), body.rfind("}")
        try:
            data = json.loads(body[start : end + 1]) if 0 <= start < end else None
        except json.JSONDecodeError:
            data = None
        if data is None:
            raise OutputError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()[:5])
        raise OutputError(f"does not match the schema: {errs}") from None


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    """One event loop thread for every LLM call of the process: SDK clients keep connection pools
    bound to the loop that opened them, so every call must run on the same loop."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="finhallu-llm-loop", daemon=True).start()
            atexit.register(_close_clients, _LOOP)
        return _LOOP


def _close_clients(loop: asyncio.AbstractEventLoop) -> None:
    """At exit: the SDK clients' connections closed on the loop that opened them."""
    from finhallu.llm.providers.base import aclose_clients

    if loop.is_running():
        try:
            asyncio.run_coroutine_threadsafe(aclose_clients(), loop).result(timeout=5)
        except Exception:  # a loop stuck in a call that never returns: exit anyway
            pass


def _run(coro):
    """Run a coroutine on the LLM loop from sync stage code and wait for its result."""
    with old_objects_frozen():
        return asyncio.run_coroutine_threadsafe(coro, _loop()).result()


@dataclass(frozen=True)
class DeclaredCalls:
    """The roles and operations a stage declares: the only ones its router may call. An undeclared
    role would otherwise run on the offline rules backend unseen, outside the cache key and the key check."""

    stage: str
    roles: frozenset[str]
    operations: frozenset[str]

    def check(self, role: str, op_name: str) -> None:
        if role not in self.roles or op_name not in self.operations:
            what = f"role {role!r}" if role not in self.roles else f"operation {op_name!r}"
            raise UndeclaredCallError(
                f"stage {self.stage} calls {what} ({role}/{op_name}) that its declaration does not list "
                f"(roles: {sorted(self.roles)}; operations: {sorted(self.operations)})"
            )


class LLMRouter:
    def __init__(self, roles: dict[str, dict], runtime: LLMRuntime | None = None, declared: DeclaredCalls | None = None):
        self.roles = roles
        self._runtime = runtime
        self.declared = declared  # None: any role (a router made outside a stage: tests, tools)

    @property
    def runtime(self) -> LLMRuntime:
        return self._runtime or current_runtime()

    def role_config(self, role: str) -> dict:
        cfg = self.roles.get(role) or {"provider": "offline", "model": "rules", "temperature": 0.0}
        return cfg if isinstance(cfg, dict) else cfg.model_dump()

    def backend(self, role: str) -> str:
        cfg = self.role_config(role)
        return f"{cfg['provider']}:{cfg['model']}"

    def is_offline(self, role: str) -> bool:
        return getattr(get_provider(self.role_config(role)["provider"]), "offline", False)

    # ---- public API ---------------------------------------------------------------------
    def call(self, role: str, op_name: str, *, sample: int = 0, **inputs):
        """Run operation `op_name` for `role`; inputs are its keyword arguments (incl. `lang`).
        Returns the validated output, or None when a remote call failed for good (recorded)."""
        self._check(role, op_name)
        if self.is_offline(role):
            return self._offline(role, op_name, inputs)
        chain = call_round(self.runtime)
        if self.runtime.estimating:
            return self._estimate(role, op_name, inputs, chain)
        bound = self._bound()
        prepared = bound._request(role, OPERATIONS[op_name], inputs, sample)  # rendered and hashed here, off the loop
        self._look_up([prepared[2]])
        ahead = rounds_ahead(self.runtime)
        sending()
        return _run(bound._complete(*prepared, role, op_name, inputs.get("lang", "ko"), None, chain, ahead))

    def call_many(self, role: str, op_name: str, inputs_list: list[dict], samples: list[int] | None = None) -> list:
        """Many independent calls of one operation, concurrently within the model's limits (and
        through the provider's batch API when the role asks for it). Order is preserved."""
        self._check(role, op_name)
        if self.is_offline(role):
            return [self._offline(role, op_name, dict(i)) for i in inputs_list]
        chain = call_round(self.runtime)  # one round: the calls are in flight together
        if self.runtime.estimating:
            return [self._estimate(role, op_name, dict(i), chain) for i in inputs_list]
        samples = samples or [0] * len(inputs_list)
        bound, op = self._bound(), OPERATIONS[op_name]
        prepared = [bound._request(role, op, i, s) for i, s in zip(inputs_list, samples)]
        self._look_up([p[2] for p in prepared])
        langs = [i.get("lang", "ko") for i in inputs_list]
        ahead = rounds_ahead(self.runtime)
        sending()
        return _run(bound._many(role, op_name, prepared, langs, chain, ahead))

    def _look_up(self, requests: list[LLMRequest]) -> None:
        """The call cache asked about these requests here, in the calling thread (CallCache.look_up)."""
        if self.runtime.cache is not None:
            self.runtime.cache.look_up([r.key() for r in requests])

    async def _complete(
        self, provider, client, request: LLMRequest, role: str, op_name: str, lang: str, batch, chain: int, ahead: float = 0.0
    ):
        """One prepared request sent (through the runtime), its reply parsed and validated, repaired once."""
        op = OPERATIONS[op_name]
        rt = self.runtime
        try:
            reply, rec = await rt.execute(provider, client, request, role, op_name, batch_replies=batch, chain=chain, ahead=ahead)
        except ProviderError:
            return None  # recorded by the runtime
        try:
            return parse_output(reply.text, op.output)
        except OutputError as first:
            repair = request.with_messages(
                request.messages + (("assistant", reply.text or ""), ("user", REPAIR.get(lang, REPAIR["en"]).format(error=first)))
            )
            try:
                reply2, rec2 = await rt.execute(
                    provider, client, repair, role, op_name, repair=True, chain=chain + 1, ahead=ahead
                )
            except ProviderError:
                rec.error = f"invalid output ({first}); the repair call failed"
                rt.mark_failed(request, rec.error)  # a rerun with --retry-failed asks the first prompt again
                return None
            try:
                return parse_output(reply2.text, op.output)
            except OutputError as second:
                rec2.error = f"invalid output after one repair: {second}"
                rt.mark_failed(request, rec2.error)
                return None

    def prepare(self, roles) -> None:
        """The SDK clients of the remote roles, made (their SDKs imported) in the calling thread. Made
        on the LLM loop, the first call of a role would stall every call in flight for the seconds
        an SDK takes to import."""
        if not self.runtime.estimating:
            for role in roles:
                if not self.is_offline(role):
                    self._client(role)

    def warm_clients(self, roles) -> None:
        """The SDK clients of the remote roles that have a key, made now (a build's warm-up, while
        its API server boots): making one builds SSL contexts (~0.05 s each, three for Gemini's),
        which delayed the first stage's first requests. A role without a key, or whose key is a
        Prefect Secret block (read through the API, which may still be booting), is left to the
        build's own check, and so is a client that cannot be made here (its SDK missing): the
        stage that calls the role reports it where it belongs."""
        for role in roles:
            cfg = self.role_config(role)
            if self.is_offline(role) or cfg.get("api_key_secret"):
                continue
            try:
                self.runtime.key_for(role, cfg)
                self._client(role)
            except Exception:  # best effort: nothing here may stop a build before its own checks
                continue

    def _client(self, role: str) -> tuple[Any, str, Any]:
        """The role's provider, endpoint and SDK client (made once per endpoint and key)."""
        cfg = self.role_config(role)
        provider = get_provider(cfg["provider"])
        rt = self.runtime
        endpoint = provider.endpoint(role, cfg)
        return provider, endpoint, provider.client(endpoint, rt.key_for(role, cfg), rt.settings.timeout_s)

    # ---- internals ----------------------------------------------------------------------
    def _check(self, role: str, op_name: str) -> None:
        if self.declared is not None:
            self.declared.check(role, op_name)

    def _bound(self) -> "LLMRouter":
        # Resolve the stage's runtime in the calling thread, before the call hops to the LLM loop.
        return self if self._runtime is not None else LLMRouter(self.roles, self.runtime, self.declared)

    def _offline(self, role: str, op_name: str, inputs: dict):
        op = OPERATIONS[op_name]
        cfg = self.role_config(role)
        run = lambda: get_provider("offline").run(op, cfg, inputs.get("lang", "ko"), inputs)  # noqa: E731
        rt = self.runtime
        results = rt.offline_results
        if results is None or rt.offline_cheap(op_name):
            return run()
        # The rules answer is a function of the operation's code and its inputs (as the call cache
        # holds for a model's): kept by both, so a rebuild answers unchanged items from the file.
        try:
            digest = item_digest((op_name, code_hash(op.rules.__module__), sorted(cfg.items()), inputs))
        except ValueError:  # an input marshal cannot write (a callable, an object): not kept
            return run()
        hit = results.get([digest])
        if digest in hit:
            return hit[digest]
        started = time.perf_counter()
        out = run()
        rt.offline_timed(op_name, time.perf_counter() - started)
        results.put([(digest, out)])
        return out

    def _estimate(self, role: str, op_name: str, inputs: dict, chain: int = 0):
        """A dry run's call: the rules backend answers (once per prompt, as the call cache would);
        the runtime's ledger gets what the prompt and a reply of that size would cost."""
        op = OPERATIONS[op_name]
        cfg = self.role_config(role)
        messages = op.render(inputs.get("lang", "ko"), inputs)
        key = json.dumps(
            [cfg["provider"], cfg["model"], get_provider(cfg["provider"]).params(cfg), op_name, messages],
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        text = self.runtime.estimate_call(
            role, op_name, cfg, key, messages, lambda: self._offline(role, op_name, inputs).model_dump_json(), chain
        )
        return op.output.model_validate_json(text)

    def _request(self, role: str, op, inputs: dict, sample: int) -> tuple[Any, Any, LLMRequest]:
        cfg = self.role_config(role)
        provider, endpoint, client = self._client(role)
        request = LLMRequest(
            provider=cfg["provider"],
            model=cfg["model"],
            endpoint=endpoint,
            messages=op.render(inputs.get("lang", "ko"), inputs),
            schema_name=op.name,
            json_schema=strict_json_schema(op.output),
            params=provider.params(cfg),
            prompt_version=op.prompt_version(),
            sample=sample,
        )
        request.key(), request.approx_input_tokens()  # both cached: computed where the request is made
        return provider, client, request

    async def _many(
        self,
        role: str,
        op_name: str,
        prepared: list[tuple[Any, Any, LLMRequest]],
        langs: list[str],
        chain: int = 0,
        ahead: float = 0.0,
    ) -> list:
        cfg = self.role_config(role)
        batch_replies: dict = {}
        provider = get_provider(cfg["provider"])
        if prepared and cfg.get("batch") and getattr(provider, "supports_batch", False):
            batch_replies = await asyncio.to_thread(
                self.runtime.run_batch, prepared[0][0], prepared[0][1], [b[2] for b in prepared], role, op_name
            )
        return await asyncio.gather(
            *(self._complete(*b, role, op_name, lang, batch_replies, chain, ahead) for b, lang in zip(prepared, langs))
        )
