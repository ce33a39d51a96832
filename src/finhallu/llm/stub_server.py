"""A loopback LLM server that speaks the real wire formats: OpenAI (`/v1/chat/completions`,
`/v1/files`, `/v1/batches`) and Gemini (`/v1beta/models/{model}:generateContent`,
`:batchGenerateContent`, `/v1beta/batches/{id}`).

It answers with a JSON instance of the request's schema, built deterministically from the
schema and the prompt (scores at their maximum, strings taken from the prompt's evidence
lines), or with scripted faults: HTTP statuses with headers, a stall past the client's
timeout, malformed or empty output. Random faults (`fault_rate`, `fault_kinds`: 429, 500,
timeout, html, truncated, schema) are drawn from the seed, the request body and how often that
body was seen, so the same build against the same seed meets the same faults whatever the
order in which concurrent requests arrive. It can enforce an RPM limit the way providers do (a
sliding 60 s window, 429 + Retry-After) and counts what it saw. Tests, `benchmarks/` and
`finhallu llm-stub` (to try a profile against an OpenAI-compatible endpoint offline) use it.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import io
import json
import re
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from finhallu.llm.request import prompt_digest
from finhallu.llm.tokens import approx_prompt_tokens, approx_tokens

Responder = Callable[[str, dict, list[tuple[str, str]]], dict]
# 429 (with a short Retry-After), 500, timeout (no answer until the client gives up), html (a 200
# gateway page, Content-Type text/html), truncated (the connection drops mid-body), schema (a 200
# whose output is valid JSON that does not match the schema).
FAULT_KINDS = ("429", "500", "timeout", "html", "truncated", "schema")
GATEWAY_PAGE = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"


# ---- schema-driven answers ---------------------------------------------------------------
def _evidence_lines(messages: list[tuple[str, str]]) -> list[str]:
    """Lines of the prompt's material, not its instructions: the first block (up to the first
    blank line) is the instruction, as in every finhallu template; lines with numbers first."""
    user = "\n".join(c for r, c in messages if r == "user")
    blocks = user.split("\n\n", 1)
    body = blocks[1] if len(blocks) > 1 else blocks[0]
    lines = [ln.strip(" -[]") for ln in body.splitlines()]
    lines = [ln for ln in lines if len(ln) > 8 and "{" not in ln and "JSON" not in ln]
    return sorted(lines, key=lambda ln: not any(ch.isdigit() for ch in ln))


def schema_instance(schema: dict, messages: list[tuple[str, str]], name: str = "", defs: dict | None = None):
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return schema_instance(defs[schema["$ref"].split("/")[-1]], messages, name, defs)
    if "anyOf" in schema:
        if any(s.get("type") == "null" for s in schema["anyOf"]):
            return None  # an optional field: the model leaves it out
        return schema_instance(schema["anyOf"][0], messages, name, defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    t = schema.get("type")
    if t == "object":
        return {k: schema_instance(v, messages, k, defs) for k, v in schema.get("properties", {}).items()}
    if t == "array":
        n = max(1, int(schema.get("minItems", 1)))
        return [schema_instance(schema.get("items", {"type": "string"}), messages, name, defs) for _ in range(n)]
    if t in ("integer", "number"):
        v = schema.get("maximum", schema.get("exclusiveMaximum", 3 if t == "integer" else 1.0))
        return int(v) if t == "integer" else float(v)
    if t == "boolean":
        return True
    if t == "string":
        lines = _evidence_lines(messages)
        if not lines:
            return "stub"
        pick = int(hashlib.sha256(name.encode()).hexdigest(), 16) % min(len(lines), 3)
        return max(lines[: pick + 1], key=len)[:240]
    return None


def default_responder(schema_name: str, schema: dict, messages: list[tuple[str, str]]) -> dict:
    return schema_instance(schema or {"type": "object", "properties": {}}, messages)


# The one judgement a scripted model must give the other way for a benchmark to exist: a retrieved
# passage that passed the lexical step is judged unable to answer (else there are no hard negatives).
COOPERATIVE_VERDICTS = {"judge_answerability": {"answerable": False, "reason": "the passage does not state the answer"}}


def cooperative_responder(schema_name: str, schema: dict, messages: list[tuple[str, str]]) -> dict:
    """Schema answers built from the prompt, with the verdicts that let a build produce samples."""
    out = default_responder(schema_name, schema, messages)
    if isinstance(out, dict):
        out.update({k: v for k, v in COOPERATIVE_VERDICTS.get(schema_name, {}).items() if k in out})
    return out


class ReplayResponder:
    """A Responder that answers as a dry run did, counting the prompts it had no answer for."""

    def __init__(self, answers: dict[str, str], fallback: Responder):
        self.answers, self.fallback = answers, fallback
        self.unseen: dict[str, int] = {}  # prompts the dry run never asked, by operation

    def __call__(self, schema_name: str, schema: dict, messages: list[tuple[str, str]]) -> dict:
        known = self.answers.get(prompt_digest(messages))
        if known is None:
            self.unseen[schema_name] = self.unseen.get(schema_name, 0) + 1
            return self.fallback(schema_name, schema, messages)
        return json.loads(known)


def replay_responder(answers: dict[str, str], fallback: Responder = cooperative_responder) -> ReplayResponder:
    """Answers recorded by a dry run (`finhallu.estimate.dry_run(answers=...)`), by prompt: a model
    that decides as the rules backend does; prompts it has not seen get `fallback`'s answer."""
    return ReplayResponder(answers, fallback)


