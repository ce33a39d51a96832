"""Loopback stand-in for OpenDART (`/api/list.json`, `/api/document.xml`).

Keys: `valid_keys` answer normally, `suspended_keys` get 011, any other key 010, a missing
key 010 too (the real API's behaviour). `list.json` pages `rows` by page_no/page_count and
filters by corp_code; `statuses` scripts the next answers' status (e.g. ["020", "020"]).
`document.xml` serves `documents[rcept_no]` (bytes, normally a ZIP) or 014 as JSON.
"""

from __future__ import annotations

import math
from collections import deque

from edgar_stub import LoopbackServer, Recorded, Response, json_response

MESSAGES = {
    "000": "정상",
    "010": "등록되지 않은 키입니다.",
    "011": "사용할 수 없는 키입니다. 오픈API에 등록되었으나, 일시적으로 사용 중지된 키를 통하여 검색하는 경우 발생합니다.",
    "012": "접근할 수 없는 IP입니다.",
    "013": "조회된 데이타가 없습니다.",
    "014": "파일이 존재하지 않습니다.",
    "020": "요청 제한을 초과하였습니다.",
    "100": "필드의 부적절한 값입니다.",
}


def status_body(status: str) -> Response:
    return json_response({"status": status, "message": MESSAGES.get(status, "정의되지 않은 오류가 발생하였습니다.")})


class DartStub(LoopbackServer):
    def __init__(self, valid_keys=("test-key-0123456789abcdef0123456789abcdef",), suspended_keys=()):
        super().__init__()
        self.valid_keys = set(valid_keys)
        self.suspended_keys = set(suspended_keys)
        self.rows: list[dict] = []
        self.statuses: deque[str] = deque()
        self.documents: dict[str, bytes] = {}
        self.route("/api/list.json", self._list)
        self.route("/api/document.xml", self._document)

    @property
    def base_url(self) -> str:
        return f"{self.url}/api"

    def _key_problem(self, rec: Recorded) -> Response | None:
        key = rec.query.get("crtfc_key", "")
        if key in self.suspended_keys:
            return status_body("011")
        if key not in self.valid_keys:
            return status_body("010")
        if self.statuses:
            return status_body(self.statuses.popleft())
        return None

    def _list(self, rec: Recorded) -> Response:
        problem = self._key_problem(rec)
        if problem:
            return problem
        rows = [r for r in self.rows if not rec.query.get("corp_code") or r["corp_code"] == rec.query["corp_code"]]
        if not rows:
            return status_body("013")
        page_no = int(rec.query.get("page_no", 1))
        page_count = int(rec.query.get("page_count", 10))
        total_page = math.ceil(len(rows) / page_count)
        if page_no > total_page:
            return status_body("013")
        chunk = rows[(page_no - 1) * page_count : page_no * page_count]
        return json_response(
            {
                "status": "000",
                "message": "정상",
                "page_no": page_no,
                "page_count": page_count,
                "total_count": len(rows),
                "total_page": total_page,
                "list": chunk,
            }
        )

    def _document(self, rec: Recorded) -> Response:
        problem = self._key_problem(rec)
        if problem:
            return problem
        body = self.documents.get(rec.query.get("rcept_no", ""))
        if body is None:
            return status_body("014")
        return (
            200,
            {
                "Content-Type": "application/x-msdownload",
                "Content-Disposition": f'attachment; filename="{rec.query["rcept_no"]}.zip"',
            },
            body,
        )
