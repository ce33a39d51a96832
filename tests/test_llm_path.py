"""The LLM path: items in flight together, a lazy answerability judge, bounded injection attempts
and the dry run's estimate."""

from __future__ import annotations

import threading
import time

import polars as pl
import pytest

from finhallu.config import load_config
from finhallu.llm.config import LLMConfig, ModelLimits
from finhallu.estimate import has_remote_roles, stage_estimate
from finhallu.llm.parallel import map_items
from finhallu.llm.router import LLMRouter
from finhallu.llm.runtime import LLMRuntime
from finhallu.stages.pipeline import table_rules
from finhallu import answerability
from finhallu.stages import inject as injection


def _router(provider: str, concurrency: int = 4) -> LLMRouter:
    rt = LLMRuntime(LLMConfig(limits={"m": ModelLimits(concurrency=concurrency)}))
    return LLMRouter({"r": {"provider": provider, "model": "m", "base_url": "http://127.0.0.1:9/v1"}}, rt)


def test_items_of_a_remote_role_are_in_flight_together_and_come_back_in_order():
    router = _router("openai_compatible", concurrency=4)
    lock, now, peak = threading.Lock(), [0], [0]
    release = threading.Event()

    def item(i: int) -> int:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
            if now[0] == 8:
                release.set()  # eight items wait together: no item finishes before the eighth starts
        release.wait(timeout=60)
        with lock:
            now[0] -= 1
        return i * i

    done = []
    assert map_items(item, list(range(12)), router, ["r"], lambda n, total: done.append((n, total))) == [i * i for i in range(12)]
    # two items per request the model may have in flight (the limiter still sends four at most), never more
    assert peak[0] == 2 * 4
    assert done[-1] == (12, 12)


def test_offline_items_run_one_after_another_in_the_calling_thread():
    router = _router("offline")
    caller = threading.get_ident()
    assert map_items(lambda i: (i, threading.get_ident() == caller), [1, 2, 3], router, ["r"]) == [
        (1, True),
        (2, True),
        (3, True),
    ]


def test_an_item_error_reaches_the_stage():
    router = _router("openai_compatible")

    def item(i: int) -> int:
        if i == 3:
            raise ValueError("bad item 3")
        time.sleep(0.01)
        return i

    with pytest.raises(ValueError, match="bad item 3"):
        map_items(item, list(range(8)), router, ["r"])


class _Judge:
    """call_many stand-in: candidates of passage ids in `answerable` are judged answerable."""

    def __init__(self, answerable: set[str]):
        self.answerable, self.asked = answerable, []

    def backend(self, role):
        return "test:judge"

    def call_many(self, role, op, inputs):
        self.asked.append([i["passage"] for i in inputs])
        return [answerability.AnswerabilityOut(answerable=i["passage"] in self.answerable, reason="t") for i in inputs]


def _step2(seeds: dict[str, int]) -> list[tuple[dict, dict]]:
    out = []
    for sid, n in seeds.items():
        for rank in range(1, n + 1):
            row = {
                "seed_id": sid,
                "passage_id": f"{sid}-p{rank}",
                "candidate_rank": rank,
                "score": 1.0 / rank,
                "clue_absent": True,
                "answer_absent": True,
                "unanswerable": None,
                "is_hard_negative": False,
                "judge": "test:judge",
            }
            out.append((row, {"passage": row["passage_id"]}))
    return out


def test_the_judge_asks_in_rank_order_only_until_a_seed_has_its_hard_negatives():
    step2 = _step2({"a": 30, "b": 6})
    judge = _Judge({"a-p2", "a-p5"})  # two of a's first candidates could answer
    answerability.judge_lazily(step2, judge, "test:judge", top_k=4, margin=1)
    rows = pl.DataFrame([r for r, _ in step2])
    judged = {
        sid: sorted(g.filter(pl.col("unanswerable").is_not_null())["candidate_rank"].to_list())
        for (sid,), g in rows.group_by("seed_id")
    }
    # a: round 1 asks ranks 1-5 (K=4 plus a margin of 1), finds 3; round 2 asks 6-7 for the one missing.
    assert judged == {"a": [1, 2, 3, 4, 5, 6, 7], "b": [1, 2, 3, 4, 5]}
    assert [len(w) for w in judge.asked] == [10, 2]
    assert rows.filter(pl.col("seed_id") == "a")["is_hard_negative"].sum() == 5
    # The first K hard negatives are those a full judgement finds.
    full = _step2({"a": 30, "b": 6})
    answerability.judge_lazily(full, _Judge({"a-p2", "a-p5"}), "test:judge", top_k=4, lazily=False)
    first_k = lambda rs: [r["passage_id"] for r in rs if r["seed_id"] == "a" and r["is_hard_negative"]][:4]  # noqa: E731
    assert first_k([r for r, _ in step2]) == first_k([r for r, _ in full])