# ---- the server ----------------------------------------------------------------------------
class _Server(ThreadingHTTPServer):
    # A deep accept queue: with the default of 5, a burst of concurrent connects overflows it and
    # a client's SYN waits for a retransmit (seconds), which reads as a timeout that never reached us.
    request_queue_size = 256
    stub: "StubLLM"


class _Handler(BaseHTTPRequestHandler):
    """One request to the stub: the OpenAI and Gemini routes it serves, each answered or faulted."""

    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body go out as two writes, and with Nagle's algorithm the
    # body waits for the client's delayed ACK of the headers (~40 ms on Linux): every answer would
    # arrive 40 ms late, which a provider's server does not do.
    disable_nagle_algorithm = True
    server: "_Server"
    _in_flight = False  # this connection's current chat request counts in the stub's `inflight`

    @property
    def stub(self) -> "StubLLM":
        return self.server.stub

    def log_message(self, *a):  # quiet
        pass

    def parse_request(self) -> bool:
        # The request came in when its first line did: parsing its headers (the email package, slow
        # beside 30 other requests on the stub's interpreter lock) is the stub's work, part of latency_s.
        self._arrived = time.monotonic()
        return super().parse_request()

    def _send(
        self,
        status: int,
        body,
        headers: dict | None = None,
        raw: bytes | None = None,
        content_type: str = "application/json",
        truncate: bool = False,
        after_latency: bool = False,
    ):
        """`after_latency`: the response, encoded now, goes out `latency_s` after the request came in."""
        data = raw if raw is not None else json.dumps(body, ensure_ascii=False).encode()
        socket_writer, self.wfile = self.wfile, io.BytesIO()  # the headers written here first
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            head = self.wfile.getvalue()
        finally:
            self.wfile = socket_writer
        if truncate:  # the connection drops halfway through the announced body
            data = data[: len(data) // 2]
            self.close_connection = True
        if after_latency:
            self._await_latency()
        self._leave_in_flight()
        try:
            self.wfile.write(head + data)  # one write: nothing but the socket's own time after the wait
            if truncate:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass

    def _batch_fault(self) -> bool:
        """A random fault on a batch submission (upload or create): a 429 or a 500; a 404
        when the stub plays an endpoint without a batch API."""
        if not self.stub.batch_api:
            with self.stub.lock:
                self.stub.requests.append({"kind": "batch_refused", "model": "", "schema": ""})
            self._send(404, {"error": {"message": f"no route {self.path}", "code": 404}})
            return True
        kind = self.stub.draw_fault("batch-submit")
        if kind is None:
            return False
        self.stub._note_fault(kind)
        status = 429 if kind == "429" else 500
        self._send(
            status,
            {"error": {"message": f"stub fault {status}", "code": status}},
            {"retry-after-ms": "10", "Retry-After": "0"} if status == 429 else None,
        )
        return True

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/v1/files/([^/]+)/content", path)
        if m and m.group(1) in self.stub.files:
            return self._send(200, None, raw=self.stub.files[m.group(1)])
        m = re.fullmatch(r"/v1/batches/([^/]+)", path)
        if m and m.group(1) in self.stub.batches:
            return self._send(200, self.stub._openai_batch_poll(m.group(1)))
        m = re.fullmatch(r"/v1(?:beta)?/(batches/[^/]+)", path)
        if m and m.group(1) in self.stub.batches:
            return self._send(200, self.stub._gemini_batch_poll(m.group(1)))
        self._send(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}})

    def do_POST(self):
        path = self.path.split("?")[0]
        raw = self._body()
        if path == "/v1/chat/completions":
            return self._chat(json.loads(raw), raw)
        if path == "/v1/files":
            if self._batch_fault():
                return
            return self._send(200, self.stub._upload(self.headers.get("Content-Type", ""), raw))
        if path == "/v1/batches":
            return self._send(200, self.stub._openai_batch_create(json.loads(raw)))
        m = re.fullmatch(r"/v1(?:beta)?/models/([^/:]+):(generateContent|batchGenerateContent)", path)
        if m and m.group(2) == "generateContent":
            return self._generate(m.group(1), json.loads(raw), raw)
        if m:
            if self._batch_fault():
                return
            return self._send(200, self.stub._gemini_batch_create(m.group(1), json.loads(raw)))
        self._send(404, {"error": {"message": f"no route {path}"}})

    # -- one fault or one answer ------------------------------------------------
    def _fault(self, fingerprint: str = "") -> tuple[bool, tuple | None]:
        """(response already sent, output override) for the next scripted action, else a
        random fault drawn for this request."""
        action: tuple[Any, ...] | None  # (kind, *arguments): scripted, or drawn below
        with self.stub.lock:
            action = self.stub.faults.popleft() if self.stub.faults else None
        if action is None:
            kind = self.stub.draw_fault(fingerprint)
            if kind is None:
                return False, None
            self.stub._note_fault(kind)
            drawn: dict[str, tuple[Any, ...]] = {
                "429": ("status", 429, {"retry-after-ms": "10", "Retry-After": "0"}),
                "500": ("status", 500),
                "timeout": ("hold",),
                "html": ("html",),
                "truncated": ("truncated",),
                "schema": ("text", "[1, 2, 3]"),
            }
            action = drawn[kind]
        else:
            self.stub._note_fault(action[0])
        kind = action[0]
        if kind == "status":
            status, headers = action[1], (action[2] if len(action) > 2 else {})
            self._send(
                status,
                {
                    "error": {
                        "message": f"stub fault {status}",
                        "code": status,
                        "type": "rate_limit_error" if status == 429 else "server_error",
                    }
                },
                headers,
            )
            return True, None
        if kind == "sleep":
            time.sleep(action[1])
            return False, None  # then answers (the client has usually given up by now)
        if kind == "hold":  # no answer at all: the client's timeout fires, however slow the machine
            self.stub._stopping.wait(self.stub.fault_hold_s)
            self.close_connection = True
            return True, None
        if kind == "body":  # a 200 whose body is not the API's JSON (a broken proxy, a captive portal)
            self._send(200, None, raw=action[1].encode(), content_type=action[2] if len(action) > 2 else "application/json")
            return True, None
        if kind == "html":  # a gateway's HTML error page with a 200, as it really comes
            self._send(
                200, None, raw=(action[1] if len(action) > 1 else GATEWAY_PAGE).encode(), content_type="text/html; charset=utf-8"
            )
            return True, None
        if kind == "truncated":
            return False, ("truncated", None)
        return False, (kind, action[1] if len(action) > 1 else None)

    def _chat(self, req: dict, raw: bytes = b""):
        messages = [
            (m["role"], m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])) for m in req["messages"]
        ]
        fmt = req.get("response_format") or {}
        schema_name = (fmt.get("json_schema") or {}).get("name", "")
        schema = (fmt.get("json_schema") or {}).get("schema", {})
        with self.stub.lock:
            self.stub.requests.append(
                {"kind": "chat", "model": req["model"], "schema": schema_name, "fp": hashlib.sha256(raw).hexdigest()[:16]}
            )
        retry_after = self.stub._admit()
        if retry_after is not None:
            return self._send(
                429,
                {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
                {"Retry-After": f"{retry_after:.2f}"},
            )
        with self.stub.lock:
            self.stub.inflight += 1
            self.stub.max_inflight = max(self.stub.max_inflight, self.stub.inflight)
            self._in_flight = True
        try:
            sent, override = self._fault("chat|" + hashlib.sha256(raw).hexdigest())
            if not sent:
                self._chat_answer(req, schema_name, schema, messages, override)
        finally:
            self._leave_in_flight()

    def _leave_in_flight(self) -> None:
        """The request no longer counts as in flight (once; before its answer is written, so that a
        client's next request, sent on receiving it, never counts beside it)."""
        with self.stub.lock:
            if self._in_flight:
                self.stub.inflight -= 1
                self._in_flight = False

    def _chat_answer(self, req: dict, schema_name: str, schema: dict, messages: list, override: tuple | None) -> None:
        text, pt, ct = self.stub._answer(schema_name, schema, messages)
        reply = self.stub._apply_override(text, override)
        assert reply is not None, "an empty reply is a Gemini fault; the chat API has none"
        self._send(
            after_latency=True,
            truncate=override is not None and override[0] == "truncated",
            status=200,
            body={
                "id": f"chatcmpl-{hashlib.sha1(reply.encode()).hexdigest()[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply, "refusal": None},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
            },
        )

    def _generate(self, model: str, req: dict, raw: bytes = b""):
        with self.stub.lock:
            self.stub.requests.append(
                {"kind": "generate", "model": model, "schema": "", "fp": hashlib.sha256(raw).hexdigest()[:16]}
            )
        retry_after = self.stub._admit()
        if retry_after is not None:
            return self._send(
                429,
                {"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}},
                {"Retry-After": f"{retry_after:.2f}"},
            )
        sent, override = self._fault(f"generate|{model}|" + hashlib.sha256(raw).hexdigest())
        if sent:
            return
        body = self.stub._gemini_response(model, req, override)
        self._send(200, body, truncate=override is not None and override[0] == "truncated", after_latency=True)

    def _await_latency(self) -> None:
        """The answer goes out `latency_s` after the request came in, as a provider's would: the
        stub's own work on it (parsing, answering) is part of that time, not added to it (on a
        busy machine it added up to 0.3 s per call in bursts)."""
        if self.stub.latency_s:
            left = self.stub.latency_s - (time.monotonic() - self._arrived)
            if left > 0:
                time.sleep(left)


class StubLLM:
    """`with StubLLM() as stub:` serves on 127.0.0.1:<port>; `stub.openai_base` / `stub.gemini_base`."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        rpm_limit: float | None = None,
        responder: Responder = default_responder,
        batch_polls_until_done: int = 1,
        port: int = 0,
        usage_tokens: tuple[int, int] | None = None,
        fault_rate: float = 0.0,
        fault_kinds: tuple[str, ...] = FAULT_KINDS,
        fault_seed: int = 0,
        fault_hold_s: float = 120.0,
        batch_api: bool = True,
    ):
        unknown = set(fault_kinds) - set(FAULT_KINDS)
        if unknown or not 0.0 <= fault_rate <= 1.0:
            raise ValueError(f"fault kinds are {FAULT_KINDS} (got {sorted(unknown)}), the rate a share in [0, 1]")
        self.fault_rate = fault_rate  # may be changed while serving (a test turns faults off for a rerun)
        self.fault_kinds = tuple(fault_kinds)
        self.fault_seed = fault_seed
        self.fault_hold_s = fault_hold_s  # how long a `timeout` fault holds the connection (or until stop)
        self.faults_injected: dict[str, int] = {}
        self.batch_api = batch_api  # False: an endpoint without /v1/files and batch routes (404s)
        self._seen: dict[str, int] = {}
        self._stopping = threading.Event()
        self.latency_s = latency_s
        self.rpm_limit = rpm_limit
        self.responder = responder
        self.batch_polls_until_done = batch_polls_until_done
        self.usage_tokens = usage_tokens
        self.faults: deque = deque()  # scripted actions, consumed one per chat/generate request
        self.lock = threading.Lock()
        self.requests: list[dict] = []  # every request: path, schema, model
        self.arrivals: deque[float] = deque()
        self.over_limit = 0
        self.max_window = 0
        self.inflight = 0
        self.max_inflight = 0
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.stub = self
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # ---- lifecycle --------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def openai_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def gemini_base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "StubLLM":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # held `timeout` faults let go
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- observations -----------------------------------------------------------------
    def count(self, kind: str | None = None) -> int:
        with self.lock:
            return sum(1 for r in self.requests if kind is None or r["kind"] == kind)

    def reset_counts(self) -> None:
        with self.lock:
            self.requests.clear()
            self.faults_injected.clear()

    def faulted(self, kind: str | None = None) -> int:
        """Requests that got a random or scripted fault (of `kind`)."""
        with self.lock:
            return sum(n for k, n in self.faults_injected.items() if kind is None or k == kind)

    # ---- random faults ------------------------------------------------------------------
    def draw_fault(self, fingerprint: str) -> str | None:
        """The random fault (a kind) for this request, or None: a hash of the seed, the request's
        fingerprint and its occurrence number, so retries of one request draw afresh."""
        if not self.fault_rate:
            return None
        with self.lock:
            n = self._seen.get(fingerprint, 0)
            self._seen[fingerprint] = n + 1
        h = hashlib.sha256(f"{self.fault_seed}|{fingerprint}|{n}".encode()).digest()
        if int.from_bytes(h[:8], "big") / 2**64 >= self.fault_rate:
            return None
        return self.fault_kinds[int.from_bytes(h[8:16], "big") % len(self.fault_kinds)]

    def _note_fault(self, kind: str) -> None:
        with self.lock:
            self.faults_injected[kind] = self.faults_injected.get(kind, 0) + 1

    # ---- behaviour ----------------------------------------------------------------------
    def _admit(self) -> float | None:
        """Record an arrival; with an RPM limit, None if admitted else the Retry-After seconds."""
        now = time.monotonic()
        with self.lock:
            while self.arrivals and self.arrivals[0] <= now - 60.0:
                self.arrivals.popleft()
            if self.rpm_limit and len(self.arrivals) >= self.rpm_limit:
                self.over_limit += 1
                return max(0.05, self.arrivals[0] + 60.0 - now)
            self.arrivals.append(now)
            self.max_window = max(self.max_window, len(self.arrivals))
            return None

    def _answer(self, schema_name: str, schema: dict, messages) -> tuple[str, int, int]:
        text = json.dumps(self.responder(schema_name, schema, messages), ensure_ascii=False)
        if self.usage_tokens:
            return text, *self.usage_tokens
        # Usage as finhallu.llm.tokens approximates it (no tokenizer here; see there).
        return text, approx_prompt_tokens(messages), approx_tokens(text)

    @staticmethod
    def _apply_override(text: str, ov: tuple | None) -> str | None:
        if ov is None:
            return text
        kind, value = ov
        if kind == "text":
            return value
        if kind == "empty":
            return None
        return text

    def _gemini_response(self, model: str, req: dict, override: tuple | None = None) -> dict:
        messages = []
        si = req.get("systemInstruction") or req.get("system_instruction")
        if si:
            messages.append(("system", "".join(p.get("text", "") for p in si.get("parts", []))))
        for c in req.get("contents", []):
            messages.append(
                ("assistant" if c.get("role") == "model" else "user", "".join(p.get("text", "") for p in c.get("parts", [])))
            )
        gen = req.get("generationConfig") or {}
        schema = gen.get("responseJsonSchema") or gen.get("responseSchema") or {}
        text, pt, ct = self._answer("", schema, messages)
        reply = self._apply_override(text, override)
        if reply is None:
            return {}
        return {
            "candidates": [{"content": {"role": "model", "parts": [{"text": reply}]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": pt, "candidatesTokenCount": ct, "totalTokenCount": pt + ct},
            "modelVersion": model,
        }

    # ---- OpenAI files and batches ---------------------------------------------------------
    def _upload(self, content_type: str, raw: bytes) -> dict:
        msg = email.parser.BytesParser(policy=email.policy.default).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        fields = {}
        for part in msg.iter_parts():
            data = part.get_payload(decode=True)
            assert isinstance(data, bytes), "a form field's content, never a nested multipart"
            fields[part.get_param("name", header="content-disposition")] = (part.get_filename(), data)
        fid = f"file-{hashlib.sha1(raw).hexdigest()[:16]}"
        filename, data = fields["file"]
        self.files[fid] = data
        with self.lock:
            self.requests.append({"kind": "file_upload", "model": "", "schema": ""})
        return {
            "id": fid,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename or "batch.jsonl",
            "purpose": (fields.get("purpose") or (None, b"batch"))[1].decode(),
            "status": "processed",
        }

    def _openai_batch_create(self, req: dict) -> dict:
        bid = f"batch_{len(self.batches) + 1:04d}{hashlib.sha1(req['input_file_id'].encode()).hexdigest()[:8]}"
        self.batches[bid] = {"kind": "openai", "req": req, "polls": 0, "created_at": int(time.time())}
        with self.lock:
            self.requests.append({"kind": "batch_create", "model": "", "schema": ""})
        return self._openai_batch_obj(bid, "validating")

    def _openai_batch_obj(self, bid: str, status: str, out: str | None = None) -> dict:
        b = self.batches[bid]
        n = len(self.files[b["req"]["input_file_id"]].splitlines())
        return {
            "id": bid,
            "object": "batch",
            "endpoint": b["req"]["endpoint"],
            "errors": None,
            "input_file_id": b["req"]["input_file_id"],
            "completion_window": b["req"]["completion_window"],
            "status": status,
            "output_file_id": out,
            "error_file_id": None,
            "created_at": b["created_at"],
            "request_counts": {"total": n, "completed": n if out else 0, "failed": 0},
            "metadata": b["req"].get("metadata"),
        }

    def _openai_batch_poll(self, bid: str) -> dict:
        b = self.batches[bid]
        with self.lock:
            self.requests.append({"kind": "batch_poll", "model": "", "schema": ""})
        b["polls"] += 1
        if b["polls"] < self.batch_polls_until_done:
            return self._openai_batch_obj(bid, "in_progress")
        if "output" not in b:
            lines: list[str] = []
            for line in self.files[b["req"]["input_file_id"]].decode().splitlines():
                item = json.loads(line)
                body = item["body"]
                fmt = (body.get("response_format") or {}).get("json_schema") or {}
                messages = [(m["role"], m["content"]) for m in body["messages"]]
                text, pt, ct = self._answer(fmt.get("name", ""), fmt.get("schema", {}), messages)
                lines.append(
                    json.dumps(
                        {
                            "id": f"batch_req_{len(lines)}",
                            "custom_id": item["custom_id"],
                            "response": {
                                "status_code": 200,
                                "request_id": f"req_{len(lines)}",
                                "body": {
                                    "id": "chatcmpl-b",
                                    "object": "chat.completion",
                                    "created": 0,
                                    "model": body["model"],
                                    "choices": [
                                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                                    ],
                                    "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
                                },
                            },
                            "error": None,
                        },
                        ensure_ascii=False,
                    )
                )
            oid = f"file-out-{bid}"
            self.files[oid] = ("\n".join(lines) + "\n").encode()
            b["output"] = oid
        return self._openai_batch_obj(bid, "completed", b["output"])

    # ---- Gemini batches ---------------------------------------------------------------------
    def _gemini_batch_create(self, model: str, req: dict) -> dict:
        name = f"batches/stub{len(self.batches) + 1:04d}"
        self.batches[name] = {"kind": "gemini", "model": model, "req": req, "polls": 0}
        with self.lock:
            self.requests.append({"kind": "batch_create", "model": model, "schema": ""})
        return {
            "name": name,
            "metadata": {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
                "model": f"models/{model}",
                "displayName": req["batch"].get("displayName"),
                "state": "BATCH_STATE_PENDING",
                "name": name,
            },
        }

    def _gemini_batch_poll(self, name: str) -> dict:
        b = self.batches[name]
        with self.lock:
            self.requests.append({"kind": "batch_poll", "model": b["model"], "schema": ""})
        b["polls"] += 1
        meta: dict[str, object] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": f"models/{b['model']}",
            "state": "BATCH_STATE_RUNNING",
            "name": name,
        }
        if b["polls"] < self.batch_polls_until_done:
            return {"name": name, "metadata": meta}
        responses = []
        for item in b["req"]["batch"]["inputConfig"]["requests"]["requests"]:
            responses.append({"response": self._gemini_response(b["model"], item["request"]), "metadata": item.get("metadata")})
        meta.update(
            state="BATCH_STATE_SUCCEEDED",
            output={
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
                "inlinedResponses": {"inlinedResponses": responses},
            },
        )
        return {
            "name": name,
            "metadata": meta,
            "done": True,
            "response": {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
                "inlinedResponses": {"inlinedResponses": responses},
            },
        }
