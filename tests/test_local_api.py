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
        url = api.url(timeout=300)  # boot may be slow on a busy machine; idle time has not started
        pid = api._process.pid
        time.sleep(4)  # several idle periods: the client's shared lock keeps it up
        assert _healthy(url, timeout=5)
        # a second client finds the same server
        other = HomeAPI(home).ensure()
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
