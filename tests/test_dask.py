"""Builds on a Dask cluster (prefect-dask): a real `dask scheduler` and two `dask worker` processes
on loopback, started here; the partitioned work (finhallu.fanout) runs on them as Prefect task
runs, and the tables come out byte for byte as the local build's."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from finhallu.fanout import InProcess, PrefectTasks, partitions
from conftest import ROOT, SMALL_DEMO, cli_env, run_cli

DASK = [sys.executable, "-m", "dask"]


def _square_each(items: list[int]) -> list[int]:
    return [i * i for i in items]


def _one_short(items: list[int]) -> list[int]:
    return items[1:]


def test_partitions_are_contiguous_balanced_and_cover_every_item():
    for n_items in (0, 1, 5, 31, 64, 1001):
        items = list(range(n_items))
        for n in (1, 2, 3, 8, 2000):
            parts = partitions(items, n)
            assert [i for p in parts for i in p] == items
            assert len(parts) <= max(1, n)
            assert all(parts), "no empty partition"
            if parts:
                assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_fanouts_keep_the_items_order_and_check_the_result_count():
    items = list(range(100))
    assert InProcess().map(_square_each, items) == [i * i for i in items]
    with pytest.raises(RuntimeError, match="returned 99 results for 100 items"):
        InProcess().map(_one_short, items)


def test_prefect_tasks_run_few_items_in_process():
    # Below min_items a round trip to the cluster costs more than the work: no flow, no task runs.
    assert PrefectTasks(workers=2, min_items=32).map(_square_each, list(range(31))) == [i * i for i in range(31)]


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """A scheduler and two single-threaded workers on loopback; yields the scheduler's address."""
    from distributed import Client

    tmp = tmp_path_factory.mktemp("dask")
    scheduler_file = tmp / "scheduler.json"
    logs, procs = [], []

    def start(name: str, *args: str) -> None:
        log = open(tmp / f"{name}.log", "w+")
        logs.append(log)
        procs.append(subprocess.Popen([*DASK, *args], env=cli_env(), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))

    start(
        "scheduler", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(scheduler_file)
    )
    try:
        _wait_for_scheduler_file(scheduler_file, procs[0], tmp / "scheduler.log")
        for i in range(2):
            start(
                f"worker{i}",
                "worker",
                "--scheduler-file",
                str(scheduler_file),
                "--nthreads",
                "1",
                "--nworkers",
                "1",
                "--no-dashboard",
                "--preload",
                "finhallu.dask_preload",
                "--name",
                f"w{i}",
                "--local-directory",
                str(tmp / f"w{i}"),
            )
        # Ready when the scheduler knows both workers (the client waits for the file and the workers).
        with Client(scheduler_file=str(scheduler_file), timeout="300s") as client:
            client.wait_for_workers(2, timeout=300)
            address = client.scheduler.address
        yield address
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs[::-1]:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in logs:
            log.close()


def _wait_for_scheduler_file(path: Path, proc: subprocess.Popen, log: Path) -> None:
    """Until the scheduler has written its address (readiness, not a sleep: however busy the machine)."""
    import json
    import time

    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"dask scheduler exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            if json.loads(path.read_text()).get("address"):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)


def _executed_per_worker(address: str) -> dict[str, int]:
    from distributed import Client

    with Client(address, timeout="120s") as client:
        return client.run(lambda dask_worker: dask_worker.state.executed_count)


def _tables(home: Path) -> dict[str, bytes]:
    """Every published Parquet file of the home, by its path under tables/."""
    return {str(p.relative_to(home / "tables")): p.read_bytes() for p in sorted((home / "tables").rglob("*.parquet"))}


