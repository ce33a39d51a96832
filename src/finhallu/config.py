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

    @model_validator(mode="after")
    def _default_test_split(self) -> "SourceConfig":
        if self.test_institutions is None:
            self.test_institutions = list(AIHUB_TEST_INSTITUTIONS) if self.kind == "aihub" else []
        return self


class IngestConfig(_Section):
    sources: list[SourceConfig]


class ChunkConfig(_Section):
    max_tokens: int = 1000
    # approx (offline XLM-R estimate) | kure (KURE-v1's tokenizer.json from $FINHALLU_KURE_PATH or the
    # local HF cache) | hf:<path> (any local tokenizer.json or folder holding one). See tasks/tokenize.py.
    tokenizer: str = Field(default="approx", pattern=r"^(approx|kure|hf:.+)$")


class EmbedConfig(_Section):
    # A registered embedder (tasks/embedders/): hashing | sentence_transformers | kure | minilm | hybrid
    backend: str = "hashing"
    # hashing
    dim: int = 2048
    char_ngrams: list[int] = Field(default_factory=lambda: [2, 3])
    hashing_version: Literal[1, 2] = 2  # v1 = the original features (kept byte-identical); v2 see embedders/hashing.py
    # sentence_transformers / kure / minilm: hub id (found in the local HF cache, never downloaded)
    # or local folder; None = the backend's default (nlpai-lab/KURE-v1; minilm: all-MiniLM-L6-v2)
    model: str | None = None
    device: str = "cpu"  # cpu | cuda | mps | auto
    batch_size: int = 32
    max_seq_length: int | None = None
    query_prefix: str = ""
    passage_prefix: str = ""
    # hybrid: dense backend (any of the above but hybrid) fused with BM25 over Kiwi morphemes
    dense: str = "hashing"
    fusion: Literal["sum", "rrf"] = "sum"
    fusion_weight: float = Field(default=0.5, ge=0.0, le=1.0)  # dense share of the normalized score sum
    rrf_k: int = 60
    bm25_k1: float = 1.5
    bm25_b: float = 0.75


class SeedQAConfig(_Section):
    max_table_questions_per_passage: int = 4
    min_table_rows: int = 2


class RetrieveConfig(_Section):
    top_k: int = 10
    candidate_pool: int = 40
    # Step 2 (answerability): a candidate still "covers" the clue if this share of the
    # clue's content words occurs in it; such passages are not hard negatives.
    max_clue_coverage: float = 0.6
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


class DialogueConfig(_Section):
    min_turns: int = 4
    max_turns: int = 8
    dialogues_per_document: int = 1
    dialogues_per_filing: int = 3  # 10-K / DART documents are long: several dialogues each
    min_hard_negatives: int = 3  # an unanswerable turn needs at least this many hard negatives
    reconfirm_probability: float = 0.6
    supporting_sentence_probability: float = 0.5


class DialogueQCConfig(_Section):
    min_answerability: float = 1.0
    min_plausibility: int = 2
    min_correctness: float = 1.0
    min_diversity: int = 2
    min_coherency: int = 2


class InjectConfig(_Section):
    types: list[str] = Field(
        default_factory=lambda: ["contradictory", "unverifiable", "irrelevance", "false_acceptance", "false_refusal"]
    )
    # Two injectors for the test split (the paper uses two LLMs); offline both are rule
    # configurations with different seeds and phrasing banks.
    injectors: list[str] = Field(default_factory=lambda: ["rules_a", "rules_b"])


class InjectionQCConfig(_Section):
    min_naturalness: int = 2


class AssembleConfig(_Section):
    fingerprint_folds: int = 5


class DetectConfig(_Section):
    # detector name -> its parameters (a dict so `--set detect.detectors.NAME.threshold=...` works)
    detectors: dict[str, dict] = Field(default_factory=lambda: {"numeric_grounding": {}, "lexical_support": {}})


class MetricsConfig(_Section):
    bootstrap_resamples: int = 1000
    confidence: float = 0.95


class ReportConfig(_Section):
    title: str = "finhallu benchmark report"


class RoleConfig(_Section):
    provider: Literal["offline"] = "offline"
    model: str = "rules"
    temperature: float = 0.0


class BuildConfig(_Section):
    profile: str = "custom"
    seed: int = 20240917
    roles: dict[str, RoleConfig] = Field(default_factory=dict)
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
