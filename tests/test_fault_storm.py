"""The demo build against a loopback LLM that faults on a third of its requests (429, 500,
timeouts, HTML gateway pages, dropped connections, schema-invalid output), in both wire formats
(OpenAI and Gemini), with one role on the batch API: the build completes, the calls that failed
for good are recorded in llm_calls, and `--retry-failed` re-sends exactly those calls.

Faults are drawn from the stub's seed and each request's body, and the rerun runs with faults
off, so every count below is exact: nothing depends on timing.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import duckdb
import pytest
import yaml

from finhallu.config import load_config
from finhallu.llm.stub_server import StubLLM, cooperative_responder
from finhallu.stages.pipeline import STAGES
from conftest import run_cli

FAULT_RATE = 0.35
WIRES = {"openai": {"provider": "openai", "model": "gpt-4o"}, "gemini": {"provider": "gemini", "model": "gemini-2.5-flash"}}
KINDS = {"openai": "chat", "gemini": "generate"}  # the stub's name for each wire's online request
BATCH_ROLES = {"dialogue_judge", "injection_judge"}  # one on each wire (see storm_profile)
responder = cooperative_responder  # as in test_llm_build: no hard negatives without one "unanswerable"


def storm_profile(tmp_path: Path, stub: StubLLM, scale: int = 1) -> str:
    """The demo roles on the stub, alternately in the Gemini and the OpenAI wire format (so one
    build storms both), BATCH_ROLES through the batch API; two attempts per call (so failures
    happen) and short timeouts (a `timeout` fault never answers)."""
    roles = {}
    for i, r in enumerate(sorted(load_config("demo").roles)):
        wire = "gemini" if i % 2 == 0 else "openai"
        base = stub.gemini_base if wire == "gemini" else stub.openai_base
        roles[r] = dict(WIRES[wire], base_url=base, batch=r in BATCH_ROLES)
    assert {roles[r]["provider"] for r in BATCH_ROLES} == {"openai", "gemini"}
    unlimited = {"rpm": 1_000_000, "tpm": 1_000_000_000, "concurrency": 16}
    llm = {
        "limits": {w["model"]: unlimited for w in WIRES.values()},
        "default_limits": {"concurrency": 16},
        "max_attempts": 2,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "timeout_s": 2.0,
        "batch_poll_s": 0.05,
        "batch_min_requests": 5,
        "estimate_before_build": False,
    }
    # Reduced (scale 1): fewer hard-negative candidates to judge and one dialogue per document keep
    # the build to about two thousand calls; the benchmark runs it at a larger scale.
    reduced = {
        "retrieve": {"top_k": min(10, 4 * scale), "candidate_pool": min(40, 5 * scale)},
        "dialogues": {"dialogues_per_document": min(4, scale), "dialogues_per_filing": min(4, scale)},
    }
    path = tmp_path / "storm.yaml"
    path.write_text(yaml.safe_dump({"extends": "demo", "roles": roles, "llm": llm, **reduced}), encoding="utf-8")
    return str(path)


def ledger(home: Path, build_id: str) -> list[dict]:
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        cur = con.execute(
            "SELECT stage, provider, request_key, attempts, cache_hit, batch, repair, error FROM llm_calls WHERE build_id = ?",
            [build_id],
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        con.close()


def failed_keys(home: Path) -> set[str]:
    with sqlite3.connect(home / "cache" / "llm_calls.sqlite") as db:
        return {r[0] for r in db.execute("SELECT key FROM failures")}


def summary(proc) -> dict:
    return json.loads(next(ln for ln in proc.stdout.splitlines()[::-1] if ln.startswith("{")))


@pytest.mark.slow
def test_a_fault_storm_build_completes_records_failures_and_retry_failed_resends_only_those(tmp_path, monkeypatch):
    with StubLLM(responder=responder, fault_rate=FAULT_RATE, fault_seed=16, fault_hold_s=30) as stub:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-storm-test-key")
        monkeypatch.setenv("GEMINI_API_KEY", "storm-test-key")
        profile = storm_profile(tmp_path, stub)
        home = tmp_path / "home"
        proc = run_cli("build", "--profile", profile, "--json", home=home, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert "Traceback" not in proc.stderr
        first = summary(proc)
        sent = stub.count("chat") + stub.count("generate")
        assert min(stub.count("chat"), stub.count("generate")) > 100  # both wire formats
        assert stub.faulted() >= 0.3 * sent, stub.faults_injected  # a storm of every kind
        assert set(stub.faults_injected) == {"429", "500", "timeout", "html", "truncated", "schema"}
        assert stub.count("batch_create") >= 1  # a batch role went through the batch API (or fell back)

        rows1 = ledger(home, first["build_id"])
        errors1 = [r for r in rows1 if r["error"] is not None]
        failed1 = failed_keys(home)
        assert failed1 and len(errors1) >= len(failed1)  # recorded in llm_calls and in the call cache
        assert {r["provider"] for r in errors1} == {"openai", "gemini"}
        assert max(r["attempts"] for r in rows1) == 2  # llm.max_attempts bounds every call
        # The failed-call count of each stage reached the console (a WARNING, not an INFO line).
        for stage in {r["stage"] for r in errors1}:
            assert f"stage {stage}: " in proc.stderr and "LLM calls failed" in proc.stderr

        # Rerun with --retry-failed and the faults off: only the recorded failures go out again.
        stub.fault_rate = 0.0
        stub.reset_counts()
        proc = run_cli("build", "--profile", profile, "--json", "--retry-failed", home=home, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        rows2 = ledger(home, summary(proc)["build_id"])
        resent = [r for r in rows2 if not r["cache_hit"]]
        resent_keys = {r["request_key"] for r in resent}
        keys1 = {r["request_key"] for r in rows1}
        succeeded1 = {r["request_key"] for r in rows1 if r["error"] is None} - failed1
        # Never a call that had succeeded; every one sent again had failed (or is new: items that
        # the first build dropped now reach the later stages).
        assert not resent_keys & succeeded1
        assert resent_keys & keys1 <= failed1
        # Every recorded failure the rerun asked for again was sent again (none kept as "recorded
        # failure"), and most of those of the first LLM stage were asked again (its inputs are
        # unchanged; a stage that stops asking once it has enough answers may skip a few).
        asked_again = {r["request_key"] for r in rows2} & failed1
        assert asked_again and asked_again <= resent_keys  # (a second ask of one in the rerun is a cache hit)
        assert not [r for r in rows2 if (r["error"] or "").startswith("recorded failure")]
        order = [s.name for s in STAGES]
        first_stage = min({r["stage"] for r in errors1}, key=order.index)
        originals = {r["request_key"] for r in rows1 if r["stage"] == first_stage and not r["repair"]} & failed1
        assert len(originals & resent_keys) >= 0.5 * len(originals) > 0
        # The stub's request log agrees with the ledger: one request per online attempt, per wire.
        for wire, kind in KINDS.items():
            online = sum(r["attempts"] for r in resent if not r["batch"] and r["provider"] == wire)
            assert stub.count(kind) == online > 0, wire
        assert not failed_keys(home) & resent_keys  # they succeeded now
