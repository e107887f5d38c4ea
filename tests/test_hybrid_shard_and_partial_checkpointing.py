"""Hybrid sharding (TrainConfig.dp_shard: FSDP HYBRID_SHARD / HSDP) and full checkpointing on a
share of the layers (TrainConfig.checkpoint_fraction), against hand-computed values.

tiny-llama (tests/data): 2 layers, N = 137,728 matmul weights (test_throughput.py), all
202,048 parameters trained in full fine-tuning; test-gpu: 8 per node.
"""

from __future__ import annotations

import pytest
from conftest import tiny_config

from planner.catalog.request_checks import validate_config
from planner.errors import PlannerError
from planner.models import flops, memory, network, states
from planner.models import host_launches as hl
from planner.models import throughput as tp
from planner.validation.case_inputs import case_config

ALL_PARAMS = 202_048


# --- hybrid sharding ------------------------------------------------------------------------
def test_states_shard_over_the_shard_group_only(tiny):
    hsdp = tiny_config(num_gpus=32, fsdp=True, dp_shard=8)
    full8 = tiny_config(num_gpus=8, fsdp=True)
    full32 = tiny_config(num_gpus=32, fsdp=True)
    assert states.shard_group(hsdp) == 8
    assert states.optimizer_state_bytes(tiny, hsdp) == states.optimizer_state_bytes(tiny, full8)
    assert states.optimizer_state_bytes(tiny, hsdp) == 4 * states.optimizer_state_bytes(
        tiny, full32)


def test_gathers_span_the_shard_group_and_replicas_all_reduce_its_shard(tiny):
    cfg = tiny_config(num_gpus=32, fsdp=True, dp_shard=8, grad_accum=2)
    # gathers and reduce-scatter as full-shard FSDP over 8 ranks
    assert network.dp_bytes_per_step(tiny, cfg) == network.dp_bytes_per_step(
        tiny, tiny_config(num_gpus=8, fsdp=True, grad_accum=2))
    # replicas: 4 groups; each micro-batch all-reduces the 1/8 gradient shard (16-bit: 2 B)
    g = ALL_PARAMS * 2 / 8
    assert network.replica_bytes_per_step(tiny, cfg) == pytest.approx(2 * 2 * 3 / 4 * g)
    assert network.replica_bytes_per_step(tiny, tiny_config(num_gpus=32, fsdp=True)) == 0.0


def test_replica_traffic_is_timed_on_the_network_and_the_shards_inside_a_node(tiny, gpu):
    cfg = tiny_config(num_gpus=32, fsdp=True, dp_shard=8)
    est = tp.estimate_throughput(tiny, gpu, cfg, stack="fsdp", inter_node_gbps=8.0)
    links = network.resolve_links(gpu, inter_node_gbps=8.0)
    shard = network.dp_bytes_per_step(tiny, cfg) / (links.collective_gbps(8, False) * 1e9)
    replica = network.replica_bytes_per_step(tiny, cfg) / (
        links.collective_gbps(4, True) * 1e9)
    assert est.raw["dp_comm"] == pytest.approx(shard + replica)
    assert links.collective_gbps(4, True) < links.collective_gbps(8, False)
    full = tp.estimate_throughput(tiny, gpu, tiny_config(num_gpus=32, fsdp=True),
                                  stack="fsdp", inter_node_gbps=8.0)
    assert est.raw["dp_comm"] < full.raw["dp_comm"]  # the gathers stay inside the node


@pytest.mark.parametrize(("kw", "needle"), [
    ({"num_gpus": 16, "dp_shard": 8}, "needs the weights sharded"),
    ({"num_gpus": 16, "fsdp": True, "dp_shard": 3}, "must divide the data-parallel degree 16"),
    ({"checkpoint_fraction": 0.5}, "needs --checkpointing full"),
])
def test_hybrid_sharding_and_partial_checkpointing_rules(tiny, kw, needle):
    with pytest.raises(PlannerError, match=needle):
        validate_config(tiny_config(**kw), tiny)


def test_a_case_stating_hsdp_shards_within_its_hosts(cat):
    case = {"model": "tiny-llama", "gpu": "test-gpu", "workload": "pretrain", "method": "full",
            "num_gpus": 32, "sharding": "fsdp", "micro_batch_size": 1, "seq_len": 8,
            "grad_checkpointing": "none", "framework": "pytorch",
            "extra": {"sharding_strategy": "hsdp"}}
    cfg, _ = case_config(case, cat)
    assert cfg.dp_shard == 8  # test-gpu: 8 per node
    cfg, _ = case_config({**case, "extra": {"sharding_strategy": "hsdp", "gpus_per_node": 4}},
                         cat)
    assert cfg.dp_shard == 4
    cfg, _ = case_config({**case, "extra": {}}, cat)
    assert cfg.dp_shard is None


