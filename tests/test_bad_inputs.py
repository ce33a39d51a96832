"""A corpus of broken inputs beside good ones, through the real ingest stage: every good record
loads, every bad one is quarantined naming file, record and field, nothing hangs or crashes."""

import json
import os

import polars as pl
import pytest

from finhallu.config import load_config
from finhallu.stages import ingest
from finhallu.stages.base import StageContext
from finhallu.sources.encoding import decode_bytes
from finhallu.sources.tables import MAX_CELLS, grid_to_markdown, span

FILLER = "Revenue grew in every segment and the company expanded its branch network. " * 20
TEN_K = f"""<html><body>
<p>HOSTILE BANCORP (Exact name of registrant as specified in its charter)</p>
<p>For the fiscal year ended December 31, 2024</p>
<p>ITEM 1. BUSINESS</p><p>We take deposits. {FILLER}</p>
<p>ITEM 7. MANAGEMENT'S DISCUSSION</p><p>Net income rose. {FILLER}</p>
<table><tr><td>Net income</td><td>$</td><td>1,200</td></tr></table>
</body></html>"""
DART = """<?xml version="1.0" encoding="utf-8"?>
<DOCUMENT><DOCUMENT-NAME ACODE="11011">사업보고서</DOCUMENT-NAME>
<COMPANY-NAME AREGCIK="00990077">적대적금융주식회사</COMPANY-NAME>
<BODY><SECTION-1><TITLE>I. 회사의 개요</TITLE><P>당사는 은행업을 영위합니다. 자본금은 1,000억원입니다.</P>
<SECTION-2><TITLE>1. 재무</TITLE><P>당기순이익은 500억원입니다.</P></SECTION-2></SECTION-1></BODY></DOCUMENT>
"""


def _qa(qid, **over):
    qa = {
        "question_id": qid,
        "qa_type": 1,
        "question": "예금자보호 한도는 얼마인가요?",
        "is_impossible": False,
        "answer": {
            "text": "1억 원",
            "answer_start": 10,
            "clue_text": "예금자보호 한도는 1억 원입니다.",
            "clue_start": 0,
            "options": None,
        },
    }
    qa.update(over)
    return qa


def _doc(doc_id, qas, **over):
    doc = {
        "doc_id": doc_id,
        "doc_source": "테스트기관",
        "doc_title": f"{doc_id} 문서",
        "paragraphs": [{"context": "예금자보호 한도는 1억 원입니다.", "qas": qas}],
    }
    doc.update(over)
    return doc


