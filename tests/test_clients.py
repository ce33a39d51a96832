"""EDGAR / OpenDART clients against loopback stubs (tests/edgar_stub.py, tests/dart_stub.py).

The stubs speak the real URL paths and serve the real fixtures from ../shared/data (read at
test time through `conftest.fixtures_dir()`; those tests are marked `realdata`). Backoffs are
tiny or run on a fake clock, so the module stays fast; only the rate-limit test waits for real
(25 requests at 10/s, about 2.4 s).
"""

from __future__ import annotations

import email.utils
import io
import json
import logging
import socket
import threading
import time
import zipfile
from pathlib import Path

import pytest

from conftest import fixtures_dir
from dart_stub import DartStub
from edgar_stub import EdgarStub, json_response
from finhallu.clients import (
    DartApiError,
    DartDocumentError,
    DartKeyError,
    DartKeyMissingError,
    DartRateLimitError,
    EdgarClient,
    EdgarUserAgentError,
    HttpError,
    HttpStatusError,
    OpenDartClient,
    RateLimiter,
    RetryError,
    RetryPolicy,
    fetch_dart,
    fetch_edgar,
    parse_retry_after,
)
from finhallu.sources import LoadedDoc, get_loader

UA = "finhallu tests research@example.com"
KEY = "test-key-0123456789abcdef0123456789abcdef"
FAST = RetryPolicy(max_attempts=3, backoff_base=0.001, backoff_max=0.01)
TSLA = 1318605
SAMSUNG_RCEPT = "20220816001711"


class FakeTime:
    """monotonic/time/sleep on a fake clock: sleeping advances it and is recorded."""

    def __init__(self, epoch: float = 1_700_000_000.0):
        self.epoch, self.elapsed, self.sleeps = epoch, 0.0, []

    def monotonic(self) -> float:
        return self.elapsed

    def time(self) -> float:
        return self.epoch + self.elapsed

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.elapsed += s


def loaded(source: str, path: Path) -> list[LoadedDoc]:
    items = list(get_loader(source).load(path))
    return [d for d in items if isinstance(d, LoadedDoc)]


def folder_files(source: str, folder: Path) -> list[Path]:
    return sorted({f for pat in get_loader(source).patterns for f in folder.rglob(pat)})


@pytest.fixture
def edgar():
    with EdgarStub() as stub:
        yield stub


@pytest.fixture
def dart():
    with DartStub(suspended_keys={"suspended-key-0000000000000000000000000000"}) as stub:
        yield stub


@pytest.fixture
def no_key_env(monkeypatch):
    for var in ("OPENDART_API_KEY", "DART_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def edgar_client(stub: EdgarStub, **kw) -> EdgarClient:
    kw.setdefault("retry", FAST)
    return EdgarClient(UA, base_url=stub.url, archives_url=stub.url, **kw)


def dart_client(stub: DartStub, key: str = KEY, **kw) -> OpenDartClient:
    kw.setdefault("retry", FAST)
    kw.setdefault("max_rps", 1000)
    return OpenDartClient(key, base_url=stub.base_url, **kw)


def fixture_bytes(rel: str) -> bytes:
    return (fixtures_dir() / rel).read_bytes()


def serve_latest_10k(stub: EdgarStub, html_rel: str, companyfacts: bytes) -> tuple[dict, int]:
    """Serve the real submissions JSON with `html_rel` as its latest 10-K's primary document."""
    sub_bytes = fixture_bytes("sec10k/xbrl/submissions_company_submission.json")
    recent = json.loads(sub_bytes)["filings"]["recent"]
    i = recent["form"].index("10-K")
    stub.add_submissions(TSLA, sub_bytes)
    stub.add_document(TSLA, recent["accessionNumber"][i], recent["primaryDocument"][i], fixture_bytes(html_rel))
    stub.add_companyfacts(TSLA, companyfacts)
    return recent, i


# =========================================================================== http helper


def test_parse_retry_after_seconds_and_http_date():
    now = lambda: 1_700_000_000.0  # noqa: E731
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after(" 0 ", now) == 0.0
    assert parse_retry_after(email.utils.formatdate(1_700_000_030, usegmt=True), now) == pytest.approx(30)
    assert parse_retry_after(email.utils.formatdate(1_600_000_000, usegmt=True), now) == 0.0  # in the past
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_token_bucket_spacing_on_fake_clock():
    ft = FakeTime()
    lim = RateLimiter(10, clock=ft.monotonic, sleep=ft.sleep)
    stamps = []
    for _ in range(25):
        lim.acquire()
        stamps.append(ft.monotonic())
    assert all(b - a == pytest.approx(0.1) for a, b in zip(stamps, stamps[1:]))
    assert all(stamps[i + 10] - stamps[i] >= 1.0 - 1e-9 for i in range(len(stamps) - 10))

    burst = RateLimiter(10, burst=3, clock=ft.monotonic, sleep=ft.sleep)
    ft.elapsed += 5
    assert [burst.reserve() for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])
    with pytest.raises(ValueError):
        RateLimiter(0)