# --- full checkpointing on a share of the layers --------------------------------------------
def test_recomputed_flops_scale_with_the_share(tiny):
    full = flops.training_flops(tiny, tiny_config(checkpointing="full"))
    half = flops.training_flops(tiny, tiny_config(checkpointing="full", checkpoint_fraction=0.5))
    none = flops.training_flops(tiny, tiny_config())
    assert full.recompute_linear == 2 * 73_728  # both layers' forward matmuls again
    assert half.recompute_linear == pytest.approx(full.recompute_linear / 2)
    assert half.recompute_attention == pytest.approx(full.recompute_attention / 2)
    assert none.recompute_linear == 0.0
    assert flops.recomputed_share(tiny_config(checkpointing="selective",
                                              checkpoint_fraction=0.5)) == 0.0


def test_activations_keep_the_unwrapped_layers_whole(tiny):
    half = tiny_config(checkpointing="full", checkpoint_fraction=0.5)
    full = tiny_config(checkpointing="full")
    tokens = 8
    # 2 layers: one keeps its input only, the other every saved tensor
    expect = (memory.activation_bytes(tiny, full) - memory._layer_input_bytes(tiny, full)
              + memory.layer_activation_bytes_per_token(tiny, half) * tokens)
    assert memory.activation_bytes(tiny, half) == pytest.approx(expect)
    working = memory.backward_working_set_bytes_per_token(tiny, full) * tokens
    assert memory.activation_bytes(tiny, full) < memory.activation_bytes(tiny, half) \
        < memory.activation_bytes(tiny, tiny_config()) + working


def test_host_launches_replay_only_the_wrapped_layers(tiny):
    full = tp.host_launch_seconds(tiny, tiny_config(checkpointing="full"))
    none = tp.host_launch_seconds(tiny, tiny_config())
    half = tp.host_launch_seconds(tiny, tiny_config(checkpointing="full",
                                                    checkpoint_fraction=0.5))
    assert half == pytest.approx((full + none) / 2)
    assert full > none > 0.0 and hl.HOST_CHECKPOINT_PER_FORWARD_LAUNCH > 0


def test_the_command_line_takes_both_and_shows_them(capsys):
    from planner.cli import main

    argv = ["check", "--model", "llama-2-13b", "--gpu", "a100-80gb-sxm", "--num-gpus", "32",
            "--fsdp", "--dp-shard", "8", "--seq-len", "4096", "--checkpoint-fraction", "0.4"]
    with pytest.raises(SystemExit) as done:
        main(argv)
    out = capsys.readouterr().out
    assert done.value.code in (0, 1)
    assert "fsdp hybrid (shards of 8, 4 replicas)" in out
    assert "checkpointing full on 40% of the layers" in out


def test_tune_keeps_full_checkpointing_for_a_share_of_the_layers(cat):
    from planner.solver.tune import tune

    cfg = tiny_config(checkpointing="full", checkpoint_fraction=0.5, seq_len=64)
    found = tune(model="tiny-llama", gpu="test-gpu", config=cfg, catalog=cat)
    assert found.status == "optimal" or found.best is not None
    assert {c.config.checkpointing for c in (found.best, *found.runners_up)} == {"full"}


def test_a_case_on_smaller_nodes_keeps_each_gpus_network_share():
    from planner.catalog.load import load_catalog
    from planner.validation.throughput_cases import case_platform

    catalog = load_catalog()
    gpu = catalog.gpu("h100-sxm")
    platform, node, network = case_platform(gpu, catalog)
    assert node is None and network is None  # the platform's own 8-GPU hosts
    platform, node, network = case_platform(gpu, catalog, {"extra": {"gpus_per_node": 4}})
    assert node == 4
    assert network / 4 == pytest.approx(platform.inter_node_bandwidth_gbps / platform.max_gpus)


def test_memory_and_flops_take_the_same_share_of_the_layers(tiny):
    # 2 layers at a quarter: FLOPs recompute 0.25 of them, memory keeps 0.5 layers' inputs
    # only and 1.5 layers' saved tensors (an expectation over layers, no rounding apart)
    q = tiny_config(checkpointing="full", checkpoint_fraction=0.25)
    full = tiny_config(checkpointing="full")
    assert flops.training_flops(tiny, q).recompute_linear == pytest.approx(
        flops.training_flops(tiny, full).recompute_linear / 4)
    expect = (memory.activation_bytes(tiny, full) - 1.5 * memory._layer_input_bytes(tiny, full)
              + 1.5 * memory.layer_activation_bytes_per_token(tiny, q) * 8)
    assert memory.activation_bytes(tiny, q) == pytest.approx(expect)
