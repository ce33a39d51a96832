"""Documents reach every split: filings by company (lists of CIKs/names or a stable hashed ratio),
AI-Hub kept by category; dates stored in ISO form."""

import json

import pytest

from finhallu.config import load_config
from finhallu.stages.ingest import SourceConfig
from finhallu.stages import ingest
from finhallu.stages.base import StageContext
from finhallu.sources import LoadedDoc
from finhallu.text.dates import iso_date, iso_date_or_period


@pytest.mark.parametrize(
    "raw,iso",
    [
        ("20210402", "2021-04-02"),
        ("January 26, 2025", "2025-01-26"),
        ("Sept 30, 2023", "2023-09-30"),
        ("2021년 4월 2일", "2021-04-02"),
        ("2025.01.26", "2025-01-26"),
        ("June 31, 2024", None),
        ("FY2024", None),
    ],
)
def test_iso_dates(raw, iso):
    assert iso_date(raw) == iso


def test_periods_become_iso_intervals():
    assert iso_date_or_period("20220101-20220630") == "2022-01-01/2022-06-30"
    assert iso_date_or_period("1997-06-30") == "1997-06-30"


def _doc(doc_id, source, institution):
    return LoadedDoc(doc_id, source, institution, "en", "t", "10-K", None, "p", [])


def test_filings_split_by_company_id_and_stable_ratio():
    src = SourceConfig(kind="sec10k", paths=["x"], test_institutions=["1045810"], valid_institutions=["GAINSCO, INC."])
    assert ingest._split(src, _doc("sec10k-1045810-2025", "sec10k", "NVIDIA CORP")) == "test"
    assert ingest._split(src, _doc("sec10k-1045810-2024", "sec10k", "NVIDIA CORPORATION")) == "test"  # renamed
    assert ingest._split(src, _doc("sec10k-parity-gate-x-2009", "sec10k", "GAINSCO, INC.")) == "valid"
    ratio = SourceConfig(kind="sec10k", paths=["x"], split_ratio={"train": 0.6, "valid": 0.2, "test": 0.2})
    docs = [_doc(f"sec10k-{1000 + i}-2024", "sec10k", f"CO {i}") for i in range(2000)]
    splits = [ingest._split(ratio, d) for d in docs]
    shares = {s: splits.count(s) / len(splits) for s in ("train", "valid", "test")}
    assert abs(shares["train"] - 0.6) < 0.05 and abs(shares["test"] - 0.2) < 0.05, shares
    # a company's other years land in the same split
    assert [ingest._split(ratio, _doc(f"sec10k-{1000 + i}-2019", "sec10k", "x")) for i in range(50)] == splits[:50]
    with pytest.raises(ValueError):
        SourceConfig(kind="sec10k", paths=["x"], split_ratio={"train": -1, "test": 0.5})


def test_aihub_documents_kept_by_category(tmp_path):
    docs = [
        {
            "doc_id": f"D{i}",
            "doc_source": "기관",
            "doc_title": "t",
            "doc_class": {"class": cls, "code": "c"},
            "paragraphs": [{"context": "본문입니다. 한도는 1억 원입니다.", "qas": []}],
        }
        for i, cls in enumerate(["금융", "공공행정", "금융"])
    ]
    (tmp_path / "a.json").write_text(json.dumps({"data": docs}, ensure_ascii=False), encoding="utf-8")
    cfg = load_config("demo", {"ingest": {"sources": [{"kind": "aihub", "paths": [str(tmp_path)], "categories": ["금융"]}]}})
    out = ingest.run({}, StageContext(stage="ingest", config=cfg.ingest, seed=1))
    assert out["documents"]["doc_id"].to_list() == ["D0", "D2"]
