"""The LLM path at demo scale: the `paper` profile with every role on a loopback server that
answers after a set latency (both wire formats: GPT roles on its OpenAI API, Gemini roles on its
Gemini API), the rate limits lifted and `--concurrency` requests in flight per model, so the
only brakes are latency and concurrency.

Prints, per stage: calls that reached the server, the stage's floor and the share of it reached
by its LLM phase (first request sent to last answer back) and by the whole stage task. The floor
is what no schedule can beat (`finhallu.estimate.stage_estimate` on the build's own ledger): calls
go out in waves of `concurrency` per model, ceil(calls / concurrency) x latency, and calls that
wait for each other (a dialogue's turns; the ledger's `chain`) take chain x latency however many
may be in flight. The naive calls x latency / concurrency is printed beside it. Then the whole
build against the sum of the floors, and the dry run's estimate against the actual calls and tokens.

    .venv/bin/python benchmarks/llm_path.py [--latency 0.5] [--concurrency 32] [--profile paper] [--keep HOME] [--phases]

--phases: the build's phases too (benchmarks/build_phases.py): its start, each stage's run and
gates, its end and the interpreter's exit.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import conftest  # noqa: E402

from finhallu.config import load_config  # noqa: E402
from finhallu.stages.pipeline import STAGES  # noqa: E402
from finhallu.estimate import dry_run, stage_estimate  # noqa: E402
from finhallu.llm.stub_server import StubLLM, cooperative_responder, replay_responder  # noqa: E402


def stub_profile(tmp: Path, stub: StubLLM, base: str, concurrency: int, extra: dict | None = None) -> str:
    """`base` with every remote role on the stub (its own wire format) and limits that never bind."""
    cfg = load_config(base)
    roles = {}
    for name, role in cfg.roles.items():
        r = role.model_dump(exclude_none=True)
        if r["provider"] == "offline":
            continue
        r["base_url"] = stub.gemini_base if r["provider"] == "gemini" else stub.openai_base
        r["batch"] = False  # online calls: the path under test (batch jobs do not see the latency)
        roles[name] = r
    unlimited = {"rpm": 10_000_000, "tpm": 10_000_000_000, "concurrency": concurrency}
    models = {r["model"] for r in roles.values()}
    doc = {
        "extends": base,
        "roles": roles,
        **(extra or {}),
        "llm": {"limits": {m: unlimited for m in models}, "default_limits": unlimited, "estimate_before_build": False},
    }  # the benchmark runs the dry run itself
    path = tmp / "llm-path.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def stage_seconds(home: Path, flow_run_id: str) -> dict[str, float]:
    """Each stage task's run time, from the home's Prefect API (the runs the UI shows)."""
    api = json.loads((home / "prefect" / "api.json").read_text())["url"]
    runs = httpx.post(f"{api}/task_runs/filter", json={"task_runs": {"flow_run_id": {"any_": [flow_run_id]}}}, timeout=30).json()
    return {r["name"]: r["total_run_time"] for r in runs}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--keep", type=Path, help="build into this home and keep it (its llm_calls hold each call's timing)")
    ap.add_argument("--phases", action="store_true", help="also time the build's phases (benchmarks/build_phases.py)")
    ap.add_argument(
        "--model",
        choices=("replay", "scripted"),
        default="replay",
        help="replay: the server answers as the dry run's rules did; scripted: the stub's canned answers",
    )
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    os.environ.setdefault("GEMINI_API_KEY", "benchmark")
    with tempfile.TemporaryDirectory() as tmp, StubLLM(latency_s=args.latency) as stub:
        tmp = Path(tmp)
        profile = stub_profile(tmp, stub, args.profile, args.concurrency)
        home = args.keep or tmp / "home"
        answers: dict[str, str] = {}
        t_dry = time.monotonic()
        estimate = dry_run(load_config(profile), answers=answers).to_json()
        t_dry = time.monotonic() - t_dry
        stub.responder = replay_responder(answers) if args.model == "replay" else cooperative_responder
        gc.freeze()  # the dry run's objects stay out of the stub's collections (a provider does not pause for them)
        phases_file = tmp / "phases.json"
        if args.phases:  # the build through build_phases.py, which times its phases in the build's process
            conftest.FINHALLU = [sys.executable, str(ROOT / "benchmarks" / "build_phases.py"), str(phases_file)]
        t0 = time.monotonic()
        proc = conftest.run_cli("build", "--profile", profile, "--json", home=home, timeout=4 * 3600)
        wall = time.monotonic() - t0
        ended = time.time()
        if proc.returncode != 0:
            print(f"build exit {proc.returncode}:\n{proc.stderr[-3000:]}")
            return 1
        out = json.loads(next(ln for ln in proc.stdout.splitlines()[::-1] if ln.startswith("{")))
        con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
        cols = "stage, model, attempts, input_tokens, output_tokens, latency_s, epoch(created_at::TIMESTAMPTZ) AS t, "
        cols += "operation, batch, cache_hit, cost_usd, chain"
        cur = con.execute(f"SELECT {cols} FROM llm_calls WHERE build_id = ? AND NOT cache_hit", [out["build_id"]])
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
        calls = [tuple(r[k] for k in names[:7]) for r in rows]
        flow_run = con.execute("SELECT flow_run_id FROM builds WHERE build_id = ?", [out["build_id"]]).fetchone()[0]
        ops = con.execute(
            "SELECT stage, operation, count(*) FROM llm_calls WHERE build_id = ? AND NOT cache_hit GROUP BY ALL ORDER BY ALL",
            [out["build_id"]],
        ).fetchall()
        con.close()
        seconds = stage_seconds(home, flow_run)
        print(
            f"stub latency {args.latency:.2f} s, concurrency {args.concurrency} per model, profile {args.profile}, "
            f"model {args.model}; server requests {stub.count('chat') + stub.count('generate')}; dry run {t_dry:.0f} s"
        )
        print(
            "floor: the largest of ceil(calls / concurrency) x latency per model (waves) and longest chain x latency;\n"
            "naive: calls x latency / concurrency of the busiest model. llm: first request sent to last answer back;\n"
            "stage: the whole stage task (with its offline work)"
        )
        print(
            f"{'stage':<13} {'calls':>6} {'chain':>5} {'naive s':>7} {'floor s':>7} {'llm s':>6} {'of floor':>8} "
            f"{'stage s':>7} {'of floor':>8}"
        )
        settings = load_config(profile).llm
        est_calls = {s["stage"]: s["calls"] for s in estimate["stages"]}
        floor_total = llm_total = 0.0
        for stage in [s.name for s in STAGES]:
            mine = [r for r in rows if r["stage"] == stage]
            if not mine:
                continue
            per_model: dict[str, int] = {}
            for r in mine:
                per_model[r["model"]] = per_model.get(r["model"], 0) + r["attempts"]
            naive = max(per_model.values()) * args.latency / args.concurrency
            est = stage_estimate(stage, mine, settings, latency_s=args.latency)
            llm_s = max(r["t"] for r in mine) - min(r["t"] - r["latency_s"] for r in mine)
            floor_total += est.floor_s
            llm_total += llm_s
            st = seconds.get(stage, float("nan"))
            print(
                f"{stage:<13} {len(mine):>6} {est.longest_chain:>5} {naive:>7.1f} {est.floor_s:>7.1f} {llm_s:>6.1f} "
                f"{est.floor_s / llm_s if llm_s else 0:>8.0%} {st:>7.1f} {est.floor_s / st:>8.0%}   "
                f"(dry run: {est_calls.get(stage, 0)} calls)"
            )
        total_calls = len(calls)
        tokens = sum(c[3] + c[4] for c in calls)
        rest = wall - llm_total
        print(
            f"build wall {wall:.1f} s for {total_calls} calls, x{wall / max(floor_total, 1e-9):.2f} the sum of the LLM "
            f"phases' floors (issue 21 asks <= x1.5): LLM phases {llm_total:.1f} s (their floors "
            f"{floor_total:.1f} s, x{llm_total / max(floor_total, 1e-9):.2f}), the rest {rest:.1f} s (offline work, gates, "
            f"the run's start); with every LLM phase at its floor the build would take {rest + floor_total:.0f} s "
            f"(this build: x{wall / max(rest + floor_total, 1e-9):.2f})"
        )
        if args.phases:
            from build_phases import table

            record = json.loads(phases_file.read_text())
            print(table([tuple(p) for p in record["phases"]], record["main_end_s"], ended - record["main_end_wall"]))
        if estimate:
            est_calls = sum(s["calls"] for s in estimate["stages"])
            est_tokens = sum(s["input_tokens"] + s["output_tokens"] for s in estimate["stages"])
            print(
                f"dry run: {est_calls} calls (actual {total_calls}, {est_calls / total_calls - 1:+.1%}), "
                f"{est_tokens} tokens (actual {tokens}, {est_tokens / max(tokens, 1) - 1:+.1%}), "
                f"${estimate['cost_usd']:.2f}, floor under the configured limits {estimate['floor_s']:.0f} s"
            )
            est_ops = {(s["stage"], op): n for s in estimate["stages"] for op, n in s["operations"].items()}
            if args.model == "replay":
                print(f"prompts the dry run had not asked (answered by the scripted stub): {stub.responder.unseen}")
            print("calls per operation, actual vs dry run:")
            for stage, op, n in ops:
                print(f"  {stage:<13} {op:<26} {n:>6} {est_ops.pop((stage, op), 0):>6}")
            for (stage, op), n in sorted(est_ops.items()):
                print(f"  {stage:<13} {op:<26} {0:>6} {n:>6}")

    return 0


if __name__ == "__main__":
    raise SystemExit(main())
