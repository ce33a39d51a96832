"""The LLM layer against loopback servers speaking OpenAI's and Gemini's wire formats, driven by
the official SDKs: structured output, retries, repair, cache, ledger, keys, batch."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import threading
import time

import duckdb
import pytest

from finhallu.llm.config import LLMConfig, ModelLimits, ModelPrice
from finhallu.llm.cache import CallCache
from finhallu.llm.errors import BatchPending, MissingKeyError
from finhallu.llm.keys import check_keys
from finhallu.llm.limits import ModelLimiter
from finhallu.llm.router import LLMRouter
from finhallu.llm.runtime import LLMRuntime
from finhallu.llm.stub_server import StubLLM
from finhallu.answerability import AnswerabilityOut  # registers the judge_answerability operation
from finhallu.warehouse import Catalog

KEY = "sk-test-secret-0123456789"
OP = "judge_answerability"
INPUTS = dict(
    question="What was total revenue in fiscal 2024?",
    passage="Total revenue was $1,234 million in 2024.",
    clue="Total revenue was $1,234 million",
    answer="$1,234 million",
    lang="en",
)


@pytest.fixture
def stub():
    with StubLLM() as s:
        yield s


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def runtime(tmp_path, **settings) -> LLMRuntime:
    base = dict(backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=5.0, batch_poll_s=0.01, batch_min_requests=2)
    base.update(settings)
    return LLMRuntime(LLMConfig(**base), CallCache(tmp_path / "llm.sqlite"), stage="test")


def openai_role(stub, **kw) -> dict:
    return {"provider": "openai", "model": "gpt-4o", "base_url": stub.openai_base, "temperature": 0.0, "max_tokens": 200, **kw}


def gemini_role(stub, **kw) -> dict:
    return {
        "provider": "gemini",
        "model": "gemini-2.5-flash",
        "base_url": stub.gemini_base,
        "temperature": 0.0,
        "max_tokens": 200,
        **kw,
    }


def test_openai_structured_output(stub, tmp_path):
    seen = {}

    def responder(name, schema, messages):
        seen.update(name=name, schema=schema, messages=messages)
        return {"answerable": True, "reason": "the passage states the revenue"}

    stub.responder = responder
    out = LLMRouter({"j": openai_role(stub)}, runtime(tmp_path)).call("j", OP, **INPUTS)
    assert isinstance(out, AnswerabilityOut) and out.answerable is True
    assert seen["name"] == OP
    assert seen["schema"]["additionalProperties"] is False and set(seen["schema"]["required"]) == {"answerable", "reason"}
    assert "Total revenue was $1,234 million in 2024." in seen["messages"][-1][1]  # the rendered en template


def test_gemini_structured_output_and_empty_reply_repaired(stub, tmp_path):
    rt = runtime(tmp_path)
    router = LLMRouter({"g": gemini_role(stub)}, rt)
    out = router.call("g", OP, **INPUTS)
    assert isinstance(out, AnswerabilityOut)
    stub.faults.append(("empty",))  # Gemini's `{}` reply: r.text is None -> repaired once
    out = router.call("g", OP, sample=1, **INPUTS)
    assert isinstance(out, AnswerabilityOut)
    rows = rt.ledger.rows()
    assert [r["repair"] for r in rows] == [False, False, True]
    assert stub.count("generate") == 3


def test_retries_429_with_retry_after_then_500_then_timeout(stub, tmp_path):
    rt = runtime(tmp_path, timeout_s=0.5)
    router = LLMRouter({"j": openai_role(stub)}, rt)
    stub.faults.extend([("status", 429, {"Retry-After": "0.4"}), ("status", 500), ("sleep", 1.5)])
    t0 = time.monotonic()
    out = router.call("j", OP, **INPUTS)
    elapsed = time.monotonic() - t0
    assert isinstance(out, AnswerabilityOut)
    rec = rt.ledger.rows()[0]
    assert rec["attempts"] == 4 and rec["error"] is None
    assert stub.count("chat") == 4
    assert elapsed >= 0.4 + 0.5  # waited the Retry-After, and the stalled attempt ran into the timeout


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_a_non_api_body_is_retried_not_a_crash(stub, tmp_path, kind):
    rt = runtime(tmp_path)
    role = (openai_role if kind == "openai" else gemini_role)(stub)
    stub.faults.append(("body", "<html>502 Bad Gateway (proxy)</html>"))
    assert isinstance(LLMRouter({"j": role}, rt).call("j", OP, **INPUTS), AnswerabilityOut)
    assert rt.ledger.rows()[0]["attempts"] == 2


def test_attempts_are_bounded_and_a_4xx_is_not_retried(stub, tmp_path):
    rt = runtime(tmp_path, max_attempts=3)
    router = LLMRouter({"j": openai_role(stub)}, rt)
    stub.faults.extend([("status", 503)] * 5)
    assert router.call("j", OP, **INPUTS) is None  # a recorded failure, not an exception
    assert stub.count("chat") == 3
    stub.faults.clear()
    stub.reset_counts()
    stub.faults.append(("status", 400))
    assert router.call("j", OP, sample=7, **INPUTS) is None
    assert stub.count("chat") == 1
    errors = [r["error"] for r in rt.ledger.rows()]
    assert "HTTP 503" in errors[0] and "after 3 attempt" in errors[0] and "HTTP 400" in errors[1]
    assert all(KEY not in e for e in errors)


def test_malformed_output_gets_one_repair_then_is_a_recorded_failure(stub, tmp_path):
    rt = runtime(tmp_path)
    router = LLMRouter({"j": openai_role(stub)}, rt)
    stub.faults.append(("text", "Sure! The answer is yes."))
    assert isinstance(router.call("j", OP, **INPUTS), AnswerabilityOut)  # repaired
    stub.faults.extend([("text", '{"answerable": "maybe"}'), ("text", "still not json")])
    assert router.call("j", OP, sample=1, **INPUTS) is None
    rows = rt.ledger.rows()
    assert [(r["repair"], r["error"] is None) for r in rows] == [(False, True), (True, True), (False, True), (True, False)]
    assert "after one repair" in rows[-1]["error"]
    summary = rt.ledger.summary()[0]
    assert summary["failures"] == 1 and summary["repairs"] == 2


def test_rerun_is_served_from_the_cache(stub, tmp_path):
    many = [dict(INPUTS, question=f"What was revenue in year {i}?") for i in range(12)]
    first = LLMRouter({"j": openai_role(stub)}, runtime(tmp_path)).call_many("j", OP, many)
    assert stub.count("chat") == 12
    stub.reset_counts()
    rt2 = runtime(tmp_path)  # a new process would open the same file
    second = LLMRouter({"j": openai_role(stub)}, rt2).call_many("j", OP, many)
    assert stub.count() == 0
    assert second == first
    assert all(r["cache_hit"] and r["cost_usd"] == 0 for r in rt2.ledger.rows())
    # every output-affecting setting is in the key: another temperature calls again
    LLMRouter({"j": openai_role(stub, temperature=0.5)}, rt2).call("j", OP, **many[0])
    assert stub.count("chat") == 1


def test_concurrency_and_rpm_limits_hold(stub, tmp_path):
    stub.latency_s = 0.15
    rt = runtime(tmp_path, limits={"gpt-4o": ModelLimits(rpm=6000, concurrency=3)})
    many = [dict(INPUTS, question=f"q{i}") for i in range(12)]
    LLMRouter({"j": openai_role(stub)}, rt).call_many("j", OP, many)
    assert stub.max_inflight == 3
    # the ledger's latency is time at the provider, not time queued behind the concurrency limit
    latencies = [r["latency_s"] for r in rt.ledger.rows()]
    assert all(0.15 <= x < 0.45 for x in latencies), latencies


def test_limiter_never_exceeds_rpm_or_tpm_in_any_window():
    now = [0.0]
    lim = ModelLimiter(rpm=30, tpm=1000, clock=lambda: now[0])
    starts, tokens = [], []
    while now[0] < 300:
        wait, res = lim.try_reserve(90)
        if res is None:
            now[0] += wait
            continue
        starts.append(now[0])
        tokens.append((now[0], 90))
        res.settle(60)  # real usage below the estimate frees budget
        tokens[-1] = (now[0], 60)
    for t in starts:
        assert sum(1 for s in starts if t <= s < t + 60) <= 30
        assert sum(k for s, k in tokens if t <= s < t + 60) <= 1000
    assert len(starts) > 60


def test_limiter_logs_stay_exact_and_bounded_with_late_settles():
    """The logs are kept incrementally (every request passes the limiter): with replies settling
    late and out of order, some after their entry left the 60 s window, the token total is still
    the sum of the window's entries, no window holds more than the limits, and the RPM log does
    not grow with the build when the limit is far away."""
    rng = random.Random(7)
    now = [0.0]
    lim = ModelLimiter(rpm=40, tpm=4000, clock=lambda: now[0])
    admitted: list[list] = []  # [start, tokens as settled, settled at]
    pending: list[tuple] = []
    while now[0] < 400:
        if pending and rng.random() < 0.4:
            res, entry = pending.pop(rng.randrange(len(pending)))
            entry[1] = rng.randint(0, 150)
            entry[2] = now[0]
            res.settle(entry[1])
        wait, res = lim.try_reserve(100)  # drops the entries that left the window first
        if res is not None:
            entry = [now[0], 100, None]
            admitted.append(entry)
            pending.append((res, entry))
        assert lim._used == sum(e[1] for e in admitted if e[0] > now[0] - 60)
        now[0] += rng.choice([0.0, 0.5, 3.0, wait])
    for t in (e[0] for e in admitted):
        assert sum(1 for e in admitted if t <= e[0] < t + 60) <= 40
    assert len(admitted) > 150 and any(e[2] is not None and e[2] - e[0] > 60 for e in admitted)

    lim = ModelLimiter(rpm=10**7, tpm=None, clock=lambda: now[0])
    for i in range(20_000):  # 200 requests a second for 100 s, each settled a second later
        now[0] = i / 200
        _, res = lim.try_reserve(1)
        res.settle(1)
        assert len(lim._starts) <= 2 * 61 * 200 + 64


def test_ledger_totals_and_llm_calls_view(stub, tmp_path):
    stub.usage_tokens = (1000, 500)
    rt = runtime(tmp_path, prices={"gpt-4o": ModelPrice(input_per_1m=2.5, output_per_1m=10.0)})
    many = [dict(INPUTS, question=f"q{i}") for i in range(5)]
    LLMRouter({"j": openai_role(stub)}, rt).call_many("j", OP, many)
    summary = rt.ledger.summary()[0]
    assert summary["calls"] == 5 and summary["input_tokens"] == 5000 and summary["output_tokens"] == 2500
    assert summary["cost_usd"] == pytest.approx(5 * (1000 * 2.5 + 500 * 10.0) / 1e6)
    home = tmp_path / "home"
    cat = Catalog(home)
    cat.record_llm_calls("b1", "test", rt.ledger.rows())
    cat.refresh_views()
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    total, n = con.execute("SELECT sum(cost_usd), count(*) FROM llm_calls WHERE stage='test'").fetchone()
    assert n == 5 and total == pytest.approx(0.0375)
    con.close()
    assert KEY not in (home / "catalog" / "llm_calls" / "b1__test.jsonl").read_text()


def test_missing_key_names_the_role(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    roles = {
        "injector_b": {"provider": "gemini", "model": "gemini-2.5-flash"},
        "assistant_llm": {"provider": "openai", "model": "gpt-4o"},
        "local": {"provider": "openai_compatible", "model": "qwen", "base_url": "http://127.0.0.1:1/v1"},
        "rules": {"provider": "offline", "model": "rules"},
    }
    with pytest.raises(MissingKeyError) as exc:
        check_keys(roles)
    msg = str(exc.value)
    assert "injector_b" in msg and "GEMINI_API_KEY" in msg and "assistant_llm" in msg and "OPENAI_API_KEY" in msg
    assert "local" not in msg and "rules" not in msg  # keyless endpoints and offline roles need none
    monkeypatch.setenv("GOOGLE_API_KEY", "x" * 12)
    with pytest.raises(MissingKeyError, match="assistant_llm"):
        check_keys(roles)


def test_openai_compatible_endpoint_from_env(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", stub.openai_base)
    monkeypatch.delenv("OPENAI_API_KEY")
    role = {"provider": "openai_compatible", "model": "qwen2.5-7b-instruct", "temperature": 0.0, "max_tokens": 64}
    out = LLMRouter({"v": role}, runtime(tmp_path)).call("v", OP, **INPUTS)
    assert isinstance(out, AnswerabilityOut) and stub.requests[-1]["model"] == "qwen2.5-7b-instruct"


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_batch_submit_poll_fetch_and_resume(stub, tmp_path, kind):
    stub.batch_polls_until_done = 3
    role = (openai_role if kind == "openai" else gemini_role)(stub, batch=True)
    many = [dict(INPUTS, question=f"What was revenue in quarter {i}?") for i in range(6)]
    # Interrupted: the job is submitted and polled, but the build gives up waiting.
    rt = runtime(tmp_path, batch_max_wait_s=0.001)
    with pytest.raises(BatchPending):
        LLMRouter({"b": role}, rt).call_many("b", OP, many)
    assert stub.count("batch_create") == 1
    # The rerun polls the same job instead of submitting another, and caches its results.
    rt2 = runtime(tmp_path)
    outs = LLMRouter({"b": role}, rt2).call_many("b", OP, many)
    assert all(isinstance(o, AnswerabilityOut) for o in outs)
    assert stub.count("batch_create") == 1 and stub.count("chat") == 0 and stub.count("generate") == 0
    rows = rt2.ledger.rows()
    assert len(rows) == 6 and all(r["batch"] for r in rows)
    # A third run is served from the call cache.
    stub.reset_counts()
    rt3 = runtime(tmp_path)
    assert LLMRouter({"b": role}, rt3).call_many("b", OP, many) == outs
    assert stub.count() == 0


def test_call_cache_is_safe_under_concurrent_writers(tmp_path):
    from finhallu.llm.request import LLMReply

    path = tmp_path / "c.sqlite"
    caches = [CallCache(path) for _ in range(4)]  # four connections, as four processes would hold

    def write(c, i):
        for j in range(50):
            c.put(f"k{i}-{j}", "openai", "gpt-4o", "op", LLMReply(text=f"{i}-{j}", input_tokens=1, output_tokens=1))

    threads = [threading.Thread(target=write, args=(c, i)) for i, c in enumerate(caches)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(caches[0]) == 200
    assert caches[0].get("k3-49").text == "3-49"
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_keys_looked_up_together_answer_from_memory_until_written(tmp_path):
    """`look_up` asks SQLite once for many keys; those it found in neither table are answered absent
    without a query, and a key this cache then writes (a reply or a failure) is read from SQLite
    again. Keys another connection held before the look-up are found."""
    from finhallu.llm.request import LLMReply

    path = tmp_path / "c.sqlite"
    cache, other = CallCache(path), CallCache(path)
    other.put("held", "openai", "gpt-4o", "op", LLMReply(text="earlier", input_tokens=1, output_tokens=1))
    other.put_failure("failed", "openai", "gpt-4o", "op", "HTTP 400")
    cache.look_up(["held", "failed", "new", "dead", *(f"k{i}" for i in range(900))])  # more than one query's parameters
    assert cache.get("held").text == "earlier" and cache.failure("failed") == "HTTP 400"
    assert cache._absent == {"new", "dead", *(f"k{i}" for i in range(900))}
    assert cache.get("new") is None and cache.failure("new") is None
    cache.put("new", "openai", "gpt-4o", "op", LLMReply(text="now", input_tokens=1, output_tokens=1))
    cache.put_failure("dead", "openai", "gpt-4o", "op", "HTTP 400")
    assert cache.get("new").text == "now" and cache.failure("dead") == "HTTP 400"
    assert "new" not in cache._absent and "dead" not in cache._absent


def test_a_prompt_asked_twice_at_once_is_sent_once(stub, tmp_path):
    """Two items with the same prompt in flight together: both looked it up as absent, the second
    waits for the first's answer and takes it from the cache."""
    router = LLMRouter({"j": openai_role(stub)}, runtime(tmp_path))
    outs = router.call_many("j", OP, [dict(INPUTS), dict(INPUTS)])
    assert outs[0] == outs[1] and outs[0] is not None
    assert stub.count("chat") == 1


