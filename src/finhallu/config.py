"""Typed build configuration and YAML profiles.

A profile is a YAML file (packaged under `finhallu/profiles/` or any path) that may
`extends:` another; keys merge recursively. Each stage reads one section; the section's
canonical JSON (plus the global seed and the LLM roles the stage uses) enters its cache key.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


AIHUB_TEST_INSTITUTIONS = ["금융감독원", "한국소비자원"]  # K-FinHallu's held-out institutions


class SourceConfig(_Section):
    kind: Literal["aihub", "sec10k", "dart", "edgar_corpus", "xbrl"]
    # Files or folders; relative paths resolve against the profile file; `pkg:` = inside finhallu.
    paths: list[str]
    # Splits are assigned by institution (AI-Hub doc_source; company for filings).
    # None = the source's default: AI-Hub holds out 금융감독원 and 한국소비자원 for test.
    test_institutions: list[str] | None = None
    valid_institutions: list[str] = Field(default_factory=list)
    default_split: Literal["train", "valid", "test"] = "train"
    # Institutions in neither list: None = default_split; else a split drawn by a stable hash of the
    # company (CIK / corp_code for filings, else the institution), with these relative shares, so a
    # company never moves between splits as the corpus grows. The lists above also take CIKs/corp_codes.
    split_ratio: dict[Literal["train", "valid", "test"], float] | None = None
    # Keep only documents of these categories (AI-Hub doc_class.class or the document type), as
    # K-FinHallu keeps the finance documents; None = all.
    categories: list[str] | None = None

    @model_validator(mode="after")
    def _default_test_split(self) -> "SourceConfig":
        if self.split_ratio is not None and (any(v < 0 for v in self.split_ratio.values())
                                             or sum(self.split_ratio.values()) <= 0):
            raise ValueError("split_ratio shares must be non-negative with a positive sum")
        if self.test_institutions is None:
            self.test_institutions = list(AIHUB_TEST_INSTITUTIONS) if self.kind == "aihub" else []
        return self


class IngestConfig(_Section):
    sources: list[SourceConfig]


class ChunkConfig(_Section):
    max_tokens: int = Field(1000, ge=16)  # a chunk holds at least a sentence's worth of tokens
    # approx (offline XLM-R estimate) | kure (KURE-v1's tokenizer.json from $FINHALLU_KURE_PATH or the
    # local HF cache) | hf:<path> (any local tokenizer.json or folder holding one). See tasks/tokenize.py.
    tokenizer: str = Field(default="approx", pattern=r"^(approx|kure|hf:.+)$")


class EmbedConfig(_Section):
    # A registered embedder (tasks/embedders/): hashing | sentence_transformers | kure | minilm | hybrid
    backend: str = "hashing"
    # hashing
    dim: int = Field(2048, ge=2)
    char_ngrams: list[int] = Field(default_factory=lambda: [2, 3], min_length=1)
    hashing_version: Literal[1, 2] = 2  # v1 = the original features (kept byte-identical); v2 see embedders/hashing.py
    # sentence_transformers / kure / minilm: hub id (found in the local HF cache, never downloaded)
    # or local folder; None = the backend's default (nlpai-lab/KURE-v1; minilm: all-MiniLM-L6-v2)
    model: str | None = None
    device: str = "cpu"  # cpu | cuda | mps | auto
    batch_size: int = Field(32, ge=1)
    max_seq_length: int | None = Field(None, ge=8)
    query_prefix: str = ""
    passage_prefix: str = ""
    # hybrid: dense backend (any of the above but hybrid) fused with BM25 over Kiwi morphemes
    dense: str = "hashing"
    fusion: Literal["sum", "rrf"] = "sum"
    fusion_weight: float = Field(default=0.5, ge=0.0, le=1.0)  # dense share of the normalized score sum
    rrf_k: int = Field(60, ge=1)
    bm25_k1: float = Field(1.5, ge=0.0)
    bm25_b: float = Field(0.75, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ngrams_positive(self) -> "EmbedConfig":
        if any(n < 1 for n in self.char_ngrams):
            raise ValueError(f"embed.char_ngrams must be positive sizes, got {self.char_ngrams}")
        return self


class SeedGeneratorConfig(_Section):
    """One generator of the multi-LLM method: an LLM role and the configuration it runs with
    (offline: the rules phrasing `style`; with an LLM the style is a prompt input)."""

    role: str
    style: str
    seed: int = 0


class TripletQAConfig(_Section):
    """FinReflectKG HalluBench: triplets per page, pages with enough triplets, QA per sampled triplet."""

    page_tokens: int = Field(1000, ge=1)  # a page: consecutive passages of one section up to this many tokens
    min_triplets_per_page: int = Field(10, ge=1)
    sample_min: int = Field(5, ge=1)
    sample_max: int = Field(7, ge=1)
    max_pages_per_document: int = Field(40, ge=1)


class MultiLLMQAConfig(_Section):
    """FinDartBench: questions from several generators, dedup, answers from several generators,
    three validation stages."""

    question_generators: list[SeedGeneratorConfig] = Field(default_factory=lambda: [
        SeedGeneratorConfig(role="qa_generator_a", style="formal", seed=1),
        SeedGeneratorConfig(role="qa_generator_b", style="colloquial", seed=2)])
    answer_generators: list[SeedGeneratorConfig] = Field(default_factory=lambda: [
        SeedGeneratorConfig(role="qa_generator_a", style="table_first"),
        SeedGeneratorConfig(role="qa_generator_b", style="sentence_first"),
        SeedGeneratorConfig(role="qa_generator_c", style="terse")])
    questions_per_generator: int = Field(4, ge=1)  # per chunk
    max_chunks_per_document: int = Field(40, ge=1)
    min_chunk_numbers: int = Field(3, ge=1)  # chunks stating fewer figures get no questions
    # Draw up to half of the sampled chunks from those whose figures the XBRL facts hold (verifiable seeds).
    prefer_fact_chunks: bool = True
    cluster_threshold: float = Field(0.5, ge=0, le=1)  # cosine linking candidates for the grouping step
    near_duplicate_threshold: float = Field(0.95, ge=0, le=1)  # cosine filter on representatives
    quality_threshold: float = Field(3.0, ge=1, le=5)  # tau of the listwise quality stage
    min_agreeing_answers: int = Field(2, ge=2)


class SeedQAConfig(_Section):
    # Seed methods per filing source (AI-Hub ships its QA triplets). tasks/seed_qa.py: SEED_METHODS.
    methods: dict[str, list[Literal["triplet_qa", "multi_llm_qa"]]] = Field(
        default_factory=lambda: {"sec10k": ["triplet_qa"], "dart": ["multi_llm_qa"]})
    # Embedder (model id, tasks/embedders) for question deduplication; None = the embed stage's model.
    dedup_model: str | None = None
    triplet_qa: TripletQAConfig = TripletQAConfig()
    multi_llm_qa: MultiLLMQAConfig = MultiLLMQAConfig()

    @model_validator(mode="after")
    def _sample_range(self) -> "SeedQAConfig":
        if self.triplet_qa.sample_min > self.triplet_qa.sample_max:
            raise ValueError("seed_qa.triplet_qa.sample_min exceeds sample_max")
        return self


class RetrieveConfig(_Section):
    top_k: int = Field(10, ge=1)
    candidate_pool: int = Field(40, ge=1)
    # Step 2 (answerability): a candidate still "covers" the clue if this share of the
    # clue's content words occurs in it; such passages are not hard negatives.
    max_clue_coverage: float = Field(0.6, ge=0.0, le=1.0)
    # Step 2 judges a seed's candidates lazily, in rank order, until it has top_k hard negatives
    # (an answerable context holds K-1 beside the gold passage, False Acceptance swaps in K): the
    # stages read no more than the first K. Each round asks for what is missing plus this many
    # more, so few seeds need another round. False: every candidate that passed step 1 is judged.
    judge_lazily: bool = True
    judge_round_margin: int = Field(2, ge=0)
    # An answerable seed's hard negatives serve only False Acceptance (its context swapped for them),
    # which takes about one turn in ten: `on_demand` leaves them to the inject stage, which judges the
    # candidates of the turns it picks (same rank order, same laziness); `in_retrieve` judges every
    # seed's here. Unanswerable seeds are always judged here (the dialogues' refusal contexts).
    judge_answerable_seeds: Literal["on_demand", "in_retrieve"] = "on_demand"
    # FAISS index (finhallu.tasks.index). `auto`: exact IndexFlatIP below `ann_threshold`
    # passages, `ann_kind` at or above it; `flat`/`ivf`/`hnsw` force a kind at any size.
    index_kind: Literal["auto", "flat", "ivf", "hnsw"] = "auto"
    ann_kind: Literal["ivf", "hnsw"] = "ivf"
    ann_threshold: int = Field(200_000, ge=1)
    ivf_nlist: int | None = Field(None, ge=1)  # None: about 4*sqrt(n), at most n/39
    ivf_nprobe: int = Field(32, ge=1)
    # An incrementally grown IVF keeps its trained centroids until it holds this many times
    # the vectors they were trained on; then it is retrained from scratch.
    ivf_retrain_growth: float = Field(2.0, ge=1.0)
    hnsw_m: int = Field(32, ge=2)
    hnsw_ef_construction: int = Field(80, ge=1)
    hnsw_ef_search: int = Field(128, ge=1)
    index_seed: int = 1234  # k-means (IVF) and level generator (HNSW) seed

    @model_validator(mode="after")
    def _pool_holds_top_k(self) -> "RetrieveConfig":
        if self.candidate_pool < self.top_k:
            raise ValueError(f"retrieve.candidate_pool ({self.candidate_pool}) is smaller than top_k ({self.top_k})")
        return self


class DialogueConfig(_Section):
    min_turns: int = Field(4, ge=1)
    max_turns: int = Field(8, ge=1)
    dialogues_per_document: int = 1
    dialogues_per_filing: int = 3  # 10-K / DART documents are long: several dialogues each
    min_hard_negatives: int = 3  # an unanswerable turn needs at least this many hard negatives
    reconfirm_probability: float = 0.6
    supporting_sentence_probability: float = 0.5
    # The user LLM writes a new question from the current passage when no candidate keeps the
    # flow coherent (a candidate of another document must share this much with the current question).
    write_new_questions: bool = True
    coherence_min_overlap: float = 0.15

    @model_validator(mode="after")
    def _turns(self) -> "DialogueConfig":
        if self.min_turns > self.max_turns:
            raise ValueError(f"dialogues.min_turns ({self.min_turns}) must not exceed dialogues.max_turns "
                             f"({self.max_turns})")
        return self


class DialogueQCConfig(_Section):
    # Thresholds on the judge's scores (K-FinHallu Table 7); a dialogue below any is dropped.
    min_answerability: float = Field(1.0, ge=0.0, le=1.0)  # shares of turns
    min_plausibility: int = Field(2, ge=1, le=3)  # 1-3 scales
    min_correctness: float = Field(1.0, ge=0.0, le=1.0)
    min_diversity: int = Field(2, ge=1, le=3)
    min_coherency: int = Field(2, ge=1, le=3)


class InjectConfig(_Section):
    types: list[str] = Field(
        default_factory=lambda: ["contradictory", "unverifiable", "irrelevance", "false_acceptance", "false_refusal"]
    )
    # Two injectors for the test split (the paper uses two LLMs); offline both are rule
    # configurations with different seeds and phrasing banks.
    injectors: list[str] = Field(default_factory=lambda: ["rules_a", "rules_b"])
    # The LLM role of each injector, by position (default injector_a, injector_b).
    injector_roles: list[str] = Field(default_factory=lambda: ["injector_a", "injector_b"])
    # entity_error: replacement strategy and mention selection, drawn per dialogue from these lists.
    entity_strategies: list[Literal["embedding", "instructed"]] = Field(default_factory=lambda: ["embedding", "instructed"])
    entity_selections: list[Literal["uniform", "theme", "position"]] = Field(
        default_factory=lambda: ["uniform", "theme", "position"])
    entity_noise_sigma: float = Field(0.5, ge=0.0)  # norm of the Gaussian noise on a unit entity embedding
    # Every subtype a split can carry is injected at least this often there before types are balanced.
    min_per_subtype: int = Field(1, ge=0)
    # A minimal-edit subtype's output that changes more words than this is passed over for the
    # dialogue's next candidate (the QC judge applies its own limit to what gets through).
    max_minimal_edit_words: int = Field(4, ge=1)
    # Injector calls per dialogue before it is given up (its candidates in order: the best-suited
    # turn of each chosen subtype first). A model that keeps missing must not cost 20 calls a dialogue.
    max_attempts: int = Field(4, ge=1, le=50)
    # Target share of each type among injected dialogues (relative weights; types left out weigh
    # 1, a zero weight turns the type off). The demo stays balanced; `paper` sets K-FinHallu's.
    type_weights: dict[str, float] = Field(default_factory=dict)
    # Share of unanswerable samples: False Acceptance is the only unanswerable hallucination (its
    # counterpart a True Refusal), so this fixes its share and the other weights share the rest.
    unanswerable_share: float | None = Field(None, ge=0.0, lt=1.0)

    @model_validator(mode="after")
    def _check_weights(self):
        unknown = sorted(set(self.type_weights) - set(self.types))
        if unknown:
            raise ValueError(f"inject.type_weights names types not in inject.types: {unknown}")
        if any(w < 0 for w in self.type_weights.values()):
            raise ValueError("inject.type_weights must be non-negative")
        if sum(self.weights().values()) <= 0:
            raise ValueError("inject.type_weights must leave some type a positive weight")
        if self.unanswerable_share is not None and "false_acceptance" not in self.types:
            raise ValueError("inject.unanswerable_share needs false_acceptance in inject.types")
        return self

    def weights(self) -> dict[str, float]:
        """Each type's target share (summing to 1), unanswerable_share applied."""
        raw = {t: float(self.type_weights.get(t, 1.0)) for t in self.types}
        share = self.unanswerable_share
        if share is not None:
            rest = sum(w for t, w in raw.items() if t != "false_acceptance")
            if rest <= 0:
                return {t: float(t == "false_acceptance") for t in raw}
            raw = {t: (share if t == "false_acceptance" else (1 - share) * w / rest) for t, w in raw.items()}
        total = sum(raw.values())
        return {t: w / total for t, w in raw.items()} if total > 0 else raw


