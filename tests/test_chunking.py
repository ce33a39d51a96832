import polars as pl

from finhallu.stages.chunk import ChunkConfig
from finhallu.schemas.contracts import CONTRACTS
from finhallu.stages import chunk as chunking
from finhallu.stages.base import StageContext
from finhallu.text.sentences import split
from finhallu.text.tokenize import approx_count


def _docs(blocks, source="dart", lang="ko"):
    return pl.DataFrame(
        [
            {
                "doc_id": "d1",
                "source": source,
                "institution": "기관",
                "lang": lang,
                "title": "t",
                "doc_type": "사업보고서",
                "published": None,
                "source_path": "p",
                "split": "train",
                "blocks": blocks,
            }
        ]
    )


def _chunk(docs, max_tokens=60):
    ctx = StageContext(stage="chunk", config=ChunkConfig(max_tokens=max_tokens), seed=1)
    return chunking.run({"documents": docs}, ctx)["passages"]


KO = (
    "예금자보호 한도는 2025년 9월 1일부터 1억 원으로 올랐습니다. 이전 한도는 5천만 원이었다 이에 따라 보호 범위가 넓어졌다. "
    "퇴직연금과 연금저축은 별도로 각각 1억 원까지 보호됩니다. 외화예금도 보호 대상에 포함되지만 투자상품은 제외됩니다. "
) * 3


def test_long_korean_text_splits_at_sentence_boundaries_under_the_limit():
    p = _chunk(_docs([{"block_id": "b1", "section_path": "II. 사업의 내용", "kind": "text", "text": KO}]))
    assert p.height > 1
    sents = set(split(KO, "ko"))
    for row in p.iter_rows(named=True):
        assert row["token_count"] <= 60 and row["token_count"] == approx_count(row["text"])
        assert KO[row["char_start"] : row["char_start"] + len(row["text"])] == row["text"]
        assert set(split(row["text"], "ko")) <= sents  # pieces are whole sentences of the block
        assert row["chunk_total"] == p.height and row["tokenizer"].startswith("approx")
    assert [r["chunk_index"] for r in p.iter_rows(named=True)] == list(range(p.height))


def test_big_table_splits_by_row_groups_repeating_the_header():
    rows = "\n".join(f"| 항목{i} | {i * 1000:,} | {i * 900:,} |" for i in range(40))
    table = "(단위 : 백만원)\n| 구 분 | 제12기 | 제11기 |\n| --- | --- | --- |\n" + rows
    p = _chunk(_docs([{"block_id": "t1", "section_path": "III. 재무에 관한 사항", "kind": "table", "text": table}]), 120)
    assert p.height > 1
    for text in p["text"].to_list():
        lines = text.splitlines()
        assert lines[0] == "(단위 : 백만원)" and lines[1] == "| 구 분 | 제12기 | 제11기 |" and lines[2].startswith("| ---")
    body = [ln for t in p["text"].to_list() for ln in t.splitlines()[3:]]
    assert body == rows.splitlines()  # every row once, in order


def test_heading_joins_following_paragraph_and_ids_are_stable():
    blocks = [
        {"block_id": "b1", "section_path": "Item 7. MD&A", "kind": "text", "text": "Results of Operations"},
        {
            "block_id": "b2",
            "section_path": "Item 7. MD&A",
            "kind": "text",
            "text": "Net interest income rose 4% to $1.2 billion in 2024.",
        },
        {"block_id": "b3", "section_path": "Item 8. Financial Statements", "kind": "text", "text": "See the notes."},
    ]
    docs = _docs(blocks, source="sec10k", lang="en")
    p1, p2 = _chunk(docs, 1000), _chunk(docs, 1000)
    texts = p1["text"].to_list()
    assert "Results of Operations\nNet interest income rose" in texts[0]
    assert p1.height == 2  # the heading did not become a passage; sections are not merged
    assert p1["passage_id"].to_list() == p2["passage_id"].to_list()
    changed = _chunk(
        _docs([{**blocks[0]}, {**blocks[1], "text": blocks[1]["text"] + " Fees fell."}, blocks[2]], source="sec10k", lang="en"),
        1000,
    )
    assert changed["passage_id"][0] != p1["passage_id"][0] and changed["passage_id"][1] == p1["passage_id"][1]
    CONTRACTS["passages"].conform(p1)


def test_english_splitter_keeps_abbreviations():
    assert split("The U.S. unit of Acme Inc. grew 2.5% in Dec. 2024. Margins fell.", "en") == [
        "The U.S. unit of Acme Inc. grew 2.5% in Dec. 2024.",
        "Margins fell.",
    ]