def test_every_operation_has_ko_and_en_templates_over_its_own_inputs():
    """The `llm` backend renders the template with the operation's keyword inputs: a template
    naming anything else would fail at the first real call, so check them all here."""
    import inspect

    import jinja2
    from jinja2 import meta

    import finhallu.stages.pipeline  # noqa: F401  (imports every stage module, registering its operations)
    from finhallu.llm.operations import OPERATIONS

    env = jinja2.Environment()
    assert len(OPERATIONS) >= 10
    for name, op in OPERATIONS.items():
        params = set(inspect.signature(op.rules).parameters)
        for lang in ("ko", "en"):
            used = meta.find_undeclared_variables(env.parse(op.template(lang)))
            assert used <= params, f"{lang}/{name}.j2 uses {sorted(used - params)} which {name} does not take"


# ---- reliability (issue 16): every fault a recorded failure or a retry, never a crash ---------------
@pytest.mark.parametrize("kind", ["openai", "gemini"])
@pytest.mark.parametrize("fault", [("html",), ("truncated",), ("hold",), ("status", 502)])
def test_transport_faults_of_both_sdks_are_retried(tmp_path, kind, fault):
    """An HTML gateway page (text/html), a connection dropped mid-body, no answer at all (the
    client's timeout fires) and a 502: each is one failed attempt, then the retry answers."""
    with StubLLM(fault_hold_s=30) as stub:
        rt = runtime(tmp_path, timeout_s=0.5)
        role = (openai_role if kind == "openai" else gemini_role)(stub)
        stub.faults.append(fault)
        assert isinstance(LLMRouter({"j": role}, rt).call("j", OP, **INPUTS), AnswerabilityOut)
        rec = rt.ledger.rows()[0]
        assert rec["attempts"] == 2 and rec["error"] is None
        assert stub.count("chat" if kind == "openai" else "generate") == 2


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_a_gateway_page_on_every_attempt_is_a_recorded_failure(stub, tmp_path, kind):
    rt = runtime(tmp_path, max_attempts=3)
    role = (openai_role if kind == "openai" else gemini_role)(stub)
    stub.faults.extend([("html",)] * 3)
    assert LLMRouter({"j": role}, rt).call("j", OP, **INPUTS) is None
    err = rt.ledger.rows()[0]["error"]
    assert "unreadable response body" in err and "after 3 attempt" in err


