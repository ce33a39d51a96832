"""Typed rows of every published table, generated from schemas/contracts.py by
`python -m finhallu.schemas.rowgen --write`: do not edit by hand.

A column outside the contract's key and not-null columns may be None."""

from __future__ import annotations

from typing import TypedDict


class Block(TypedDict):
    block_id: str
    section_path: str
    kind: str
    text: str
    role: str | None


class Message(TypedDict):
    role: str
    content: str


class SamplePassage(TypedDict):
    passage_id: str
    text: str
    role: str


class ContextEntry(TypedDict):
    passage_id: str
    role: str


class ConfusionRow(TypedDict):
    """A row of `confusion`."""

    eval_id: str
    detector: str
    setting: str
    slice: str
    true_label: str
    pred_label: str
    count: int


class DatasetStatsRow(TypedDict):
    """A row of `dataset_stats`."""

    split: str
    metric: str
    slice: str
    value: float


class DetectionsRow(TypedDict):
    """A row of `detections`."""

    eval_id: str
    detector: str
    sample_id: str
    score: float
    pred_binary: str
    pred_4class: str
    pred_type: str | None
    rationale: str | None
    detector_version: str
    detector_config: str


class DetectorTestsRow(TypedDict):
    """A row of `detector_tests`."""

    eval_id: str
    dataset: str
    dataset_version: str
    test: str
    setting: str
    slice: str
    detector_a: str
    detector_b: str
    detectors: list[str]
    n: int
    statistic: float
    df: int | None
    p_value: float
    p_holm: float | None
    a_only_correct: int | None
    b_only_correct: int | None
    net: int | None


class DialogueQcRow(TypedDict):
    """A row of `dialogue_qc`."""

    dialogue_id: str
    answerability: float
    plausibility: int
    correctness: float
    diversity: int
    coherency: int
    passed: bool
    reasons: list[str] | None
    judge: str | None


class DialoguesRow(TypedDict):
    """A row of `dialogues`."""

    dialogue_id: str
    doc_id: str
    source: str
    institution: str | None
    lang: str
    split: str
    n_turns: int
    seed_ids: list[str] | None
    has_reconfirm: bool | None


class DocumentsRow(TypedDict):
    """A row of `documents`."""

    doc_id: str
    source: str
    institution: str
    lang: str
    title: str
    doc_type: str | None
    published: str | None
    source_path: str | None
    split: str
    blocks: list[Block]


class EmbeddingsRow(TypedDict):
    """A row of `embeddings`."""

    passage_id: str
    model: str
    dim: int | None
    vector: list[float]


class ExternalSamplesRow(TypedDict):
    """A row of `external_samples`."""

    sample_id: str
    pair_id: str
    dialogue_id: str | None
    split: str
    source: str
    institution: str | None
    lang: str | None
    turn_index: int | None
    history: list[Message]
    query: str
    standalone_query: str | None
    passages: list[SamplePassage]
    response: str
    answerable: bool | None
    label_binary: str
    label_4class: str
    hallu_type: str | None
    hallu_subtype: str | None
    injector: str | None
    dataset: str
    external_id: str


class FactsRow(TypedDict):
    """A row of `facts`."""

    fact_id: str
    source: str
    entity: str | None
    entity_id: str | None
    concept: str
    label: str | None
    label_en: str | None
    value: str
    numeric_value: float | None
    unit: str | None
    decimals: str | None
    period_start: str | None
    period_end: str
    instant: bool | None
    fiscal_year: int | None
    fiscal_period: str | None
    form: str | None
    filed: str | None
    accession: str | None
    context_id: str | None
    dimensions: str | None
    source_path: str


class HardNegativesRow(TypedDict):
    """A row of `hard_negatives`."""

    seed_id: str
    passage_id: str
    candidate_rank: int
    score: float
    clue_absent: bool
    answer_absent: bool
    unanswerable: bool | None
    is_hard_negative: bool
    judge: str | None


class InjectionQcRow(TypedDict):
    """A row of `injection_qc`."""

    injection_id: str
    appropriate: bool
    naturalness: int
    passed: bool
    reasons: list[str] | None
    judge: str | None
    appropriateness: int | None
    verified: bool
    verify_reasons: list[str] | None


class InjectionsRow(TypedDict):
    """A row of `injections`."""

    injection_id: str
    dialogue_id: str
    turn_id: str
    turn_index: int
    split: str | None
    injector: str
    hallu_type: str
    hallu_subtype: str | None
    original_response: str
    injected_response: str
    injected_context: list[ContextEntry]
    counterpart_response: str
    counterpart_label: str
    edit: str | None
    strategy: str | None
    edit_chars: int | None
    edit_words: int | None


class MetricsRow(TypedDict):
    """A row of `metrics`."""

    eval_id: str
    dataset: str
    dataset_version: str
    detector: str
    setting: str
    slice: str
    metric: str
    value: float
    ci_low: float | None
    ci_high: float | None
    n: int


class PassagesRow(TypedDict):
    """A row of `passages`."""

    passage_id: str
    doc_id: str
    block_id: str
    source: str
    institution: str
    lang: str
    split: str
    doc_type: str | None
    title: str | None
    section_path: str | None
    section_role: str | None
    kind: str | None
    chunk_index: int | None
    chunk_total: int | None
    char_start: int | None
    text: str
    token_count: int
    tokenizer: str


