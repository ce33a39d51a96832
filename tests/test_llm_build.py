"""The whole demo build with its LLM roles on loopback servers (OpenAI-compatible by `base_url`,
OpenAI by `OPENAI_BASE_URL`), and the fail-fast key check of the `paper` profile."""

from __future__ import annotations

import json
import sqlite3

import duckdb
import httpx
import pytest
import yaml

from finhallu.config import load_config
from finhallu.estimate import dry_run, save_estimate
from finhallu.llm.stub_server import StubLLM, replay_responder
from finhallu.stages.pipeline import STAGES
from conftest import SMALL_DEMO, run_cli

# The loopback model answers every prompt as the dry run's rules backend did (replay_responder),
# so the build takes the path the estimate took; prompts it has not seen get the scripted answers.


def _stub_profile(tmp_path, stub: StubLLM) -> str:
    roles = {}
    for i, role in enumerate(sorted(load_config("demo").roles)):
        if i % 2:  # half the roles by base_url in the profile...
            roles[role] = {"provider": "openai_compatible", "model": "stub-chat", "base_url": stub.openai_base}
        else:  # ...half as `openai` through OPENAI_BASE_URL
            roles[role] = {"provider": "openai", "model": "gpt-4o"}
    path = tmp_path / "stub.yaml"
    # The loopback server has no quota: lift the packaged gpt-4o limits (tier-1 TPM would pace
    # the build at a few calls per second, as it would against the real API).
    llm = {
        "limits": {"gpt-4o": {"rpm": 1_000_000, "tpm": 1_000_000_000, "concurrency": 16}},
        "default_limits": {"concurrency": 16},
    }
    # A smaller hard-negative candidate pool keeps the step-2 judge calls (one HTTP call each) to a few thousand,
    # two dialogues per document (the demo has four) halve the calls of every stage after retrieve, and
    # the small corpus (one AI-Hub part, both filings) cuts every stage: the path is the same, the test costs less.
    path.write_text(
        yaml.safe_dump(
            {
                "extends": "demo",
                **SMALL_DEMO,
                "roles": roles,
                "llm": llm,
                "retrieve": {"candidate_pool": 15},
                "dialogues": {"dialogues_per_document": 2, "dialogues_per_filing": 2},
                "metrics": {"bootstrap_resamples": 1000},
            }
        ),
        encoding="utf-8",
    )
    return str(path)