def test_every_transport_exception_class_maps_to_a_retryable_provider_error():
    import asyncio

    import httpx
    import httpx2

    from finhallu.llm.providers.base import transport_error

    req = httpx2.Request("POST", "http://127.0.0.1/")
    for exc in (
        httpx2.ReadTimeout("t", request=req),
        httpx2.ConnectTimeout("t", request=req),
        httpx2.ConnectError("c", request=req),
        httpx2.RemoteProtocolError("r", request=req),
        httpx2.ReadError("r", request=req),
        httpx2.DecodingError("d", request=req),
        httpx.ReadTimeout("t"),
        httpx.RemoteProtocolError("r"),
        httpx.ConnectError("c"),
        asyncio.TimeoutError(),
        ConnectionResetError("reset"),
        ValueError("Expecting value"),
    ):
        err = transport_error("gemini m", exc)
        assert err is not None and err.retryable, exc
    assert "timed out" in str(transport_error("m", httpx2.ReadTimeout("t", request=req)))
    assert transport_error("m", KeyError("x")) is None


def test_a_rejected_key_stops_at_once_naming_role_and_variable(stub, tmp_path):
    from finhallu.llm.errors import KeyRejected

    rt = runtime(tmp_path)
    router = LLMRouter({"judge": openai_role(stub)}, rt)
    stub.faults.extend([("status", 401)] * 5)
    # One call first, so exactly one request is in flight when the key is refused (no timing involved).
    with pytest.raises(KeyRejected) as info:
        router.call("judge", OP, **INPUTS)
    msg = str(info.value)
    assert "'judge'" in msg and "OPENAI_API_KEY" in msg and "401" in msg and KEY not in msg
    assert stub.count("chat") == 1  # a 401 is not retried
    with pytest.raises(KeyRejected):  # every later call of the stage stops without a request
        router.call_many("judge", OP, [dict(INPUTS, question=f"q{i}?") for i in range(5)])
    with pytest.raises(KeyRejected):
        router.call("judge", OP, sample=9, **INPUTS)
    assert stub.count("chat") == 1


