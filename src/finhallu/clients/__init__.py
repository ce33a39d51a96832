"""Network clients for the raw sources: SEC EDGAR and OpenDART.

`fetch_edgar` / `fetch_dart` download filings into a folder the source loaders read as is
(`sec10k` picks up the *.htm/*.html primary documents, `xbrl` the companyfacts JSON beside them,
`dart` the unpacked *.xml documents), so a profile can point `ingest.sources[].paths` at it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Iterable

from finhallu.clients.edgar import (
    EdgarClient,
    EdgarUserAgentError,
    check_user_agent,
    normalize_accession,
    normalize_cik,
)
from finhallu.clients.http import (
    ClientError,
    HttpClient,
    HttpError,
    HttpStatusError,
    RateLimiter,
    RetryError,
    RetryPolicy,
    parse_retry_after,
)
from finhallu.clients.opendart import (
    DartApiError,
    DartDocumentError,
    DartKeyError,
    DartKeyMissingError,
    DartRateLimitError,
    OpenDartClient,
    resolve_api_key,
)

log = logging.getLogger("finhallu.clients")

__all__ = [
    "ClientError",
    "HttpClient",
    "HttpError",
    "HttpStatusError",
    "RateLimiter",
    "RetryError",
    "RetryPolicy",
    "parse_retry_after",
    "EdgarClient",
    "EdgarUserAgentError",
    "check_user_agent",
    "normalize_accession",
    "normalize_cik",
    "DartApiError",
    "DartDocumentError",
    "DartKeyError",
    "DartKeyMissingError",
    "DartRateLimitError",
    "OpenDartClient",
    "resolve_api_key",
    "FetchResult",
    "fetch_edgar",
    "fetch_dart",
]


@dataclass
class FetchResult:
    dest: Path
    documents: list[Path] = field(default_factory=list)  # files a source loader reads
    facts: list[Path] = field(default_factory=list)  # companyfacts JSON (EDGAR)
    filings: list[dict] = field(default_factory=list)  # the filing rows the documents came from


def fetch_edgar(
    cik: int | str,
    user_agent: str,
    dest: str | Path,
    forms: str | Iterable[str] = ("10-K",),
    limit: int | None = 1,
    companyfacts: bool = True,
    **client_options: Any,
) -> FetchResult:
    """Download the `limit` most recent filings of each form (primary documents) and, optionally,
    the companyfacts JSON into `dest`. Files already there with the indexed size are not fetched again.
    `client_options` go to `EdgarClient` (base_url, archives_url, max_rps, retry, timeout ...)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    forms = (forms,) if isinstance(forms, str) else tuple(forms)
    result = FetchResult(dest)
    with EdgarClient(user_agent, **client_options) as client:
        rows = client.filings(cik, form=None, include_older=False)
        for form in forms:
            picked = [r for r in rows if r["form"] == form]
            if limit is not None and len(picked) < limit:
                picked = client.filings(cik, form=form, limit=limit, include_older=True)
            picked = picked[:limit] if limit is not None else picked
            if not picked:
                log.warning("EDGAR CIK %s has no %s filing", cik, form)
            for filing in picked:
                result.documents.append(client.download_primary(cik, filing, dest))
                result.filings.append(filing)
        if companyfacts:
            result.facts.append(client.download_companyfacts(cik, dest))
    return result


def fetch_dart(
    corp_code: str,
    dest: str | Path,
    bgn_de: str | date,
    end_de: str | date,
    pblntf_ty: str | None = "A",
    limit: int | None = 1,
    *,
    api_key: str | None = None,
    **client_options: Any,
) -> FetchResult:
    """Download the `limit` most recent filings of `corp_code` filed between bgn_de and end_de
    (pblntf_ty "A" = 정기공시: periodic reports) and unpack their XML documents into `dest`.
    `client_options` go to `OpenDartClient` (base_url, max_rps, retry, timeout ...)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    result = FetchResult(dest)
    with OpenDartClient(api_key, **client_options) as client:
        for row in client.iter_filings(corp_code, bgn_de, end_de, pblntf_ty):
            if limit is not None and len(result.filings) >= limit:
                break
            result.documents.extend(client.download_document(row["rcept_no"], dest))
            result.filings.append(row)
    if not result.filings:
        log.warning("OpenDART has no filings for corp_code %s between %s and %s", corp_code, bgn_de, end_de)
    return result
