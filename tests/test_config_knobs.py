"""Bad knobs stop `finhallu build` before any work: exit 2, one line naming the setting, nothing built."""

import pytest

from finhallu.cli import main

BAD_KNOBS = [
    ("chunk.max_tokens=-5", "chunk.max_tokens"),
    ("retrieve.top_k=-1", "retrieve.top_k"),
    ("retrieve.top_k=50", "candidate_pool"),  # larger than the candidate pool
    ("retrieve.max_clue_coverage=1.5", "retrieve.max_clue_coverage"),
    ("embed.dim=0", "embed.dim"),
    ("embed.char_ngrams=[0]", "char_ngrams"),
    ("embed.bm25_b=2", "embed.bm25_b"),
    ("dialogue_qc.min_coherency=9", "dialogue_qc.min_coherency"),
    ("injection_qc.min_naturalness=0", "injection_qc.min_naturalness"),
    ("metrics.sweep_min=0.99", "sweep_min"),
    ("metrics.confidence=1.5", "metrics.confidence"),
    ("retrieve.nosuch=1", "retrieve.nosuch: unknown setting"),
    ("nosuch.key=1", "nosuch: unknown setting"),
    ("retrieve.top_k=abc", "retrieve.top_k"),
    ("retrieve.top_k", "KEY=VALUE"),
    ("dialogues.min_turns=-3", "dialogues.min_turns"),
    ("dialogues.max_turns=0", "dialogues.max_turns"),
    ("dialogues.min_turns=9", "must not exceed dialogues.max_turns"),
    ("llm.max_failed_share=1.5", "llm.max_failed_share"),
    ("llm.max_failed_share=-0.1", "llm.max_failed_share"),
    ("llm.failed_share_min_calls=0", "llm.failed_share_min_calls"),
    ("llm.max_attempts=0", "llm.max_attempts"),
    ("llm.max_attempts=1000", "llm.max_attempts"),
]


@pytest.mark.parametrize("knob,named", BAD_KNOBS)
def test_bad_knob_exits_2_with_one_line_and_builds_nothing(knob, named, tmp_path, capsys):
    home = tmp_path / "home"
    rc = main(["build", "--profile", "demo", "--home", str(home), "--set", knob])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and named in err, err
    assert not (home / "tables").exists() and not (home / "warehouse.duckdb").exists()


def test_unknown_profile_is_one_line(tmp_path, capsys):
    assert main(["build", "--profile", "no-such-profile", "--home", str(tmp_path / "h")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-profile" in err


MISTAKES = [
    (["build", "--profile", "demo", "--set", "detect.detectors.lexical_support.thresh=0.3"], "thresh"),
    (["build", "--profile", "demo", "--set", "detect.detectors.nosuch={}"], "unknown detector 'nosuch'"),
    (["evaluate", "--detector", "nosuch"], "unknown detector 'nosuch'"),
    (["evaluate", "--profile", "no-such-profile"], "no-such-profile"),
    (["evaluate"], "no samples published"),
    (["eval-external", "--format", "jsonl", "--path", "x.jsonl", "--detector", "nosuch"], "unknown detector"),
    (["evaluate", "--detector", "nli"], "NLI"),
    (
        ["build", "--profile", "demo", "--set", "injection_qc.verifier_nli_model=/no/such/model"],
        "injection_qc.verifier_nli_model",
    ),
    (["sql", "SELECT 1"], "no warehouse"),
]


@pytest.mark.parametrize("argv,named", MISTAKES)
def test_user_mistakes_are_one_line_exit_2(argv, named, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FINHALLU_NLI_PATH", str(tmp_path / "no-model"))
    rc = main([*argv, "--home", str(tmp_path / "home")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and named in err and "Traceback" not in err, err


def test_a_missing_local_model_is_named_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FINHALLU_NLI_PATH", str(tmp_path / "no-model"))
    rc = main(["build", "--profile", "demo", "--home", str(tmp_path / "h"), "--set", "detect.detectors.nli={}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "detect.detectors.nli" in err and "NLI" in err
    assert not (tmp_path / "h" / "tables").exists()
