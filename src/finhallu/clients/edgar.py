"""SEC EDGAR client: submissions, filing lists, filing indexes, primary documents, companyfacts.

SEC's fair-access policy (https://www.sec.gov/os/accessing-edgar-data): declare a User-Agent
with a contact ("Sample Company Name AdminContact@example.com"), send Accept-Encoding
gzip/deflate, and stay at or below 10 requests per second across all SEC hosts. The client
enforces all three; one rate limiter is shared by data.sec.gov and www.sec.gov.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path, PurePosixPath
from typing import Any, Iterable
from urllib.parse import urlsplit

from finhallu.clients.http import ClientError, HttpBacked, HttpClient, RateLimiter

log = logging.getLogger("finhallu.clients")

SEC_MAX_RPS = 10
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_ACCESSION = re.compile(r"^(\d{10})-?(\d{2})-?(\d{6})$")
SEC_403_HINT = (
    "SEC refuses requests without a declared User-Agent (name and contact email) and clients "
    "above 10 requests/second; see https://www.sec.gov/os/accessing-edgar-data"
)


class EdgarUserAgentError(ClientError, ValueError):
    """The User-Agent does not identify the requester with a contact, as SEC requires."""


def check_user_agent(user_agent: str | None) -> str:
    ua = (user_agent or "").strip()
    if not ua or not _EMAIL.search(ua):
        raise EdgarUserAgentError(
            f"SEC EDGAR requires a User-Agent naming you and a contact email, e.g. "
            f"'Sample Company Name admin@example.com'; got {user_agent!r}. "
            f"See https://www.sec.gov/os/accessing-edgar-data"
        )
    if any(c in ua for c in "\r\n"):
        raise EdgarUserAgentError("the User-Agent must be a single line")
    return ua


def normalize_cik(cik: int | str) -> int:
    """1318605, '0001318605', 'CIK0001318605' -> 1318605."""
    text = str(cik).strip().upper()
    text = text[3:] if text.startswith("CIK") else text
    if not text.isdigit() or not 0 < int(text) < 10**10:
        raise ValueError(f"not a CIK (up to 10 digits): {cik!r}")
    return int(text)


def cik10(cik: int | str) -> str:
    return f"{normalize_cik(cik):010d}"


def normalize_accession(accession: str) -> str:
    """'000095017022000796' or '0000950170-22-000796' -> '0000950170-22-000796'."""
    m = _ACCESSION.match(str(accession).strip())
    if not m:
        raise ValueError(f"not an EDGAR accession number (0000950170-22-000796): {accession!r}")
    return "-".join(m.groups())


def _same_sec_site(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == "sec.gov" or host.endswith(".sec.gov")


class EdgarClient(HttpBacked):
    """EDGAR over HTTPS. `http_options` go to `HttpClient` (retry, timeout, clock, sleep, now, rng, transport)."""

    def __init__(
        self,
        user_agent: str,
        base_url: str = "https://data.sec.gov",
        archives_url: str = "https://www.sec.gov",
        max_rps: float = SEC_MAX_RPS,
        **http_options: Any,
    ):
        self.user_agent = check_user_agent(user_agent)
        self.base_url = base_url.rstrip("/")
        self.archives_url = archives_url.rstrip("/")
        if max_rps <= 0:
            raise ValueError("max_rps must be positive")
        if max_rps > SEC_MAX_RPS and (_same_sec_site(self.base_url) or _same_sec_site(self.archives_url)):
            raise ValueError(f"SEC allows at most {SEC_MAX_RPS} requests/second; max_rps={max_rps} is too high")
        self.max_rps = max_rps
        http_options.setdefault("status_hints", {403: SEC_403_HINT})
        clock = http_options.get("clock")
        sleep = http_options.get("sleep")
        limiter = RateLimiter(max_rps, **({"clock": clock} if clock else {}), **({"sleep": sleep} if sleep else {}))
        hosts = {urlsplit(u).netloc.lower() for u in (self.base_url, self.archives_url)}
        self.http = HttpClient(
            headers={"User-Agent": self.user_agent, "Accept-Encoding": "gzip, deflate"},
            rate_limits={h: limiter for h in hosts},
            default_rps=max_rps,
            **http_options,
        )

    # -- JSON APIs

    def submissions(self, cik: int | str) -> dict:
        """The submissions JSON (company facts and `filings.recent`) for a CIK."""
        return self.http.get_json(f"{self.base_url}/submissions/CIK{cik10(cik)}.json")

    def companyfacts(self, cik: int | str) -> dict:
        """All XBRL facts a company reported (`/api/xbrl/companyfacts/CIK##########.json`)."""
        return self.http.get_json(self.companyfacts_url(cik))

    def companyfacts_url(self, cik: int | str) -> str:
        return f"{self.base_url}/api/xbrl/companyfacts/CIK{cik10(cik)}.json"

    def download_companyfacts(self, cik: int | str, dest_dir: str | Path) -> Path:
        """Save the companyfacts JSON as `companyfacts_CIK##########.json` (streamed, atomic)."""
        dest = Path(dest_dir) / f"companyfacts_CIK{cik10(cik)}.json"
        self.http.download(self.companyfacts_url(cik), dest)
        return dest

    # -- filings

    def filings(
        self, cik: int | str, form: str | Iterable[str] | None = "10-K", limit: int | None = None, include_older: bool = False
    ) -> list[dict]:
        """Filings newest first from `filings.recent`: dicts with accession, filing_date, report_date,
        form, primary_document and url (of the primary document).

        form: one form type, several, or None for all (exact match: "10-K" excludes "10-K/A").
        include_older: also read the older `filings.files` pages when `recent` has too few.
        """
        forms = None if form is None else ({form} if isinstance(form, str) else set(form))
        cik_int = normalize_cik(cik)
        sub = self.submissions(cik_int)
        pages = [sub.get("filings", {}).get("recent", {})]
        out: list[dict] = []

        def take(page: dict) -> bool:
            cols = ("accessionNumber", "filingDate", "reportDate", "form", "primaryDocument")
            missing = [c for c in cols if c not in page]
            if missing:
                raise ClientError(f"EDGAR submissions for CIK {cik_int}: filings arrays lack {missing}")
            for acc, fdate, rdate, f, doc in zip(*(page[c] for c in cols)):
                if forms is not None and f not in forms:
                    continue
                if not doc:
                    continue  # paper filings have no primary document
                out.append(
                    {
                        "accession": acc,
                        "filing_date": fdate or None,
                        "report_date": rdate or None,
                        "form": f,
                        "primary_document": doc,
                        "url": self.document_url(cik_int, acc, doc),
                    }
                )
                if limit is not None and len(out) >= limit:
                    return True
            return False

        if take(pages[0]):
            return out
        if include_older:
            for f in sub.get("filings", {}).get("files", []):
                name = f.get("name", "")
                if not re.fullmatch(r"CIK\d{10}-submissions-\d+\.json", name):
                    continue
                if take(self.http.get_json(f"{self.base_url}/submissions/{name}")):
                    break
        return out

    def filing_dir_url(self, cik: int | str, accession: str) -> str:
        return f"{self.archives_url}/Archives/edgar/data/{normalize_cik(cik)}/{normalize_accession(accession).replace('-', '')}"

    def document_url(self, cik: int | str, accession: str, name: str) -> str:
        return f"{self.filing_dir_url(cik, accession)}/{name.lstrip('/')}"

    def filing_index(self, cik: int | str, accession: str) -> dict:
        """The filing folder's `index.json` ({"directory": {"item": [{"name", "size", ...}]}})."""
        return self.http.get_json(f"{self.filing_dir_url(cik, accession)}/index.json")

    def _indexed_size(self, cik: int | str, accession: str, name: str) -> int | None:
        try:
            items = self.filing_index(cik, accession).get("directory", {}).get("item", [])
        except ClientError as exc:  # no index: download again rather than fail
            log.info("EDGAR index unavailable (%s): downloading again", exc)
            return None
        for item in items:
            if item.get("name") == name:
                size = str(item.get("size", "")).strip()
                return int(size) if size.isdigit() else None
        return None

    def download_primary(self, cik: int | str, filing: dict, dest_dir: str | Path, filename: str | None = None) -> Path:
        """Save the filing's primary document into dest_dir as `<cik>-<accession>-<name>` (atomic).

        When the file is already there with the size the filing index lists, nothing is downloaded.
        """
        doc = filing["primary_document"]
        accession = normalize_accession(filing["accession"])
        base = PurePosixPath(doc).name
        if not base or base in (".", ".."):
            raise ValueError(f"bad primary document name {doc!r}")
        dest = Path(dest_dir) / (filename or f"{normalize_cik(cik)}-{accession}-{base}")
        if dest.exists():
            size = self._indexed_size(cik, accession, PurePosixPath(doc).name)
            if size is not None and size == dest.stat().st_size:
                log.info("EDGAR %s already saved (%d bytes): skipped", dest.name, size)
                return dest
        self.http.download(self.document_url(cik, accession, doc), dest)
        return dest

    def __repr__(self) -> str:
        return f"EdgarClient(user_agent={self.user_agent!r}, base_url={self.base_url!r}, max_rps={self.max_rps})"
