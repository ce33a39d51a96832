"""The seed_qa stage's settings (`seed_qa:` in a profile)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from finhallu.schemas.section import Section

SeedMethod = Literal["triplet_qa", "multi_llm_qa"]


class SeedGeneratorConfig(Section):
    """One generator of the multi-LLM method: an LLM role and the configuration it runs with
    (offline: the rules phrasing `style`; with an LLM the style is a prompt input)."""

    role: str
    style: str
    seed: int = 0


class TripletQAConfig(Section):
    """FinReflectKG HalluBench: triplets per page, pages with enough triplets, QA per sampled triplet."""

    page_tokens: int = Field(1000, ge=1)  # a page: consecutive passages of one section up to this many tokens
    min_triplets_per_page: int = Field(10, ge=1)
    sample_min: int = Field(5, ge=1)
    sample_max: int = Field(7, ge=1)
    max_pages_per_document: int = Field(40, ge=1)


class MultiLLMQAConfig(Section):
    """FinDartBench: questions from several generators, dedup, answers from several generators,
    three validation stages."""

    question_generators: list[SeedGeneratorConfig] = Field(
        default_factory=lambda: [
            SeedGeneratorConfig(role="qa_generator_a", style="formal", seed=1),
            SeedGeneratorConfig(role="qa_generator_b", style="colloquial", seed=2),
        ]
    )
    answer_generators: list[SeedGeneratorConfig] = Field(
        default_factory=lambda: [
            SeedGeneratorConfig(role="qa_generator_a", style="table_first"),
            SeedGeneratorConfig(role="qa_generator_b", style="sentence_first"),
            SeedGeneratorConfig(role="qa_generator_c", style="terse"),
        ]
    )
    questions_per_generator: int = Field(4, ge=1)  # per chunk
    max_chunks_per_document: int = Field(40, ge=1)
    min_chunk_numbers: int = Field(3, ge=1)  # chunks stating fewer figures get no questions
    # Draw up to half of the sampled chunks from those whose figures the XBRL facts hold (verifiable seeds).
    prefer_fact_chunks: bool = True
    cluster_threshold: float = Field(0.5, ge=0, le=1)  # cosine linking candidates for the grouping step
    near_duplicate_threshold: float = Field(0.95, ge=0, le=1)  # cosine filter on representatives
    quality_threshold: float = Field(3.0, ge=1, le=5)  # tau of the listwise quality stage
    min_agreeing_answers: int = Field(2, ge=2)


def _default_methods() -> dict[str, list[SeedMethod]]:
    return {"sec10k": ["triplet_qa"], "dart": ["multi_llm_qa"]}


class SeedQAConfig(Section):
    # Seed methods per filing source (AI-Hub ships its QA triplets). stages/seed_qa/: SEED_METHODS.
    methods: dict[str, list[SeedMethod]] = Field(default_factory=_default_methods)
    # Embedder (model id, embedders/) for question deduplication; None = the embed stage's model.
    dedup_model: str | None = None
    triplet_qa: TripletQAConfig = TripletQAConfig()
    multi_llm_qa: MultiLLMQAConfig = MultiLLMQAConfig()

    @model_validator(mode="after")
    def _sample_range(self) -> "SeedQAConfig":
        if self.triplet_qa.sample_min > self.triplet_qa.sample_max:
            raise ValueError("seed_qa.triplet_qa.sample_min exceeds sample_max")
        return self