def test_backoff_is_exponential_capped_and_jittered():
    p = RetryPolicy(backoff_base=1, backoff_max=5, jitter=0.5)
    assert p.backoff(1, rng=lambda: 1.0) == 1 and p.backoff(1, rng=lambda: 0.0) == 0.5
    assert p.backoff(3, rng=lambda: 1.0) == 4
    assert p.backoff(10, rng=lambda: 1.0) == 5  # capped
    assert 0.5 <= p.backoff(1) <= 1


# =========================================================================== EDGAR


def test_edgar_refuses_missing_or_anonymous_user_agent(tmp_path):
    for ua in (None, "", "   ", "python-httpx/0.28", "Jane Doe"):
        with pytest.raises(EdgarUserAgentError, match="User-Agent.*contact email"):
            EdgarClient(ua)
    with pytest.raises(EdgarUserAgentError):
        fetch_edgar(TSLA, "", tmp_path)
    assert not any(tmp_path.iterdir())
    with pytest.raises(ValueError, match="at most 10 requests/second"):
        EdgarClient(UA, max_rps=20)
    assert EdgarClient("Jane Doe jane.doe@example.org").user_agent == "Jane Doe jane.doe@example.org"


@pytest.mark.realdata
def test_edgar_submissions_filings_download_loadable(edgar, tmp_path, real_data):
    sub_bytes = fixture_bytes("sec10k/xbrl/submissions_company_submission.json")
    html = fixture_bytes("sec10k/html/parity_gate_10-K_0000950153-99-001234.html")
    recent = json.loads(sub_bytes)["filings"]["recent"]
    expected = [i for i, f in enumerate(recent["form"]) if f == "10-K"]
    edgar.add_submissions(TSLA, sub_bytes)
    first = expected[0]
    acc, doc = recent["accessionNumber"][first], recent["primaryDocument"][first]
    edgar.add_document(TSLA, acc, doc, html)

    with edgar_client(edgar) as client:
        sub = client.submissions("CIK0001318605")
        assert sub["name"] == "Tesla, Inc."
        filings = client.filings(TSLA, form="10-K")
        assert [f["accession"] for f in filings] == [recent["accessionNumber"][i] for i in expected]
        assert {f["form"] for f in filings} == {"10-K"}
        top = filings[0]
        assert top == {
            "accession": acc,
            "filing_date": recent["filingDate"][first],
            "report_date": recent["reportDate"][first],
            "form": "10-K",
            "primary_document": doc,
            "url": f"{edgar.url}/Archives/edgar/data/{TSLA}/{acc.replace('-', '')}/{doc}",
        }
        assert client.filings(TSLA, form="10-K", limit=2) == filings[:2]
        assert len(client.filings("1318605", form=("10-K", "10-Q"), limit=5)) == 5
        idx = client.filing_index(TSLA, acc.replace("-", ""))
        assert {"name": doc, "size": str(len(html))}.items() <= next(
            i for i in idx["directory"]["item"] if i["name"] == doc
        ).items()

        path = client.download_primary(TSLA, top, tmp_path / "edgar")
        assert path.read_bytes() == html  # gzip-encoded on the wire, decoded on disk
        assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind
        doc_path = f"/Archives/edgar/data/{TSLA}/{acc.replace('-', '')}/{doc}"
        n = len(edgar.hits(doc_path))
        assert client.download_primary(TSLA, top, tmp_path / "edgar") == path  # same size: skipped
        assert len(edgar.hits(doc_path)) == n
        path.write_bytes(html[:100])  # wrong size: fetched again
        client.download_primary(TSLA, top, tmp_path / "edgar")
        assert path.read_bytes() == html and len(edgar.hits(doc_path)) == n + 1

    docs = loaded("sec10k", path)
    assert docs and docs[0].institution == "MEDICIS PHARMACEUTICAL CORPORATION" and len(docs[0].blocks) > 50
    assert edgar.requests
    for rec in edgar.requests:
        assert rec.header("User-Agent") == UA, rec.path
        assert rec.header("Accept-Encoding") == "gzip, deflate", rec.path


