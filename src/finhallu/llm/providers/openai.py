"""`openai`: GPT-4o and friends through the official SDK's chat completions, with strict
structured outputs (`response_format: json_schema`), and the Batch API for bulk work.

Retries are ours (runtime.py), so the SDK's own are switched off (`max_retries=0`): one
policy, one place that honours Retry-After and counts attempts for the ledger.
"""

from __future__ import annotations

import json
import os
from typing import Any

from finhallu.llm.errors import ProviderError
from finhallu.llm.providers import register_provider
from finhallu.llm.providers.base import (
    RemoteProvider,
    connection_error,
    http_error,
    not_api_body,
    short,
    timeout_error,
    transport_error,
    unexpected_error,
    unreadable_error,
)
from finhallu.llm.request import LLMReply, LLMRequest

DEFAULT_ENDPOINT = "https://api.openai.com/v1"


@register_provider("openai")
class OpenAIProvider(RemoteProvider):
    name = "openai"
    supports_batch = True
    key_envs = ("OPENAI_API_KEY",)
    sdk_modules = ("openai",)
    max_tokens_param = "max_completion_tokens"  # `max_tokens` is deprecated on api.openai.com

    def endpoint(self, role: str, cfg: dict) -> str:
        return (cfg.get("base_url") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT).rstrip("/")

    def _make_client(self, endpoint: str, key: str, timeout: float):
        from openai import AsyncOpenAI, DefaultAioHttpClient

        # aiohttp under the SDK (its `aiohttp` extra, a dependency of ours): the SDK's advice for
        # many requests in flight. httpx's pool polls every idle connection's socket on each request.
        return AsyncOpenAI(
            api_key=key, base_url=endpoint, max_retries=0, timeout=timeout, http_client=DefaultAioHttpClient(timeout=timeout)
        )

    def _sync_client(self, client):
        from openai import OpenAI

        return OpenAI(api_key=client.api_key, base_url=str(client.base_url), max_retries=2, timeout=client.timeout)

    def body(self, request: LLMRequest) -> dict:
        p = request.params
        body: dict[str, Any] = {"model": request.model, "messages": [{"role": r, "content": c} for r, c in request.messages]}
        if p.get("temperature") is not None:
            body["temperature"] = p["temperature"]
        if p.get("max_tokens"):
            body[self.max_tokens_param] = p["max_tokens"]
        for k in ("top_p", "seed"):
            if p.get(k) is not None:
                body[k] = p[k]
        mode = p.get("structured", "json_schema")
        if mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": True},
            }
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    @staticmethod
    def reply_from(completion: dict) -> LLMReply:
        choice = (completion.get("choices") or [{}])[0]
        msg = choice.get("message") or {}
        usage = completion.get("usage") or {}
        text = msg.get("content")
        finish = choice.get("finish_reason")
        if msg.get("refusal"):
            text, finish = None, "refusal"
        return LLMReply(
            text=text,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=finish,
            model_version=completion.get("model"),
        )

    async def complete(self, client, request: LLMRequest) -> LLMReply:
        import openai

        who = f"{self.name} {request.model}"
        try:
            # The chat completions route through the SDK's low-level `post` (its documented way to
            # call a route with a plain body): the same client, auth, timeouts and status errors,
            # without `create`'s per-call TypedDict transform of a body we build already in wire
            # form, and with the reply as the API's JSON instead of a pydantic model dumped back
            # to a dict. ~2 ms of the LLM loop thread per call, which every call of a build shares.
            completion = await client.post("/chat/completions", cast_to=object, body=self.body(request))
        except openai.APIStatusError as exc:
            raise http_error(who, exc.status_code, exc.message, exc.response.headers) from None
        except openai.APITimeoutError:
            raise timeout_error(who) from None
        except openai.APIConnectionError as exc:
            raise connection_error(who, exc) from None
        except ValueError as exc:
            raise unreadable_error(who, exc) from None
        except openai.OpenAIError as exc:  # anything else the SDK rejects: a recorded failure, not a crash
            raise ProviderError(f"{who}: {type(exc).__name__}: {short(str(exc))}") from None
        except Exception as exc:  # the transport under the SDK (httpx2 or httpx), or anything else
            raise (transport_error(who, exc) or unexpected_error(who, exc)) from None
        # A 200 whose Content-Type is not JSON (an HTML gateway page) comes back from the SDK as the
        # page's text, not the API's object: retried like a 5xx, then a recorded failure.
        if not isinstance(completion, dict):
            raise not_api_body(who, f"a {type(completion).__name__} body: {completion!s:.80}")
        data = completion
        if not isinstance(data.get("choices"), list):
            raise not_api_body(who, "no choices in the reply")
        try:
            return self.reply_from(data)
        except (AttributeError, TypeError, ValueError) as exc:
            raise not_api_body(who, exc) from None

    # ---- Batch API: upload JSONL -> create batch -> poll -> download output -------------
    def submit_batch(self, client, requests: list[LLMRequest], display_name: str) -> str:
        sync = self._sync_client(client)
        lines = [
            json.dumps(
                {"custom_id": r.key(), "method": "POST", "url": "/v1/chat/completions", "body": self.body(r)}, ensure_ascii=False
            )
            for r in requests
        ]
        f = sync.files.create(file=(f"{display_name}.jsonl", ("\n".join(lines) + "\n").encode("utf-8")), purpose="batch")
        batch = sync.batches.create(
            input_file_id=f.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"source": "finhallu", "name": display_name[:500]},
        )
        return batch.id

    def poll_batch(self, client, job_id: str):
        sync = self._sync_client(client)
        batch = sync.batches.retrieve(job_id)
        if batch.status in ("validating", "in_progress", "finalizing", "cancelling"):
            return batch.status, None
        results: dict[str, LLMReply | str] = {}
        if batch.status in ("failed", "expired", "cancelled") and not batch.output_file_id:
            errors = "; ".join(e.message or "" for e in (batch.errors.data if batch.errors else []) or [])
            return batch.status, {"__batch__": f"batch {job_id} {batch.status}: {errors}".strip()}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for line in sync.files.content(file_id).text.splitlines():
                if not line.strip():
                    continue
                item = json.loads(line)
                resp = item.get("response") or {}
                if item.get("error") or resp.get("status_code", 200) >= 400:
                    err = item.get("error") or (resp.get("body") or {}).get("error") or {}
                    results[item["custom_id"]] = f"batch item failed: {short(json.dumps(err, ensure_ascii=False))}"
                else:
                    results[item["custom_id"]] = self.reply_from(resp.get("body") or {})
        return batch.status, results
