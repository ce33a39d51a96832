"""Source loaders against the real fixtures in ../shared/data and the bundled demo corpus.

Real-fixture tests are marked `realdata` and find the files through `conftest.fixtures_dir()`
(the `real_data` fixture skips only where the folder is absent). Fixture files are read in
place or copied into tmp_path at test time, never into the repository.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import ROOT, fixtures_dir
from finhallu.sources import LoadedDoc, Quarantined, get_loader

DEMO = ROOT / "src" / "finhallu" / "demo"
PUA = re.compile("[\ue000-\uf8ff]")
SEP_ROW = re.compile(r"^\|(?: --- \|)+$")
ITEM_SECTION = re.compile(r"^Item (\w+)\.(?: |$)")
HEADING_LIKE = re.compile(r"^\s*item\s*\d{1,2}[a-c]?\b", re.IGNORECASE)


# --------------------------------------------------------------------------- helpers


def load_all(source: str, path: Path) -> tuple[list[LoadedDoc], list[Quarantined]]:
    docs, quarantined = [], []
    for item in get_loader(source).load(path):
        (quarantined if isinstance(item, Quarantined) else docs).append(item)
    return docs, quarantined


def load_folder(source: str, folder: Path) -> tuple[list[LoadedDoc], list[Quarantined]]:
    """Every file the loader's patterns select in folder, as ingest walks a source folder."""
    files = sorted({f for pat in get_loader(source).patterns for f in folder.rglob(pat)})
    docs, quarantined = [], []
    for f in files:
        d, q = load_all(source, f)
        docs += d
        quarantined += q
    return docs, quarantined


@lru_cache(maxsize=None)
def load_one(source: str, path: str) -> LoadedDoc:
    docs, quarantined = load_all(source, Path(path))
    assert not quarantined, quarantined
    assert len(docs) == 1, [d.doc_id for d in docs]
    return docs[0]


def doc_sig(doc: LoadedDoc) -> tuple:
    """Everything a loader produces except where it read the document from."""
    return (
        doc.doc_id,
        doc.institution,
        doc.title,
        doc.doc_type,
        doc.published,
        [(b.block_id, b.section_path, b.kind, b.text) for b in doc.blocks],
        doc.qas,
    )


def items(doc: LoadedDoc) -> dict[str, dict]:
    """Item number -> {'section': path, 'blocks': [...], 'text': joined text} (in document order)."""
    out: dict[str, dict] = {}
    order: list[str] = []
    for b in doc.blocks:
        m = ITEM_SECTION.match(b.section_path)
        assert m, f"block outside an Item section: {b.section_path!r}"
        item = m.group(1)
        if item not in out:
            out[item] = {"section": b.section_path, "blocks": []}
            order.append(item)
        else:
            assert order[-1] == item, f"Item {item} is not contiguous (after {order[-1]})"
        out[item]["blocks"].append(b)
    for v in out.values():
        v["text"] = "\n".join(b.text for b in v["blocks"])
    return out


def markdown_header_ok(lines: list[str], i: int) -> bool:
    """lines[i] is a `| a | b |` header row followed by a `| --- | --- |` row of the same width."""
    if i + 1 >= len(lines):
        return False
    head, sep = lines[i], lines[i + 1]
    if not (head.startswith("| ") and head.endswith(" |") and SEP_ROW.match(sep)):
        return False
    return head.count(" | ") + 1 == sep.count("---")