def test_keys_are_stripped_and_their_shape_checked(monkeypatch):
    from finhallu.llm.keys import resolve_key

    role = {"provider": "openai", "model": "gpt-4o"}
    monkeypatch.setenv("OPENAI_API_KEY", f"  {KEY}\n")
    assert resolve_key("judge", role) == KEY
    for bad in (f"{KEY} {KEY}", f"{KEY}\x07x", f"sk-ключ{KEY}"):
        monkeypatch.setenv("OPENAI_API_KEY", bad)
        with pytest.raises(MissingKeyError) as info:
            check_keys({"judge": role})
        assert "OPENAI_API_KEY" in str(info.value) and "'judge'" in str(info.value) and KEY not in str(info.value)
    monkeypatch.setenv("OPENAI_API_KEY", " \n")  # blank: missing
    with pytest.raises(MissingKeyError, match="no API key was found"):
        check_keys({"judge": role})


def test_a_stage_past_its_failure_budget_stops_instead_of_hammering(stub, tmp_path):
    from finhallu.llm.errors import FailureBudgetExceeded

    rt = runtime(
        tmp_path, max_attempts=1, max_failed_share=0.5, failed_share_min_calls=4, limits={"gpt-4o": ModelLimits(concurrency=1)}
    )
    stub.faults.extend([("status", 500)] * 50)
    with pytest.raises(FailureBudgetExceeded, match="llm.max_failed_share"):
        LLMRouter({"j": openai_role(stub)}, rt).call_many("j", OP, [dict(INPUTS, question=f"q{i}?") for i in range(30)])
    assert stub.count("chat") == 4  # one at a time: the 4th failure (4 of 4 > 50 %) stopped the stage
    # Under the budget the stage goes on: 1 failure in 20 calls.
    stub.faults.clear()
    stub.reset_counts()
    rt = runtime(tmp_path, max_attempts=1, max_failed_share=0.5, failed_share_min_calls=4)
    stub.faults.append(("status", 500))
    outs = LLMRouter({"j": openai_role(stub)}, rt).call_many("j", OP, [dict(INPUTS, question=f"r{i}?") for i in range(20)])
    assert sum(o is None for o in outs) == 1


