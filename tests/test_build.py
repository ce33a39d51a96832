"""End-to-end: the demo build, cached reruns, knob reruns, gate failure, kill-and-rerun, concurrency."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from conftest import FINHALLU, ROOT, build_json, cli_env, run_cli
from finhallu.stages.pipeline import STAGES
from finhallu.text.normalize import contains_normalized
from finhallu.text.numbers import number_keys
from finhallu.warehouse import TableStore

pytestmark = pytest.mark.slow

TYPES = {"contradictory", "unverifiable", "irrelevance", "false_acceptance", "false_refusal"}


def _con(home: Path):
    return duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)


def _current_hashes(home: Path) -> dict[str, str]:
    store = TableStore(home)
    return {name: store.record(name, v)["content_hash"] for name, v in store.current().items()}


def test_demo_build_produces_a_complete_benchmark(demo_build):
    home, summary = demo_build
    assert summary["status"] == "succeeded" and len(summary["ran"]) == 13
    con = _con(home)
    labels = dict(con.execute("SELECT label_4class, count(*) FROM samples GROUP BY 1").fetchall())
    assert set(labels) == {"faithful_answer", "hallucination", "false_refusal", "true_refusal"}
    assert {t for (t,) in con.execute("SELECT DISTINCT hallu_type FROM samples WHERE hallu_type IS NOT NULL").fetchall()} == TYPES
    subtypes = {
        s for (s,) in con.execute("SELECT DISTINCT hallu_subtype FROM samples WHERE hallu_subtype IS NOT NULL").fetchall()
    }
    assert len(subtypes) >= 7, subtypes
    assert con.execute("SELECT count(*) FROM samples").fetchone()[0] >= 150
    stats = dict(con.execute("SELECT metric, value FROM dataset_stats WHERE split = 'all' AND slice = 'all'").fetchall())
    # The judges keep most of the authored corpus' dialogues and injections; what they drop carries its reasons.
    assert 0.5 <= stats["dialogue_retention"] <= 1 and stats["injection_retention"] >= 0.85
    assert con.execute("SELECT count(*) FROM dialogue_qc WHERE NOT passed AND len(reasons) = 0").fetchone()[0] == 0
    assert stats["fingerprint_tfidf_lr_accuracy"] <= 0.6 and stats["fingerprint_length_accuracy"] <= 0.6
    # No shortcut (stages/assemble/validity.py): copying is no sign of faithfulness, and hallucinations sit deep in
    # the dialogues. (Response-only recall per type is reported in dataset_stats, not asserted here.)
    assert stats["shortcut_verbatim_copy_accuracy"] <= 0.6 and stats["shortcut_near_copy_accuracy"] <= 0.6
    assert stats["shortcut_mean_turn"] >= 3.5
    depth = dict(con.execute("SELECT slice, value FROM dataset_stats WHERE metric = 'shortcut_turn2plus_share'").fetchall())
    assert set(depth) == TYPES and min(depth.values()) >= 0.5, depth
    assert {s for (s,) in con.execute("SELECT DISTINCT source FROM documents").fetchall()} == {"aihub", "sec10k", "dart"}
    # Filings ship no QA: their generated seeds (triplet-grounded for 10-K, multi-LLM for DART) reach the samples.
    seeded = set(
        con.execute("""SELECT DISTINCT q.source, q.method FROM samples s
        JOIN turns t ON t.dialogue_id = s.dialogue_id AND t.turn_index = s.turn_index
        JOIN qa_seeds q ON q.seed_id = t.seed_id""").fetchall()
    )
    assert {("sec10k", "triplet_qa"), ("dart", "multi_llm_qa")} <= seeded, seeded
    # Pairing: one faithful and one hallucinated sample per pair, same turn.
    bad_pairs = con.execute("""SELECT pair_id FROM samples GROUP BY pair_id
        HAVING count(*) FILTER (label_binary='faithful') != 1 OR count(*) FILTER (label_binary='hallucinated') != 1
            OR count(DISTINCT query) != 1""").fetchall()
    assert bad_pairs == []
    # Splits disjoint by institution and by document; test split = the two consumer-protection bodies.
    assert (
        con.execute(
            "SELECT count(*) FROM (SELECT institution FROM samples GROUP BY 1 HAVING count(DISTINCT split) > 1)"
        ).fetchone()[0]
        == 0
    )
    assert {i for (i,) in con.execute("SELECT DISTINCT institution FROM samples WHERE split='test'").fetchall()} == {
        "금융감독원",
        "한국소비자원",
    }
    leak = con.execute("""SELECT count(*) FROM (SELECT s.split, p.split AS psplit FROM
        (SELECT split, unnest(passages).passage_id AS pid FROM samples) s JOIN passages p ON p.passage_id = s.pid
        WHERE s.split != p.split)""").fetchone()[0]
    assert leak == 0
    # Exactly one injected turn per hallucinated dialogue.
    assert con.execute("SELECT max(n) FROM (SELECT count(*) n FROM injections GROUP BY dialogue_id, injector)").fetchone()[0] == 1
    # Gates recorded, nothing failed.
    assert con.execute("SELECT count(*) FROM dq_results WHERE outcome != 'passed'").fetchone()[0] == 0
    built = {t for stage in STAGES for t in stage.outputs}
    gated = {r[0] for r in con.execute("SELECT DISTINCT table_name FROM dq_results").fetchall()}
    assert built <= gated  # every published table was gated (a probe on this home gates its own too)
    assert (home / "reports").glob("*/index.html")
    assert Path(summary["report"]).read_text().count("<table") >= 4
    con.close()


def test_every_type_and_subtype_on_both_splits_paired_with_stats_and_exports(demo_build):
    from finhallu.injectors import minimal_edit_subtypes, subtypes_by_type

    home, _ = demo_build
    con = _con(home)
    leaves = {(t, s) for t, subs in subtypes_by_type().items() for s in (subs or (None,))}
    for split in ("train", "test"):
        got = set(
            con.execute(
                "SELECT DISTINCT hallu_type, hallu_subtype FROM samples WHERE split = ? AND label_binary = 'hallucinated'",
                [split],
            ).fetchall()
        )
        assert got == leaves, (split, leaves - got)
    # the test split by two sources, each base dialogue injected once
    assert {i for (i,) in con.execute("SELECT DISTINCT injector FROM samples WHERE split = 'test'").fetchall()} == {
        "rules_a",
        "rules_b",
    }
    assert {i for (i,) in con.execute("SELECT DISTINCT injector FROM samples WHERE split = 'train'").fetchall()} == {"rules_a"}
    assert con.execute("SELECT max(n) FROM (SELECT count(*) n FROM injections GROUP BY dialogue_id)").fetchone()[0] == 1
    # Table 2 per split, and small edits for the minimal-edit subtypes
    stats = {(sp, m, sl): v for sp, m, sl, v in con.execute("SELECT split, metric, slice, value FROM dataset_stats").fetchall()}
    for split in ("train", "test"):
        for metric in (
            "dialogues",
            "unique_passages",
            "turns_min",
            "turns_max",
            "turns_mean",
            "mean_query_words",
            "mean_response_words",
            "pct_unanswerable",
        ):
            assert (split, metric, "all") in stats, (split, metric)
        assert stats[(split, "mean_response_morphemes", "ko")] > stats[(split, "mean_response_words", "all")]
        assert 0 < stats[(split, "pct_unanswerable", "all")] < 50
    for sub in minimal_edit_subtypes():
        assert stats[("all", "max_edit_words", sub)] <= 4, sub
    strategies = {sl for (sp, m, sl) in stats if m == "pairs_by_strategy"}
    assert {s.split("/")[0] for s in strategies if "/" in s} == {"embedding", "instructed"}
    assert {"same_document", "other_document"} <= strategies
    # exports: HF layout and SFT records with rationales
    version = con.execute("SELECT max(version) FROM table_versions WHERE name = 'samples'").fetchone()[0]
    root = home / "exports" / f"samples@v{version}"
    assert (root / "README.md").read_text().startswith("---\nconfigs:")
    for split in ("train", "valid", "test"):
        n = con.execute("SELECT count(*) FROM samples WHERE split = ?", [split]).fetchone()[0]
        assert len(list((root / "data").glob(f"{split}-*.parquet"))) == 1
        assert len((root / "jsonl" / f"{split}.jsonl").read_text().splitlines()) == n
        sft = [json.loads(x) for x in (root / "sft" / f"{split}.jsonl").read_text().splitlines()]
        assert len(sft) == n and all(r["messages"][-1]["content"].startswith("1) ") for r in sft)
    con.close()


def test_injected_samples_carry_their_labels(demo_build):
    home, _ = demo_build
    con = _con(home)
    rows = con.execute("""SELECT h.hallu_type, h.hallu_subtype, h.response, f.response, h.passages, f.label_4class
        FROM samples h JOIN samples f ON h.pair_id = f.pair_id AND f.label_binary = 'faithful'
        WHERE h.label_binary = 'hallucinated'""").fetchall()
    assert rows
    for htype, sub, hresp, fresp, passages, flabel in rows:
        evidence = "\n".join(p["text"] for p in passages)
        if sub == "number_error":
            new = number_keys(hresp) - number_keys(fresp)
            assert new and not (new & number_keys(evidence)), (hresp, fresp)
        elif htype == "false_acceptance":
            assert all(p["role"] == "hard_negative" for p in passages) and flabel == "true_refusal"
        elif htype == "false_refusal":
            assert any(p["role"] == "gold" for p in passages) and flabel == "faithful_answer"
        if htype != "false_acceptance":
            assert hresp != fresp
    # Unanswerable contexts never hold the turn's gold passage.
    leaked = con.execute("""SELECT count(*) FROM samples s JOIN injections i ON i.injection_id = s.pair_id
        JOIN turns t ON t.turn_id = i.turn_id
        WHERE NOT s.answerable AND list_contains([p.passage_id FOR p IN s.passages], t.gold_passage_id)""").fetchone()[0]
    assert leaked == 0
    assert con.execute("SELECT count(*) FROM samples WHERE NOT answerable").fetchone()[0] > 0
    # Hard negatives really lack the clue.
    for text, clue in con.execute("""SELECT p.text, q.clue_text FROM hard_negatives h JOIN passages p USING (passage_id)
            JOIN qa_seeds q USING (seed_id) WHERE q.clue_text IS NOT NULL AND h.is_hard_negative""").fetchall():
        assert not contains_normalized(text, clue)
    con.close()


def test_readme_queries_run_in_the_duckdb_shell_readonly(demo_build):
    home, _ = demo_build
    readme = (ROOT / "README.md").read_text()
    queries = [q.split("```")[0].strip() for q in readme.split("```sql")[1:]]
    assert len(queries) >= 4
    shell = Path(sys.executable).parent / "duckdb"
    assert shell.exists(), "the duckdb shell (duckdb-cli) should be installed with finhallu"
    for q in queries:
        out = subprocess.run(
            [str(shell), "-readonly", "-json", str(home / "warehouse.duckdb"), "-c", q],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and "Error" not in out.stderr, (q, out.stderr)
        if q is queries[0]:
            rows = json.loads(out.stdout)
            assert {r["label_4class"] for r in rows} == {"faithful_answer", "hallucination", "false_refusal", "true_refusal"}
    # The Python client, read-only, sees the same views.
    con = _con(home)
    assert con.execute(queries[0]).fetchall()
    con.close()


def test_cached_rerun_creates_no_versions(demo_build):
    home, _ = demo_build
    before = sorted(p.name for p in (home / "catalog" / "table_versions").iterdir())
    hashes = _current_hashes(home)
    proc, summary = build_json(home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary["ran"] == [] and len(summary["cached"]) == 13
    assert sorted(p.name for p in (home / "catalog" / "table_versions").iterdir()) == before
    assert _current_hashes(home) == hashes


def test_gates_behind_the_next_stage_publish_the_same_tables(demo_build):
    """Every stage rerun (--retry-failed refreshes Prefect's cache) with each stage's gates in the
    gate worker while the next stage works on its unpublished outputs: the same content, so no new
    version and the same current tables; every gate outcome recorded for the build."""
    home, _ = demo_build
    before = sorted(p.name for p in (home / "catalog" / "table_versions").iterdir())
    hashes = _current_hashes(home)
    proc, summary = build_json(home, "--retry-failed", "--set", "llm.overlap_gates=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(summary["ran"]) == 13 and summary["cached"] == []
    assert sorted(p.name for p in (home / "catalog" / "table_versions").iterdir()) == before
    assert _current_hashes(home) == hashes
    con = _con(home)
    gated = con.execute(
        "SELECT count(DISTINCT table_name), count(*) FILTER (outcome <> 'passed') FROM dq_results WHERE build_id = ?",
        [summary["build_id"]],
    ).fetchone()
    con.close()
    assert gated == (len(hashes), 0)


def test_late_knob_reruns_only_descendants(demo_build):
    home, _ = demo_build
    before = _current_hashes(home)
    proc, summary = build_json(home, "--set", "detect.detectors.lexical_support.threshold=0.45")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary["ran"] == ["detect", "metrics", "report"]
    after = _current_hashes(home)
    assert after["detections"] != before["detections"]
    assert {k for k in before if before[k] != after[k]} <= {
        "detections",
        "metrics",
        "confusion",
        "detector_tests",
        "report_index",
    }
    # Back to the original knob: all cached, the earlier versions become current again.
    proc, summary = build_json(home)
    assert summary["ran"] == [] and _current_hashes(home) == before


@pytest.mark.parametrize("overlap", ["false", "true"])
def test_failing_gate_stops_descendants_and_keeps_current(demo_build, overlap):
    home, _ = demo_build
    before = TableStore(home).current()
    versions = sorted(p.name for p in (home / "catalog" / "table_versions").iterdir())
    # No dialogue asked for (QC thresholds are range-checked now, so "impossible" ones are refused
    # up front): the dialogues gate finds an empty table and nothing after it publishes. With the
    # gates behind the next stage (flows/overlap.py), dialogue_qc already ran on the unpublished
    # dialogues: it must fail too, publish nothing, and the build report the dialogues gate.
    proc, summary = build_json(
        home,
        "--set",
        "dialogues.dialogues_per_document=0",
        "--set",
        "dialogues.dialogues_per_filing=0",
        "--set",
        f"llm.overlap_gates={overlap}",
    )
    assert proc.returncode == 2
    assert summary["status"] == "failed" and summary["failed_stage"] == "dialogues"
    assert sorted(p.name for p in (home / "catalog" / "table_versions").iterdir()) == versions
    err = proc.stderr
    assert "dialogues" in err and "expect_table_row_count_to_be_between" in err
    assert TableStore(home).current() == before
    con = _con(home)
    failed = con.execute("SELECT DISTINCT table_name, expectation FROM dq_results WHERE outcome='failed'").fetchall()
    assert ("dialogues", "expect_table_row_count_to_be_between") in failed
    assert con.execute("SELECT status FROM builds ORDER BY started_at DESC LIMIT 1").fetchone()[0] == "failed"
    con.close()


def _start_build(home: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*FINHALLU, "build", "--profile", "demo", "--json", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        start_new_session=True,
    )


def _wait_for(path_glob: tuple[Path, str], timeout: float = 300) -> None:
    folder, pattern = path_glob
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if folder.exists() and list(folder.glob(pattern)):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{pattern} never appeared in {folder}")


def test_kill_mid_build_then_rerun_matches_uninterrupted(demo_build, tmp_path):
    ref_home, _ = demo_build
    home = tmp_path / "killed"
    proc = _start_build(home)
    # Kill while a stage after `embed` is running. (Waiting for `embed`'s publish, not `chunk`'s: a stage's
    # Prefect cache record is written just after its tables are published, so killing right after the
    # `passages` record could still lose chunk's cache record, and chunk would rightly rerun.)
    _wait_for((home / "catalog" / "table_versions", "embeddings@*.json"))
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    visible = {p.name.split("@")[0] for p in (home / "catalog" / "table_versions").iterdir()}
    assert "samples" not in visible
    rerun, summary = build_json(home)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "ingest" in summary["cached"] and "chunk" in summary["cached"]
    assert _current_hashes(home) == _current_hashes(ref_home)
    assert not list((home / "tables").glob("*/.tmp-*"))
    # reruns are byte-identical down to the exports
    digest = lambda root: {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}  # noqa: E731
    assert digest(home / "exports") == digest(ref_home / "exports") and digest(home / "exports")


def test_second_build_on_same_home_refuses(tmp_path):
    home = tmp_path / "busy"
    first = _start_build(home)
    try:
        _wait_for((home, ".build.lock"))
        time.sleep(0.5)
        second, _ = build_json(home)
        assert second.returncode == 3
        assert "another build is running" in second.stderr
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


def test_stage_command_runs_up_to_a_stage_without_moving_current(demo_build):
    home, _ = demo_build
    before = TableStore(home).current()
    proc = subprocess.run(
        [*FINHALLU, "stage", "retrieve", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["cached"] == ["ingest", "chunk", "embed", "seed_qa", "retrieve"] and summary["ran"] == []
    assert TableStore(home).current() == before


def _audit(home: Path, swap: bool = False):
    """The label verifier over published samples; swap: each pair's two responses exchanged (every
    label then wrong), to show the verifier rejects what it should."""
    import polars as pl

    from finhallu.labelcheck.audit import audit_samples

    con = _con(home)
    samples = con.sql("SELECT * FROM samples").pl()
    if swap:
        other = samples.select("pair_id", "label_binary", pl.col("response").alias("other"))
        other = other.with_columns(
            label_binary=pl.when(pl.col("label_binary") == "faithful").then(pl.lit("hallucinated")).otherwise(pl.lit("faithful"))
        )
        samples = samples.join(other, on=["pair_id", "label_binary"]).with_columns(response=pl.col("other")).drop("other")
    audit = audit_samples(samples, con.sql("SELECT * FROM injections").pl(), con.sql("SELECT * FROM turns").pl())
    dropped = con.execute(
        "SELECT count(*) FILTER (WHERE NOT passed), count(*) FILTER (WHERE NOT verified) FROM injection_qc"
    ).fetchone()
    stats = con.execute("SELECT coalesce(sum(value), 0) FROM dataset_stats WHERE metric = 'label_dropped_by'").fetchone()[0]
    con.close()
    return audit, dropped, stats


def test_every_published_pair_passes_the_label_verifier(demo_build):
    """Both sides of every pair re-checked from what `samples` publishes, and dataset_stats counts
    every drop. The verifier is no rubber stamp: with each pair's responses swapped it rejects the
    samples (what it drops of the demo's own injections is in dataset_stats; see label_audit.py)."""
    audit, (_, not_verified), stats = _audit(demo_build[0])
    failed = audit.filter(~audit["ok"])
    assert audit.height > 100 and failed.height == 0, failed.head(5).to_dicts()
    assert stats >= not_verified
    assert not_verified > 0  # QC that passes everything is a defect: the verifier drops a share of the demo's injections
    swapped, _, _ = _audit(demo_build[0], swap=True)
    assert swapped.filter(~swapped["ok"]).height >= 0.8 * swapped.height  # 88 % on the demo


@pytest.mark.realdata
def test_shared_fixtures_build_passes_the_label_verifier(real_data, tmp_path):
    """The real fixtures: every label verified; every split holds samples, all three sources are in the
    benchmark and filings reach every split (split by company); no coverage warning; filing passages
    carry section roles and none is only page furniture."""
    from finhallu.sources.furniture import is_furniture

    home = tmp_path / "fixtures-home"
    proc = run_cli("build", "--profile", str(ROOT / "examples" / "shared-fixtures.yaml"), "--json", home=home, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    audit, _, _ = _audit(home)
    failed = audit.filter(~audit["ok"])
    assert audit.height > 0 and failed.height == 0, failed.head(5).to_dicts()
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["warnings"] == [] and not [ln for ln in proc.stdout.splitlines() if ln.startswith("warning")]
    con = _con(home)
    try:
        by = dict(
            ((sp, src), n) for sp, src, n in con.execute("SELECT split, source, count(*) FROM samples GROUP BY ALL").fetchall()
        )
        roles = con.execute(
            "SELECT source, count(*) FILTER (WHERE section_role IS NULL), "
            "count(*) FILTER (WHERE section_role = 'financial_statements') FROM passages "
            "WHERE source <> 'aihub' GROUP BY 1 ORDER BY 1"
        ).fetchall()
        filing_texts = [t for (t,) in con.execute("SELECT text FROM passages WHERE source <> 'aihub'").fetchall()]
        statements = {
            d
            for (d,) in con.execute(
                "SELECT DISTINCT d.institution FROM passages p JOIN documents d USING (doc_id) "
                "WHERE p.section_role = 'financial_statements' AND d.source = 'sec10k'"
            ).fetchall()
        }
    finally:
        con.close()
    assert {sp for sp, _ in by} == {"train", "valid", "test"} and {src for _, src in by} == {"aihub", "sec10k", "dart"}
    assert all(by.get((sp, "sec10k"), 0) > 0 for sp in ("train", "valid", "test")), by
    assert [(src, nulls) for src, nulls, _ in roles] == [("dart", 0), ("sec10k", 0)] and all(fs > 0 for _, _, fs in roles)
    assert {"Apple Inc.", "NVIDIA CORP", "GAINSCO, INC."} <= statements
    assert filing_texts and not [t[:80] for t in filing_texts if is_furniture(t)]


@pytest.mark.parametrize("kinds", [("aihub", "sec10k", "dart"), ("sec10k",)])
def test_build_warm_up_loads_kiwi_only_where_a_source_is_korean(monkeypatch, kinds):
    from finhallu import cli
    from finhallu.config import load_config
    from finhallu.text import sentences

    loaded: list[str] = []
    monkeypatch.setattr(sentences, "kiwi", lambda: loaded.append("kiwi"))
    cfg = load_config("demo")
    ingest = cfg.ingest.model_copy(update={"sources": [s for s in cfg.ingest.sources if s.kind in kinds]})
    cli._warm_up(cfg.model_copy(update={"ingest": ingest}), lambda: loaded.append("gates"))
    assert loaded == (["gates", "kiwi"] if "aihub" in kinds else ["gates"])


def test_build_warm_up_starts_the_gate_worker_instead_of_importing_gates_where_gates_overlap(monkeypatch):
    from finhallu import cli
    from finhallu.config import load_config
    from finhallu.flows import gate_worker
    from finhallu.llm.providers.base import RemoteProvider
    from finhallu.text import sentences

    loaded: list[str] = []
    monkeypatch.setattr(sentences, "kiwi", lambda: loaded.append("kiwi"))
    monkeypatch.setattr(gate_worker, "start_early", lambda: loaded.append("gate worker"))
    monkeypatch.setattr(RemoteProvider, "import_sdk", lambda self: loaded.append(f"sdk {self.name}"))
    cfg = load_config("demo", {"llm": {"overlap_gates": True}})
    cli._warm_up(cfg, lambda: loaded.append("gates"))
    assert loaded == ["kiwi", "gate worker"]  # the demo's roles are offline: no SDK
    loaded.clear()
    # the paper profile's roles call OpenAI and Gemini; its gate worker starts after their SDKs
    cli._warm_up(load_config("paper"), lambda: loaded.append("gates"))
    assert loaded == ["kiwi", "sdk gemini", "sdk openai", "gate worker"]


@pytest.mark.parametrize("profile", ["demo", "paper"])
def test_build_start_runs_without_the_collector_then_freezes_what_it_made(monkeypatch, tmp_path, profile):
    """The imports and warm-up run with the collector paused; their objects are frozen for the
    build (a build with remote roles keeps what its stages made frozen too, until it ends), and
    everything is as before once the command returns."""
    import contextlib
    import gc

    from finhallu import cli
    from finhallu.flows import build
    from finhallu.llm import parallel
    from finhallu.warehouse.lock import HomeBusy

    seen: dict[str, object] = {}

    @contextlib.contextmanager
    def fake_api(home):
        yield lambda while_booting=None: while_booting()

    def warm_up(cfg, prepare_gates):
        seen["warm-up collector on"] = gc.isenabled()

    def run_build(*args, **kwargs):
        seen["build"] = (gc.isenabled(), gc.get_freeze_count() > 0, parallel._frozen)
        raise HomeBusy("a test stops here")

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "test")
    monkeypatch.setattr(cli, "prefect_api", fake_api)
    monkeypatch.setattr(cli, "_warm_up", warm_up)
    monkeypatch.setattr(build, "run_build", run_build)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert cli.main(["build", "--profile", profile, "--home", str(tmp_path / "home")]) == 3
    assert seen == {"warm-up collector on": False, "build": (True, True, 1 if profile == "paper" else 0)}
    assert gc.isenabled() and gc.get_freeze_count() == 0 and parallel._frozen == 0


def test_build_warm_up_makes_the_clients_of_remote_roles_that_have_a_key(monkeypatch):
    from finhallu import cli
    from finhallu.config import load_config
    from finhallu.flows import gate_worker
    from finhallu.llm.providers import get_provider
    from finhallu.text import sentences

    monkeypatch.setattr(sentences, "kiwi", lambda: None)
    monkeypatch.setattr(gate_worker, "start_early", lambda: None)
    openai, gemini = get_provider("openai"), get_provider("gemini")
    monkeypatch.setattr(openai, "_clients", {})
    monkeypatch.setattr(gemini, "_clients", {})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    cli._warm_up(load_config("paper"), lambda: None)  # no keys: nothing made, nothing raised (the build says what is missing)
    assert not openai._clients and not gemini._clients
    monkeypatch.setenv("OPENAI_API_KEY", "sk-warm")
    cli._warm_up(load_config("paper"), lambda: None)
    # one client per endpoint and key, shared by every role on it (what the stages' calls take)
    assert len(openai._clients) == 1 and not gemini._clients


def test_build_warm_up_leaves_a_client_it_cannot_make_to_the_stage(monkeypatch):
    """A remote role whose SDK is missing (or whose client fails to build) does not stop the
    warm-up: the stage that calls it reports the problem."""
    from finhallu import cli
    from finhallu.config import load_config
    from finhallu.flows import gate_worker
    from finhallu.llm.providers import get_provider
    from finhallu.text import sentences

    def no_sdk(*args):
        raise ImportError("No module named 'google.genai'")

    monkeypatch.setattr(sentences, "kiwi", lambda: None)
    monkeypatch.setattr(gate_worker, "start_early", lambda: None)
    gemini = get_provider("gemini")
    monkeypatch.setattr(gemini, "_clients", {})
    monkeypatch.setattr(gemini, "_make_client", no_sdk)
    monkeypatch.setenv("GEMINI_API_KEY", "warm")
    cli._warm_up(load_config("paper"), lambda: None)
    assert not gemini._clients
