"""Every file of cases the project adds (validation/project_cases*.yaml, validate.
project_case_files): ids unique across the files, each source a file at a commit, notes within
the schema's lengths, an unusable case saying why once, known frameworks and GPUs, and every
usable throughput case predicts. What a single file must hold is tested beside it."""

from __future__ import annotations

import pytest

from planner.catalog.frameworks import resolve
from planner.catalog.load import load_catalog
from planner.models import efficiency as eff
from planner.validation.validate import load_cases, project_case_files
from planner.validation.validate_throughput import predict_throughput_case

FILES = {path.name: path for path in project_case_files()}
# how many cases (and usable ones) each file was written with, at least
SIZES = {"project_cases.yaml": (1, 1), "project_cases_training.yaml": (40, 28),
         "project_cases_hf.yaml": (20, 19), "project_cases_rl.yaml": (18, 5),
         "project_cases_litgpt.yaml": (89, 37), "project_cases_primerl.yaml": (49, 3),
         "project_cases_primerl_memory.yaml": (31, 29),
         "project_cases_olmocore.yaml": (8, 4),
         "project_cases_fmsacc_memory.yaml": (46, 33),
         "project_cases_hfmeasured.yaml": (78, 78)}
# files whose notes keep to the shared schema's 300 / 200 characters (the others quote longer)
SCHEMA_LENGTHS = {"project_cases_hf.yaml", "project_cases_litgpt.yaml"}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def by_file() -> dict[str, list[dict]]:
    return {name: load_cases(path) for name, path in FILES.items()}


def test_the_files_are_the_ones_read_and_their_ids_unique(by_file):
    assert set(SIZES) <= set(FILES)
    ids = [c["id"] for cases in by_file.values() for c in cases]
    assert len(ids) == len(set(ids))
    for name, (least, usable) in SIZES.items():
        assert len(by_file[name]) >= least, name
        assert sum(c["usable_for_accuracy"] for c in by_file[name]) >= usable, name


@pytest.mark.parametrize("name", sorted(FILES))
def test_sources_at_a_commit_and_notes_said(name, by_file):
    for c in by_file[name]:
        # every source is a file at a commit (40 hex digits), so the row can be read again
        commit = c["source"].split("/blob/")[1].split("/")[0] if "/blob/" in c["source"] else ""
        assert len(commit) == 40, c["id"]
        if name in SCHEMA_LENGTHS:
            assert len(c["note"]) <= 300 and len(c["location"]) <= 200, c["id"]
        if not c["usable_for_accuracy"]:
            assert c["note"].count("Not usable") == 1, c["id"]


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_case_names_a_known_framework_and_gpu_and_usable_ones_predict(
        name, by_file, catalog):
    for c in by_file[name]:
        assert resolve(catalog, c["framework"]) is not None, c["id"]
        assert catalog.gpu(c["gpu"]) is not None, c["id"]
        if c["usable_for_accuracy"] and "metric" in c:
            result = predict_throughput_case(c, catalog)
            assert result.predicted is not None and result.predicted > 0, (c["id"], result)


def test_fsdp_pool_holds_the_usable_rows_of_frameworks_inheriting_fsdp(by_file):
    """The torchtitan and llm-foundry rows set the fsdp factor (efficiency.STACK_CASES)."""
    inherit = {c["id"] for c in by_file["project_cases_training.yaml"]
               if c["usable_for_accuracy"]
               and c["framework"] in ("torchtitan", "llm-foundry", "fms-fsdp")}
    assert inherit and inherit <= set(eff.STACK_CASES["fsdp"])


def test_hf_pool_holds_the_usable_hugging_face_path_rows(by_file):
    """fms-acceleration's plain-HF rows set the hf factor with LLaMA-Factory's and ms-swift's."""
    usable = {c["id"] for c in by_file["project_cases_hf.yaml"] if c["usable_for_accuracy"]}
    assert usable and usable <= set(eff.STACK_CASES["hf"])


def test_litgpt_adapter_cases_run_their_configs_lora_dropout(by_file, catalog):
    """Each LitGPT LoRA/QLoRA row states its config's lora_dropout (config_hub 0.05, the Gemma
    configs 0.1), and the case's TrainConfig carries it with LitGPT's one shared q, k, v
    dropout (case_inputs reads extra.lora_dropout over the profile's 0.05)."""
    from planner.validation.case_inputs import case_config

    rows = [c for c in by_file["project_cases_litgpt.yaml"] if c["method"] in ("lora", "qlora")]
    assert rows and all("lora_dropout" in c["extra"] for c in rows)
    gemma = next(c for c in rows if c["id"] == "litgpt_hub_gemma-2b_lora_1xA10G")
    cfg, _ = case_config(gemma, catalog)
    assert cfg.lora_dropout == 0.1 and cfg.lora_dropout_shared_qkv


def test_measured_cases_are_written_from_the_measurements():
    """validation/project_cases_hfmeasured.yaml is tools/hf_measured_cases.py's output
    from the result files it names, each committed at the commit its cases cite (the file is not
    edited by hand)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "hf_measured_cases.py"
    spec = importlib.util.spec_from_file_location("hf_measured_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.OUT.read_text() == module.build()
    for results, commit in module.RESULTS:
        assert (module.ROOT / results).exists() and len(commit) == 40


def test_the_measured_shapes_are_the_catalogs(catalog):
    """tools/measure_hf_trainer.py builds its models from shapes of its own (the device machine
    runs it without the planner); each is the catalog entry's config.json facts."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "measure_hf_trainer.py"
    spec = importlib.util.spec_from_file_location("measure_hf_trainer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for model_id, shape in module.SHAPES.items():
        m = catalog.model(model_id).spec
        assert (shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"],
                shape["num_attention_heads"], shape["num_key_value_heads"],
                shape["vocab_size"], shape["tie_word_embeddings"]) == (
            m.hidden_size, m.ffn_hidden_size, m.num_layers, m.num_attention_heads,
            m.num_kv_heads, m.vocab_size, m.tied_embeddings), model_id