def strip_tags(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def aihub_dir() -> Path:
    return fixtures_dir() / "aihub-mrc"


def tl_files() -> list[Path]:
    return sorted(aihub_dir().glob("TL_*.json"))


def sec_file(name: str) -> str:
    return str(fixtures_dir() / "sec10k" / "html" / name)


DART_XML = "dart/document-xml/dart-20220816001711.xhml"


# --------------------------------------------------------------------------- 1. AI-Hub (real sample)


@pytest.mark.realdata
def test_aihub_fixture_set_present(real_data):
    names = {f.name for f in (real_data / "aihub-mrc").glob("TL_*.json")}
    assert {
        "TL_multiple_choice.json",
        "TL_span_extraction.json",
        "TL_tableqa.json",
        "TL_text_entailment.json",
        "TL_unanswerable.json",
    } <= names


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name",
    ["TL_multiple_choice.json", "TL_span_extraction.json", "TL_tableqa.json", "TL_text_entailment.json", "TL_unanswerable.json"],
)
def test_aihub_tl_loads_every_qa(real_data, name):
    path = real_data / "aihub-mrc" / name
    raw = json.loads(path.read_text(encoding="utf-8"))
    docs, quarantined = load_all("aihub", path)
    assert quarantined == []
    assert [d.doc_id for d in docs] == [d["doc_id"] for d in raw["data"]]

    raw_qas = {}
    for rdoc in raw["data"]:
        for para in rdoc["paragraphs"]:
            for qa in para["qas"]:
                raw_qas[f"{rdoc['doc_id']}/{qa['question_id']}"] = (qa, rdoc, para)
    rows = [qa for d in docs for qa in d.qas]
    assert len(rows) == len(raw_qas) > 0
    assert {r["qa_id"] for r in rows} == set(raw_qas)

    blocks = {b.block_id: b for d in docs for b in d.blocks}
    for d, rdoc in zip(docs, raw["data"]):
        assert d.source == "aihub" and d.lang == "ko"
        assert d.institution == rdoc["doc_source"]
        assert len(d.blocks) == len(rdoc["paragraphs"])
        for b in d.blocks:
            assert "<br" not in b.text.lower() and "<table" not in b.text.lower() and "<td" not in b.text.lower()
            assert not PUA.search(b.text), b.block_id

    for row in rows:
        qa, rdoc, para = raw_qas[row["qa_id"]]
        ans = qa.get("answers") or {}
        block = blocks[row["block_id"]]
        assert row["doc_id"] == rdoc["doc_id"]
        assert row["question"] == qa["question"].strip()
        assert row["is_impossible"] is bool(qa.get("is_impossible"))
        if qa.get("is_impossible"):
            assert row["qa_kind"] == "unanswerable"
            assert row["answer_start"] is None
            continue
        if isinstance(ans.get("options"), list):
            assert row["options"] == [str(o) for o in ans["options"]]
            assert row["qa_kind"] == "multiple_choice"
        text = PUA.sub("", str(ans.get("text") or ""))
        if text and text in block.text and row["qa_kind"] not in ("yesno", "entailment"):
            s = row["answer_start"]
            assert s is not None, row
            assert block.text[s : s + len(text)] == text, row
        clue = ans.get("clue_text")
        if clue:
            clue = PUA.sub("", re.sub(r"<br\s*/?>", "\n", clue, flags=re.I))
            if clue in block.text:
                s = row["clue_start"]
                assert s is not None, row
                assert block.text[s : s + len(clue)] == clue, row
                assert "clue_not_in_context" not in row["flags"]


@pytest.mark.realdata
def test_aihub_kinds_and_options(real_data):
    by_file = {f.name: [qa for d in load_all("aihub", f)[0] for qa in d.qas] for f in tl_files()}
    assert {q["qa_kind"] for q in by_file["TL_unanswerable.json"]} == {"unanswerable"}
    assert {q["qa_kind"] for q in by_file["TL_multiple_choice.json"]} == {"multiple_choice"}
    assert all(q["options"] and len(q["options"]) >= 2 for q in by_file["TL_multiple_choice.json"])
    assert {q["qa_kind"] for q in by_file["TL_span_extraction.json"]} == {"span"}
    assert {q["qa_kind"] for q in by_file["TL_tableqa.json"]} == {"table"}
    assert {q["qa_kind"] for q in by_file["TL_text_entailment.json"]} == {"entailment"}
    # the sample's unanswerable items carry a plausible text: it is kept, but never located
    unans = by_file["TL_unanswerable.json"]
    assert all(q["answer"] and q["answer_start"] is None for q in unans)
    # span answers in this sample are all present in their context
    assert all(q["answer_start"] is not None for q in by_file["TL_span_extraction.json"])