@pytest.mark.realdata
def test_fetch_edgar_writes_a_folder_the_sec10k_loader_ingests(edgar, tmp_path, real_data):
    facts = fixture_bytes("sec10k/xbrl/companyfacts_lpa_facts.json")
    recent, i = serve_latest_10k(edgar, "sec10k/html/aapl-10-k-2024-11-01.html", facts)

    res = fetch_edgar(TSLA, UA, tmp_path / "sec", base_url=edgar.url, archives_url=edgar.url, retry=FAST)
    assert len(res.documents) == 1 and res.filings[0]["accession"] == recent["accessionNumber"][i]
    assert res.facts[0].name == f"companyfacts_CIK{TSLA:010d}.json" and json.loads(res.facts[0].read_bytes()) == json.loads(facts)
    files = folder_files("sec10k", tmp_path / "sec")
    assert files == res.documents
    docs = loaded("sec10k", files[0])
    assert docs[0].institution == "Apple Inc." and docs[0].doc_type == "10-K"
    assert all(r.header("User-Agent") == UA for r in edgar.requests)


def test_fetch_edgar_reads_older_submission_pages_when_recent_has_no_such_form(edgar, tmp_path):
    cols = ("accessionNumber", "filingDate", "reportDate", "form", "primaryDocument")

    def arrays(*rows):
        return {c: [r[i] for r in rows] for i, c in enumerate(cols)}

    recent = arrays(
        ("0000000001-24-000001", "2024-05-01", "2024-03-31", "10-Q", "q1.htm"),
        ("0000000001-24-000002", "2024-04-01", "", "8-K", "ek.htm"),
    )
    older = arrays(("0000000001-23-000009", "2023-02-01", "2022-12-31", "10-K", "annual.htm"))
    edgar.add_submissions(
        1,
        json.dumps(
            {
                "cik": "1",
                "filings": {"recent": recent, "files": [{"name": "CIK0000000001-submissions-001.json", "filingCount": 1}]},
            }
        ).encode(),
    )
    edgar.route("/submissions/CIK0000000001-submissions-001.json", json_response(older))
    edgar.add_document(1, "0000000001-23-000009", "annual.htm", b"<html><body><p>Item 1. Business</p></body></html>")
    res = fetch_edgar(
        "0000000001",
        UA,
        tmp_path,
        forms="10-K",
        companyfacts=False,
        base_url=edgar.url,
        archives_url=edgar.url,
        max_rps=1000,
        retry=FAST,
    )
    assert [f["accession"] for f in res.filings] == ["0000000001-23-000009"] and res.facts == []
    assert [p.name for p in res.documents] == ["1-0000000001-23-000009-annual.htm"]
    with edgar_client(edgar, max_rps=1000) as client:
        assert client.filings(1, form=None)[1]["report_date"] is None
        assert client.filings(1) == []  # recent only by default


