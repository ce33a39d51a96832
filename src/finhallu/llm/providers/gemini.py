"""`gemini`: Gemini through google-genai's `generate_content` with a JSON response schema,
and Gemini batch mode (`batches.create` with inlined requests) for bulk work.

google-genai does not retry unless asked (`HttpRetryOptions`), which is what we want: the
runtime's retry policy is the only one.
"""

from __future__ import annotations

import os
from typing import Any

from finhallu.llm.errors import ProviderError
from finhallu.llm.providers import register_provider
from finhallu.llm.providers.base import RemoteProvider, http_error, not_api_body, short, transport_error, unexpected_error
from finhallu.llm.request import LLMReply, LLMRequest

DEFAULT_ENDPOINT = "https://generativelanguage.googleapis.com"
_RUNNING = {
    "JOB_STATE_PENDING",
    "JOB_STATE_QUEUED",
    "JOB_STATE_RUNNING",
    "JOB_STATE_UNSPECIFIED",
    "JOB_STATE_PAUSED",
    "JOB_STATE_UPDATING",
    "JOB_STATE_CANCELLING",
}


@register_provider("gemini")
class GeminiProvider(RemoteProvider):
    name = "gemini"
    supports_batch = True
    key_envs = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    sdk_modules = ("google.genai",)

    def endpoint(self, role: str, cfg: dict) -> str:
        return (cfg.get("base_url") or os.environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_ENDPOINT).rstrip("/")

    def _make_client(self, endpoint: str, key: str, timeout: float):
        from google import genai
        from google.genai import types

        return genai.Client(
            api_key=key, http_options=types.HttpOptions(base_url=endpoint, api_version="v1beta", timeout=int(timeout * 1000))
        )

    async def aclose_client(self, client) -> None:
        await client.aio.aclose()

    def contents_and_config(self, request: LLMRequest):
        from google.genai import types

        system = "\n\n".join(c for r, c in request.messages if r == "system") or None
        contents = [
            types.Content(role="model" if r == "assistant" else "user", parts=[types.Part(text=c)])
            for r, c in request.messages
            if r != "system"
        ]
        p = request.params
        cfg = {
            "system_instruction": system,
            "temperature": p.get("temperature"),
            "max_output_tokens": p.get("max_tokens"),
            "top_p": p.get("top_p"),
            "seed": p.get("seed"),
        }
        if p.get("structured", "json_schema") != "none":
            cfg["response_mime_type"] = "application/json"
        if p.get("structured", "json_schema") == "json_schema":
            cfg["response_json_schema"] = request.json_schema
        return contents, types.GenerateContentConfig(**{k: v for k, v in cfg.items() if v is not None})

    @staticmethod
    def reply_from(resp) -> LLMReply:
        usage = resp.usage_metadata
        finish = None
        if resp.candidates:
            fr = resp.candidates[0].finish_reason
            finish = getattr(fr, "value", fr)
        try:
            text = resp.text  # None for an empty reply ({}), which the router treats as a failure
        except ValueError:
            text = None
        out_tokens = 0
        if usage is not None:
            # Gemini 2.5 "thinking" tokens are billed as output.
            out_tokens = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
        return LLMReply(
            text=text,
            input_tokens=int((usage.prompt_token_count or 0) if usage else 0),
            output_tokens=int(out_tokens),
            finish_reason=finish,
            model_version=resp.model_version,
        )

    async def complete(self, client, request: LLMRequest) -> LLMReply:
        from google.genai import errors

        contents, config = self.contents_and_config(request)
        who = f"gemini {request.model}"
        try:
            resp = await client.aio.models.generate_content(model=request.model, contents=contents, config=config)
        except errors.APIError as exc:
            raise self.api_error(who, exc) from None
        except Exception as exc:  # the transport under the SDK (httpx2, httpx or aiohttp), or anything else
            raise (transport_error(who, exc) or unexpected_error(who, exc)) from None
        try:
            return self.reply_from(resp)
        except (AttributeError, TypeError, ValueError) as exc:  # a 200 that is not a GenerateContentResponse
            raise not_api_body(who, exc) from None

    @staticmethod
    def api_error(who: str, exc) -> ProviderError:
        headers: Any = getattr(getattr(exc, "response", None), "headers", None)  # a mapping, or not: tried below
        try:
            headers.get("retry-after")
        except Exception:  # not a mapping (a replay or an aiohttp response): no Retry-After
            headers = None
        return http_error(who, int(exc.code or 0), exc.message or exc.status or "", headers)

    # ---- batch mode: inlined requests, results inline in the finished job -----------------
    def submit_batch(self, client, requests: list[LLMRequest], display_name: str) -> str:
        from google.genai import types

        inlined = []
        for r in requests:
            contents, config = self.contents_and_config(r)
            inlined.append(types.InlinedRequest(contents=contents, config=config, metadata={"key": r.key()}))
        job = client.batches.create(
            model=requests[0].model, src=inlined, config=types.CreateBatchJobConfig(display_name=display_name[:120])
        )
        return job.name

    def poll_batch(self, client, job_id: str):
        job = client.batches.get(name=job_id)
        state = getattr(job.state, "value", str(job.state))
        if state in _RUNNING:
            return state, None
        if state != "JOB_STATE_SUCCEEDED":
            return state, {"__batch__": f"batch {job_id} {state}: {job.error}"}
        results: dict[str, LLMReply | str] = {}
        for item in (job.dest.inlined_responses if job.dest else None) or []:
            key = (item.metadata or {}).get("key")
            if key is None:
                continue
            if item.error is not None:
                results[key] = f"batch item failed: {short(str(item.error))}"
            else:
                results[key] = self.reply_from(item.response)
        return state, results
