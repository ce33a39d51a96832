"""Stage declarations: one per stage beside its code, checked against what the stage calls and what
the config and CLI accept."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from finhallu.config import BuildConfig, load_config
from finhallu.flows.stage_task import stage_key_material
from finhallu.llm.errors import UndeclaredCallError
from finhallu.stages.base import StageContext
from finhallu.stages.dialogue_qc import DialogueQCConfig
from finhallu.stages.pipeline import ALL_STAGES, STAGES, STAGES_BY_NAME


def test_each_profile_section_is_typed_by_its_stage_declaration():
    for stage in ALL_STAGES:
        assert BuildConfig.model_fields[stage.name].annotation is stage.config, stage.name
        assert stage.run.__module__.startswith(f"finhallu.stages.{stage.name}"), stage.name  # declared beside its code


def test_a_stage_calling_a_role_or_operation_it_does_not_declare_fails():
    ctx = StageContext(stage="dialogue_qc", config=DialogueQCConfig(), seed=1)
    turns = [
        {
            "turn_index": 1,
            "kind": "question",
            "reconfirms_turn": None,
            "query": "q?",
            "standalone_query": "q?",
            "response": "a.",
            "answerable": True,
            "clue": "a",
            "answer": "a",
            "gold_passage": "a",
            "doc": "d",
            "context": ["a"],
        }
    ]
    assert ctx.llm.call("dialogue_judge", "judge_dialogue", turns=turns, lang="en").answerability == 1.0
    with pytest.raises(UndeclaredCallError, match="role 'user_llm'"):
        ctx.llm.call("user_llm", "judge_dialogue", turns=turns, lang="en")  # offline too: not silently the rules
    with pytest.raises(UndeclaredCallError, match="operation 'answer_turn'"):
        ctx.llm.call_many("dialogue_judge", "answer_turn", [])


def test_roles_named_by_the_config_are_declared_and_keyed(tmp_path):
    gen = {"role": "qa_generator_d", "style": "formal", "seed": 3}
    cfg = load_config(
        "demo",
        {
            "roles": {"qa_generator_d": {"provider": "offline", "temperature": 0.5}},
            "seed_qa": {"multi_llm_qa": {"question_generators": [gen]}},
        },
    )
    seed_qa = STAGES_BY_NAME["seed_qa"]
    assert "qa_generator_d" in seed_qa.calls_roles(cfg)
    assert "qa_generator_d" in stage_key_material("seed_qa", {}, cfg, str(tmp_path))["roles"]
    assert "qa_generator_d" in seed_qa.context(cfg).roles
    judge = load_config(
        "demo",
        {"roles": {"my_judge": {"provider": "offline"}}, "detect": {"detectors": {"llm_judge:mine": {"role": "my_judge"}}}},
    )
    assert "my_judge" in STAGES_BY_NAME["detect"].calls_roles(judge)


@pytest.mark.parametrize(
    "override, says",
    [
        ({"roles": {"usr_llm": {"provider": "offline"}}}, "roles ['usr_llm'] are configured but no stage calls them"),
        ({"roles": {"user_llm": {"provider": "openia"}}}, "unknown LLM provider 'openia'; registered: gemini, offline"),
        ({"ingest": {"sources": [{"kind": "10k", "paths": ["x"]}]}}, "unknown source kind '10k'; registered: aihub"),
        ({"embed": {"backend": "kur"}}, "unknown embedder backend 'kur'"),
        ({"inject": {"types": ["contradictory", "made_up"]}}, "unknown injector 'made_up'"),
        ({"detect": {"detectors": {"lexical": {}}}}, "unknown detector 'lexical'"),
        ({"detect": {"detectors": {"lexical_support": {"treshold": 0.4}}}}, "has no parameter(s) ['treshold']"),
        ({"detect": {"detectors": {"lexical_support": {"threshold": "high"}}}}, "threshold: Input should be a valid number"),
    ],
)
def test_names_are_checked_against_the_registries_when_the_profile_loads(override, says):
    with pytest.raises(ValidationError) as err:
        load_config("demo", override)
    assert says in str(err.value)


def test_cli_choices_come_from_the_registries():
    from finhallu.cli import parser
    from finhallu.external import FORMATS

    sub = next(a for a in parser()._actions if a.dest == "command").choices
    stage_arg = next(a for a in sub["stage"]._actions if a.dest == "stage")
    assert list(stage_arg.choices) == [s.name for s in STAGES]
    fmt = next(a for a in sub["eval-external"]._actions if a.dest == "format")
    assert list(fmt.choices) == FORMATS.names() and "ragtruth" in fmt.choices


def test_typed_rows_are_generated_from_the_contracts():
    """schemas/rows.py is what the generator makes of the contracts today (regenerate it with
    `python -m finhallu.schemas.rowgen --write` after a contract changes)."""
    from finhallu.schemas import rowgen
    from finhallu.schemas.contracts import CONTRACTS

    assert rowgen.rows_path().read_text("utf-8") == rowgen.render()
    from finhallu.schemas import rows

    for name, contract in CONTRACTS.items():
        row = getattr(rows, rowgen.camel(name) + "Row")
        assert list(row.__annotations__) == list(contract.columns), name
        nullable = {c for c, t in row.__annotations__.items() if "None" in str(t)}
        assert nullable == set(contract.columns) - set(contract.key) - set(contract.not_null), name


def test_rows_built_column_by_column_equal_polars_reading_the_rows():
    """typed_rows_frame (flat Arrow arrays for lists of structs) builds the frame polars builds from
    the dicts: empty lists stay empty, a null list stays null, a missing field is null, typed as the schema."""
    import polars as pl

    from finhallu.stages.base import typed_rows_frame

    schema = {
        "id": pl.String,
        "n": pl.Int64,
        "history": pl.List(pl.Struct({"role": pl.String, "content": pl.String})),
        "passages": pl.List(pl.Struct({"passage_id": pl.String, "rank": pl.Int32})),
    }
    rows = [
        {"id": "b", "n": 2, "history": [], "passages": [{"passage_id": "p1", "rank": 1}, {"passage_id": "p2", "rank": None}]},
        {"id": "a", "n": None, "history": [{"role": "user", "content": "q"}], "passages": None},
        {"id": "c", "n": 3, "history": [{"role": "user"}, {"role": "assistant", "content": "r"}], "passages": []},
    ]
    built = typed_rows_frame(rows, schema, "id")
    assert built.schema == pl.Schema(schema)
    expected = pl.DataFrame(rows, schema=schema).sort("id")
    assert built.equals(expected)
    # string views handed to Arrow as they are: published as the same bytes (the store's digest)
    from finhallu.warehouse.store import content_hash

    assert content_hash(built) == content_hash(expected)
    assert built["passages"].to_list() == [None, [{"passage_id": "p1", "rank": 1}, {"passage_id": "p2", "rank": None}], []]
    assert built["history"].to_list()[2] == [{"role": "user", "content": None}, {"role": "assistant", "content": "r"}]
    assert typed_rows_frame([], schema, "id").height == 0
    with pytest.raises(ValueError, match="lacks column 'passages'"):
        typed_rows_frame([{"id": "x", "n": 1, "history": []}], schema, "id")
