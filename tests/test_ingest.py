"""Bad inputs next to good ones: quarantined with file, record and field named; the rest goes on."""

import json

from finhallu.config import load_config
from finhallu.schemas.contracts import CONTRACTS
from finhallu.schemas.gate import run_gate
from finhallu.stages.pipeline import table_rules
from finhallu.stages import ingest
from finhallu.stages.base import StageContext


def test_broken_inputs_are_quarantined_and_good_ones_load(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "truncated.json").write_text('{"data": [{"doc_id": "X"')
    (bad / "empty.zip").write_bytes(b"PK\x03\x04 not really a zip")
    (bad / "missing_source.json").write_text(
        json.dumps(
            {
                "data": [
                    {"doc_id": "NOSRC-1", "doc_title": "기관 없는 문서", "paragraphs": [{"context": "본문입니다.", "qas": []}]},
                    {
                        "doc_id": "OK-1",
                        "doc_source": "테스트기관",
                        "doc_title": "정상 문서",
                        "paragraphs": [
                            {
                                "context": "예금자보호 한도는 1억 원입니다.",
                                "qas": [
                                    {
                                        "question_id": "q1",
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
                                    },
                                    {
                                        "question_id": "q2",
                                        "qa_type": 1,
                                        "question": "보호 기간은요?",
                                        "is_impossible": False,
                                        "answer": {
                                            "text": "5년",
                                            "answer_start": None,
                                            "clue_text": "보호 기간은 5년입니다.",
                                            "clue_start": None,
                                            "options": None,
                                        },
                                    },
                                ],
                            }
                        ],
                    },
                ]
            },
            ensure_ascii=False,
        )
    )
    cfg = load_config(
        "demo",
        {
            "ingest": {
                "sources": [
                    {"kind": "aihub", "paths": ["pkg:demo/aihub", str(bad)], "test_institutions": ["금융감독원", "한국소비자원"]},
                    {"kind": "dart", "paths": [str(bad / "truncated.json")]},
                ]
            }
        },
    )
    out = ingest.run({}, StageContext(stage="ingest", config=cfg.ingest, seed=1))
    q = out["quarantine"]
    by_path = {(r["source"], r["path"].rsplit("/", 1)[-1]): r for r in q.to_dicts()}
    assert "malformed JSON" in by_path[("aihub", "truncated.json")]["error"]
    assert "DART" in by_path[("dart", "truncated.json")]["error"]
    assert by_path[("aihub", "empty.zip")]["error"]
    src = by_path[("aihub", "missing_source.json")]
    assert src["field"] == "doc_source" and "NOSRC-1" in src["record_id"]
    assert all(r["stage"] == "ingest" for r in q.to_dicts())
    clue = [r for r in q.to_dicts() if r["record_id"] == "OK-1/q2"]
    assert clue and clue[0]["field"] == "answer.clue_text" and "missing_source.json" in clue[0]["path"]
    flagged = out["source_qas"].filter(out["source_qas"]["qa_id"] == "OK-1/q2")
    assert "clue_not_in_context" in flagged["flags"][0].to_list()
    docs = out["documents"]
    assert "OK-1" in docs["doc_id"].to_list() and docs.height >= 35
    assert "NOSRC-1" not in docs["doc_id"].to_list()
    # The outputs still pass their gates: bad input never blocks the good.
    conformed = {n: CONTRACTS[n].conform(df) for n, df in out.items()}
    for name, df in conformed.items():
        res = run_gate(name, df, conformed, table_rules(name))
        assert res.ok, res.message()