def test_the_gate_accepts_a_lazy_judgement_and_rejects_a_gap_in_it():
    step2 = _step2({"a": 12})
    answerability.judge_lazily(step2, _Judge(set()), "test:judge", top_k=4, margin=0)
    rows = pl.DataFrame([r for r, _ in step2])
    (rule,) = [r for r in table_rules("hard_negatives") if r.name == "verdicts_consistent"]
    assert rule.derive(rows, {})["ok"].all()
    gap = rows.with_columns(
        unanswerable=pl.when(pl.col("candidate_rank") == 2).then(None).otherwise(pl.col("unanswerable")),
        is_hard_negative=pl.col("candidate_rank") != 2,
    )
    assert not rule.derive(gap, {})["ok"].all()  # rank 2 skipped while rank 3 was asked


class _Missing:
    """An injector whose every output is unusable (the turn comes back unchanged)."""

    name, calls = "x", 0

    def call(self, view, htype, sub, seed, did):
        _Missing.calls += 1
        return injection.Injected(sub, view.turn["response"], "", None, None, "faithful_answer", "t")


def test_injection_attempts_per_dialogue_are_bounded_and_the_reason_is_kept():
    class View:
        turn = {"response": "same"}

    feas = {("contradictory", "number_error"): [(View(), 1)] * 5, ("unverifiable", None): [(View(), 2)] * 5}
    cfg = load_config("demo").inject.model_copy(update={"max_attempts": 3})
    made, why = injection._inject_dialogue({"dialogue_id": "d"}, _Missing(), list(feas), feas, cfg)
    assert made is None and _Missing.calls == 3 and why == "attempts exhausted: the output was unusable"


def test_stage_floors_follow_the_limits_and_leave_batch_out():
    settings = LLMConfig(limits={"m": ModelLimits(rpm=60, tpm=6000, concurrency=2)}, expected_latency_s=1.0)
    rows = [
        {
            "model": "m",
            "operation": "o",
            "batch": False,
            "cache_hit": False,
            "input_tokens": 90,
            "output_tokens": 10,
            "cost_usd": 0.01,
        }
    ] * 30
    rows += [
        {
            "model": "m",
            "operation": "o",
            "batch": True,
            "cache_hit": False,
            "input_tokens": 90,
            "output_tokens": 10,
            "cost_usd": 0.005,
        }
    ] * 10
    est = stage_estimate("s", rows, settings)
    assert est.calls == 40 and est.batch_calls == 10
    assert est.rate_floor_s == pytest.approx(30.0)  # 30 calls at 60 RPM (3,000 tokens at 6,000 TPM: 30 s as well)
    assert est.latency_floor_s == pytest.approx(15.0)  # 30 calls x 1 s / 2 in flight
    assert est.cost_usd == pytest.approx(0.35)


def test_waves_and_the_longest_chain_bound_a_stage_from_below():
    settings = LLMConfig(limits={"m": ModelLimits(concurrency=4)}, expected_latency_s=0.5)
    row = {
        "model": "m",
        "operation": "o",
        "batch": False,
        "cache_hit": False,
        "input_tokens": 9,
        "output_tokens": 1,
        "cost_usd": 0,
    }
    # 9 independent calls at 4 in flight go out in 3 waves: 1.5 s, not 9 x 0.5 / 4 = 1.125 s
    est = stage_estimate("s", [dict(row, chain=1)] * 9, settings)
    assert est.latency_floor_s == pytest.approx(1.5) and est.floor_s == pytest.approx(1.5)
    # one item's 6 calls wait for each other: 3 s, whatever the concurrency
    est = stage_estimate("s", [dict(row, chain=c) for c in range(1, 7)] + [dict(row, chain=1)] * 3, settings, latency_s=0.5)
    assert est.longest_chain == 6 and est.chain_floor_s == pytest.approx(3.0) and est.floor_s == pytest.approx(3.0)