def _write_corpus(root):
    aihub, tenk, dart = root / "aihub", root / "sec10k", root / "dart"
    for d in (aihub, tenk, dart):
        d.mkdir()
    # One file, good documents around bad records.
    (aihub / "mixed.json").write_text(
        json.dumps(
            {
                "data": [
                    _doc(
                        "GOOD-1",
                        [
                            _qa("q1"),
                            _qa("q-str-false", is_impossible="false"),
                            _qa("q-maybe", is_impossible="maybe"),
                            _qa("q-ans-str", answer="1억 원"),
                            _qa(
                                "q-offset-junk",
                                answer={
                                    "text": "1억 원",
                                    "answer_start": "abc",
                                    "clue_text": "예금자보호 한도는 1억 원입니다.",
                                    "clue_start": -4,
                                    "options": None,
                                },
                            ),
                        ],
                    ),
                    _doc("BROKEN-PARAS", [], paragraphs=5),
                    "not a document",
                    _doc("GOOD-2", [_qa("q1", qa_type="1")]),
                ]
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    # UTF-16 (with BOM) and hostile table spans.
    hostile = (
        '예금자보호 한도는 1억 원입니다.<table><tr><td rowspan="20000000">a</td><td colspan="999999999">b</td>'
        '<td rowspan="abc" colspan="2px">c</td></tr><tr><td>d</td></tr></table>'
    )
    (aihub / "utf16.json").write_bytes(
        json.dumps(
            {"data": [_doc("UTF16-1", [_qa("q1")], paragraphs=[{"context": hostile, "qas": [_qa("q1")]}])]}, ensure_ascii=False
        ).encode("utf-16")
    )
    os.mkfifo(aihub / "pipe.json")
    (tenk / "hostile-10k-utf16.html").write_bytes(TEN_K.encode("utf-16"))
    (tenk / "truncated-10k.html").write_text(TEN_K[: TEN_K.index("</body>")].replace("HOSTILE", "CUTOFF"), encoding="utf-8")
    (dart / "truncated.xml").write_text(DART[: DART.index("</BODY>")], encoding="utf-8")
    (dart / "good.xml").write_text(DART.replace("00990077", "00990078"), encoding="utf-8")
    return aihub, tenk, dart


@pytest.fixture
def ingested(tmp_path):
    aihub, tenk, dart = _write_corpus(tmp_path)
    cfg = load_config(
        "demo",
        {
            "ingest": {
                "sources": [
                    {"kind": "aihub", "paths": [str(aihub)]},
                    {"kind": "sec10k", "paths": [str(tenk)]},
                    {"kind": "dart", "paths": [str(dart)]},
                ]
            }
        },
    )
    out = ingest.run({}, StageContext(stage="ingest", config=cfg.ingest, seed=1))
    return out, {
        (r["path"].rsplit("/", 1)[-1], r["record_id"] or "", r["field"] or ""): r["error"] for r in out["quarantine"].to_dicts()
    }


def test_good_records_of_a_file_survive_its_bad_ones(ingested):
    out, q = ingested
    docs = set(out["documents"]["doc_id"].to_list())
    assert {"GOOD-1", "GOOD-2"} <= docs and "BROKEN-PARAS" not in docs
    qas = {r["qa_id"]: r for r in out["source_qas"].to_dicts()}
    assert qas["GOOD-1/q-str-false"]["is_impossible"] is False  # "false" is false
    assert qas["GOOD-2/q1"]["qa_kind"] == "span"  # qa_type "1" read as 1
    assert qas["GOOD-1/q-offset-junk"]["answer_start"] == 10  # junk offset recomputed from the text
    assert "GOOD-1/q-maybe" not in qas and "GOOD-1/q-ans-str" not in qas
    maybe = next(k for k in q if "question_id=q-maybe" in k[1])
    assert maybe[0] == "mixed.json" and maybe[2] == "is_impossible" and "maybe" in q[maybe]
    assert "qas[1]" not in maybe[1] and "qas[2]" in maybe[1]  # the record's index in its paragraph
    ans = next(k for k in q if "question_id=q-ans-str" in k[1])
    assert ans[2] == "answer" and "not an object" in q[ans]
    broken = next(k for k in q if "BROKEN-PARAS" in k[1])
    assert broken[1].startswith("data[1]")
    assert any(k[1] == "data[2]" and "not an object" in v for k, v in q.items())


def test_encodings_are_detected_before_structure(ingested):
    out, q = ingested
    docs = out["documents"].filter(pl.col("source") == "sec10k")
    assert "HOSTILE BANCORP" in docs["institution"].to_list()  # UTF-16 10-K: items found, not quarantined
    assert not any(k[0] == "hostile-10k-utf16.html" for k in q)
    utf16 = out["documents"].filter(pl.col("doc_id") == "UTF16-1")
    assert utf16.height == 1


def test_hostile_spans_are_clamped(ingested):
    out, _ = ingested
    text = out["documents"].filter(pl.col("doc_id") == "UTF16-1")["blocks"][0][0]["text"]
    table = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert len(table) == 3  # header, rule, one body row: the 20,000,000-row span stops at the table's end
    assert all(ln.count("|") <= 6 for ln in table)  # empty spanned columns dropped, no million-cell rows


def test_truncated_filings_load_and_are_flagged(ingested):
    out, q = ingested
    assert any(i.startswith("CUTOFF") for i in out["documents"]["institution"].to_list())
    assert any(k[0] == "truncated-10k.html" and k[2] == "file" and "truncated" in v for k, v in q.items())
    assert any(k[0] == "truncated.xml" and k[2] == "file" and "truncated" in v for k, v in q.items())
    assert not any(k[0] == "good.xml" for k in q)


def test_non_regular_files_are_skipped_not_read(ingested):
    _, q = ingested
    assert any(k[0] == "pipe.json" and "not a regular file" in v for k, v in q.items())


def test_a_file_vanishing_mid_ingest_fails_the_stage(tmp_path, monkeypatch):
    folder = tmp_path / "aihub"
    folder.mkdir()
    for name in ("a.json", "b.json"):
        (folder / name).write_text(json.dumps({"data": [_doc(name.upper(), [_qa("q1")])]}), encoding="utf-8")
    real = ingest.get_loader

    class Deleting:
        patterns = real("aihub").patterns

        @staticmethod
        def load(path):
            if path.name == "a.json":
                (folder / "b.json").unlink()  # the operator's `mv` races the build
            return real("aihub").load(path)

    monkeypatch.setattr(ingest, "get_loader", lambda kind: Deleting)
    cfg = load_config("demo", {"ingest": {"sources": [{"kind": "aihub", "paths": [str(folder)]}]}})
    with pytest.raises(ingest.SourceVanished, match="b.json"):
        ingest.run({}, StageContext(stage="ingest", config=cfg.ingest, seed=1))


def test_span_attributes_and_cell_cap():
    assert [span(v) for v in ("3", " 2 ", "2px", "abc", None, "0", "-4")] == [3, 2, 2, 1, 1, 1, 1]
    rows = [[("x", 1, 1000)] for _ in range(MAX_CELLS // 500)]  # twice the cap in spanned cells
    md = grid_to_markdown(rows)
    assert 2 <= len(md.splitlines()) <= MAX_CELLS // 1000 + 2


def test_decode_bytes_reads_marks_and_markless_utf16():
    text = "단위: 백만원 | Net income"
    for enc in ("utf-16", "utf-32", "utf-8-sig", "utf-16-le", "utf-16-be"):
        assert decode_bytes(text.encode(enc), ("utf-8",))[0].lstrip("\ufeff") == text, enc
    assert decode_bytes(text.encode("cp949"), ("utf-8", "cp949")) == (text, "cp949")
    with pytest.raises(UnicodeDecodeError):
        decode_bytes(b"abc\x80\xc3(" * 3, ("utf-8",))