def test_edgar_rate_limit_at_most_10_per_second_over_a_burst(edgar):
    """Five threads, 25 requests, one shared limiter at the SEC's 10/s. What the limiter promises is
    when each request may go: read off its own clock, not off arrival times at the server (which a
    busy machine bunches), so nothing here depends on scheduling slack."""
    edgar.add_submissions(1, json.dumps({"cik": "1", "name": "x", "filings": {"recent": {}}}).encode())
    client = edgar_client(edgar)  # max_rps=10, the SEC limit
    limiter = client.http.limiter_for(f"{edgar.url}/submissions/CIK0000000001.json")
    assert limiter is not None and limiter.rate == 10
    now_of: dict[int, float] = {}  # the clock as reserve() read it, per thread
    due: list[float] = []
    clock, reserve = limiter.clock, limiter.reserve

    def reading_clock() -> float:
        now_of[threading.get_ident()] = clock()
        return now_of[threading.get_ident()]

    def recording_reserve() -> float:
        wait = reserve()
        due.append(now_of[threading.get_ident()] + wait)  # when this request may be sent
        return wait

    limiter.clock, limiter.reserve = reading_clock, recording_reserve
    errors = []

    def worker():
        try:
            for _ in range(5):
                client.submissions(1)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(5)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    client.close()
    assert not errors
    assert len(edgar.requests) == 25 and len(due) == 25
    slots = sorted(due)
    # Any 11 consecutive requests may go no sooner than one second apart (float rounding aside), and
    # a request waits for its slot, so the burst takes at least 2.4 s however busy the machine is.
    assert min(slots[i + 10] - slots[i] for i in range(len(slots) - 10)) >= 1.0 - 1e-9
    assert elapsed >= slots[-1] - slots[0] >= 2.4 - 1e-9
    assert all(r.header("User-Agent") == UA for r in edgar.requests)


def test_429_retry_after_seconds_then_success(edgar):
    ft = FakeTime()
    edgar.add_submissions(TSLA, b'{"name": "Tesla, Inc."}')
    path = f"/submissions/CIK{TSLA:010d}.json"
    edgar.fail(path, [(429, {"Retry-After": "3"}, b"slow down")])
    with edgar_client(edgar, max_rps=1e6, clock=ft.monotonic, sleep=ft.sleep, now=ft.time) as client:
        assert client.submissions(TSLA) == {"name": "Tesla, Inc."}
    assert len(edgar.hits(path)) == 2
    assert 3.0 in ft.sleeps


def test_429_retry_after_http_date_is_honoured(edgar):
    ft = FakeTime()
    edgar.add_submissions(TSLA, b'{"name": "Tesla, Inc."}')
    path = f"/submissions/CIK{TSLA:010d}.json"
    edgar.fail(path, [lambda rec: (429, {"Retry-After": email.utils.formatdate(ft.time() + 7, usegmt=True)}, b"")])
    with edgar_client(edgar, max_rps=1e6, clock=ft.monotonic, sleep=ft.sleep, now=ft.time) as client:
        assert client.submissions(TSLA)["name"] == "Tesla, Inc."
    assert max(ft.sleeps) == pytest.approx(7, abs=1)


def test_retry_after_longer_than_allowed_fails_at_once(edgar):
    edgar.add_submissions(TSLA, b"{}")
    path = f"/submissions/CIK{TSLA:010d}.json"
    edgar.fail(path, [(503, {"Retry-After": "3600"}, b"")])
    with edgar_client(edgar, max_rps=1e6) as client, pytest.raises(RetryError, match="3600 s") as ei:
        client.submissions(TSLA)
    assert ei.value.status == 503 and len(edgar.hits(path)) == 1


def test_500_twice_then_success_with_exponential_backoff(edgar):
    ft = FakeTime()
    edgar.add_submissions(TSLA, b'{"ok": true}')
    path = f"/submissions/CIK{TSLA:010d}.json"
    edgar.fail(path, [(500, {}, b"oops"), (500, {}, b"oops")])
    policy = RetryPolicy(max_attempts=4, backoff_base=0.5, jitter=0.5)
    with edgar_client(
        edgar, max_rps=1e6, retry=policy, clock=ft.monotonic, sleep=ft.sleep, now=ft.time, rng=lambda: 1.0
    ) as client:
        assert client.submissions(TSLA) == {"ok": True}
    assert len(edgar.hits(path)) == 3
    assert [s for s in ft.sleeps if s > 0.01] == [0.5, 1.0]