class PremiseItemsRow(TypedDict):
    """A row of `premise_items`."""

    item_id: str
    base_id: str
    cell: str
    mechanism: str
    premise_kind: str
    field: str
    source: str
    lang: str
    doc_id: str
    passage_id: str
    institution: str | None
    with_evidence: bool
    context: str
    history: list[Message]
    prompt: str
    false_claim: str
    false_value: str | None
    true_fact: str
    true_value: str | None
    source_passage: str


class ProbeAnchorsRow(TypedDict):
    """A row of `probe_anchors`."""

    anchor_version: str
    lang: str
    pole: str
    anchor_index: int
    text: str
    instruction: str
    embedder: str | None
    raw: float | None


class ProbeEndpointsRow(TypedDict):
    """A row of `probe_endpoints`."""

    cell: str
    lang: str
    embedder: str
    anchor_version: str
    defer_end: float
    hard_end: float
    source: str
    n_defer: int
    n_hard: int


class ProbeReferencesRow(TypedDict):
    """A row of `probe_references`."""

    reference_id: str
    item_id: str
    cell: str
    panel_role: str
    mode: str
    reply: str


class ProbeReportIndexRow(TypedDict):
    """A row of `probe_report_index`."""

    report_id: str
    title: str
    html: str


class ProbeResponsesRow(TypedDict):
    """A row of `probe_responses`."""

    response_id: str
    item_id: str
    target: str
    backend: str
    reply: str


class ProbeScoresRow(TypedDict):
    """A row of `probe_scores`."""

    response_id: str
    item_id: str
    target: str
    cell: str
    mechanism: str
    field: str
    lang: str
    with_evidence: bool
    judge_label: str | None
    judge_rationale: str | None
    embedder: str | None
    axis_score: float | None
    first_sentence_score: float | None
    axis_label: str | None
    sentences: int | None


class ProbeSentenceScoresRow(TypedDict):
    """A row of `probe_sentence_scores`."""

    response_id: str
    sentence_index: int
    sentence: str
    raw: float
    score: float
    anchor_score: float


class QaSeedsRow(TypedDict):
    """A row of `qa_seeds`."""

    seed_id: str
    passage_id: str
    doc_id: str
    source: str
    institution: str | None
    lang: str
    split: str
    question: str
    answer: str
    clue_text: str | None
    clue_start: int | None
    answer_start: int | None
    qa_kind: str | None
    answerable: bool
    method: str
    origin_id: str | None
    generator: str | None
    triplet_ids: list[str] | None
    fact_id: str | None
    answer_value: float | None
    answer_unit: str | None
    period: str | None


class QuarantineRow(TypedDict):
    """A row of `quarantine`."""

    source: str
    path: str
    record_id: str | None
    stage: str
    field: str | None
    error: str


class ReportIndexRow(TypedDict):
    """A row of `report_index`."""

    report_id: str
    title: str
    detectors: list[str] | None
    html: str


class RetrievalsRow(TypedDict):
    """A row of `retrievals`."""

    seed_id: str
    rank: int
    passage_id: str
    score: float
    is_gold: bool
    is_positive: bool


class SamplesRow(TypedDict):
    """A row of `samples`."""

    sample_id: str
    pair_id: str
    dialogue_id: str
    split: str
    source: str
    institution: str | None
    lang: str | None
    turn_index: int | None
    history: list[Message]
    query: str
    standalone_query: str | None
    passages: list[SamplePassage]
    response: str
    answerable: bool
    label_binary: str
    label_4class: str
    hallu_type: str | None
    hallu_subtype: str | None
    injector: str | None


class SeedQaStatsRow(TypedDict):
    """A row of `seed_qa_stats`."""

    source: str
    method: str
    funnel: str | None
    step: int | None
    metric: str
    value: float


class SourceQasRow(TypedDict):
    """A row of `source_qas`."""

    qa_id: str
    doc_id: str
    block_id: str
    qa_type: int | None
    qa_kind: str
    question: str
    answer: str | None
    answer_start: int | None
    clue_text: str | None
    clue_start: int | None
    is_impossible: bool
    options: list[str] | None
    flags: list[str] | None


class TripletsRow(TypedDict):
    """A row of `triplets`."""

    triplet_id: str
    passage_id: str
    head: str
    relation: str
    tail: str
    origin: str | None
    head_type: str | None
    tail_type: str | None
    span: str | None
    value: float | None
    unit: str | None
    period: str | None
    column: str | None
    evidence: str | None
    evidence_start: int | None
    fact_id: str | None
    extractor: str | None


class TurnsRow(TypedDict):
    """A row of `turns`."""

    turn_id: str
    dialogue_id: str
    turn_index: int
    seed_id: str
    kind: str | None
    reconfirms_turn: int | None
    standalone_query: str
    query: str
    response: str
    answerable: bool
    gold_passage_id: str | None
    clue_text: str | None
    answer: str | None
    context: list[ContextEntry]
    origin: str | None
