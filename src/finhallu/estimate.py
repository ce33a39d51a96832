"""What a build will cost before it runs: `finhallu build --dry-run`, and the line before every
build with LLM roles.

The dry run runs the stage functions (no Prefect, no warehouse, a scratch folder) with every
remote role answered by its rules backend; each call it would have made is a ledger row with
approximate tokens (finhallu.llm.tokens) and list prices (`llm.prices`, batch at half). The rules
stand in for the model, so where a stage's next call depends on an answer (a judge rejecting an
injection, a candidate judged answerable) the count follows the rules' answers. A prompt
asked twice (two dialogues on one seed) is one call and gets the first answer again, as the call
cache makes it in a build; otherwise it
estimates a cold build: calls an earlier build cached cost nothing when they are made.

Time: per stage and model, the floor the configured limits set (calls / RPM, tokens / TPM) and
the one latency sets with `concurrency` requests in flight: calls go out in waves of at most
`concurrency`, so ceil(calls / concurrency) x `llm.expected_latency_s`; and per stage the floor
of its longest chain of calls that wait for each other (a dialogue's turns: the ledger's
`chain`), chain x latency, however many requests may be in flight. A stage takes at least the
largest of these, and stages run one after another. Batch calls are left out of the floors (a
batch job takes up to 24 h).
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from finhallu.config import BuildConfig

if TYPE_CHECKING:
    import polars as pl


@dataclass
class StageEstimate:
    stage: str
    calls: int = 0
    batch_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    rate_floor_s: float = 0.0  # under RPM/TPM
    latency_floor_s: float = 0.0  # under latency and concurrency: waves of `concurrency` calls
    chain_floor_s: float = 0.0  # under latency: the longest chain of calls that wait for each other
    longest_chain: int = 0
    models: dict[str, int] = field(default_factory=dict)  # calls per model
    operations: dict[str, int] = field(default_factory=dict)  # calls per operation

    @property
    def floor_s(self) -> float:
        return max(self.rate_floor_s, self.latency_floor_s, self.chain_floor_s)


def stage_estimate(stage: str, rows: list[dict], settings, latency_s: float | None = None) -> StageEstimate:
    """Totals and time floors of one stage's (estimated or actual) ledger rows; `latency_s`: each
    call's time at the provider (default `llm.expected_latency_s`)."""
    latency = settings.expected_latency_s if latency_s is None else latency_s
    est = StageEstimate(stage)
    per_model: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("cache_hit"):
            continue
        est.calls += 1
        est.batch_calls += int(bool(r["batch"]))
        est.input_tokens += r["input_tokens"]
        est.output_tokens += r["output_tokens"]
        est.cost_usd += r["cost_usd"]
        est.models[r["model"]] = est.models.get(r["model"], 0) + 1
        est.operations[r["operation"]] = est.operations.get(r["operation"], 0) + 1
        if not r["batch"]:
            per_model.setdefault(r["model"], []).append(r)
            est.longest_chain = max(est.longest_chain, int(r.get("chain") or 0))
    for model, mrows in per_model.items():
        lim = settings.limits.get(model) or settings.default_limits
        tokens = sum(r["input_tokens"] + r["output_tokens"] for r in mrows)
        rate = max(len(mrows) / lim.rpm * 60.0 if lim.rpm else 0.0, tokens / lim.tpm * 60.0 if lim.tpm else 0.0)
        est.rate_floor_s = max(est.rate_floor_s, rate)
        est.latency_floor_s = max(est.latency_floor_s, math.ceil(len(mrows) / lim.concurrency) * latency)
    est.chain_floor_s = est.longest_chain * latency
    est.cost_usd = round(est.cost_usd, 6)
    return est


