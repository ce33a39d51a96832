"""LLM layer throughput against a loopback OpenAI-compatible stub that answers in 200 ms and
enforces 600 RPM the way providers do (sliding 60 s window, 429 + Retry-After).

Prints: achieved RPM (target >= 90 % of the limit), requests the stub refused as over the limit
(target 0), and the provider calls of an identical rerun (target 0: all from the call cache).

    .venv/bin/python benchmarks/llm_throughput.py [--requests 2000] [--rpm 600] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from finhallu.llm.config import LLMConfig, ModelLimits
from finhallu.llm.cache import CallCache
from finhallu.llm.router import LLMRouter
from finhallu.llm.runtime import LLMRuntime
from finhallu.llm.stub_server import StubLLM
from finhallu.answerability import JUDGE  # noqa: F401  (registers judge_answerability)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rpm", type=float, default=600)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    inputs = [
        dict(
            question=f"What was the net interest margin in quarter {i}?",
            passage=f"The net interest margin was {1.5 + i / 1000:.3f}% in quarter {i}.",
            clue=None,
            answer=None,
            lang="en",
        )
        for i in range(args.requests)
    ]
    with tempfile.TemporaryDirectory() as tmp, StubLLM(latency_s=args.latency, rpm_limit=args.rpm) as stub:
        settings = LLMConfig(limits={"stub-model": ModelLimits(rpm=args.rpm, concurrency=args.concurrency)})
        role = {
            "j": {
                "provider": "openai_compatible",
                "model": "stub-model",
                "base_url": stub.openai_base,
                "temperature": 0.0,
                "max_tokens": 64,
            }
        }
        rt = LLMRuntime(settings, CallCache(Path(tmp) / "llm.sqlite"), stage="bench")
        t0 = time.monotonic()
        outs = LLMRouter(role, rt).call_many("j", "judge_answerability", inputs)
        elapsed = time.monotonic() - t0
        failed = sum(o is None for o in outs)
        first_calls = stub.count("chat")
        stub.reset_counts()
        rt2 = LLMRuntime(settings, CallCache(Path(tmp) / "llm.sqlite"), stage="bench")
        t1 = time.monotonic()
        LLMRouter(role, rt2).call_many("j", "judge_answerability", inputs)
        rerun_s = time.monotonic() - t1
        achieved = args.requests / elapsed * 60.0
        print(
            f"requests              {args.requests} ({failed} failed), stub latency {args.latency * 1000:.0f} ms, "
            f"limit {args.rpm:.0f} RPM, concurrency {args.concurrency}"
        )
        print(f"wall time             {elapsed:.1f} s ({first_calls} provider calls)")
        print(f"achieved RPM          {achieved:.1f} ({achieved / args.rpm:.1%} of the limit; target >= 90%)")
        print(f"max in any 60 s       {stub.max_window} (limit {args.rpm:.0f})")
        print(f"over the limit (429)  {stub.over_limit} (target 0)")
        print(f"rerun provider calls  {stub.count('chat')} (target 0), rerun wall time {rerun_s:.1f} s")


if __name__ == "__main__":
    main()