@pytest.mark.realdata
def test_aihub_table_context_becomes_markdown(real_data):
    path = real_data / "aihub-mrc" / "TL_tableqa.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    docs, _ = load_all("aihub", path)
    assert len(docs) == len(raw["data"]) > 0
    for d, rdoc in zip(docs, raw["data"]):
        ctx = rdoc["paragraphs"][0]["context"]
        assert "<table" in ctx.lower()
        block = d.blocks[0]
        assert block.kind == "table"
        lines = block.text.splitlines()
        headers = [i for i, ln in enumerate(lines) if markdown_header_ok(lines, i)]
        assert len(headers) == ctx.lower().count("<table"), block.text
        # the header row is the raw table's first <tr>, colspans expanded into empty cells
        first_tr = re.search(r"<tr>(.*?)</tr>", ctx, re.S | re.I).group(1)
        expected = []
        for attrs, cell in re.findall(r"<td([^>]*)>(.*?)</td>", first_tr, re.S | re.I):
            span = re.search(r"colspan='?\"?(\d+)", attrs)
            expected += [strip_tags(cell)] + [""] * (int(span.group(1)) - 1 if span else 0)
        assert lines[headers[0]] == "| " + " | ".join(expected) + " |"
        # every body row has the header's width
        width = lines[headers[0]].count(" | ") + 1
        i = headers[0] + 2
        while i < len(lines) and lines[i].startswith("|"):
            assert lines[i].count(" | ") + 1 == width, lines[i]
            i += 1


@pytest.mark.realdata
def test_aihub_rowspan_is_expanded(real_data):
    docs, _ = load_all("aihub", real_data / "aihub-mrc" / "TL_tableqa.json")
    text = docs[0].blocks[0].text
    # rowspan=3 cells ("’21. 6. 28. 14:00", "회현") repeat on the rows they cover
    assert "| 3 | ’21. 6. 28. 14:00 | 덕수궁 함녕전 | 회현 |" in text
    assert "| 9 | ’21. 6. 29.10:00 | 해풍부원군윤택영댁재실 | 신당 |" in text


@pytest.mark.realdata
def test_aihub_ts_has_same_documents_without_qas(real_data):
    for tl in tl_files():
        ts = tl.with_name(tl.name.replace("TL_", "TS_", 1))
        tl_docs, _ = load_all("aihub", tl)
        ts_docs, q = load_all("aihub", ts)
        assert q == []
        assert all(d.qas == [] for d in ts_docs)
        assert [(d.doc_id, [b.text for b in d.blocks]) for d in ts_docs] == [
            (d.doc_id, [b.text for b in d.blocks]) for d in tl_docs
        ]


@pytest.mark.realdata
def test_aihub_zip_reads_identically(real_data, tmp_path):
    src = real_data / "aihub-mrc" / "TL_tableqa.json"
    zpath = tmp_path / "TL_tableqa.zip"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("라벨링데이터/TL_tableqa.json", src.read_bytes())
    plain, q1 = load_all("aihub", src)
    zipped, q2 = load_all("aihub", zpath)
    assert q1 == [] and q2 == []
    assert len(zipped) == len(plain) > 0
    assert [doc_sig(d) for d in zipped] == [doc_sig(d) for d in plain]
    assert all(d.source_path == f"{zpath}!라벨링데이터/TL_tableqa.json" for d in zipped)


