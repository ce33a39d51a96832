"""prefect.yaml deploys to a real local Prefect server and a process worker runs `evaluate`."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import FINHALLU, ROOT, cli_env

pytestmark = pytest.mark.slow
PREFECT = [sys.executable, "-m", "prefect"]


def test_prefect_yaml_entrypoints_match_flows():
    import importlib.util
    import inspect

    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    names = {d["name"]: d for d in spec["deployments"]}
    assert set(names) == {"rebuild", "evaluate", "probe"}
    assert names["rebuild"]["schedules"][0]["cron"] == "0 3 * * 1"
    assert set(names["evaluate"]["parameters"]) >= {"dataset_version", "detectors"}
    for d in spec["deployments"]:
        path, func = d["entrypoint"].split(":")
        mod_spec = importlib.util.spec_from_file_location("entry", ROOT / path)
        mod = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(mod)
        flow = getattr(mod, func)
        assert set(d["parameters"]) <= set(inspect.signature(flow.fn).parameters)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _wait(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def _api(port: int, path: str, body: dict | None = None):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/{path}",
        method="POST" if body is not None else "GET",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
    )
    # Like Prefect's own client: a 503 (its SQLite database locked by the worker or the scheduler on
    # a busy machine) or a 429 is retried, the request having changed nothing.
    for attempt in range(8):
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code not in (429, 503) or attempt == 7:
                raise
            time.sleep(min(2**attempt, 10))


def _builds(home) -> list[dict]:
    out = subprocess.run(
        [*FINHALLU, "status", "--json", "--last", "1000", "--home", str(home)],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=120,
    )
    return json.loads(out.stdout)["builds"]


def test_make_ui_deploy_worker_run_the_deployments_and_a_rebuild_is_fully_cached(demo_build, tmp_path):
    """As the README says: `make ui` in one terminal, `make deploy`, `make worker`; the weekly rebuild's
    run after a CLI build of the same config reuses every stage; `finhallu ui` stops its server on SIGTERM."""
    home, summary = demo_build
    port = _port()
    env = cli_env()
    # The Makefile's venv is the one running the tests; its install stamps are not remade (-o).
    venv = Path(sys.executable).parent.parent
    make = [
        "make",
        "-C",
        str(ROOT),
        f"VENV={venv}",
        f"HOME_DIR={home}",
        f"UI_PORT={port}",
        "-o",
        f"{venv}/.installed",
        "-o",
        f"{venv}/.installed-test",
    ]
    env.update(PREFECT_HOME=str(tmp_path / "prefect-cli"), PWD=str(ROOT))
    os.makedirs(env["PREFECT_HOME"])
    ui = subprocess.Popen(
        [*make, "ui"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        assert _wait(lambda: _healthy(port), 180), "make ui: no Prefect server answered"
        run = lambda *a, **kw: subprocess.run(
            [*make, *a],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,  # noqa: E731
            timeout=kw.get("timeout", 300),
        )
        dep = run("deploy")
        assert dep.returncode == 0, dep.stdout[-2000:] + dep.stderr[-2000:]
        deployments = {d["name"]: d for d in _api(port, "deployments/filter", {})}
        assert set(deployments) == {"rebuild", "evaluate", "probe"}
        assert [s["schedule"]["cron"] for s in deployments["rebuild"]["schedules"]] == ["0 3 * * 1"]
        assert all(s["active"] for s in deployments["rebuild"]["schedules"])

        # What the scheduler does on Monday 03:00: a Scheduled run of the rebuild deployment, due now.
        before = {b["build_id"] for b in _builds(home)}
        flow_run = _api(
            port,
            f"deployments/{deployments['rebuild']['id']}/create_flow_run",
            {"parameters": {"profile": "demo", "home": str(home)}, "state": {"type": "SCHEDULED"}},
        )
        worker = run("worker", "WORKER_ARGS=--run-once", timeout=600)
        log = worker.stdout + worker.stderr
        assert worker.returncode == 0 and "Finished in state Completed" in log, log[-3000:]
        assert _api(port, f"flow_runs/{flow_run['id']}")["state"]["type"] == "COMPLETED"
        new = [b for b in _builds(home) if b["build_id"] not in before]
        assert len(new) == 1 and new[0]["status"] == "succeeded", new
        # Same config as the CLI build: the deployment run shares its cache keys and result storage.
        assert new[0]["stages_run"] == [] and len(new[0]["stages_cached"]) == len(summary["ran"]) + len(summary["cached"])
        # The build reported to the `make ui` server: its flow run is there, a child of the deployment's run.
        child = _api(port, f"flow_runs/{new[0]['flow_run_id']}")
        assert child["parent_task_run_id"] and child["name"] == f"build-{new[0]['build_id']}"

        # SIGTERM to `finhallu ui` (as a service manager sends it) stops the Prefect server too.
        (finhallu_ui,) = _children(ui.pid)
        server = _children(finhallu_ui)
        assert server
        os.kill(finhallu_ui, 15)
        assert ui.wait(timeout=120) is not None
        assert _wait(lambda: not _healthy(port), 60)
        assert all(not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text() for pid in server)
    finally:
        try:
            os.killpg(ui.pid, 15)
        except ProcessLookupError:
            pass
        ui.wait(timeout=60)


def test_deploy_and_run_evaluate_with_process_worker(demo_build, tmp_path):
    home, _ = demo_build
    port = _port()
    env = cli_env()
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_API_URL=f"http://127.0.0.1:{port}/api")
    os.makedirs(env["PREFECT_HOME"])
    server = subprocess.Popen(
        [*PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        run = lambda *a, **kw: subprocess.run(
            [*PREFECT, *a],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,  # noqa: E731
            timeout=kw.get("timeout", 180),
        )
        assert run("work-pool", "create", "finhallu-local", "--type", "process").returncode == 0
        dep = run("--no-prompt", "deploy", "--all")
        assert dep.returncode == 0, dep.stdout[-2000:] + dep.stderr[-2000:]
        listed = run("deployment", "ls").stdout
        assert "finhallu-rebuild/rebuild" in listed and "finhallu-evaluate/evaluate" in listed
        before = len(list((home / "catalog" / "table_versions").glob("detections@*.json")))
        started = run(
            "deployment", "run", "finhallu-evaluate/evaluate", "-p", f"home={home}", "-p", 'detectors=["numeric_grounding"]'
        )
        assert started.returncode == 0, started.stderr[-2000:]
        worker = run("worker", "start", "--pool", "finhallu-local", "--run-once", timeout=300)
        assert "Finished in state Completed" in worker.stdout + worker.stderr, (worker.stdout + worker.stderr)[-3000:]
        after = len(list((home / "catalog" / "table_versions").glob("detections@*.json")))
        assert after == before + 1  # a detections version holding only numeric_grounding
        # An LLM role's key from a Prefect Secret block on this server (no env var set).
        code = (
            "from prefect.blocks.system import Secret\n"
            "Secret(value='sk-from-block-0123456789abcdef').save('finhallu-openai', overwrite=True)\n"
            "from finhallu.llm.keys import resolve_key\n"
            "print(resolve_key('assistant_llm', {'provider': 'openai', 'model': 'gpt-4o',"
            " 'api_key_secret': 'finhallu-openai'}) == 'sk-from-block-0123456789abcdef')"
        )
        key_env = {k: v for k, v in env.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
        out = subprocess.run([sys.executable, "-c", code], env=key_env, capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == "True", out.stderr[-2000:]
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