def test_failures_are_kept_on_rerun_and_resent_with_retry_failed(stub, tmp_path):
    role = {"j": openai_role(stub)}
    stub.faults.extend([("status", 503)] * 2 + [("text", "[1]"), ("text", "[2]")])
    rt = runtime(tmp_path, max_attempts=2)
    assert LLMRouter(role, rt).call("j", OP, **INPUTS) is None  # retries spent
    assert LLMRouter(role, rt).call("j", OP, sample=1, **INPUTS) is None  # invalid output after the repair
    assert stub.count("chat") == 4
    assert len(rt.cache.failed_keys()) == 2
    # A rerun keeps them as recorded failures, with no request.
    stub.reset_counts()
    rt2 = runtime(tmp_path, max_attempts=2)
    assert LLMRouter(role, rt2).call("j", OP, **INPUTS) is None
    assert LLMRouter(role, rt2).call("j", OP, sample=1, **INPUTS) is None
    assert stub.count("chat") == 0
    assert all(r["error"].startswith("recorded failure") for r in rt2.ledger.rows())
    # --retry-failed sends exactly those again (the invalid cached reply of the second is not reused).
    rt3 = runtime(tmp_path, max_attempts=2, retry_failed=True)
    assert isinstance(LLMRouter(role, rt3).call("j", OP, **INPUTS), AnswerabilityOut)
    assert isinstance(LLMRouter(role, rt3).call("j", OP, sample=1, **INPUTS), AnswerabilityOut)
    assert stub.count("chat") == 2 and rt3.cache.failed_keys() == set()
    rt4 = runtime(tmp_path)
    assert isinstance(LLMRouter(role, rt4).call("j", OP, **INPUTS), AnswerabilityOut) and stub.count("chat") == 2


