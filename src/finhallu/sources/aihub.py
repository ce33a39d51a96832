"""AI-Hub MRC JSON (금융·법률 set 71610 and its sibling 행정문서 set), folders or the shipped zips.

Both layouts: the 금융·법률 set's singular `answer` key and the 행정문서 set's `answers`.
The two sets number `qa_type` differently; the layout tells which table applies.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Iterator

import lxml.html

from finhallu.sources import Block, LoadedDoc, Quarantined, register_source
from finhallu.sources.encoding import decode_bytes
from finhallu.sources.tables import grid_to_markdown, span

# 금융·법률 MRC (singular `answer`): 1 정답경계, 2 YesNo, 3 Table, 4 다지선다, 5 절차
FIN_LEGAL_QA_TYPES = {1: "span", 2: "yesno", 3: "table", 4: "multiple_choice", 5: "procedure"}
# 행정문서 MRC (`answers`): 1 span, 3 table, 5 text entailment (yes/no), 6 multiple choice, 7 unanswerable
ADMIN_QA_TYPES = {1: "span", 2: "span", 3: "table", 4: "span", 5: "entailment", 6: "multiple_choice", 7: "unanswerable"}

_PUA = re.compile("[\ue000-\uf8ff]")
_TABLE = re.compile(r"<table\b.*?</table>", re.IGNORECASE | re.DOTALL)
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)

TEST_INSTITUTIONS = ("금융감독원", "한국소비자원")  # K-FinHallu's held-out institutions


def html_table_to_markdown(fragment: str) -> str:
    root = lxml.html.fragment_fromstring(fragment, create_parent="div")
    rows = []
    for tr in root.iter("tr"):
        cells = []
        for td in tr:
            if td.tag not in ("td", "th"):
                continue
            text = _BR.sub(" ", lxml.html.tostring(td, encoding="unicode", method="text") or "")
            cells.append((text, span(td.get("rowspan")), span(td.get("colspan"))))
        rows.append(cells)
    return grid_to_markdown(rows)


def clean_context(text: str) -> tuple[str, bool]:
    """`<br>` -> newline, `<table>` HTML -> Markdown table, private-use chars removed."""
    has_table = bool(_TABLE.search(text))
    text = _TABLE.sub(lambda m: "\n" + html_table_to_markdown(_BR.sub(" ", m.group(0))) + "\n", text)
    text = _BR.sub("\n", text)
    text = _PUA.sub("", text)
    return text, has_table


def _locate(context: str, needle: str | None, start: int | None) -> tuple[int | None, bool]:
    """Offset of needle in the cleaned context: the given one if it still holds, else the nearest match."""
    if not needle:
        return None, False
    if start is not None and context[start : start + len(needle)] == needle:
        return start, False
    hits = [m.start() for m in re.finditer(re.escape(needle), context)]
    if not hits:
        return None, True
    best = min(hits, key=lambda h: abs(h - (start or 0)))
    return best, True


def _iter_json_payloads(path: Path) -> Iterator[tuple[str, bytes | Exception]]:
    if path.suffix.lower() == ".zip":
        try:
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if info.filename.lower().endswith(".json"):
                        try:
                            yield f"{path}!{info.filename}", zf.read(info)
                        except Exception as exc:  # truncated member, bad CRC
                            yield f"{path}!{info.filename}", exc
        except zipfile.BadZipFile as exc:
            yield str(path), exc
    else:
        yield str(path), path.read_bytes()


class BadField(ValueError):
    """One field of one QA record cannot be read; the record is quarantined naming it."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


_TRUE, _FALSE = {"true", "1", "yes", "y"}, {"false", "0", "no", "n", ""}


def strict_bool(value, field: str) -> bool:
    """JSON booleans, 0/1 and the strings "true"/"false" — never Python truthiness ("false" is false)."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise BadField(field, f"`{field}` is {value!r}, not a boolean")


def _offset(value) -> int | None:
    """A character offset: an int (or a digit string); anything else is recomputed from the text."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _optional_text(value, field: str) -> str | None:
    if value is None or isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return None if value is None else str(value)
    raise BadField(field, f"`{field}` is a {type(value).__name__}, not text")


def _answer_of(qa: dict) -> dict:
    ans = qa.get("answer") if "answer" in qa else qa.get("answers")
    if isinstance(ans, list):  # SQuAD-style list of answers: the first is canonical
        ans = ans[0] if ans else {}
    if ans is None:
        return {}
    if not isinstance(ans, dict):
        raise BadField("answer", f"`answer` is a {type(ans).__name__}, not an object")
    return ans


