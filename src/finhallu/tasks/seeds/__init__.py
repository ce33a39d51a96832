"""QA seeds for filings (SEC 10-K, DART), which ship no (question, answer, clue) triplets.

Two methods, both run as operations with a rules backend offline and an LLM backend by profile:

* `triplet_qa` (FinReflectKG HalluBench): knowledge-graph triplets per page (rules from tables,
  text numbers and XBRL facts, or an LLM with a reflection pass), pages with enough triplets,
  a QA per sampled triplet with its supporting line, a Keep/Drop judge.
* `multi_llm_qa` (FinDartBench): question candidates per chunk from several generators,
  semantic deduplication, answers from several generators, three-stage validation
  (factuality, listwise quality, top-2 consensus).

Modules: values (numbers, scales, periods, VALUE-UNIT-PERIOD), tables (cells with their
periods), facts (XBRL ground truth), triplets, triplet_qa, dedup, multi_llm_qa, common,
alignment (does a question name the period and line item of its answer).
"""