def test_one_request_per_key_at_a_time(stub, tmp_path):
    """Nine calls of one failing prompt in a stage: sent max_attempts times in all, not nine times that."""
    rt = runtime(tmp_path, max_attempts=3)
    stub.faults.extend([("status", 500)] * 30)
    outs = LLMRouter({"j": openai_role(stub)}, rt).call_many("j", OP, [dict(INPUTS)] * 9)
    assert outs == [None] * 9 and stub.count("chat") == 3


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_an_endpoint_without_a_batch_api_falls_back_to_online_calls(tmp_path, kind, caplog):
    with StubLLM(batch_api=False) as stub:
        rt = runtime(tmp_path, batch_min_requests=5)
        role = (openai_role if kind == "openai" else gemini_role)(stub, batch=True)
        with caplog.at_level("WARNING", logger="finhallu.llm"):
            outs = LLMRouter({"j": role}, rt).call_many("j", OP, [dict(INPUTS, question=f"q{i}?") for i in range(8)])
        assert all(isinstance(o, AnswerabilityOut) for o in outs)
        assert stub.count("chat" if kind == "openai" else "generate") == 8
        warnings = [r.getMessage() for r in caplog.records if "go online" in r.getMessage()]
        assert len(warnings) == 1 and "8 judge_answerability requests" in warnings[0]


