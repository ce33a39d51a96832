"""The home's warm Prefect API server: alive while a client holds it however slow the machine,
gone once idle after the last client left (no idle window a slow start can fall into)."""

import os
import time

from finhallu.service.local_api import HomeAPI, _healthy, api_file


def test_server_outlives_its_idle_time_while_a_client_holds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("FINHALLU_API_IDLE_S", "1")
    home = tmp_path / "home"
    home.mkdir()
    api = HomeAPI(home).ensure()
    try:
        assert api.booting  # started here, not yet seen answering
        url = api.url(timeout=300)  # boot may be slow on a busy machine; idle time has not started
        assert not api.booting
        pid = api._process.pid
        time.sleep(4)  # several idle periods: the client's shared lock keeps it up
        assert _healthy(url, timeout=5)
        # a second client finds the same server
        other = HomeAPI(home).ensure()
        assert not other.booting
        assert other.url() == url
        other.release()
        assert _healthy(url, timeout=5)
    finally:
        api.release()
    for _ in range(600):  # gone once idle with no client (bounded wait; correctness needs no slack)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if api._process.poll() is not None:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the idle server did not stop")
    assert not api_file(home).exists()


def test_a_new_home_starts_from_the_first_servers_pristine_run_database(tmp_path, monkeypatch):
    """The first server keeps its freshly migrated run database (migrations and block registry only)
    as the template; a new home's run database is a copy of it, and its server runs on it."""
    import httpx

    from finhallu.service.local_api import (
        pristine,
        run_db,
        seed_run_db,
        seeded_from_template,
        server_env,
        stop_home_api,
        template_db,
    )

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("FINHALLU_API_IDLE_S", "600")
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("PREFECT_HOME", str(first / "prefect"))
    first.mkdir()
    api = HomeAPI(first).ensure()
    try:
        api.url(timeout=300)
        template = template_db()
        for _ in range(3000):  # written by the server right after it is ready (bounded wait)
            if template.exists():
                break
            time.sleep(0.1)
        assert template.exists() and pristine(template)
    finally:
        api.release()
        stop_home_api(first)

    monkeypatch.setenv("PREFECT_HOME", str(second / "prefect"))
    (second / "prefect").mkdir(parents=True)
    assert not seeded_from_template(run_db())
    assert server_env().get("PREFECT_API_DATABASE_MIGRATE_ON_START") is None  # no template copy: checks all
    assert seed_run_db() and run_db().read_bytes() == template.read_bytes()
    assert not seed_run_db()  # an existing run database is never replaced
    # Its server skips the migration check and the block registration the template already had done:
    # the registry below comes from the template.
    assert seeded_from_template(run_db()) and server_env()["PREFECT_API_BLOCKS_REGISTER_ON_START"] == "0"
    api = HomeAPI(second).ensure()
    try:
        url = api.url(timeout=300)
        assert len(httpx.post(f"{url}/block_types/filter", json={}, timeout=30).json()) > 10
        httpx.post(f"{url}/flows/", json={"name": "a-home-of-its-own"}, timeout=30).raise_for_status()
        assert not pristine(run_db())  # what a home ran never becomes a template
    finally:
        api.release()
        stop_home_api(second)
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://db/prefect")
    assert template_db() is None  # runs kept elsewhere: no SQLite template


def test_a_build_does_its_preparation_while_a_server_it_started_boots(tmp_path, monkeypatch):
    """`ready(while_booting=...)` runs the work when the command started the home's server (the wait
    would be idle), and not when it found one warm."""
    from finhallu.cli import prefect_api
    from finhallu.service.local_api import stop_home_api

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("FINHALLU_API_IDLE_S", "600")
    home = tmp_path / "home"
    home.mkdir()
    done: list[str] = []
    try:
        with prefect_api(home) as ready:
            ready(while_booting=lambda: done.append("first"))
        url = os.environ.pop("PREFECT_API_URL")  # set by ready(); the next command finds the server by its home
        with prefect_api(home) as ready:  # warm now: nothing to wait for
            ready(while_booting=lambda: done.append("second"))
        assert done == ["first"]
        assert os.environ["PREFECT_API_URL"] == url
    finally:
        stop_home_api(home)
