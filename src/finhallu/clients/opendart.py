"""OpenDART (금융감독원 전자공시 Open API) client: filing lists and original documents.

Every response carries a `status`: 000 정상, 013 no data, 020 request limit exceeded,
010/011/012/901 key problems (unregistered, unusable, IP not allowed, expired), others
(014 no file, 100 bad field, 800 maintenance, 900 undefined ...) are API errors.
`document.xml` answers a ZIP of the filing's XML documents, or a JSON/XML status body on errors.

The API key comes from the argument, `OPENDART_API_KEY`, `DART_API_KEY`, or the Prefect Secret
block `opendart-api-key` (in that order); it is masked (`***`) in every message this module emits.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from datetime import date
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

import lxml.etree

from finhallu.clients.http import MASK, ClientError, HttpBacked, HttpClient, RetryPolicy

log = logging.getLogger("finhallu.clients")

KEY_ENV_VARS = ("OPENDART_API_KEY", "DART_API_KEY")
SECRET_BLOCK = "opendart-api-key"
KEY_STATUSES = {"010", "011", "012", "901"}
RATE_LIMIT_STATUS = "020"
NO_DATA_STATUS = "013"
OK_STATUS = "000"
_KEY_HINTS = {
    "010": "the key is not registered",
    "011": "the key is registered but not usable (suspended)",
    "012": "requests from this IP address are not allowed for the key",
    "901": "the key's account has expired",
}


class DartApiError(ClientError):
    """OpenDART answered a status other than 000/013."""

    def __init__(self, status: str, message: str, detail: str = ""):
        self.status = status
        self.message = message
        super().__init__(detail or f"OpenDART status {status}: {message}")


class DartKeyError(DartApiError):
    """The API key is not registered/usable, or this IP is not allowed (status 010/011/012/901)."""


class DartRateLimitError(DartApiError):
    """Status 020 (request limit exceeded) persisted through the retries."""


class DartKeyMissingError(ClientError, LookupError):
    """No OpenDART key in the argument, the environment or the Prefect Secret block."""


class DartDocumentError(ClientError):
    """document.xml returned something other than a usable ZIP (truncated, corrupt, no XML inside)."""


def resolve_api_key(api_key: str | None = None) -> str:
    """The key from the argument, the env vars, or (only then, lazily) the Prefect Secret block."""
    if api_key and api_key.strip():
        return api_key.strip()
    for var in KEY_ENV_VARS:
        value = os.environ.get(var, "").strip()
        if value:
            return value
    where = f"pass api_key=..., set {' or '.join(KEY_ENV_VARS)}, or create a Prefect Secret block named '{SECRET_BLOCK}'"
    try:
        from prefect.blocks.system import Secret

        block = Secret.load(SECRET_BLOCK)
        if inspect.isawaitable(block):  # Prefect dispatches to the async loader inside an event loop
            getattr(block, "close", lambda: None)()
            raise RuntimeError("Secret.load returned a coroutine (called from async code)")
        value = block.get()
    except Exception as exc:  # noqa: BLE001 - any failure means "no key"
        raise DartKeyMissingError(f"no OpenDART key: {where} (loading the block failed: {type(exc).__name__}: {exc})") from None
    value = "" if value is None else str(value).strip()
    if not value:
        raise DartKeyMissingError(f"no OpenDART key: {where} (the block '{SECRET_BLOCK}' is empty)")
    return value


def _yyyymmdd(value: str | date | None, name: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, date):
        return value.strftime("%Y%m%d")
    text = str(value).strip().replace("-", "").replace(".", "")
    if not re.fullmatch(r"\d{8}", text):
        raise ValueError(f"{name} must be YYYYMMDD, got {value!r}")
    return text


def parse_status_body(data: bytes) -> tuple[str, str] | None:
    """(status, message) from an OpenDART JSON or XML status body, else None."""
    text = data.lstrip()[:65536]
    if text.startswith(b"{"):
        try:
            payload = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None
        if isinstance(payload, dict) and "status" in payload:
            return str(payload["status"]).strip(), str(payload.get("message", "")).strip()
        return None
    if text.startswith(b"<"):
        try:
            root = lxml.etree.fromstring(data, lxml.etree.XMLParser(resolve_entities=False, no_network=True))
        except lxml.etree.XMLSyntaxError:
            return None
        status = root.findtext("status")
        if status is not None:
            return status.strip(), (root.findtext("message") or "").strip()
    return None


class OpenDartClient(HttpBacked):
    """OpenDART over HTTPS. `http_options` go to `HttpClient` (retry, timeout, clock, sleep, now, rng, transport);
    the same RetryPolicy governs status 020 retries."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str = "https://opendart.fss.or.kr/api",
        max_rps: float = 5,
        **http_options: Any,
    ):
        self._key = resolve_api_key(api_key)
        self.base_url = base_url.rstrip("/")
        self.http = HttpClient(
            headers={"User-Agent": "finhallu-opendart/0.1", "Accept-Encoding": "gzip, deflate"},
            default_rps=max_rps,
            secrets=[self._key],
            secret_params=("crtfc_key",),
            **http_options,
        )
        self.retry: RetryPolicy = self.http.retry

    def __repr__(self) -> str:
        return f"OpenDartClient(api_key={MASK!r}, base_url={self.base_url!r})"

    # -- status handling

    def _error(self, endpoint: str, status: str, message: str, attempts: int = 1) -> DartApiError:
        message = self.http.redact(message)
        head = f"OpenDART {endpoint} returned status {status}: {message or '(no message)'}"
        if status in KEY_STATUSES:
            return DartKeyError(
                status,
                message,
                f"{head} — {_KEY_HINTS[status]}; check the key "
                f"({' / '.join(KEY_ENV_VARS)} or the Prefect Secret '{SECRET_BLOCK}') "
                f"and its registered IPs at https://opendart.fss.or.kr",
            )
        if status == RATE_LIMIT_STATUS:
            return DartRateLimitError(
                status, message, f"{head} (still after {attempts} attempts; OpenDART allows about 20,000 requests a day per key)"
            )
        return DartApiError(status, message, head)

    def _backoff(self, endpoint: str, attempt: int, message: str) -> None:
        delay = self.retry.backoff(attempt, self.http.rng)
        log.warning(
            "OpenDART %s: status 020 (%s); retry %d/%d in %.2f s",
            endpoint,
            self.http.redact(message),
            attempt + 1,
            self.retry.max_attempts,
            delay,
        )
        self.http.sleep(delay)

    def call(self, endpoint: str, **params: Any) -> dict | None:
        """GET `<base>/<endpoint>` with the key; the JSON on 000, None on 013, retries on 020, raises otherwise."""
        url = f"{self.base_url}/{endpoint}"
        query = {"crtfc_key": self._key, **{k: v for k, v in params.items() if v is not None}}
        for attempt in range(1, self.retry.max_attempts + 1):
            data = self.http.get_json(url, params=query)
            if not isinstance(data, dict) or "status" not in data:
                raise DartApiError(
                    "", "", f"OpenDART {endpoint} answered JSON without a status: {self.http.redact(str(data)[:200])}"
                )
            status, message = str(data["status"]).strip(), str(data.get("message", "")).strip()
            if status == OK_STATUS:
                return data
            if status == NO_DATA_STATUS:
                return None
            if status == RATE_LIMIT_STATUS and attempt < self.retry.max_attempts:
                self._backoff(endpoint, attempt, message)
                continue
            raise self._error(endpoint, status, message, attempt)
        raise AssertionError("unreachable")

    # -- list.json

    def iter_filings(
        self,
        corp_code: str | None = None,
        bgn_de: str | date | None = None,
        end_de: str | date | None = None,
        pblntf_ty: str | None = None,
        page_count: int = 100,
        **params: Any,
    ) -> Iterator[dict]:
        """Rows of `list.json` over every page (page_no 1..total_page), each rcept_no once.
        Extra params (last_reprt_at, pblntf_detail_ty, corp_cls, sort, sort_mth) pass through."""
        if not 1 <= int(page_count) <= 100:
            raise ValueError("page_count must be within 1..100")
        if corp_code is not None and not re.fullmatch(r"\d{8}", str(corp_code)):
            raise ValueError(f"corp_code must be the 8-digit DART code, got {corp_code!r}")
        query = {
            "corp_code": corp_code,
            "bgn_de": _yyyymmdd(bgn_de, "bgn_de"),
            "end_de": _yyyymmdd(end_de, "end_de"),
            "pblntf_ty": pblntf_ty,
            "page_count": int(page_count),
            **params,
        }
        seen: set[str] = set()
        page_no, total_page = 1, 1
        while page_no <= total_page:
            data = self.call("list.json", **query, page_no=page_no)
            if data is None:  # 013: no (more) data
                return
            total_page = int(data.get("total_page") or 1)
            rows = data.get("list") or []
            for row in rows:
                key = row.get("rcept_no")
                if key in seen:
                    continue  # a filing that arrived meanwhile shifted the pages
                seen.add(key)
                yield row
            if not rows:
                return
            page_no += 1

    def list_filings(
        self,
        corp_code: str | None = None,
        bgn_de: str | date | None = None,
        end_de: str | date | None = None,
        pblntf_ty: str | None = None,
        page_count: int = 100,
        **params: Any,
    ) -> list[dict]:
        """All rows of `list.json` (every page); [] when OpenDART reports no data (013)."""
        return list(self.iter_filings(corp_code, bgn_de, end_de, pblntf_ty, page_count, **params))

    # -- document.xml

    def download_document(self, rcept_no: str, dest_dir: str | Path, overwrite: bool = False) -> list[Path]:
        """Unpack the filing's XML documents (`<rcept_no>.xml`, attachments `<rcept_no>_NNNNN.xml`)
        from `document.xml`'s ZIP into dest_dir, each atomically. Skips the download when
        `<rcept_no>.xml` is already there (unless overwrite)."""
        rcept_no = str(rcept_no).strip()
        if not re.fullmatch(r"\d{14}", rcept_no):
            raise ValueError(f"rcept_no must be the 14-digit receipt number, got {rcept_no!r}")
        dest_dir = Path(dest_dir)
        dest_dir.mkdir(parents=True, exist_ok=True)
        if not overwrite and (dest_dir / f"{rcept_no}.xml").exists():
            existing = sorted(p for p in dest_dir.glob(f"{rcept_no}*.xml") if p.is_file())
            log.info("OpenDART %s already unpacked: skipped", rcept_no)
            return existing
        url = f"{self.base_url}/document.xml"
        params = {"crtfc_key": self._key, "rcept_no": rcept_no}
        for attempt in range(1, self.retry.max_attempts + 1):
            fd, tmp_name = tempfile.mkstemp(dir=dest_dir, prefix=f".{rcept_no}.", suffix=".zip.part")
            os.close(fd)
            tmp = Path(tmp_name)
            try:
                size = self.http.download(url, tmp, params=params)
                with tmp.open("rb") as fh:
                    head = fh.read(65536)
                if head[:2] == b"PK":
                    try:
                        return self._unpack(tmp, dest_dir, rcept_no)
                    except DartDocumentError as exc:
                        if attempt >= self.retry.max_attempts:
                            raise DartDocumentError(f"{exc} (after {attempt} attempts)") from None
                        delay = self.retry.backoff(attempt, self.http.rng)
                        log.warning("%s; retry %d/%d in %.2f s", exc, attempt + 1, self.retry.max_attempts, delay)
                        self.http.sleep(delay)
                        continue
                parsed = parse_status_body(head if size <= len(head) else tmp.read_bytes())
                if parsed is None:
                    raise DartDocumentError(
                        f"OpenDART document.xml for rcept_no {rcept_no} returned neither a ZIP nor a status body "
                        f"({size} bytes, starting {self.http.redact(head[:60].decode('utf-8', 'replace'))!r})"
                    )
                status, message = parsed
                if status == RATE_LIMIT_STATUS and attempt < self.retry.max_attempts:
                    self._backoff("document.xml", attempt, message)
                    continue
                if status == OK_STATUS:
                    raise DartDocumentError(f"OpenDART document.xml for rcept_no {rcept_no} answered status 000 but no ZIP")
                raise self._error(f"document.xml (rcept_no {rcept_no})", status, message, attempt)
            finally:
                tmp.unlink(missing_ok=True)
        raise AssertionError("unreachable")

    def _unpack(self, archive: Path, dest_dir: Path, rcept_no: str) -> list[Path]:
        """All-or-nothing: every .xml member is staged to a temp file first, then all are renamed."""
        staged: list[tuple[Path, Path]] = []
        size = archive.stat().st_size
        try:
            with zipfile.ZipFile(archive) as zf:
                members = [i for i in zf.infolist() if not i.is_dir() and i.filename.lower().endswith(".xml")]
                if not members:
                    raise DartDocumentError(
                        f"OpenDART document.xml ZIP for rcept_no {rcept_no} holds no .xml file "
                        f"({[i.filename for i in zf.infolist()][:10]})"
                    )
                for info in members:
                    name = PurePosixPath(info.filename.replace("\\", "/")).name  # no paths from the archive
                    if not name or name.startswith("."):
                        continue
                    fd, tmp = tempfile.mkstemp(dir=dest_dir, prefix=f".{name}.", suffix=".part")
                    staged.append((Path(tmp), dest_dir / name))
                    with os.fdopen(fd, "wb") as out, zf.open(info) as src:
                        shutil.copyfileobj(src, out, 1 << 20)
                        out.flush()
                        os.fsync(out.fileno())
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, NotImplementedError) as exc:
            for part, _ in staged:
                part.unlink(missing_ok=True)
            raise DartDocumentError(
                f"OpenDART document.xml for rcept_no {rcept_no} is a truncated or corrupt ZIP ({size} bytes): {exc}"
            ) from None
        except BaseException:
            for part, _ in staged:
                part.unlink(missing_ok=True)
            raise
        out_paths = []
        for part, target in staged:
            os.replace(part, target)
            out_paths.append(target)
        return out_paths
