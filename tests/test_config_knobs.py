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