class InjectionQCConfig(_Section):
    min_naturalness: int = Field(2, ge=1, le=3)
    min_appropriateness: int = Field(2, ge=1, le=3)
    # Minimal-edit subtypes whose edit changes more words than this are rated less appropriate.
    max_minimal_edit_words: int = Field(4, ge=1)
    # Injector calls per dialogue before it is given up (its candidates in order: the best-suited
    # turn of each chosen subtype first). A model that keeps missing must not cost 20 calls a dialogue.
    max_attempts: int = Field(4, ge=1, le=50)
    # Every injected response and its faithful counterpart are re-checked by the label verifier
    # (operation verify_sample, role label_verifier); a pair either side of which fails is dropped.
    verify_labels: bool = True
    # A local NLI cross-encoder (folder or cached hub id; FINHALLU_NLI_PATH overrides) that also checks
    # faithful answers (entailed) and Contradictory edits (not entailed); None: the rules alone.
    verifier_nli_model: str | None = None
    verifier_nli_threshold: float = Field(0.5, gt=0, lt=1)


class AssembleConfig(_Section):
    fingerprint_folds: int = 5


class DetectConfig(_Section):
    # detector name -> its parameters (a dict so `--set detect.detectors.NAME.threshold=...` works).
    # `base:variant` names run one detector under another configuration (e.g. numeric_grounding:no_history).
    # The offline set by default; `nli` needs a local cross-encoder (see tasks/detectors/nli.py).
    detectors: dict[str, dict] = Field(default_factory=lambda: {
        "numeric_grounding": {}, "lexical_support": {}, "embedding_similarity": {}, "refusal_answerability": {},
        "llm_judge": {}, "learned": {}})
    # The trivial baselines (tasks/detectors/baselines.py: length, novel-token share, verbatim copy)
    # run beside the detectors in every evaluation, so no score is read without them.
    baselines: bool = True