@dataclass
class BuildEstimate:
    profile: str
    config_hash: str
    stages: list[StageEstimate]

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.stages)

    @property
    def cost_usd(self) -> float:
        return round(sum(s.cost_usd for s in self.stages), 4)

    @property
    def floor_s(self) -> float:
        return sum(s.floor_s for s in self.stages)

    @classmethod
    def from_json(cls, data: dict) -> "BuildEstimate":
        fields = set(StageEstimate.__dataclass_fields__)
        return cls(
            data["profile"],
            data["config_hash"],
            [StageEstimate(**{k: v for k, v in s.items() if k in fields}) for s in data["stages"]],
        )

    def to_json(self) -> dict:
        return {
            "profile": self.profile,
            "config_hash": self.config_hash,
            "calls": self.calls,
            "input_tokens": sum(s.input_tokens for s in self.stages),
            "output_tokens": sum(s.output_tokens for s in self.stages),
            "cost_usd": self.cost_usd,
            "floor_s": round(self.floor_s, 1),
            "stages": [{**asdict(s), "floor_s": round(s.floor_s, 1)} for s in self.stages if s.calls],
        }

    def line(self) -> str:
        tokens = sum(s.input_tokens + s.output_tokens for s in self.stages)
        batch = sum(s.batch_calls for s in self.stages)
        return (
            f"estimate (cold build): {self.calls:,} LLM calls, {tokens / 1e6:.2f} M tokens, ${self.cost_usd:,.2f}, "
            f"at least {_duration(self.floor_s)} under the configured limits"
            + (f" plus the turnaround of batch jobs for {batch:,} calls (up to 24 h)" if batch else "")
        )

    def table(self) -> str:
        head = f"{'stage':<13} {'calls':>8} {'batch':>6} {'in tokens':>11} {'out tokens':>11} {'cost $':>9} {'floor':>9}"
        lines = [head, "-" * len(head)]
        for s in self.stages:
            if s.calls:
                floor = "batch" if s.batch_calls == s.calls else _duration(s.floor_s)
                lines.append(
                    f"{s.stage:<13} {s.calls:>8,} {s.batch_calls:>6,} {s.input_tokens:>11,} {s.output_tokens:>11,} "
                    f"{s.cost_usd:>9.2f} {floor:>9}"
                )
        return "\n".join(lines + ["", self.line()])


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _remote_roles(cfg: BuildConfig) -> set[str]:
    from finhallu.llm.providers import get_provider

    return {r for r, c in cfg.roles.items() if not getattr(get_provider(c.provider), "offline", False)}


def called_remote_roles(cfg: BuildConfig) -> set[str]:
    """The roles on a remote provider that a stage of the build calls."""
    from finhallu.stages.pipeline import STAGES

    return _remote_roles(cfg) & {r for s in STAGES for r in s.calls_roles(cfg)}


def has_remote_roles(cfg: BuildConfig) -> bool:
    return bool(called_remote_roles(cfg))


def stage_calls_remote(stage, cfg: BuildConfig) -> bool:
    """Whether this stage calls a role on a remote provider under this config."""
    return bool(_remote_roles(cfg) & set(stage.calls_roles(cfg)))


def dry_run(cfg: BuildConfig, progress=None, answers: dict[str, str] | None = None) -> BuildEstimate:
    """Run the stages offline with every remote call estimated (see the module docstring).
    `answers`, if given, receives each prompt's rules answer by `prompt_digest`: a loopback server
    replaying them is a model that decides as the rules do (the dry run's test and benchmark)."""
    from finhallu.llm.runtime import LLMRuntime, use_runtime
    from finhallu.schemas.contracts import CONTRACTS
    from finhallu.stages.pipeline import STAGES

    frames: dict[str, pl.DataFrame] = {}  # every table made so far, by name
    stages: list[StageEstimate] = []
    prompts: dict[str, str] = {}  # every prompt estimated so far and its answer: the build's call cache
    remote = _remote_roles(cfg)
    # Past the last stage that calls a remote role there is nothing to count.
    last_llm = max((i for i, s in enumerate(STAGES) if remote & set(s.calls_roles(cfg))), default=-1)
    with tempfile.TemporaryDirectory(prefix="finhallu-dry-run-") as scratch:
        for stage in STAGES[: last_llm + 1]:
            if progress:
                progress(stage.name)
            ctx = stage.context(cfg, cache_dir=Path(scratch) / "cache")
            runtime = LLMRuntime(cfg.llm, None, stage.name, estimating=True)
            runtime.estimated_prompts, runtime.estimated_answers = prompts, answers
            with use_runtime(runtime):
                outputs = stage.run({n: frames[n] for n in stage.inputs}, ctx)
            frames.update({n: CONTRACTS[n].conform(outputs[n]) for n in stage.outputs})
            stages.append(stage_estimate(stage.name, runtime.ledger.rows(), cfg.llm))
    return BuildEstimate(cfg.profile, cfg.hash(), stages)


def estimate_path(home: Path, config_hash: str) -> Path:
    return Path(home) / "cache" / "estimates" / f"{config_hash}.json"


def save_estimate(home: Path, est: BuildEstimate) -> Path:
    path = estimate_path(home, est.config_hash)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(est.to_json(), indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def saved_stage_estimate(home: Path, config_hash: str, stage: str) -> dict | None:
    """The estimate made before this config's build, for one stage (None: none made, or no calls)."""
    path = estimate_path(home, config_hash)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return next((s for s in data.get("stages", []) if s["stage"] == stage), None)
