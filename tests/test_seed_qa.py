import polars as pl

from finhallu.config import SeedQAConfig
from finhallu.tasks import seed_qa
from finhallu.tasks.base import StageContext

TABLE = ("| Item | 2023 | 2022 |\n| --- | --- | --- |\n| Revenue total | 1,000 | 900 |\n"
         "| Revenue | 500 | 900 |\n| Cost of revenue | 300 | 250 |")


def test_table_seed_clue_is_the_rows_own_line_even_with_prefix_labels():
    p = pl.DataFrame([{"passage_id": "p1", "doc_id": "d1", "block_id": "b1", "source": "sec10k", "institution": "Acme Inc.",
                       "lang": "en", "split": "train", "doc_type": "10-K", "title": "Acme Inc. Form 10-K FY2023",
                       "section_path": "Item 8.", "kind": "table", "chunk_index": 0, "chunk_total": 1, "char_start": 0,
                       "text": TABLE, "token_count": 40, "tokenizer": "approx"}])
    empty_qas = pl.DataFrame(schema={"qa_id": pl.String, "doc_id": pl.String, "block_id": pl.String, "qa_kind": pl.String,
                                     "question": pl.String, "answer": pl.String, "answer_start": pl.Int64,
                                     "clue_text": pl.String, "clue_start": pl.Int64, "is_impossible": pl.Boolean})
    out = seed_qa.run({"passages": p, "source_qas": empty_qas},
                      StageContext(stage="seed_qa", config=SeedQAConfig(max_table_questions_per_passage=10), seed=1))
    seeds = out["qa_seeds"]
    assert seeds.height == 6
    for s in seeds.iter_rows(named=True):
        label = s["question"].split("what was ")[1].split(" (")[0]
        assert s["clue_text"].startswith(f"| {label} |"), (s["question"], s["clue_text"])
        assert s["answer"] in s["clue_text"] and TABLE[s["clue_start"]:].startswith(s["clue_text"])
    assert out["triplets"].height == 6
