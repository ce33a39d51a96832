from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Under `pytest -n N` each worker has its share of the cores: OpenMP/BLAS pools sized for the whole
# machine in every worker, and in every build it starts, oversubscribe it with spinning threads (the
# encoder fit took 137 s beside one busy core, 81 s with one thread). Set before torch is imported.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)))
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, _share)
FINHALLU = [sys.executable, "-m", "finhallu.cli"]


# The demo corpus cut to one AI-Hub part (one institution per split) and both filings:
# for tests of the machinery around the stages (LLM transport, faults), where the corpus size only
# costs time. A cold build on it takes about three quarters of the full demo's.
SMALL_DEMO = {
    "ingest": {
        "sources": [
            {
                "kind": "aihub",
                "paths": ["pkg:demo/aihub/TL_demo_part2.json"],
                "test_institutions": ["주택도시보증공사"],
                "valid_institutions": ["한국주택금융공사"],
            },
            {"kind": "sec10k", "paths": ["pkg:demo/sec10k"]},
            {"kind": "dart", "paths": ["pkg:demo/dart"]},
        ]
    }
}


def fixtures_dir() -> Path:
    return Path(os.environ.get("FINHALLU_FIXTURES", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def real_data() -> Path:
    d = fixtures_dir()
    if not d.exists():
        pytest.skip(f"real source fixtures not found at {d} (set FINHALLU_FIXTURES)")
    return d


def cli_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    env["FINHALLU_API_IDLE_S"] = "20"  # warm API servers of test homes go away soon after the tests
    # Every run reports to its home's warm API (or the one given): a run that starts Prefect's
    # ephemeral server of its own instead (4-7 s each) fails here rather than passing slowly.
    env["PREFECT_SERVER_EPHEMERAL_ENABLED"] = "false"
    return env


def run_cli(*args: str, home: Path | str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*FINHALLU, *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env={**cli_env(), **(env or {})},
        timeout=timeout,
        cwd=ROOT,
    )


def build_json(home: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    proc = run_cli("build", "--profile", "demo", "--json", *extra, home=home)
    line = next((ln for ln in proc.stdout.splitlines()[::-1] if ln.startswith("{")), None)
    return proc, (json.loads(line) if line else None)


@pytest.fixture(scope="session")
def demo_build(tmp_path_factory):
    """One cold demo build shared by the end-to-end tests (home, summary)."""
    home = tmp_path_factory.mktemp("demo-home")
    proc, summary = build_json(home)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return home, summary


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the markers
def pytest_collection_modifyitems(config, items):
    """Under `pytest -n` (make test), the tests of the shared demo home run on one worker, so no two
    tests change it at the same time. One group, one cold build: splitting them into two groups
    with a home each (tried) cost a whole cold build more and made the suite slower on 2 cores."""
    for item in items:
        if "demo_build" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("demo-home"))


S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test-key", "AWS_SECRET_ACCESS_KEY": "test-secret", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def s3_server():
    """An S3-compatible server on loopback (moto's, in a thread of this process): the environment
    a subprocess needs to reach it, endpoint and credentials, as AWS SDKs read them."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield {**S3_CREDENTIALS, "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    finally:
        server.stop()
