"""Values derived in one place (issue 16): the method label, LoRA alpha, GPUs per host, hosts for
a GPU count, the tensor-parallel degrees a model allows and the vLLM memory fraction to set."""

from __future__ import annotations

import dataclasses

import numpy as np

from planner.catalog.load import load_catalog
from planner.catalog.request import LORA_ALPHA_PER_RANK, TrainConfig, method_label
from planner.catalog.specs import divisors, gpus_per_host, hosts_for, tensor_parallel_options
from planner.models.memory import MemoryEstimate, engine_utilization_to_set


def test_method_label_short_and_long_forms():
    assert method_label("full", None) == "full"
    assert method_label("qlora", 8) == "qlora r8"
    assert method_label("lora", 16, targets=("q", "v")) == "lora r=16 on q,v"
    assert method_label("full", None, targets=("q",)) == "full"  # no adapters, no targets


def test_config_method_label_and_adapter_rank():
    lora = TrainConfig(method="lora", lora_rank=32)
    assert lora.adapter_rank == 32 and lora.method_label == "lora r32"
    full = TrainConfig(method="full")
    assert full.adapter_rank is None and full.method_label == "full"
    assert TrainConfig(method="dora").method_label == f"dora r{TrainConfig().rank}"


def test_lora_alpha_is_twice_the_rank():
    # LLaMA-Factory's default (source next to LORA_ALPHA_PER_RANK): rank 8 -> alpha 16
    assert LORA_ALPHA_PER_RANK == 2
    assert TrainConfig(method="lora", lora_rank=8).lora_alpha == 16
    assert TrainConfig(method="qlora", lora_rank=64).lora_alpha == 128


def test_gpus_per_host_is_the_smaller_of_platform_and_node_for_modules(cat):
    # a module sits on a baseboard of its generation; a PCIe card fills every slot
    # (tests/test_hosts.py)
    gpu = cat.gpu("test-gpu").model_copy(update={"form_factor": "sxm"})  # max_gpus_per_node 8
    assert gpus_per_host(gpu, None) == 8
    plat = next(iter(load_catalog().platforms.values()))
    assert gpus_per_host(gpu, plat.model_copy(update={"max_gpus": 4})) == 4
    assert gpus_per_host(gpu, plat.model_copy(update={"max_gpus": 16})) == 8


def test_hosts_for_rounds_up_also_on_arrays():
    assert hosts_for(8, 8) == 1 and hosts_for(9, 8) == 2 and hosts_for(1, 4) == 1
    assert hosts_for(np.array([1, 4, 5, 12]), 4).tolist() == [1, 1, 2, 3]


def test_tensor_parallel_options_split_heads_within_a_node(tiny):
    # tiny-llama: 4 attention heads, 2 kv heads
    assert tensor_parallel_options(tiny, 8) == (1, 2)
    assert tensor_parallel_options(tiny, 1) == (1,)
    assert tiny.splits_heads(2) and not tiny.splits_heads(4)  # 4 divides 4 heads, not 2 kv
    gqa = tiny.model_copy(update={"num_attention_heads": 12, "num_kv_heads": 4})
    assert not gqa.splits_heads(3)  # 3 divides 12 attention heads, not 4 kv heads
    assert tensor_parallel_options(gqa, 8) == (1, 2, 4)
    assert divisors(12, at_most=6) == (1, 2, 3, 4, 6)


def test_engine_utilization_to_set_rounds_the_need_up():
    est = MemoryEstimate({}, "train", 0.0, 0.0, 0.0, 0.0, 1.0, "bf16", engine_utilization=0.372)
    grpo = TrainConfig(workload="grpo", prompt_len=8, response_len=8)
    assert engine_utilization_to_set(grpo, est) == 0.38  # ceil(37.2) / 100
    assert engine_utilization_to_set(grpo.model_copy(update={"gpu_memory_utilization": 0.5}),
                                     est) == 0.5  # the config's own, as set
    assert engine_utilization_to_set(grpo, dataclasses.replace(est, engine_utilization=None)) \
        is None
    assert engine_utilization_to_set(TrainConfig(), est) is None  # no engine outside RL
