"""Typed build configuration and YAML profiles.

A profile is a YAML file (packaged under `finhallu/profiles/` or any path) that may
`extends:` another; keys merge recursively. Each stage reads one section, named after it and
typed by the config model its declaration names (`finhallu/stages/<name>`); the section's
canonical JSON (plus the global seed and the LLM roles the stage uses) enters its cache key.
Names of plug-ins (source kinds, embedders, injectors, detectors, providers) are checked against
their registries when the profile loads, and every configured role must be one a stage calls.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import yaml
from pydantic import Field, model_validator

from finhallu.llm.config import LLMConfig, RoleConfig
from finhallu.schemas.section import Section
from finhallu.sources import resolve_path
from finhallu.stages.assemble import AssembleConfig
from finhallu.stages.chunk import ChunkConfig
from finhallu.stages.detect import DetectConfig
from finhallu.stages.dialogue_qc import DialogueQCConfig
from finhallu.stages.dialogues import DialogueConfig
from finhallu.stages.embed import EmbedConfig
from finhallu.stages.ingest import IngestConfig
from finhallu.stages.inject import InjectConfig
from finhallu.stages.injection_qc import InjectionQCConfig
from finhallu.stages.metrics import MetricsConfig
from finhallu.stages.premise_items import PremiseItemsConfig
from finhallu.stages.probe_report import ProbeReportConfig
from finhallu.stages.probe_responses import ProbeResponsesConfig
from finhallu.stages.probe_scores import ProbeScoresConfig
from finhallu.stages.report import ReportConfig
from finhallu.stages.retrieve import RetrieveConfig
from finhallu.stages.seed_qa import SeedQAConfig


class BuildConfig(Section):
    """A whole profile: one field per stage (typed by the stage's declared config model; a test
    checks the two agree), the LLM roles and how calls are made."""

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
    # the false-premise probe (`finhallu probe`)
    premise_items: PremiseItemsConfig = PremiseItemsConfig()
    probe_responses: ProbeResponsesConfig = ProbeResponsesConfig()
    probe_scores: ProbeScoresConfig = ProbeScoresConfig()
    probe_report: ProbeReportConfig = ProbeReportConfig()

    @model_validator(mode="after")
    def _roles_are_called(self) -> "BuildConfig":
        """A configured role no stage calls is a typo or a leftover: say so rather than ignore it."""
        from finhallu.stages.pipeline import ALL_STAGES

        called = {r for s in ALL_STAGES for r in s.calls_roles(self)}
        unused = sorted(set(self.roles) - called)
        if unused:
            raise ValueError(f"roles {unused} are configured but no stage calls them (the stages call: {sorted(called)})")
        return self

    def section(self, name: str) -> dict:
        return getattr(self, name).model_dump(mode="json")

    def hash(self) -> str:
        return canonical_hash(self.model_dump(mode="json"))


def with_detectors(cfg: BuildConfig, detectors: dict[str, dict]) -> BuildConfig:
    """The config with exactly these detectors (an evaluation's selection), validated like a profile."""
    data = cfg.model_dump(mode="json")
    data["detect"]["detectors"] = detectors
    return BuildConfig.model_validate(data)


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