def test_a_batch_poll_error_falls_back_to_online_calls(stub, tmp_path, monkeypatch):
    from finhallu.llm.providers import get_provider

    def broken_poll(self, client, job_id):
        raise RuntimeError("poll endpoint exploded")

    monkeypatch.setattr(type(get_provider("openai")), "poll_batch", broken_poll)
    rt = runtime(tmp_path, batch_min_requests=2)
    outs = LLMRouter({"j": openai_role(stub, batch=True)}, rt).call_many(
        "j", OP, [dict(INPUTS, question=f"q{i}?") for i in range(3)]
    )
    assert all(isinstance(o, AnswerabilityOut) for o in outs) and stub.count("chat") == 3


def test_random_faults_are_seeded_and_per_request():
    a, b, c = (StubLLM(fault_rate=0.3, fault_seed=s) for s in (1, 1, 2))
    try:
        draws = [[x.draw_fault(f"req{i}") for i in range(400)] for x in (a, b, c)]
    finally:
        for x in (a, b, c):
            x._server.server_close()
    assert draws[0] == draws[1] != draws[2]
    share = sum(d is not None for d in draws[0]) / 400
    assert 0.2 < share < 0.4 and set(draws[0]) - {None} == {"429", "500", "timeout", "html", "truncated", "schema"}
    with pytest.raises(ValueError):
        StubLLM(fault_kinds=("404",))


