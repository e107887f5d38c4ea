"""GPU names as nvidia-smi, datasheets and unseen validation files print them (catalog/gpu_names.py
rule 3), and how a measured case settles a name that is ambiguous on its own (rule 4)."""

from __future__ import annotations

import pytest

from planner.catalog.gpu_names import candidates, settle
from planner.catalog.load import load_catalog
from planner.errors import UnknownNameError
from planner.validation.validate import case_gpu, predict_case
from planner.validation.validate_throughput import predict_throughput_case

CAT = load_catalog()


@pytest.mark.parametrize(("name", "gpu"), [
    # nvidia-smi's product names
    ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"), ("NVIDIA A100-SXM4-40GB", "a100-40gb-sxm"),
    ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"), ("NVIDIA H100-SXM5-80GB", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"), ("Tesla V100-SXM2-32GB", "v100-32gb"),
    ("Tesla V100-SXM2-16GB", "v100-16gb"), ("NVIDIA A800-SXM4-80GB", "a800-80gb"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    # sizes and memory types as papers print them
    ("H200 141GB", "h200-sxm"), ("GeForce RTX 4090 24GB", "rtx-4090"),
    ("MI300X 192GB", "mi300x"), ("H800 80GB HBM3", "h800"), ("A100 SXM 80G", "a100-80gb-sxm"),
])
def test_a_product_name_with_its_memory_and_form_factor_finds_the_card(name, gpu):
    assert CAT.gpu(name).id == gpu


@pytest.mark.parametrize(("name", "left"), [
    ("NVIDIA H100 80GB HBM3", "h100-pcie, h100-sxm"),
    ("A100 80GB", "a100-80gb-pcie, a100-80gb-sxm"),
])
def test_a_product_name_that_leaves_several_cards_names_them(name, left):
    with pytest.raises(UnknownNameError, match=f"{left}: name the variant"):
        CAT.gpu(name)


@pytest.mark.parametrize("name", ["Tesla V100-PCIE-16GB", "80GB", "SXM", "A40", "H100 48GB"])
def test_a_name_no_catalog_card_matches_is_unknown(name):
    """No PCIe V100 or A40 in the catalog; a size or form factor alone names no card; a size no
    H100 has matches none (never the nearest)."""
    assert candidates(name, CAT.gpus) == []
    with pytest.raises(UnknownNameError, match="unknown GPU"):
        CAT.gpu(name)


@pytest.mark.parametrize(("name", "memory", "gpu"), [
    ("H100", None, "h100-sxm"), ("NVIDIA H100 80GB HBM3", None, "h100-sxm"),
    ("A100", 40, "a100-40gb-sxm"), ("A100", 80, "a100-80gb-sxm"), ("V100", 32, "v100-32gb"),
    ("H100", 94, "h100-nvl"),  # the stated memory first: only the NVL card has 94 GB
])
def test_a_case_settles_an_ambiguous_name_by_its_memory_then_the_sxm_part(name, memory, gpu):
    assert settle(candidates(name, CAT.gpus), CAT.gpus, memory) == [gpu]
    assert case_gpu({"gpu": name, "gpu_memory_gib": memory}, CAT)["gpu"] == gpu


@pytest.mark.parametrize(("name", "memory"), [("A100", None), ("V100", None)])
def test_a_case_leaves_a_name_ambiguous_when_several_sxm_parts_remain(name, memory):
    """A100 without its memory is the 40 or the 80 GB SXM part: not guessed."""
    assert len(settle(candidates(name, CAT.gpus), CAT.gpus, memory)) > 1
    assert case_gpu({"gpu": name}, CAT)["gpu"] == name


MEMORY_CASE = {
    "id": "nvsmi-name", "source": "https://example.com/m", "framework": "hf-trainer",
    "model": "meta-llama/Llama-3.1-8B", "workload": "sft", "method": "lora", "lora_rank": 16,
    "precision": "bf16", "num_gpus": 1, "tp": 1, "pp": 1, "cp": 1, "micro_batch_size": 2,
    "seq_len": 2048, "grad_checkpointing": "full", "usable_for_accuracy": True,
    "outcome": {"kind": "peak", "peak_gib": 30.0, "measured_as": "max_memory_allocated"},
}
TIME_CASE = {
    "id": "nvsmi-time", "source": "https://example.com/t", "framework": "torchtitan",
    "model": "meta-llama/Llama-3.1-8B", "workload": "pretrain", "method": "full",
    "precision": "bf16", "num_gpus": 8, "tp": 1, "pp": 1, "cp": 1, "dp": 8, "sharding": "fsdp",
    "micro_batch_size": 1, "seq_len": 8192, "grad_checkpointing": "selective",
    "metric": "tokens_per_sec_per_gpu", "value": 6000, "usable_for_accuracy": True,
}


@pytest.mark.parametrize("printed", ["NVIDIA H100 80GB HBM3", "H100", "H100-SXM5-80GB"])
def test_validate_predicts_a_case_named_as_nvidia_smi_prints_its_gpu_as_by_its_id(printed):
    """What an unseen validation file writes for its GPU does not change the prediction."""
    for case, predict, field in ((MEMORY_CASE, predict_case, "predicted_gib"),
                                 (TIME_CASE, predict_throughput_case, "predicted")):
        by_id = predict({**case, "gpu": "h100-sxm"}, CAT)
        printed_as = predict({**case, "gpu": printed}, CAT)
        assert getattr(by_id, field) is not None, by_id.reason
        assert getattr(printed_as, field) == getattr(by_id, field)