@pytest.mark.slow
def test_build_on_a_dask_cluster_writes_the_local_builds_tables(dask_cluster, s3_server, tmp_path):
    """The Dask build also writes to a home stored at a URL (an S3-compatible server on loopback):
    one build shows both that the cluster and that the object store change no byte of a table."""
    profile = tmp_path / "small.yaml"
    # The small corpus, two dialogues a document, 200 resamples: still well over the partitions'
    # minimum of samples, and two builds of it cost the suite less.
    small = {
        "extends": "demo",
        **SMALL_DEMO,
        "dialogues": {"dialogues_per_document": 2, "dialogues_per_filing": 2},
        "metrics": {"bootstrap_resamples": 200},
    }
    profile.write_text(yaml.safe_dump(small), encoding="utf-8")
    local, on_dask = tmp_path / "local", "s3://dask-bucket/homes/small"
    s3_env = {**s3_server, "FINHALLU_STATE_DIR": str(tmp_path / "state")}
    proc = run_cli("build", "--profile", str(profile), "--json", home=local, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    before = _executed_per_worker(dask_cluster)
    dask_args = ["build", "--profile", str(profile), "--json", "--runner", "dask", "--dask-address", dask_cluster]
    proc = run_cli(*dask_args, home=on_dask, timeout=900, env=s3_env)
    assert proc.returncode == 0, proc.stderr[-4000:]

    # Both workers ran partitions, and they show in the run database as the detect stage's task runs.
    after = _executed_per_worker(dask_cluster)
    assert len(after) == 2 and all(after[w] > before.get(w, 0) for w in after), (before, after)
    state = tmp_path / "state" / "s3" / "dask-bucket" / "homes" / "small"
    with sqlite3.connect(state / "prefect" / "prefect.db") as db:
        names = [n for (n,) in db.execute("SELECT name FROM task_run WHERE state_name = 'Completed'")]
    assert sum(n.startswith("findings[") for n in names) >= 2, names

    ours, theirs = _tables(local), _s3_tables(s3_server, "dask-bucket/homes/small")
    assert sorted(ours) == sorted(theirs)
    assert len(ours) >= 20
    assert [t for t in ours if ours[t] != theirs[t]] == [], "tables that differ between the local and the Dask build"
    assert not (state / "tables").exists()

    # The stage cache knows the tables at the URL: an unchanged rebuild runs no stage.
    proc = run_cli(*dask_args, home=on_dask, timeout=900, env=s3_env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["ran"] == []
    # Another machine (its own state folder) queries the home: the catalog comes from the records there.
    query = "SELECT count(*) FROM samples"
    elsewhere = {**s3_env, "FINHALLU_STATE_DIR": str(tmp_path / "elsewhere")}
    proc = run_cli("sql", query, home=on_dask, env=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == run_cli("sql", query, home=local).stdout


def _s3_tables(env: dict, prefix: str) -> dict[str, bytes]:
    import s3fs

    fs = s3fs.S3FileSystem(
        key=env["AWS_ACCESS_KEY_ID"], secret=env["AWS_SECRET_ACCESS_KEY"], endpoint_url=env["AWS_ENDPOINT_URL"]
    )
    root = f"{prefix}/tables/"
    return {k[len(root) :]: fs.cat_file(k) for k in sorted(fs.find(root)) if k.endswith(".parquet")}


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_runner_options_are_checked_before_any_work(tmp_path):
    home = tmp_path / "home"
    for args, message in [
        (["--dask-address", "tcp://127.0.0.1:1"], "need --runner dask"),
        (["--runner", "dask", "--dask-workers", "0"], "at least 1"),
        (["--runner", "dask", "--dask-workers", "2", "--dask-address", "tcp://127.0.0.1:1"], "has its own workers"),
        (["--runner", "dask", "--dask-address", f"tcp://127.0.0.1:{_closed_port()}"], "no Dask scheduler at tcp://127.0.0.1:"),
    ]:
        proc = run_cli("build", "--profile", "demo", *args, home=home)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (home / "tables").exists() and not (home / "warehouse.duckdb").exists()
    assert shutil.which("dask", path=str(Path(sys.executable).parent)), "the dask CLI comes with prefect-dask's distributed"