def test_shared_result_computes_once_for_callers_in_flight_together():
    import threading

    from finhallu.llm.parallel import shared_result

    calls, entered, release = [], threading.Event(), threading.Event()

    @shared_result(maxsize=8)
    def facts(chunk: str) -> tuple:
        calls.append(chunk)
        entered.set()
        release.wait(10)  # the first caller holds the computation while the others arrive
        return (chunk.upper(),)

    out: list = []
    threads = [threading.Thread(target=lambda: out.append(facts("a"))) for _ in range(8)]
    for t in threads:
        t.start()
    entered.wait(10)
    release.set()
    for t in threads:
        t.join(10)
    assert out == [("A",)] * 8 and calls == ["a"]
    assert facts(chunk="b") == ("B",) and calls == ["a", "b"]


def test_a_process_that_called_both_sdks_exits_with_their_connections_closed(stub, tmp_path):
    """The SDKs run on aiohttp: a session left open at exit prints "Unclosed client session"
    (and its connector) to stderr of every build; the router closes them at exit."""
    script = f"""
from pathlib import Path
from finhallu.llm.cache import CallCache
from finhallu.llm.config import LLMConfig
from finhallu.llm.router import LLMRouter
from finhallu.llm.runtime import LLMRuntime
from finhallu.answerability import AnswerabilityOut
roles = {{"o": {openai_role(stub)!r}, "g": {gemini_role(stub)!r}}}
router = LLMRouter(roles, LLMRuntime(LLMConfig(), CallCache(Path({str(tmp_path)!r}) / "c.sqlite")))
for role in roles:
    assert isinstance(router.call(role, {OP!r}, **{INPUTS!r}), AnswerabilityOut)
print("answered")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "answered" in proc.stdout, proc.stderr[-2000:]
    assert stub.count("chat") == 1 and stub.count("generate") == 1
    assert "Unclosed" not in proc.stderr, proc.stderr[-2000:]


def test_rules_answers_are_kept_across_builds_by_operation_code_and_inputs(tmp_path, monkeypatch):
    """The offline backend's answers of a stage are stored in the home's result cache: a later
    build's same call (same operation, role settings, inputs and rules code) is answered from it."""
    from finhallu.llm.providers.offline import OfflineProvider

    ran: list[dict] = []
    real = OfflineProvider.run

    def counted(self, op, cfg, lang, inputs):
        ran.append(inputs)
        return real(self, op, cfg, lang, inputs)

    monkeypatch.setattr(OfflineProvider, "run", counted)
    offline = {"j": {"provider": "offline", "model": "rules", "temperature": 0.0}}
    first_rt = LLMRuntime.for_home(tmp_path, LLMConfig(), "retrieve")
    first = LLMRouter(offline, first_rt).call("j", OP, **INPUTS)
    first_rt.close()  # the stage's end writes what is buffered
    assert len(ran) == 1
    later_rt = LLMRuntime.for_home(tmp_path, LLMConfig(), "retrieve")  # the next build
    router = LLMRouter(offline, later_rt)
    assert router.call("j", OP, **INPUTS) == first and len(ran) == 1  # from the file
    changed = {**INPUTS, "question": INPUTS["question"] + " 올해는?"}
    router.call("j", OP, **changed)
    assert len(ran) == 2  # other inputs: computed
    router.call("j", OP, **changed)
    assert len(ran) == 2  # and kept (in the buffer) for the rest of the stage
    later_rt.close()
    no_cache = LLMRuntime.for_home(tmp_path / "other", LLMConfig(cache=False), "retrieve")
    LLMRouter(offline, no_cache).call("j", OP, **INPUTS)
    assert len(ran) == 3 and no_cache.offline_results is None  # llm.cache: false keeps nothing