@pytest.mark.slow
def test_demo_build_with_llm_roles_on_a_loopback_server(tmp_path, monkeypatch):
    with StubLLM() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.openai_base)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-test-key")
        profile = _stub_profile(tmp_path, stub)
        home = tmp_path / "home"
        # The dry run first (saved where the build's own estimate line looks for it), recording the
        # rules' answers for the server to replay.
        answers: dict[str, str] = {}
        estimate = dry_run(load_config(profile), answers=answers)
        save_estimate(home, estimate)
        stub.responder = replay_responder(answers)
        proc = run_cli("build", "--profile", profile, "--json", home=home, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert "estimate (cold build): " in proc.stderr and f"{estimate.calls:,} LLM calls" in proc.stderr
        calls = stub.count("chat")
        assert calls > 100
        con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
        per_stage = dict(con.execute("SELECT stage, count(*) FROM llm_calls GROUP BY stage").fetchall())
        n_samples = con.execute("SELECT count(*) FROM samples").fetchone()[0]
        failures = con.execute("SELECT count(error) FROM llm_calls").fetchone()[0]
        con.close()
        assert sum(per_stage.values()) >= calls - failures  # every provider call is in the ledger
        assert {"retrieve", "dialogues"} <= set(per_stage)
        # The estimate holds within 20 % per stage (calls) and in all (calls, tokens).
        con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
        actual = {
            st: (n, t)
            for st, n, t in con.execute(
                "SELECT stage, count(*), sum(input_tokens + output_tokens) FROM llm_calls WHERE NOT cache_hit GROUP BY 1"
            ).fetchall()
        }
        con.close()
        est = {s.stage: s for s in estimate.stages if s.calls}
        assert set(est) == set(actual)
        for st, (n, _) in actual.items():
            assert abs(est[st].calls - n) <= 0.2 * n, (st, est[st].calls, n)
        tokens = sum(t for _, t in actual.values())
        assert abs(estimate.calls - sum(n for n, _ in actual.values())) <= 0.2 * sum(n for n, _ in actual.values())
        assert abs(sum(s.input_tokens + s.output_tokens for s in estimate.stages) - tokens) <= 0.2 * tokens
        assert n_samples > 0
        assert "sk-loopback-test-key" not in "".join(p.read_text() for p in (home / "catalog" / "llm_calls").glob("*"))
        # `finhallu llm-calls` prints the same ledger per stage and role.
        printed = json.loads(run_cli("llm-calls", home=home).stdout)
        assert sum(r["calls"] for r in printed["calls"]) == sum(per_stage.values())
        assert {r["stage"] for r in printed["calls"]} == set(per_stage)
        # The per-stage summary is a keyed Prefect table artifact on the home's API server.
        api = json.loads((home / "prefect" / "api.json").read_text())["url"]
        arts = httpx.post(
            f"{api}/artifacts/filter", json={"artifacts": {"key": {"any_": ["llm-calls-retrieve"]}}}, timeout=30
        ).json()
        assert arts and arts[0]["type"] == "table" and "calls" in arts[0]["description"]
        assert "sk-loopback-test-key" not in json.dumps(arts)
        # Every stage leaves a `stage-<name>` artifact (rows, gate, QC drops, LLM calls) and an INFO
        # line in the run's log, both read back through the UI's REST API.
        keys = [f"stage-{s.name.replace('_', '-')}" for s in STAGES]
        stage_arts = {
            a["key"]: a
            for a in httpx.post(f"{api}/artifacts/filter", json={"artifacts": {"key": {"any_": keys}}}, timeout=30).json()
        }
        assert set(stage_arts) == set(keys)
        assert "| dialogues |" in stage_arts["stage-dialogues"]["data"] and "LLM:" in stage_arts["stage-dialogues"]["data"]
        assert "QC `injection_qc`: kept" in stage_arts["stage-injection-qc"]["data"]
        assert "| estimated (cold) |" in stage_arts["stage-retrieve"]["data"]  # the estimate beside the actuals
        con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
        run_id = con.execute("SELECT flow_run_id FROM builds ORDER BY started_at DESC LIMIT 1").fetchone()[0]
        con.close()
        logs = httpx.post(
            f"{api}/logs/filter",
            json={"logs": {"flow_run_id": {"any_": [run_id]}, "level": {"ge_": 20}}, "limit": 200},
            timeout=30,
        ).json()
        said = [lg["message"] for lg in logs if lg["message"].startswith("stage ")]
        assert {m.split(":")[0] for m in said} >= {f"stage {s.name}" for s in STAGES}
        assert not any(m.startswith("stage ") and "rows in" in m for m in proc.stderr.splitlines())  # INFO stays off the console

        # A second build on a fresh home that shares the call cache: every stage runs again, but
        # every LLM answer comes from the cache, so the server sees no call.
        stub.reset_counts()
        home2 = tmp_path / "home2"
        (home2 / "cache").mkdir(parents=True)
        with (
            sqlite3.connect(home / "cache" / "llm_calls.sqlite") as src,
            sqlite3.connect(home2 / "cache" / "llm_calls.sqlite") as dst,
        ):
            src.backup(dst)
        proc = run_cli("build", "--profile", profile, "--json", home=home2, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert stub.count() == 0
        summary = json.loads(next(ln for ln in proc.stdout.splitlines()[::-1] if ln.startswith("{")))
        assert summary["cached"] == [] and "retrieve" in summary["ran"]


def test_paper_profile_without_keys_fails_before_any_stage(tmp_path, monkeypatch):
    for k in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    home = tmp_path / "home"
    proc = run_cli("build", "--profile", "paper", home=home, timeout=300)
    assert proc.returncode == 2
    assert "injector_b" in proc.stderr and "GEMINI_API_KEY" in proc.stderr and "OPENAI_API_KEY" in proc.stderr
    assert not (home / "tables").exists()  # nothing ran


@pytest.mark.slow
def test_a_rejected_key_stops_the_build_at_once_with_one_line(tmp_path, monkeypatch):
    """A 401 from the provider stops the build at the first LLM stage: exit 2, one line naming the
    role and the variable of its key, no traceback, no run-on to a misleading gate failure."""
    with StubLLM() as stub:
        stub.faults.extend([("status", 401)] * 1000)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-0123456789")
        path = tmp_path / "p.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "extends": "demo",
                    "llm": {"estimate_before_build": False},
                    "roles": {"answerability_judge": {"provider": "openai", "model": "gpt-4o", "base_url": stub.openai_base}},
                }
            ),
            encoding="utf-8",
        )
        proc = run_cli("build", "--profile", str(path), "--json", home=tmp_path / "home", timeout=600)
        assert proc.returncode == 2
        stops = [ln for ln in proc.stderr.splitlines() if "stopped:" in ln]
        assert len(stops) == 1 and "'answerability_judge'" in stops[0] and "OPENAI_API_KEY" in stops[0], proc.stderr
        assert "Traceback" not in proc.stderr and "sk-wrong-key" not in proc.stderr + proc.stdout
        assert "gate" not in proc.stderr.lower()
        assert stub.count("chat") <= 16  # the calls in flight when the first 401 came back, no more