class MetricsConfig(_Section):
    bootstrap_resamples: int = Field(10_000, ge=0)  # 0 = no confidence intervals
    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    # threshold sweep over detector scores; the best threshold (by `threshold_metric`) is chosen on the
    # first of `threshold_tune_splits` present and applied to `threshold_apply_split`
    sweep_min: float = Field(0.05, ge=0.0, le=1.0)
    sweep_max: float = Field(0.95, ge=0.0, le=1.0)
    sweep_step: float = Field(0.05, gt=0.0, le=1.0)
    threshold_metric: Literal["f1", "accuracy", "precision", "recall"] = "f1"
    threshold_tune_splits: list[str] = Field(default_factory=lambda: ["valid", "train"])
    threshold_apply_split: str = "test"
    # [baseline, condition] detector pairs scored as helped/hurt/net (e.g. without vs with extra evidence)
    condition_pairs: list[tuple[str, str]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _sweep_range(self) -> "MetricsConfig":
        if self.sweep_min > self.sweep_max:
            raise ValueError(f"metrics.sweep_min ({self.sweep_min}) exceeds sweep_max ({self.sweep_max})")
        return self


class ReportConfig(_Section):
    title: str = "finhallu benchmark report"
    curve_points: int = Field(200, ge=10)  # ROC/PR curves are thinned to at most this many points per detector


class RoleConfig(_Section):
    """One LLM role (user LLM, assistant LLM, a judge, an injector, ...): provider, model and
    every output-affecting request setting. The whole role enters the cache keys."""

    provider: Literal["offline", "openai", "gemini", "openai_compatible"] = "offline"
    model: str = "rules"
    temperature: float = 0.0
    max_tokens: int = Field(1024, ge=1)
    top_p: float | None = None
    seed: int | None = None  # provider-side sampling seed where supported (OpenAI, Gemini)
    base_url: str | None = None  # OpenAI-compatible endpoint (vLLM, Ollama) or a proxy; OPENAI_BASE_URL otherwise
    # Structured output: `json_schema` (strict, OpenAI/vLLM/Ollama), `json_object` (servers without
    # schema support), `none` (plain text; the JSON is parsed from the reply).
    structured: Literal["json_schema", "json_object", "none"] = "json_schema"
    api_key_env: str | None = None  # env var holding the key (default: OPENAI_API_KEY / GEMINI_API_KEY)
    api_key_secret: str | None = None  # Prefect Secret block name holding the key
    batch: bool = False  # send bulk calls through the provider's batch API


class ModelLimits(_Section):
    rpm: float | None = Field(None, gt=0)  # requests per minute
    tpm: float | None = Field(None, gt=0)  # tokens per minute (prompt estimate + max_tokens, settled on usage)
    concurrency: int = Field(8, ge=1)  # requests in flight


class ModelPrice(_Section):
    input_per_1m: float = Field(0.0, ge=0)  # USD per million input tokens
    output_per_1m: float = Field(0.0, ge=0)


class LLMConfig(_Section):
    """How calls are made, not what they return: none of this enters a cache key."""

    cache: bool = True  # the SQLite call cache under <home>/cache/llm_calls.sqlite
    timeout_s: float = Field(60.0, gt=0)
    max_attempts: int = Field(6, ge=1, le=20)  # per request, the first included (429/5xx/timeouts are retried)
    # The stage's failure budget: once more than this share of its provider calls failed for good
    # (after at least `failed_share_min_calls` calls), the stage stops instead of hammering.
    max_failed_share: float = Field(0.5, ge=0.0, le=1.0)
    failed_share_min_calls: int = Field(20, ge=1)
    # Send requests recorded as failed by an earlier build again (`finhallu build --retry-failed`);
    # otherwise a rerun records them as failed again without a request.
    retry_failed: bool = False
    backoff_base_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)
    max_retry_after_s: float = Field(300.0, ge=0)
    default_limits: ModelLimits = ModelLimits()
    limits: dict[str, ModelLimits] = Field(default_factory=lambda: {
        "gpt-4o": ModelLimits(rpm=500, tpm=30000, concurrency=16),
        "gemini-2.5-flash": ModelLimits(rpm=1000, tpm=1000000, concurrency=16),
    })
    # USD list prices per million tokens (config, so a price change is one line in a profile).
    prices: dict[str, ModelPrice] = Field(default_factory=lambda: {
        "gpt-4o": ModelPrice(input_per_1m=2.50, output_per_1m=10.00),
        "gpt-4o-mini": ModelPrice(input_per_1m=0.15, output_per_1m=0.60),
        "gemini-2.5-flash": ModelPrice(input_per_1m=0.30, output_per_1m=2.50),
    })
    batch_poll_s: float = Field(30.0, gt=0)
    batch_max_wait_s: float = Field(86400.0, gt=0)  # then the build stops; a rerun resumes the same job
    batch_min_requests: int = Field(20, ge=1)  # fewer uncached requests than this go online
    # The estimate printed before a build with LLM roles (`finhallu build --dry-run` prints it
    # per stage): its latency floor assumes this many seconds per call.
    estimate_before_build: bool = True
    expected_latency_s: float = Field(2.0, gt=0)