@pytest.mark.realdata
def test_aihub_broken_files_are_quarantined(real_data, tmp_path):
    good_bytes = (real_data / "aihub-mrc" / "TL_span_extraction.json").read_bytes()
    (tmp_path / "good.json").write_bytes(good_bytes)
    (tmp_path / "broken.json").write_bytes(good_bytes[: len(good_bytes) // 2])
    full = tmp_path / "full.zip"
    with zipfile.ZipFile(full, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("TL_span_extraction.json", good_bytes)
    blob = full.read_bytes()
    full.unlink()
    (tmp_path / "truncated.zip").write_bytes(blob[: len(blob) * 2 // 3])

    docs, quarantined = load_folder("aihub", tmp_path)
    paths = sorted(Path(q.path.split("!")[0]).name for q in quarantined)
    assert paths == ["broken.json", "truncated.zip"], quarantined
    assert all(q.source == "aihub" and q.error for q in quarantined)
    assert any("JSON" in q.error for q in quarantined if q.path.endswith("broken.json"))
    assert docs and {Path(d.source_path).name for d in docs} == {"good.json"}
    assert len(docs) == len(json.loads(good_bytes)["data"])


def test_aihub_corrupt_zip_member_is_quarantined(tmp_path):
    payload = json.dumps(
        {"data": [{"doc_id": "X1", "doc_source": "기관", "paragraphs": [{"context": "본문" * 200}]}]}, ensure_ascii=False
    ).encode()
    zpath = tmp_path / "bad_member.zip"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("a.json", payload)
    blob = bytearray(zpath.read_bytes())
    i = blob.index("본문".encode())
    blob[i : i + 6] = b"XXXXXX"  # data changed under an intact directory: CRC mismatch on read
    zpath.write_bytes(bytes(blob))
    docs, quarantined = load_all("aihub", zpath)
    assert docs == []
    assert len(quarantined) == 1 and quarantined[0].path == f"{zpath}!a.json"


def _fin_legal_doc() -> dict:
    ctx = (
        "전세보증금반환보증은 임대인이 계약 종료 후 보증금을 돌려주지 않을 때 보증기관이 대신 지급하는 상품이다.<br>"
        "가입 절차는 먼저 신청서를 작성하고, 다음으로 서류를 제출한 뒤, 마지막으로 보증료를 납부하는 순서이다.\uf000"
    )
    return {
        "data": [
            {
                "doc_id": "FIN001",
                "doc_title": "전세보증 안내",
                "doc_source": "주택도시보증공사",
                "doc_published": 20240105,
                "doc_class": {"code": "금융"},
                "paragraphs": [
                    {
                        "context_id": "C1",
                        "context": ctx,
                        "qas": [
                            {
                                "question_id": "Q2",
                                "qa_type": 2,
                                "question": "보증기관이 대신 지급하나요?",
                                "is_impossible": False,
                                "answer": {
                                    "text": "예",
                                    "answer_start": None,
                                    "clue_text": "보증기관이 대신 지급하는 상품이다.",
                                    "clue_start": 40,
                                },
                            },
                            {
                                "question_id": "Q4",
                                "qa_type": 4,
                                "question": "가입 절차의 첫 단계는?",
                                "is_impossible": False,
                                "answer": {
                                    "text": "신청서를 작성",
                                    "answer_start": 3,
                                    "clue_text": None,
                                    "clue_start": None,
                                    "options": ["신청서를 작성", "서류를 제출", "보증료를 납부", "계약을 해지"],
                                },
                            },
                            {
                                "question_id": "Q5",
                                "qa_type": 5,
                                "question": "가입 절차는 어떻게 되나요?",
                                "is_impossible": False,
                                "answer": {
                                    "text": "먼저 신청서를 작성하고, 다음으로 서류를 제출한 뒤, 마지막으로 보증료를 납부하는 순서",
                                    "answer_start": 0,
                                    "clue_text": None,
                                    "clue_start": None,
                                },
                            },
                            {
                                "question_id": "Q9",
                                "qa_type": 9,
                                "question": "이 상품의 이름은?",
                                "is_impossible": False,
                                "answer": {"text": "전세보증금반환보증", "answer_start": 0},
                            },
                        ],
                    }
                ],
            }
        ]
    }


def test_aihub_singular_answer_layout(tmp_path):
    path = tmp_path / "TL_fin.json"
    path.write_text(json.dumps(_fin_legal_doc(), ensure_ascii=False), encoding="utf-8")
    docs, quarantined = load_all("aihub", path)
    assert quarantined == []
    (doc,) = docs
    assert doc.institution == "주택도시보증공사" and doc.published == "20240105" and doc.doc_type == "금융"
    (block,) = doc.blocks
    assert block.block_id == "FIN001-C1" and block.kind == "text"
    assert "<br" not in block.text and "\uf000" not in block.text and "\n가입 절차는" in block.text
    qas = {q["qa_id"].split("/")[-1]: q for q in doc.qas}
    assert len(qas) == 4
    assert qas["Q2"]["qa_kind"] == "yesno" and qas["Q2"]["answer"] == "예" and qas["Q2"]["answer_start"] is None
    clue = qas["Q2"]["clue_text"]
    assert block.text[qas["Q2"]["clue_start"] : qas["Q2"]["clue_start"] + len(clue)] == clue
    assert qas["Q4"]["qa_kind"] == "multiple_choice"
    assert qas["Q4"]["options"] == ["신청서를 작성", "서류를 제출", "보증료를 납부", "계약을 해지"]
    s = qas["Q4"]["answer_start"]
    assert s is not None and block.text[s : s + len("신청서를 작성")] == "신청서를 작성"
    assert qas["Q5"]["qa_kind"] == "procedure"
    s = qas["Q5"]["answer_start"]
    assert s is not None and block.text[s:].startswith("먼저 신청서를 작성하고")
    assert "answer_offset_recomputed" in qas["Q5"]["flags"]  # the given 0 no longer held
    assert qas["Q9"]["qa_kind"] == "unknown" and "unknown_qa_type:9" in qas["Q9"]["flags"]
    assert all(not any(f.startswith("unknown_qa_type") for f in q["flags"]) for k, q in qas.items() if k != "Q9")


def test_aihub_incomplete_records_are_quarantined(tmp_path):
    data = {
        "data": [
            {
                "doc_id": "A1",
                "doc_source": "금융감독원",
                "paragraphs": [{"context": "정상 문단입니다.", "qas": [{"question": ""}]}],
            },
            {"doc_id": "A2", "paragraphs": [{"context": "기관 없음"}]},
            {"doc_id": "A3", "doc_source": "한국은행", "paragraphs": [{"context": "   "}]},
            "not an object",
        ]
    }
    path = tmp_path / "x.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    docs, quarantined = load_all("aihub", path)
    assert [d.doc_id for d in docs] == ["A1"] and docs[0].qas == []
    fields = sorted((q.record_id or "", q.field or "") for q in quarantined)
    assert ("data[1] doc_id=A2", "doc_source") in fields
    assert any(r.startswith("data[0]") and f == "question" for r, f in fields)
    assert any(r.startswith("data[2]") and f == "context" for r, f in fields)
    assert any(r == "data[3]" for r, _ in fields)
    assert all(q.path == str(path) for q in quarantined)
    (tmp_path / "nodata.json").write_text('{"Dataset": {}}', encoding="utf-8")
    docs, quarantined = load_all("aihub", tmp_path / "nodata.json")
    assert docs == [] and quarantined[0].field == "data"


# --------------------------------------------------------------------------- 2. SEC 10-K HTML


@pytest.mark.realdata
def test_10k_apple(real_data):
    doc = load_one("sec10k", sec_file("aapl-10-k-2024-11-01.html"))
    assert "Apple" in doc.institution
    assert "320193" in doc.doc_id and doc.doc_id.endswith("2024")
    assert "2024" in (doc.published or "") and "FY2024" in doc.title
    assert doc.lang == "en" and doc.doc_type == "10-K"
    it = items(doc)
    for need in ("1", "1A", "7", "7A", "8"):
        assert need in it, sorted(it)
    assert len(it["1A"]["text"]) > 5000 and len(it["7"]["text"]) > 5000 and len(it["8"]["text"]) > 5000
    assert "net sales" in it["7"]["text"].lower()
    assert it["1A"]["section"].startswith("Item 1A. Risk Factors")
    assert any(b.kind == "table" for b in it["8"]["blocks"])


@pytest.mark.realdata
def test_10k_wells_fargo(real_data):
    doc = load_one("sec10k", sec_file("wfc-10-k-2025-02-25.html"))
    assert "WELLS FARGO" in doc.institution.upper()
    assert "72971" in doc.doc_id and doc.doc_id.endswith("2024")
    it = items(doc)
    for need in ("1", "1A", "7", "7A", "8", "15"):
        assert need in it, sorted(it)
    # The iXBRL header (thousands of context ids) is not body text.
    assert not any("us-gaap:" in b.text for b in doc.blocks)
    # Wells Fargo's 10-K incorporates Items 1A, 7 and 8 from the Annual Report to Shareholders
    # (Exhibit 13): the main document holds only the cross-reference, which must land in its own Item.
    for need in ("1A", "7", "8"):
        assert f"Item {need}" in it[need]["text"] and "Annual Report" in it[need]["text"]
    assert len(it["1"]["text"]) > 20000


@pytest.mark.realdata
def test_10k_nvidia(real_data):
    doc = load_one("sec10k", sec_file("nvda-10-k-2025-02-26.html"))
    assert "NVIDIA" in doc.institution.upper() and "1045810" in doc.doc_id
    it = items(doc)
    for need in ("1", "1A", "7", "8"):
        assert need in it, sorted(it)
    assert len(it["1A"]["text"]) > 5000 and len(it["7"]["text"]) > 5000
    assert "data center" in it["7"]["text"].lower()


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name",
    [
        "aapl-10-k-2024-11-01.html",
        "wfc-10-k-2025-02-25.html",
        "nvda-10-k-2025-02-26.html",
        "parity_gate_10-K_0000950153-99-001234.html",
        "parity_gate_10-K_0001193125-10-073212.html",
    ],
)
def test_10k_item_sections_are_bodies_not_toc(real_data, name):
    doc = load_one("sec10k", sec_file(name))
    it = items(doc)
    order = list(it)
    ranks = [int(re.match(r"\d+", k).group()) * 10 + (ord(k[-1]) - 64 if k[-1].isalpha() else 0) for k in order]
    assert ranks == sorted(ranks), order
    body = it["1"]
    assert len(body["text"]) > 5000
    heading_like = [b.text for b in body["blocks"] if HEADING_LIKE.match(b.text) and len(b.text) < 200]
    assert len(heading_like) <= 2, heading_like[:5]
    assert not HEADING_LIKE.match(body["blocks"][0].text)
    # no Item's blocks contain the heading of a different Item
    for item, v in it.items():
        for b in v["blocks"]:
            m = re.match(r"^\s*item\s*(\d{1,2}[a-c]?)\s*[.:\-–—]\s*[A-Z]", b.text, re.IGNORECASE)
            if m and len(b.text) < 200:
                assert m.group(1).upper() == item, (item, b.text)


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name,company",
    [
        ("parity_gate_10-K_0000950153-99-001234.html", "MEDICIS PHARMACEUTICAL CORPORATION"),
        ("parity_gate_10-K_0001193125-10-073212.html", "GAINSCO, INC."),
    ],
)
def test_10k_plain_html(real_data, name, company):
    doc = load_one("sec10k", sec_file(name))
    assert doc.institution.upper() == company.upper()
    it = items(doc)
    assert len(it) >= 8, sorted(it)
    assert it["1"]["text"].strip() and it["7"]["text"].strip()
    assert doc.published and re.search(r"(19|20)\d\d$", doc.published)


@pytest.mark.realdata
def test_10k_medicis_sub_headings_stay_in_their_item(real_data):
    it = items(load_one("sec10k", sec_file("parity_gate_10-K_0000950153-99-001234.html")))
    # "Item 14 (a)(2):"/"(a)(3):" are sub-headings of Item 14, not a later Item 14
    assert it["14"]["section"].startswith("Item 14. Exhibits, Financial Statement Schedules")
    assert "Item 14(a)(1)" in it["14"]["text"]
    assert "Item 14" not in it["13"]["text"]


@pytest.mark.realdata
def test_10k_gainsco_item_9a_t(real_data):
    it = items(load_one("sec10k", sec_file("parity_gate_10-K_0001193125-10-073212.html")))
    assert "9A" in it, sorted(it)
    assert it["9A"]["section"] == "Item 9A. CONTROLS AND PROCEDURES"
    assert "disclosure controls" in it["9A"]["text"].lower()
    assert "disclosure controls" not in it["9"]["text"].lower()
    assert len(it["1A"]["text"]) > 5000 and len(it["7"]["text"]) > 5000


def test_10k_synthetic_headings(tmp_path):
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20
    html = f"""<html><body>
    <p>ACME WIDGETS CORP (Exact name of registrant as specified in its charter)</p>
    <p>For the fiscal year ended December 31, 2009</p>
    <p>Item 1. Business</p><p>Item 1A. Risk Factors</p><p>Item 7. MD&amp;A</p><p>Item 9A(T). Controls</p>
    <p style="display:none">Item 8. hidden</p>
    <div><b>ITEM 1.</b></div><p>We make widgets. {filler}</p>
    <p>ITEM 1A — RISK FACTORS</p><p>Widgets may break. {filler}</p>
    <p>Item 7: Management's Discussion</p><p>Sales grew. {filler}</p>
    <p>Item 7: Management's Discussion (continued)</p><p>More MD&amp;A. {filler}</p>
    <p>ITEM 9A(T). CONTROLS AND PROCEDURES</p><p>Controls are effective. {filler}</p>
    </body></html>"""
    path = tmp_path / "acme-10k.html"
    path.write_text(html, encoding="utf-8")
    doc = load_one("sec10k", str(path))
    assert doc.institution == "ACME WIDGETS CORP" and doc.published == "December 31, 2009"
    it = items(doc)
    assert list(it) == ["1", "1A", "7", "9A"]
    assert it["1"]["text"].startswith("We make widgets.")
    assert it["7"]["text"].startswith("Sales grew.") and "More MD&A." in it["7"]["text"]
    assert it["9A"]["section"] == "Item 9A. CONTROLS AND PROCEDURES"
    assert "hidden" not in "".join(b.text for b in doc.blocks)


def test_10k_without_items_is_quarantined(tmp_path):
    path = tmp_path / "letter.html"
    path.write_text("<html><body><p>Dear shareholder, thank you.</p></body></html>", encoding="utf-8")
    docs, quarantined = load_all("sec10k", path)
    assert docs == [] and len(quarantined) == 1 and quarantined[0].path == str(path)


# --------------------------------------------------------------------------- 3. DART document XML


@pytest.mark.realdata
def test_dart_fixture_is_cp949_declared_utf8(real_data):
    data = (real_data / DART_XML).read_bytes()
    assert b'encoding="utf-8"' in data[:200].lower()
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")


@pytest.mark.realdata
def test_dart_document(real_data):
    doc = load_one("dart", str(real_data / DART_XML))
    assert doc.institution == "삼성전자주식회사"
    assert doc.lang == "ko" and doc.doc_type == "반기보고서"
    assert "00126380" in doc.doc_id and doc.published == "20220101-20220630"
    assert "cp949" in doc.source_path
    assert not any("\ufffd" in b.text for b in doc.blocks)
    paths = {b.section_path for b in doc.blocks}
    for top in ("II. 사업의 내용", "III. 재무에 관한 사항"):
        sec = [b for b in doc.blocks if b.section_path.split(" > ")[0] == top]
        assert sec, sorted(paths)[:20]
        hangul = sum(1 for ch in "".join(b.text for b in sec) if "\uac00" <= ch <= "\ud7a3")
        assert hangul > 1000
    assert "II. 사업의 내용 > 1. 사업의 개요" in paths
    # Blocks before the first section (cover TOC) are the only ones without a section path.
    first = next(i for i, b in enumerate(doc.blocks) if b.section_path)
    assert all(b.section_path for b in doc.blocks[first:])


@pytest.mark.realdata
def test_dart_tables_have_header_rows(real_data):
    doc = load_one("dart", str(real_data / DART_XML))
    tables = [b for b in doc.blocks if b.kind == "table"]
    assert len(tables) > 500
    good = 0
    for b in tables:
        lines = b.text.splitlines()
        start = 1 if lines and not lines[0].startswith("|") else 0  # unit caption line
        if start:
            assert "단위" in lines[0], lines[0]
        if markdown_header_ok(lines, start) and lines[start].count(" | ") >= 1:
            good += 1
    assert good > 200
    assert any(b.text.startswith("| 부문 | 주 요 제 품 |\n| --- | --- |") for b in tables)


@pytest.mark.realdata
def test_dart_text_goes_to_its_own_section(real_data):
    doc = load_one("dart", str(real_data / DART_XML))
    blk = next(b for b in doc.blocks if b.text.startswith("가. 회사의 법적ㆍ상업적 명칭"))
    assert blk.section_path == "I. 회사의 개요 > 1. 회사의 개요"
    blk = next(b for b in doc.blocks if b.text.startswith("자본금 변동사항은"))
    assert blk.section_path == "I. 회사의 개요 > 3. 자본금 변동사항"


@pytest.mark.realdata
def test_dart_bare_ampersand_and_angle_text_survive(real_data):
    raw = (real_data / DART_XML).read_bytes().decode("cp949")
    doc = load_one("dart", str(real_data / DART_XML))
    text = "\n".join(b.text for b in doc.blocks)
    assert raw.count("R&D") > 100
    assert text.count("R&D") == raw.count("R&D")
    assert text.count("S&P") == raw.count("S&P")
    assert "< TV 시장점유율 추이 >" in text
    assert "<이사ㆍ감사 전체의 보수현황>" in text


def test_dart_bad_inputs_are_quarantined(tmp_path):
    (tmp_path / "notdart.xml").write_text("<?xml version='1.0'?><ROOT><P>x</P></ROOT>", encoding="utf-8")
    (tmp_path / "noname.xml").write_text("<DOCUMENT><BODY><P>본문</P></BODY></DOCUMENT>", encoding="utf-8")
    (tmp_path / "empty.xml").write_text("<DOCUMENT><COMPANY-NAME>가나다</COMPANY-NAME><BODY></BODY></DOCUMENT>", encoding="utf-8")
    docs, quarantined = load_folder("dart", tmp_path)
    assert docs == []
    assert sorted((Path(q.path).name, q.field) for q in quarantined) == [
        ("empty.xml", "BODY"),
        ("noname.xml", "COMPANY-NAME"),
        ("notdart.xml", "DOCUMENT"),
    ]


# --------------------------------------------------------------------------- 4. bundled demo corpus


@lru_cache(maxsize=None)
def demo_corpus() -> tuple[tuple, tuple]:
    docs, quarantined = [], []
    for source, folder in (("aihub", "aihub"), ("sec10k", "sec10k"), ("dart", "dart")):
        d, q = load_folder(source, DEMO / folder)
        docs += d
        quarantined += q
    return tuple(docs), tuple(quarantined)


def test_demo_corpus_files_present():
    assert len(list((DEMO / "aihub").glob("*.json"))) >= 1
    assert len(list((DEMO / "sec10k").glob("*.html"))) >= 1
    assert len(list((DEMO / "dart").glob("*.xml"))) >= 1


def test_demo_corpus_loads_cleanly():
    docs, quarantined = demo_corpus()
    assert quarantined == ()
    ids = [d.doc_id for d in docs]
    assert len(ids) == len(set(ids))
    assert {d.source for d in docs} == {"aihub", "sec10k", "dart"}


def test_demo_aihub():
    docs, _ = demo_corpus()
    ai = [d for d in docs if d.source == "aihub"]
    assert len(ai) >= 30
    inst = Counter(d.institution for d in ai)
    assert len(inst) >= 6 and {"금융감독원", "한국소비자원"} <= set(inst)
    blocks = {b.block_id: b for d in ai for b in d.blocks}
    answerable = [q for d in ai for q in d.qas if not q["is_impossible"]]
    assert len(answerable) >= 100
    for q in answerable:
        block = blocks[q["block_id"]]
        assert q["clue_text"], q["qa_id"]
        assert q["clue_start"] is not None and "clue_not_in_context" not in q["flags"], q["qa_id"]
        assert block.text[q["clue_start"] : q["clue_start"] + len(q["clue_text"])] == q["clue_text"]
        assert "answer_not_in_context" not in q["flags"] or q["qa_kind"] in ("yesno", "multiple_choice"), q
        if q["answer_start"] is not None:
            assert block.text[q["answer_start"] : q["answer_start"] + len(q["answer"])] == q["answer"]
    assert not any(f.startswith("unknown_qa_type") for d in ai for q in d.qas for f in q["flags"])
    for b in blocks.values():
        assert "<br" not in b.text.lower() and "<table" not in b.text.lower() and not PUA.search(b.text)


def test_demo_10k():
    docs, _ = demo_corpus()
    (doc,) = [d for d in docs if d.source == "sec10k"]
    it = items(doc)
    for need in ("1", "1A", "7", "7A", "8"):
        assert need in it, sorted(it)
        assert len(it[need]["text"]) > 500, need
    assert not HEADING_LIKE.match(it["1"]["blocks"][0].text)
    assert not any(HEADING_LIKE.match(b.text) and len(b.text) < 200 for b in it["1"]["blocks"])
    assert "Hanriver" in doc.institution or "HANRIVER" in doc.institution


def test_demo_dart():
    docs, _ = demo_corpus()
    (doc,) = [d for d in docs if d.source == "dart"]
    assert doc.institution == "한강금융지주주식회사"
    tops = {b.section_path.split(" > ")[0] for b in doc.blocks}
    assert "II. 사업의 내용" in tops and "IV. 이사의 경영진단 및 분석의견" in tops
    assert all(b.section_path for b in doc.blocks)
    biz = [b for b in doc.blocks if b.section_path.startswith("II. 사업의 내용")]
    assert any(b.kind == "text" and "종합금융그룹" in b.text for b in biz)
    captioned = [b for b in doc.blocks if b.kind == "table" and b.text.startswith("(단위")]
    assert captioned and all(markdown_header_ok(b.text.splitlines(), 1) for b in captioned)


def test_get_loader_after_direct_module_import():
    # Importing one loader module first must not hide the others from get_loader.
    code = (
        "from finhallu.sources import sec10k\n"
        "from finhallu.sources import get_loader\n"
        "print(sorted(get_loader(n).name for n in ('aihub', 'dart', 'sec10k')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "['aihub', 'dart', 'sec10k']"