def test_the_ledger_records_each_call_on_its_items_chain():
    """Items branch off the caller's path: an item's calls follow each other, a call_many is one
    round, and the caller goes on from the deepest item (a dry run records what a build would)."""
    rt = LLMRuntime(LLMConfig(limits={"m": ModelLimits(concurrency=8)}), estimating=True)
    router = LLMRouter({"r": {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}, rt)

    def ask(i: int) -> dict:
        q, p = f"What was the margin in quarter {i}?", f"The margin was {i}.1% in quarter {i}."
        return dict(question=q, passage=p, clue=None, answer=None, lang="en")

    def item(n: int) -> None:
        if n == 0:
            for i in range(3):  # three calls, each after the one before
                router.call("r", "judge_answerability", **ask(i))
        else:
            router.call_many("r", "judge_answerability", [ask(10 + i) for i in range(4)])  # one round of four

    map_items(item, [0, 1], router, ["r"])
    router.call("r", "judge_answerability", **ask(99))
    chains = [r.chain for r in rt.ledger.records]
    assert chains == [1, 2, 3, 1, 1, 1, 1, 4]
    assert stage_estimate("s", rt.ledger.rows(), rt.settings, latency_s=1.0).chain_floor_s == pytest.approx(4.0)
    # the next stage (its own runtime) in the same thread starts a path of its own
    rt2 = LLMRuntime(rt.settings, estimating=True)
    LLMRouter(router.roles, rt2).call("r", "judge_answerability", **ask(7))
    assert [r.chain for r in rt2.ledger.records] == [1]


def test_only_a_build_with_remote_roles_is_estimated_first():
    assert not has_remote_roles(load_config("demo")) and has_remote_roles(load_config("paper"))


def test_build_dry_run_prints_the_estimate_and_touches_no_home(tmp_path, capsys):
    import json

    import yaml

    from finhallu.cli import main

    profile = tmp_path / "judge.yaml"  # one remote role: the dry run stops after its last stage (inject)
    profile.write_text(
        yaml.safe_dump(
            {"extends": "demo", "roles": {"answerability_judge": {"provider": "openai", "model": "gpt-4o", "batch": True}}}
        ),
        encoding="utf-8",
    )
    home = tmp_path / "home"
    assert main(["build", "--dry-run", "--json", "--profile", str(profile), "--home", str(home)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    retrieve, inject = out["stages"]  # unanswerable seeds in retrieve, False Acceptance's on demand in inject
    assert (retrieve["stage"], inject["stage"]) == ("retrieve", "inject") and retrieve["calls"] == retrieve["batch_calls"]
    assert retrieve["calls"] + inject["calls"] == out["calls"] > 50 and out["cost_usd"] > 0
    assert all(s["operations"] == {"judge_answerability": s["calls"]} for s in (retrieve, inject))
    assert not home.exists()


def test_objects_made_before_items_in_flight_are_out_of_the_collectors_reach():
    import gc

    from finhallu.llm import parallel

    router = _router("openai_compatible", concurrency=2)
    before = gc.get_freeze_count()
    seen = map_items(lambda i: gc.get_freeze_count(), list(range(4)), router, ["r"])
    assert min(seen) > before  # a full collection during the items would walk none of the old objects
    assert gc.get_freeze_count() == before and parallel._frozen == 0  # collectable again afterwards


def test_the_longest_items_have_their_first_request_on_the_way_before_the_others_start():
    from finhallu.llm import parallel

    router = _router("openai_compatible", concurrency=4)
    lock, sent, started_after = threading.Lock(), set(), {}

    def item(i: int) -> int:
        if i < 2:  # the two long items: some work, then their first request
            time.sleep(0.05)
            with lock:
                sent.add(i)
            parallel.sending()
        else:
            with lock:
                started_after[i] = set(sent)
        return i

    assert map_items(item, list(range(6)), router, ["r"], longest_first=lambda i: 3 if i < 2 else 1) == list(range(6))
    assert all(seen == {0, 1} for seen in started_after.values()) and len(started_after) == 4


def test_a_freed_slot_goes_to_the_waiting_request_with_the_most_calls_ahead():
    """Two slots, both held; five requests wait. Freed one at a time, the slots go to the waiters
    by their items' calls still ahead (most first), equal ones in arrival order; a waiter cancelled
    while it waited is passed over and a cancelled holder's slot is handed on."""
    import asyncio

    from finhallu.llm.limits import PrioritySlots

    async def scenario() -> list[str]:
        slots, order = PrioritySlots(2), []
        hold = [asyncio.Event() for _ in range(2)]

        async def holder(i: int) -> None:
            async with slots.slot(0):
                await hold[i].wait()

        async def waiter(name: str, ahead: float) -> None:
            async with slots.slot(ahead):
                order.append(name)
                await asyncio.sleep(0)

        holders = [asyncio.create_task(holder(i)) for i in range(2)]
        await asyncio.sleep(0)
        waiters = [
            asyncio.create_task(waiter(n, a)) for n, a in [("short", 1), ("long", 9), ("mid-a", 4), ("gone", 20), ("mid-b", 4)]
        ]
        await asyncio.sleep(0)
        waiters[3].cancel()  # "gone" stops waiting: it must not take a slot nor lose one
        hold[0].set()
        await asyncio.gather(holders[0], *waiters[:3], *waiters[4:], return_exceptions=True)
        hold[1].set()
        await holders[1]
        assert slots._free == 2 and not [w for w in slots._waiting if not w[2].done()]
        return order

    assert asyncio.run(scenario()) == ["long", "mid-a", "mid-b", "short"]


def test_an_items_requests_carry_the_calls_it_still_has_ahead():
    """map_items' longest_first is an item's expected calls: each request of the item carries how
    many are left (this one included), nested items inherit it, and without it nothing is ahead."""
    from finhallu.llm import parallel

    rt = LLMRuntime(LLMConfig(limits={"m": ModelLimits(concurrency=8)}), estimating=True)
    router = LLMRouter({"r": {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}, rt)
    seen: dict[int, list[float]] = {}

    def item(n: int) -> None:
        for _ in range(n):
            parallel.call_round(rt)
            seen.setdefault(n, []).append(parallel.rounds_ahead(rt))
        if n == 3:  # a nested fan-out goes on with its item's count
            seen[30] = map_items(lambda _: (parallel.call_round(rt), parallel.rounds_ahead(rt))[1], [0, 1], router, ["r"])

    map_items(item, [3, 1], router, ["r"], longest_first=lambda n: n + 1)
    assert seen == {3: [4.0, 3.0, 2.0], 1: [2.0], 30: [1.0, 1.0]}
    map_items(lambda _: (parallel.call_round(rt), seen.__setitem__(0, [parallel.rounds_ahead(rt)])), [0], router, ["r"])
    assert seen[0] == [0.0]


def test_a_lead_items_nested_first_request_lets_the_others_start():
    """A lead item whose first requests go out from items of its own (a document's chunks) counts
    as on its way then, not when it has finished."""
    from finhallu.llm import parallel

    router = _router("openai_compatible", concurrency=4)
    lock, lead_done, started_before_lead_done = threading.Lock(), threading.Event(), []

    def nested(_: int) -> None:
        parallel.sending()
        time.sleep(0.2)

    def item(i: int) -> int:
        if i == 0:
            map_items(nested, [0, 1], router, ["r"])
            lead_done.set()
        else:
            with lock:
                started_before_lead_done.append(not lead_done.is_set())
        return i

    assert map_items(item, list(range(3)), router, ["r"], longest_first=lambda i: 3 if i == 0 else 1) == [0, 1, 2]
    assert started_before_lead_done == [True, True]


def test_seed_methods_declare_the_rounds_on_their_longest_path(tmp_path):
    """SEED_METHOD_ROUNDS (the priority of a document's requests) is each method's longest chain of
    calls, as the dry run of the paper profile records it."""
    from finhallu.llm.runtime import use_runtime
    from finhallu.schemas.contracts import CONTRACTS
    from finhallu.stages.pipeline import STAGES
    from finhallu.stages.seed_qa import SEED_METHOD_ROUNDS

    cfg = load_config("paper")
    frames: dict[str, pl.DataFrame] = {}
    for stage in STAGES[: [s.name for s in STAGES].index("seed_qa") + 1]:
        runtime = LLMRuntime(cfg.llm, None, stage.name, estimating=True)
        with use_runtime(runtime):
            outputs = stage.run({n: frames[n] for n in stage.inputs}, stage.context(cfg, cache_dir=tmp_path / "cache"))
        frames.update({n: CONTRACTS[n].conform(outputs[n]) for n in stage.outputs})
    method_of = {
        **dict.fromkeys(("extract_triplets", "reflect_triplets", "generate_triplet_qa", "judge_seed_qa"), "triplet_qa"),
        **dict.fromkeys(
            ("generate_questions", "group_questions", "answer_question", "check_factuality", "score_answers_listwise"),
            "multi_llm_qa",
        ),
    }
    longest: dict[str, int] = {}
    for r in runtime.ledger.rows():
        method = method_of[r["operation"]]
        longest[method] = max(longest.get(method, 0), r["chain"])
    assert longest == SEED_METHOD_ROUNDS