def test_persistent_503_gives_up_after_bounded_attempts(edgar):
    edgar.route(f"/submissions/CIK{TSLA:010d}.json", (503, {}, b"unavailable"))
    policy = RetryPolicy(max_attempts=4, backoff_base=0.001, backoff_max=0.005)
    with edgar_client(edgar, max_rps=1e6, retry=policy) as client, pytest.raises(RetryError) as ei:
        client.submissions(TSLA)
    msg = str(ei.value)
    assert f"{edgar.url}/submissions/CIK0001318605.json" in msg and "HTTP 503" in msg and "4 attempts" in msg
    assert ei.value.status == 503 and ei.value.attempts == 4
    assert len(edgar.hits(f"/submissions/CIK{TSLA:010d}.json")) == 4


def test_not_found_is_not_retried_and_403_explains_sec_policy(edgar):
    path = f"/submissions/CIK{TSLA:010d}.json"
    with edgar_client(edgar, max_rps=1e6) as client:
        with pytest.raises(HttpStatusError, match="HTTP 404") as ei:
            client.submissions(TSLA)
        assert ei.value.status == 404 and len(edgar.hits(path)) == 1
        edgar.fail(path, [(403, {}, b"Undeclared Automated Tool")])
        with pytest.raises(HttpStatusError, match="HTTP 403.*User-Agent"):
            client.submissions(TSLA)


def test_timeouts_and_connection_errors_are_retried_then_reported(edgar):
    edgar.add_submissions(TSLA, b'{"ok": 1}')
    path = f"/submissions/CIK{TSLA:010d}.json"
    edgar.fail(path, [lambda rec: (time.sleep(0.6), (200, {}, b'{"late": 1}'))[1]])
    with edgar_client(edgar, max_rps=1e6, timeout=0.2) as client:
        assert client.submissions(TSLA) == {"ok": 1}
    assert len(edgar.hits(path)) == 2

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = f"http://127.0.0.1:{port}"
    with EdgarClient(UA, base_url=dead, archives_url=dead, retry=FAST, max_rps=1e6) as client:
        with pytest.raises(RetryError, match="ConnectError") as ei:
            client.submissions(TSLA)
    assert ei.value.status is None and ei.value.attempts == 3 and dead in str(ei.value)


# =========================================================================== OpenDART


def list_rows() -> list[dict]:
    page = json.loads(fixture_bytes("dart/opendart-api/dart_list_pblntf_ty_C_20260911.first12.json"))
    curated = json.loads(fixture_bytes("dart/opendart-api/dart_majorreport_list_20260911.json"))
    assert "_note" in curated  # not part of the API: only its rows are served
    rows = list(page["list"])
    rows += [r for r in curated["list"] if r["rcept_no"] not in {x["rcept_no"] for x in rows}]
    return rows


@pytest.mark.realdata
def test_dart_list_iterates_every_page_once(dart, real_data):
    rows = list_rows()
    dart.rows = rows
    page_count = (len(rows) + 2) // 3  # three pages
    with dart_client(dart) as client:
        got = client.list_filings(bgn_de="2026-09-10", end_de="20260910", pblntf_ty="C", page_count=page_count)
    assert [r["rcept_no"] for r in got] == [r["rcept_no"] for r in rows]
    assert got == rows
    hits = dart.hits("/api/list.json")
    assert [h.query["page_no"] for h in hits] == ["1", "2", "3"]
    assert all(h.query["crtfc_key"] == KEY and h.query["pblntf_ty"] == "C" and h.query["bgn_de"] == "20260910" for h in hits)


@pytest.mark.realdata
def test_dart_rows_shifted_between_pages_are_kept_once(dart, real_data):
    rows = list_rows()[:9]
    dart.rows = list(rows)
    new = dict(rows[0], rcept_no="20260911000001")

    def page2(rec):  # a new filing arrives before page 2: everything shifts down by one
        dart.rows.insert(0, new)
        return dart._list(rec)

    dart.fail("/api/list.json", [dart._list, page2])
    with dart_client(dart) as client:
        got = client.list_filings(page_count=3)
    nos = [r["rcept_no"] for r in got]
    assert len(nos) == len(set(nos)) and set(r["rcept_no"] for r in rows) <= set(nos)


