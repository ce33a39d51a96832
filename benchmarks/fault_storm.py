"""The fault-storm build of tests/test_fault_storm.py at a larger size: the demo build with its
LLM roles alternately on the stub's Gemini and OpenAI wire formats (two roles on the batch API),
the stub faulting on a share of its requests (429, 500, timeout, html, truncated, schema), then
a rerun with `--retry-failed` and the faults off.

Prints: faults injected (by kind), requests per wire, attempts per call (max), failures recorded
(llm_calls rows with an error, and requests recorded as failed in the call cache), calls re-sent
by the rerun (of which had failed before, and how many the stub saw), and whether both builds
completed.

    .venv/bin/python benchmarks/fault_storm.py [--fault-rate 0.35] [--scale 2] [--seed 16]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import run_cli  # noqa: E402
from test_fault_storm import failed_keys, ledger, responder, storm_profile, summary  # noqa: E402

from finhallu.llm.stub_server import FAULT_KINDS, StubLLM  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fault-rate", type=float, default=0.35)
    ap.add_argument("--faults", default=",".join(FAULT_KINDS))
    ap.add_argument("--scale", type=int, default=2, help="1 = the test's reduced build; 2-3 = closer to the demo")
    ap.add_argument("--seed", type=int, default=16)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    os.environ.setdefault("GEMINI_API_KEY", "benchmark")
    with (
        tempfile.TemporaryDirectory() as tmp,
        StubLLM(
            responder=responder,
            fault_rate=args.fault_rate,
            fault_kinds=tuple(args.faults.split(",")),
            fault_seed=args.seed,
            fault_hold_s=30,
        ) as stub,
    ):
        tmp = Path(tmp)
        profile = storm_profile(tmp, stub, scale=args.scale)
        home = tmp / "home"
        t0 = time.monotonic()
        proc = run_cli("build", "--profile", profile, "--json", home=home, timeout=3600)
        t1 = time.monotonic()
        if proc.returncode != 0:
            print(f"storm build exit {proc.returncode}:\n{proc.stderr[-3000:]}")
            return 1
        rows1 = ledger(home, summary(proc)["build_id"])
        failed1 = failed_keys(home)
        requests1 = {k: stub.count(k) for k in ("chat", "generate", "batch_create")}
        sent = requests1["chat"] + requests1["generate"]
        injected = dict(stub.faults_injected)
        print(f"storm build: exit 0 in {t1 - t0:.0f}s, {len(rows1)} LLM calls, online requests {requests1}")
        print(
            f"faults injected: {sum(injected.values())} of {sent} online requests "
            f"({sum(injected.values()) / max(1, sent):.1%}): {dict(sorted(injected.items()))}"
        )
        print(
            f"attempts per call: max {max(r['attempts'] for r in rows1)} "
            f"(mean {sum(r['attempts'] for r in rows1 if not r['cache_hit']) / max(1, sum(not r['cache_hit'] for r in rows1)):.2f} "
            "over calls sent)"
        )
        print(
            f"failures recorded: {sum(r['error'] is not None for r in rows1)} llm_calls rows with an error, "
            f"{len(failed1)} requests recorded as failed in the call cache"
        )

        stub.fault_rate = 0.0
        stub.reset_counts()
        proc = run_cli("build", "--profile", profile, "--json", "--retry-failed", home=home, timeout=3600)
        t2 = time.monotonic()
        if proc.returncode != 0:
            print(f"--retry-failed rerun exit {proc.returncode}:\n{proc.stderr[-3000:]}")
            return 1
        rows2 = ledger(home, summary(proc)["build_id"])
        resent = {r["request_key"] for r in rows2 if not r["cache_hit"]}
        seen1 = {r["request_key"] for r in rows1}
        succeeded1 = {r["request_key"] for r in rows1 if r["error"] is None} - failed1
        print(
            f"rerun --retry-failed: exit 0 in {t2 - t1:.0f}s; calls re-sent {len(resent & seen1)} "
            f"(all recorded failures: {resent & seen1 <= failed1}; succeeded calls re-sent: {len(resent & succeeded1)}), "
            f"new calls {len(resent - seen1)} (items the first build dropped), stub requests "
            f"{stub.count('chat') + stub.count('generate')} online + {stub.count('batch_create')} batch jobs; "
            f"recorded failures left: {len(failed_keys(home))} (failed prompts the rerun did not ask again: "
            "repair prompts whose first prompt now succeeds, and items a stage no longer needed)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