def _qa_row(doc_id: str, block_id: str, context: str, qa: dict, fin_legal: bool) -> dict:
    ans = _answer_of(qa)
    flags: list[str] = []
    qa_type = qa.get("qa_type")
    if isinstance(qa_type, str) and qa_type.strip().isdigit():
        qa_type = int(qa_type)
    table = FIN_LEGAL_QA_TYPES if fin_legal else ADMIN_QA_TYPES
    kind = table.get(qa_type, "unknown") if isinstance(qa_type, int) else "unknown"
    if kind == "unknown":
        flags.append(f"unknown_qa_type:{qa_type}")
    is_impossible = strict_bool(qa.get("is_impossible"), "is_impossible")
    if is_impossible:
        kind = "unanswerable"
    text = _optional_text(ans.get("text"), "answer.text")
    text = _PUA.sub("", text) if text is not None else None
    clue = _optional_text(ans.get("clue_text"), "answer.clue_text")
    clue = _PUA.sub("", _BR.sub("\n", clue)) if clue else None
    clue_start, clue_moved = _locate(context, clue, _offset(ans.get("clue_start")))
    answer_start = None
    if not is_impossible and text and kind not in ("yesno", "entailment"):
        answer_start, moved = _locate(context, text, _offset(ans.get("answer_start")))
        if answer_start is None:
            flags.append("answer_not_in_context")
        elif moved:
            flags.append("answer_offset_recomputed")
    if clue and clue_start is None:
        flags.append("clue_not_in_context")
    elif clue and clue_moved:
        flags.append("clue_offset_recomputed")
    options = ans.get("options")
    return {
        "qa_id": f"{doc_id}/{qa.get('question_id')}",
        "doc_id": doc_id,
        "block_id": block_id,
        "qa_type": qa_type if isinstance(qa_type, int) else None,
        "qa_kind": kind,
        "question": (qa.get("question") or "").strip(),
        "answer": text,
        "answer_start": answer_start,
        "clue_text": clue,
        "clue_start": clue_start,
        "is_impossible": is_impossible,
        "options": [str(o) for o in options] if isinstance(options, list) else None,
        "flags": flags,
    }


@register_source("aihub", patterns=("*.json", "*.zip"), test_institutions=TEST_INSTITUTIONS, langs=("ko",))
def load_aihub(path: Path) -> Iterator[LoadedDoc | Quarantined]:
    for origin, payload in _iter_json_payloads(path):
        if isinstance(payload, Exception):
            yield Quarantined("aihub", origin, None, None, f"cannot read archive member: {payload}")
            continue
        try:
            data = json.loads(decode_bytes(payload, ("utf-8",))[0])
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            yield Quarantined("aihub", origin, None, None, f"malformed JSON: {exc}")
            continue
        docs = data.get("data") if isinstance(data, dict) else None
        if not isinstance(docs, list):
            yield Quarantined("aihub", origin, None, "data", "no `data` list of documents at the top level")
            continue
        for i, doc in enumerate(docs):
            try:
                yield from _load_doc(origin, i, doc)
            except Exception as exc:  # one unreadable document must not cost the file's others
                doc_id = doc.get("doc_id") if isinstance(doc, dict) else None
                yield Quarantined(
                    "aihub", origin, f"data[{i}]" + (f" doc_id={doc_id}" if doc_id else ""), None, f"{type(exc).__name__}: {exc}"
                )


def _load_doc(origin: str, index: int, doc) -> Iterator[LoadedDoc | Quarantined]:
    record = f"data[{index}]"
    if not isinstance(doc, dict):
        yield Quarantined("aihub", origin, record, None, "document is not an object")
        return
    doc_id = doc.get("doc_id")
    record = f"data[{index}] doc_id={doc_id}" if doc_id else record
    for fld in ("doc_id", "doc_source", "paragraphs"):
        if not doc.get(fld):
            yield Quarantined("aihub", origin, record, fld, f"required field `{fld}` is missing or empty")
            return
    assert doc_id  # checked with the required fields
    blocks, qas = [], []
    for j, para in enumerate(doc["paragraphs"]):
        ctx_raw = para.get("context") if isinstance(para, dict) else None
        if not isinstance(ctx_raw, str) or not ctx_raw.strip():
            yield Quarantined("aihub", origin, f"{record} paragraphs[{j}]", "context", "empty or missing context")
            continue
        context, has_table = clean_context(ctx_raw)
        block_id = f"{doc_id}-{para.get('context_id') or f'P{j + 1}'}"
        blocks.append(Block(block_id, doc.get("doc_title") or "", "table" if has_table else "text", context))
        for k, qa in enumerate(para.get("qas") or []):
            if not isinstance(qa, dict) or not qa.get("question"):
                yield Quarantined("aihub", origin, f"{record} paragraphs[{j}].qas[{k}]", "question", "QA without a question")
                continue
            try:
                qas.append(_qa_row(doc_id, block_id, context, qa, fin_legal="answer" in qa))
            except BadField as exc:
                yield Quarantined(
                    "aihub", origin, f"{record} paragraphs[{j}].qas[{k}] question_id={qa.get('question_id')}", exc.field, str(exc)
                )
    if not blocks:
        yield Quarantined("aihub", origin, record, "paragraphs", "document has no usable paragraph")
        return
    published = doc.get("doc_published")
    cls = doc.get("doc_class") or {}
    yield LoadedDoc(
        doc_id=str(doc_id),
        source="aihub",
        institution=str(doc["doc_source"]).strip(),
        lang="ko",
        title=(doc.get("doc_title") or "").strip() or str(doc_id),
        doc_type=str(cls.get("code") or cls.get("class") or "mrc"),
        published=str(published) if published else None,
        source_path=origin,
        blocks=blocks,
        qas=qas,
        category=str(cls.get("class")) if cls.get("class") else None,
    )