def test_dart_013_no_data_is_empty(dart):
    with dart_client(dart) as client:
        assert client.list_filings(corp_code="00126380", bgn_de="20220101", end_de="20221231") == []
    assert len(dart.hits("/api/list.json")) == 1


def test_dart_020_is_retried_then_reported(dart, caplog):
    dart.rows = [{"corp_code": "00126380", "rcept_no": "20220816001711", "report_nm": "반기보고서"}]
    dart.statuses.extend(["020", "020"])
    with caplog.at_level(logging.WARNING, logger="finhallu.clients"):
        with dart_client(dart) as client:
            assert [r["rcept_no"] for r in client.list_filings()] == ["20220816001711"]
    assert len(dart.hits("/api/list.json")) == 3
    assert "020" in caplog.text and KEY not in caplog.text

    dart.statuses.extend(["020"] * 5)
    with dart_client(dart) as client, pytest.raises(DartRateLimitError, match="020.*요청 제한") as ei:
        client.list_filings()
    assert ei.value.status == "020" and "3 attempts" in str(ei.value)


@pytest.mark.parametrize(
    "key,status,message",
    [
        ("unregistered-key-00000000000000000000000000", "010", "등록되지 않은 키"),
        ("suspended-key-0000000000000000000000000000", "011", "사용할 수 없는 키"),
    ],
)
def test_dart_key_errors_carry_the_message_and_mask_the_key(dart, key, status, message):
    dart.valid_keys.add("unused")
    with dart_client(dart, key=key) as client:
        assert key not in repr(client)
        with pytest.raises(DartKeyError) as ei:
            client.list_filings()
    exc = ei.value
    assert isinstance(exc, DartApiError) and exc.status == status and message in exc.message and message in str(exc)
    assert key not in str(exc) and key not in repr(exc.args)


def test_dart_ip_not_allowed_and_other_statuses(dart):
    dart.statuses.extend(["012", "100"])
    with dart_client(dart) as client:
        with pytest.raises(DartKeyError, match="012.*IP"):
            client.list_filings()
        with pytest.raises(DartApiError, match="100") as ei:
            client.list_filings()
    assert not isinstance(ei.value, DartKeyError) and ei.value.status == "100"


def test_dart_http_errors_never_show_the_key(dart, caplog):
    dart.route("/api/list.json", (500, {}, b"internal"))
    with caplog.at_level(logging.WARNING, logger="finhallu.clients"):
        with dart_client(dart) as client, pytest.raises(RetryError) as ei:
            client.list_filings()
    assert "crtfc_key=***" in str(ei.value) and "HTTP 500" in str(ei.value)
    assert KEY not in str(ei.value) and KEY not in caplog.text and KEY not in ei.value.url


def make_zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.mark.realdata
def test_dart_document_zip_unpacked_and_loadable(dart, tmp_path, real_data):
    xml = fixture_bytes("dart/document-xml/dart-20220816001711.xhml")
    dart.documents[SAMSUNG_RCEPT] = make_zip({f"{SAMSUNG_RCEPT}.xml": xml, "logo.jpg": b"\xff\xd8\xff"})
    dest = tmp_path / "dart"
    with dart_client(dart) as client:
        paths = client.download_document(SAMSUNG_RCEPT, dest)
        assert paths == [dest / f"{SAMSUNG_RCEPT}.xml"]
        assert paths[0].read_bytes() == xml  # cp949 bytes untouched
        assert sorted(p.name for p in dest.iterdir()) == [f"{SAMSUNG_RCEPT}.xml"]  # no zip, no temp files
        assert client.download_document(SAMSUNG_RCEPT, dest) == paths  # already there: no request
    assert len(dart.hits("/api/document.xml")) == 1
    docs = loaded("dart", paths[0])
    assert docs[0].institution == "삼성전자주식회사" and docs[0].lang == "ko" and "cp949" in docs[0].source_path


