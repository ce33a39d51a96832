from pathlib import Path

from finhallu.config import load_config
from finhallu.flows.stage_task import stage_key_material
from finhallu.codeversion import INFRASTRUCTURE, module_closure
from finhallu.warehouse import TableRef


def test_code_version_covers_helpers_and_registries():
    dialogues = module_closure("finhallu.stages.dialogues", INFRASTRUCTURE)
    assert "finhallu.text.normalize" in dialogues  # a helper imported by a helper
    assert "finhallu.dialogue.user" in dialogues  # the rules backend of its user operations
    assert "finhallu.llm.providers.offline" not in dialogues  # how calls are made is not what they return
    inject = module_closure("finhallu.stages.inject", INFRASTRUCTURE)
    assert {"finhallu.injectors.contradictory", "finhallu.injectors.false_refusal"} <= set(inject)
    assert "finhallu.detectors.lexical_support" not in inject  # no needless invalidation


def test_key_material_tracks_config_inputs_and_prompts(tmp_path):
    cfg = load_config("demo")
    ref = TableRef("samples", 1, "abc", str(tmp_path))
    base = stage_key_material("detect", {"samples": ref}, cfg, str(tmp_path))
    knob = load_config("demo", {"detect": {"detectors": {"lexical_support": {"threshold": 0.4}}}})
    assert stage_key_material("detect", {"samples": ref}, knob, str(tmp_path)) != base
    other = load_config("demo", {"metrics": {"bootstrap_resamples": 10}})
    assert stage_key_material("detect", {"samples": ref}, other, str(tmp_path)) == base  # not detect's section
    changed = TableRef("samples", 2, "def", str(tmp_path))
    assert stage_key_material("detect", {"samples": changed}, cfg, str(tmp_path)) != base
    dlg = stage_key_material("dialogues", {}, cfg, str(tmp_path))
    assert set(dlg["prompts"]) == {"choose_next_question", "write_question", "answer_turn", "refuse_turn", "reconfirm_turn"}
    assert all(len(v) == 16 for v in dlg["prompts"].values())
    # inject judges False Acceptance's hard negatives with retrieve's step-2 settings (Stage.reads)
    inject = stage_key_material("inject", {}, cfg, str(tmp_path))
    stricter = load_config("demo", {"retrieve": {"max_clue_coverage": 0.3}})
    assert stage_key_material("inject", {}, stricter, str(tmp_path)) != inject
    assert stage_key_material("dialogue_qc", {}, stricter, str(tmp_path)) == stage_key_material(
        "dialogue_qc", {}, cfg, str(tmp_path)
    )


def test_ingest_key_covers_raw_file_content(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.json").write_text('{"data": []}')
    cfg = load_config("demo", {"ingest": {"sources": [{"kind": "aihub", "paths": [str(src)]}]}})
    k1 = stage_key_material("ingest", {}, cfg, str(tmp_path))["raw_files"]
    (src / "a.json").write_text('{"data": [ ]}')
    assert stage_key_material("ingest", {}, cfg, str(tmp_path))["raw_files"] != k1
    assert Path(src / "a.json").exists()


def test_every_stage_operation_has_prompt_templates():
    import jinja2
    from importlib import resources

    from finhallu.stages.pipeline import STAGES

    env = jinja2.Environment()
    for stage in STAGES:
        for op in stage.operations:
            for lang in ("ko", "en"):
                f = resources.files("finhallu") / "prompts" / lang / f"{op}.j2"
                assert f.is_file(), f"{stage.name}: missing prompt {lang}/{op}.j2"
                env.parse(f.read_text("utf-8"))
