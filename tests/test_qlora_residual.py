"""QLoRA's fp32 residual stream (memory.residual_bytes): where the Hugging Face recipe keeps the
norm weights in fp32 (PEFT's prepare_model_for_kbit_training), a Llama-style RMSNorm returns
fp32 and bitsandbytes' 4-bit matmuls return their input's dtype, so the checkpointed layer
inputs and the MLP's tensors are fp32. fms-acceleration measured the plain PEFT load against its
plugin's load without the casts on the same Mistral-7B runs."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.models import memory as mem
from planner.models.loss_buffers import tokens_per_gpu
from planner.validation.validate import load_cases, predict_case, project_cases_path

CAT = load_catalog()


def qlora(**kw) -> TrainConfig:
    base = {"method": "qlora", "lora_rank": 16, "checkpointing": "full", "seq_len": 4096,
            "micro_batch_size": 4}
    return TrainConfig(**{**base, **kw})


def test_the_hugging_face_recipe_runs_an_fp32_residual_stream():
    llama = CAT.model("llama-3.1-8b").spec
    assert mem.residual_bytes(llama, qlora()) == 4
    # the norms stay 16-bit: a framework that keeps the rest 16-bit, sharded QLoRA (no
    # prepare_model_for_kbit_training under FSDP), a pure-bf16 stack, fused norm kernels
    for kw in ({"qlora_16bit_rest": True}, {"fsdp": True, "num_gpus": 2}, {"pure_bf16": True},
               {"fused_norms": True}):
        assert mem.residual_bytes(llama, qlora(**kw)) == 2, kw
    assert mem.residual_bytes(llama, qlora(method="lora")) == 2
    # Gemma's RMSNorm casts its output back to the input's dtype
    gemma = CAT.model("gemma-2-9b").spec
    assert gemma.norm_casts_back and mem.residual_bytes(gemma, qlora()) == 2


def test_checkpointed_inputs_double_with_the_fp32_stream():
    llama = CAT.model("llama-3.1-8b").spec
    fp32, b16 = qlora(), qlora(qlora_16bit_rest=True)
    inputs = llama.num_layers * llama.hidden_size * tokens_per_gpu(fp32)
    extra = mem.activation_bytes(llama, fp32) - mem.activation_bytes(llama, b16)
    assert extra >= 2 * inputs  # 2 more bytes per checkpointed element, plus the MLP's tensors


@pytest.fixture(scope="module")
def fms():
    path = project_cases_path().parent / "project_cases_fmsacc_memory.yaml"
    return {c["id"]: c for c in load_cases(path)}


@pytest.mark.parametrize("bs", [4, 8])
def test_fms_acceleration_plain_and_plugin_loads(fms, bs):
    base = fms[f"fmsaccmem_mistral7b_qlora_bnbbase_bs{bs}_1xA100"]
    plugin = fms[f"fmsaccmem_mistral7b_qlora_bnbacc_bs{bs}_1xA100"]
    assert plugin["extra"]["qlora_unquantized_dtype"] == "16bit"
    p_base, p_plugin = (predict_case(c, CAT) for c in (base, plugin))
    for case, r in ((base, p_base), (plugin, p_plugin)):
        assert abs(r.predicted_gib / case["outcome"]["peak_gib"] - 1) <= 0.10, case["id"]
    # measured: 4.0 / 8.0 GiB more for the plain load (32 layers x 4096 x 2 B x 16k / 32k
    # tokens = 4.0 / 8.0 GiB of checkpointed inputs)
    measured = base["outcome"]["peak_gib"] - plugin["outcome"]["peak_gib"]
    assert measured == pytest.approx(4.0 * bs / 4, abs=0.05)
    assert p_base.predicted_gib - p_plugin.predicted_gib >= measured


def test_trl_keeps_the_load_dtype_from_0_26_and_its_older_releases_fp32_norms():
    from planner.catalog.frameworks import config_fields, resolve
    from planner.validation.case_releases import qlora_fp32_norms_of

    trl = resolve(CAT, "trl")
    fields = config_fields(trl, workload="sft", sharded=False)
    assert fields["qlora_16bit_rest"] and fields["qlora_fp32_norms"] is False
    llama = CAT.model("llama-3.1-8b").spec
    assert mem.residual_bytes(llama, qlora(**fields)) == 2  # what a plan on TRL today gets
    old = {"extra": {"framework_version": "trl 0.13.0, transformers 4.48.1"}}
    new = {"extra": {"framework_version": "trl 0.29.1"}}
    assert qlora_fp32_norms_of(old, trl) is True and qlora_fp32_norms_of(new, trl) is False
    assert mem.residual_bytes(llama, qlora(qlora_16bit_rest=True, qlora_fp32_norms=True)) == 4


def test_openrlhf_casts_its_norms_alone():
    from planner.catalog.frameworks import config_fields, resolve

    fields = config_fields(resolve(CAT, "openrlhf"), workload="sft", sharded=False)
    assert fields["qlora_16bit_rest"] and fields["qlora_fp32_norms"]


def test_check_says_when_the_residual_stream_is_fp32():
    from planner.models.workloads import estimate_memory

    llama, gpu = CAT.model("llama-3.1-8b").spec, CAT.gpu("h100-sxm")
    fp32 = estimate_memory(llama, gpu, qlora())
    b16 = estimate_memory(llama, gpu, qlora(qlora_16bit_rest=True))
    assert any("residual stream" in n for n in fp32.notes)
    assert not any("residual stream" in n for n in b16.notes)