def test_dart_document_error_bodies(dart, tmp_path):
    with dart_client(dart) as client:
        with pytest.raises(DartApiError, match="014.*파일이 존재하지 않습니다") as ei:
            client.download_document("20990101000001", tmp_path)  # JSON status instead of a ZIP
        assert ei.value.status == "014" and not isinstance(ei.value, DartKeyError)
        dart.fail(
            "/api/document.xml",
            [
                (
                    200,
                    {"Content-Type": "text/xml"},
                    "<result><status>013</status><message>조회된 데이타가 없습니다.</message></result>".encode(),
                )
            ],
        )
        with pytest.raises(DartApiError, match="013"):
            client.download_document("20990101000001", tmp_path)
        dart.fail("/api/document.xml", [(200, {"Content-Type": "text/html"}, b"<html>maintenance</html>")])
        with pytest.raises(DartDocumentError, match="neither a ZIP nor a status"):
            client.download_document("20990101000001", tmp_path)
        dart.documents["20990101000002"] = make_zip({"x.xml": b"<DOCUMENT/>"})
        dart.statuses.extend(["020"])
        assert [p.name for p in client.download_document("20990101000002", tmp_path)] == ["x.xml"]
    with dart_client(dart, key="unregistered-key-00000000000000000000000000") as client:
        with pytest.raises(DartKeyError) as ei:
            client.download_document("20990101000002", tmp_path / "k")
    assert "unregistered-key" not in str(ei.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k", "x.xml"]


def test_dart_truncated_zip_is_a_clear_error(dart, tmp_path):
    full = make_zip({f"{SAMSUNG_RCEPT}.xml": b"<DOCUMENT>" + b"x" * 50_000 + b"</DOCUMENT>"})
    dart.documents[SAMSUNG_RCEPT] = full[: len(full) // 2]
    with dart_client(dart) as client, pytest.raises(DartDocumentError, match="truncated or corrupt ZIP"):
        client.download_document(SAMSUNG_RCEPT, tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert len(dart.hits("/api/document.xml")) == FAST.max_attempts


def test_dart_key_from_env(dart, monkeypatch, no_key_env):
    monkeypatch.setenv("DART_API_KEY", KEY)
    dart.rows = [{"corp_code": "00126380", "rcept_no": "20220816001711"}]
    with OpenDartClient(base_url=dart.base_url, retry=FAST) as client:
        assert len(client.list_filings()) == 1
    monkeypatch.setenv("OPENDART_API_KEY", "unregistered-key-00000000000000000000000000")  # takes precedence
    with OpenDartClient(base_url=dart.base_url, retry=FAST) as client, pytest.raises(DartKeyError):
        client.list_filings()
    assert {h.query["crtfc_key"] for h in dart.requests} == {KEY, "unregistered-key-00000000000000000000000000"}


def test_dart_missing_key_is_a_clear_error(monkeypatch, no_key_env, tmp_path):
    from prefect.blocks.system import Secret

    calls = []

    def boom(cls, name, *a, **kw):
        calls.append(name)
        raise ValueError(f"Unable to find block document named {name}")

    monkeypatch.setattr(Secret, "load", classmethod(boom))
    with pytest.raises(DartKeyMissingError) as ei:
        OpenDartClient()
    msg = str(ei.value)
    assert "no OpenDART key" in msg and "OPENDART_API_KEY" in msg and "DART_API_KEY" in msg and "opendart-api-key" in msg
    assert calls == ["opendart-api-key"]
    with pytest.raises(DartKeyMissingError):
        fetch_dart("00126380", tmp_path, "20220101", "20221231")


def test_dart_key_from_prefect_secret_only_when_env_is_empty(dart, monkeypatch, no_key_env):
    from prefect.blocks.system import Secret

    calls = []

    class Block:
        def get(self):
            return KEY

    def load(cls, name, *a, **kw):
        calls.append(name)
        return Block()

    monkeypatch.setattr(Secret, "load", classmethod(load))
    with OpenDartClient(base_url=dart.base_url, retry=FAST) as client:
        assert client.list_filings() == []
    assert calls == ["opendart-api-key"] and dart.requests[0].query["crtfc_key"] == KEY
    monkeypatch.setenv("OPENDART_API_KEY", KEY)
    OpenDartClient(base_url=dart.base_url).close()
    assert calls == ["opendart-api-key"]  # not consulted when the env has a key


@pytest.mark.realdata
def test_fetch_dart_writes_a_folder_the_dart_loader_ingests(dart, tmp_path, real_data):
    xml = fixture_bytes("dart/document-xml/dart-20220816001711.xhml")
    other = "20220516001234"
    dart.rows = [
        {
            "corp_code": "00126380",
            "corp_name": "삼성전자",
            "report_nm": "반기보고서 (2022.06)",
            "rcept_no": SAMSUNG_RCEPT,
            "rcept_dt": "20220816",
            "rm": "",
        },
        {
            "corp_code": "00126380",
            "corp_name": "삼성전자",
            "report_nm": "분기보고서 (2022.03)",
            "rcept_no": other,
            "rcept_dt": "20220516",
            "rm": "",
        },
        *list_rows(),
    ]
    dart.documents[SAMSUNG_RCEPT] = make_zip({f"{SAMSUNG_RCEPT}.xml": xml})
    res = fetch_dart("00126380", tmp_path / "dart", "20220101", "20221231", api_key=KEY, base_url=dart.base_url, retry=FAST)
    assert [f["rcept_no"] for f in res.filings] == [SAMSUNG_RCEPT]
    assert [h.query["rcept_no"] for h in dart.hits("/api/document.xml")] == [SAMSUNG_RCEPT]
    listed = dart.hits("/api/list.json")[0].query
    assert listed["corp_code"] == "00126380" and listed["pblntf_ty"] == "A" and listed["bgn_de"] == "20220101"
    files = folder_files("dart", tmp_path / "dart")
    assert files == res.documents
    assert loaded("dart", files[0])[0].institution == "삼성전자주식회사"


def test_http_error_is_a_client_error():
    assert issubclass(RetryError, HttpError) and issubclass(DartKeyError, DartApiError)


@pytest.mark.realdata
def test_fetch_cli_then_ingest_reads_the_folder(edgar, tmp_path, real_data):
    """`finhallu fetch edgar` against the loopback EDGAR, then the ingest stage on that folder."""
    import subprocess
    import sys

    from conftest import ROOT, cli_env
    from finhallu.stages.ingest import IngestConfig, SourceConfig
    from finhallu.stages import ingest
    from finhallu.stages.base import StageContext

    serve_latest_10k(edgar, "sec10k/html/wfc-10-k-2025-02-25.html", fixture_bytes("sec10k/xbrl/companyfacts_snow_facts.json"))
    dest = tmp_path / "edgar"
    no_ua = subprocess.run(
        [
            sys.executable,
            "-m",
            "finhallu.cli",
            "fetch",
            "edgar",
            "--cik",
            str(TSLA),
            "--dest",
            str(dest),
            "--base-url",
            edgar.url,
        ],
        capture_output=True,
        text=True,
        env={**cli_env(), "SEC_USER_AGENT": ""},
        cwd=ROOT,
        timeout=60,
    )
    assert no_ua.returncode == 2 and "User-Agent" in no_ua.stderr and not edgar.requests
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "finhallu.cli",
            "fetch",
            "edgar",
            "--cik",
            str(TSLA),
            "--dest",
            str(dest),
            "--base-url",
            edgar.url,
            "--user-agent",
            UA,
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["documents"]) == 1 and len(out["facts"]) == 1
    cfg = IngestConfig(sources=[SourceConfig(kind="sec10k", paths=[str(dest)]), SourceConfig(kind="xbrl", paths=[str(dest)])])
    frames = ingest.run({}, StageContext(stage="ingest", config=cfg, seed=1))
    assert frames["documents"]["institution"].to_list() == ["WELLS FARGO & COMPANY/MN"]
    assert frames["facts"].height > 1000 and frames["quarantine"].height == 0