class BuildConfig(_Section):
    profile: str = "custom"
    seed: int = 20240917
    roles: dict[str, RoleConfig] = Field(default_factory=dict)
    llm: LLMConfig = LLMConfig()
    ingest: IngestConfig
    chunk: ChunkConfig = ChunkConfig()
    embed: EmbedConfig = EmbedConfig()
    seed_qa: SeedQAConfig = SeedQAConfig()
    retrieve: RetrieveConfig = RetrieveConfig()
    dialogues: DialogueConfig = DialogueConfig()
    dialogue_qc: DialogueQCConfig = DialogueQCConfig()
    inject: InjectConfig = InjectConfig()
    injection_qc: InjectionQCConfig = InjectionQCConfig()
    assemble: AssembleConfig = AssembleConfig()
    detect: DetectConfig = DetectConfig()
    metrics: MetricsConfig = MetricsConfig()
    report: ReportConfig = ReportConfig()

    def section(self, name: str) -> dict:
        return getattr(self, name).model_dump(mode="json")

    def hash(self) -> str:
        return canonical_hash(self.model_dump(mode="json"))


def canonical_hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def merge_dicts(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = merge_dicts(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _profile_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p.resolve()
    packaged = resources.files("finhallu") / "profiles" / f"{name_or_path}.yaml"
    if packaged.is_file():
        return Path(str(packaged))
    known = sorted(f.name[:-5] for f in (resources.files("finhallu") / "profiles").iterdir() if f.name.endswith(".yaml"))
    raise FileNotFoundError(f"profile {name_or_path!r} not found (packaged profiles: {', '.join(known)}; or pass a .yaml path)")


def _raw_profile(name_or_path: str) -> tuple[dict, Path]:
    path = _profile_path(name_or_path)
    data = yaml.safe_load(path.read_text("utf-8")) or {}
    parent = data.pop("extends", None)
    if parent:
        base, _ = _raw_profile(parent)
        data = merge_dicts(base, data)
    return data, path


def resolve_path(spec: str, base_dir: Path) -> Path:
    if spec.startswith("pkg:"):
        return Path(str(resources.files("finhallu").joinpath(spec[4:])))
    p = Path(spec).expanduser()
    return p if p.is_absolute() else (base_dir / p).resolve()


def load_config(name_or_path: str, overrides: dict | None = None) -> BuildConfig:
    data, path = _raw_profile(name_or_path)
    data.setdefault("profile", path.stem)
    if overrides:
        data = merge_dicts(data, overrides)
    # Resolve source paths now so the config (and its hash) names real locations.
    for src in data.get("ingest", {}).get("sources", []):
        src["paths"] = [str(resolve_path(s, path.parent)) if not s.startswith("pkg:") else s for s in src["paths"]]
    return BuildConfig.model_validate(data)


def parse_override(expr: str) -> dict:
    """`detect.detectors.lexical_support.threshold=0.4` style overrides from the CLI (`--set`)."""
    key, _, raw = expr.partition("=")
    if not _:
        raise ValueError(f"--set expects KEY=VALUE, got {expr!r}")
    value = yaml.safe_load(raw)
    out: dict = {}
    cur = out
    parts = key.split(".")
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    return out
