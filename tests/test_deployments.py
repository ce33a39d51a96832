"""prefect.yaml deploys to a real local Prefect server and a process worker runs `evaluate`."""

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from conftest import ROOT, cli_env

pytestmark = pytest.mark.slow
PREFECT = [sys.executable, "-m", "prefect"]


def test_prefect_yaml_entrypoints_match_flows():
    import importlib.util
    import inspect

    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    names = {d["name"]: d for d in spec["deployments"]}
    assert set(names) == {"rebuild", "evaluate"}
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


def test_deploy_and_run_evaluate_with_process_worker(demo_build, tmp_path):
    home, _ = demo_build
    port = _port()
    env = cli_env()
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_API_URL=f"http://127.0.0.1:{port}/api")
    os.makedirs(env["PREFECT_HOME"])
    server = subprocess.Popen([*PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        run = lambda *a, **kw: subprocess.run([*PREFECT, *a], env=env, cwd=ROOT, capture_output=True, text=True,  # noqa: E731
                                              timeout=kw.get("timeout", 180))
        assert run("work-pool", "create", "finhallu-local", "--type", "process").returncode == 0
        dep = run("--no-prompt", "deploy", "--all")
        assert dep.returncode == 0, dep.stdout[-2000:] + dep.stderr[-2000:]
        listed = run("deployment", "ls").stdout
        assert "finhallu-rebuild/rebuild" in listed and "finhallu-evaluate/evaluate" in listed
        before = len(list((home / "catalog" / "table_versions").glob("detections@*.json")))
        started = run("deployment", "run", "finhallu-evaluate/evaluate", "-p", f"home={home}",
                      "-p", 'detectors=["numeric_grounding"]')
        assert started.returncode == 0, started.stderr[-2000:]
        worker = run("worker", "start", "--pool", "finhallu-local", "--run-once", timeout=300)
        assert "Finished in state Completed" in worker.stdout + worker.stderr, (worker.stdout + worker.stderr)[-3000:]
        after = len(list((home / "catalog" / "table_versions").glob("detections@*.json")))
        assert after == before + 1  # a detections version holding only numeric_grounding
        # An LLM role's key from a Prefect Secret block on this server (no env var set).
        code = ("from prefect.blocks.system import Secret\n"
                "Secret(value='sk-from-block-0123456789abcdef').save('finhallu-openai', overwrite=True)\n"
                "from finhallu.llm.keys import resolve_key\n"
                "print(resolve_key('assistant_llm', {'provider': 'openai', 'model': 'gpt-4o',"
                " 'api_key_secret': 'finhallu-openai'}) == 'sk-from-block-0123456789abcdef')")
        key_env = {k: v for k, v in env.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
        out = subprocess.run([sys.executable, "-c", code], env=key_env, capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == "True", out.stderr[-2000:]
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
