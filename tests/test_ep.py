"""Expert parallelism (TrainConfig.ep): its checks, the command line, validation cases reading
it, and what it changes in memory and step time."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.catalog.request_checks import validate_config
from planner.cli import main
from planner.errors import PlannerError
from planner.validation.case_inputs import case_config

CATALOG = load_catalog()
QWEN3_30B = CATALOG.model("qwen3-30b-a3b").spec
DENSE_7B = CATALOG.model("7b").spec


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_default_ep_is_one():
    assert TrainConfig().ep == 1


@pytest.mark.parametrize("args, words", [
    (("--model", "7b", "--num-gpus", "8", "--ep", "2"), "needs a Mixture-of-Experts model"),
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--ep", "3"), "must divide the data x "
     "context parallel GPUs (dp 8 x cp 1 = 8)"),
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--ep", "16"), "dp 8 x cp 1 = 8"),
    # tp 2 leaves dp 4: ep 8 does not divide it
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--tp", "2", "--ep", "8"), "dp 4"),
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--ep", "0"), "--ep 0"),
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--ep", "2", "--workload", "grpo",
      "--prompt-len", "256", "--response-len", "256"), "expert parallel training is not"),
])
def test_bad_ep_exits_2_with_one_line(capsys, args, words):
    code, out, err = _run(capsys, "check", "--gpu", "h100-sxm", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err


def test_ep_must_divide_the_experts():
    # 128 experts: ep 256 on 256 GPUs divides dp but not the experts
    cfg = TrainConfig(num_gpus=256, ep=256)
    with pytest.raises(PlannerError, match="must divide the 128 routed experts"):
        validate_config(cfg, QWEN3_30B)


def test_ep_is_carved_from_dp_times_cp():
    # dp 2 x cp 4 = 8: ep 8 spans both, as Megatron's expert grid and torchtitan's
    # dp_shard_in_ep do
    validate_config(TrainConfig(num_gpus=8, cp=4, ep=8, seq_len=4096), QWEN3_30B)
    with pytest.raises(PlannerError, match="dp 2 x cp 4 = 8"):
        validate_config(TrainConfig(num_gpus=8, cp=4, ep=16, seq_len=4096), QWEN3_30B)


def test_tune_takes_ep(capsys):
    code, out, _ = _run(capsys, "tune", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm",
                        "--num-gpus", "8", "--zero", "3", "--ep", "8", "--seq-len", "1024")
    assert code in (0, 1) and "qwen3-30b-a3b" in out


def _case(**fields):
    base = {"id": "t", "framework": "megatron-lm", "model": "Qwen/Qwen3-30B-A3B",
            "gpu": "h100-sxm", "num_gpus": 8, "sharding": "megatron", "seq_len": 4096,
            "micro_batch_size": 1, "precision": "bf16", "method": "full", "workload": "sft"}
    return {**base, **fields}


@pytest.mark.parametrize("fields, ep", [
    ({}, 1), ({"ep": 4}, 4), ({"extra": {"ep": 8}}, 8), ({"ep": 2, "extra": {"ep": 8}}, 2),
])
def test_cases_read_ep_or_extra_ep(fields, ep):
    cfg, _ = case_config(_case(**fields), CATALOG)
    assert cfg.ep == ep


# --- memory ----------------------------------------------------------------------------------
from planner.catalog.params import count_params  # noqa: E402
from planner.models import calibration as cal  # noqa: E402
from planner.models import states  # noqa: E402

QWEN3_235B = CATALOG.model("qwen3-235b-a22b").spec


def test_routed_params_of_qwen3_235b():
    # 94 layers x 128 experts x 3 x 4096 x 1536 (gate, up, down; no bias) = 227.1e9
    assert states.routed_params(QWEN3_235B) == 94 * 128 * 3 * 4096 * 1536


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_ep_divides_the_experts_held_unsharded(zero):
    one = TrainConfig(num_gpus=64, zero_stage=zero)
    eight = TrainConfig(num_gpus=64, zero_stage=zero, ep=8)
    routed = states.routed_params(QWEN3_235B)
    # 7/8 of the routed experts leave the GPU: weights 2 B each
    drop = routed * 7 / 8 * 2
    assert states.weight_bytes(QWEN3_235B, one, "bf16") - \
        states.weight_bytes(QWEN3_235B, eight, "bf16") == pytest.approx(drop)
    assert states.params_on_gpu(QWEN3_235B, eight) == pytest.approx(
        count_params(QWEN3_235B).total - routed * 7 / 8)
    if zero < 2:  # unsharded gradients: 2 B each
        assert states.gradient_bytes(QWEN3_235B, one, "bf16") - \
            states.gradient_bytes(QWEN3_235B, eight, "bf16") == pytest.approx(drop)


def test_ep_shards_the_experts_over_the_expert_data_parallel_group():
    # ZeRO-1 over dp 64: the experts' fp32 master and Adam states of one EP rank (1/8 of them)
    # are sharded over the 8 ranks holding the same experts: routed / 8 / 8 = routed / 64,
    # the same share as without EP; non-expert states over all 64 as before
    z1, z1e = TrainConfig(num_gpus=64, zero_stage=1), TrainConfig(num_gpus=64, zero_stage=1, ep=8)
    assert states.master_weight_bytes(QWEN3_235B, z1e, "bf16") == pytest.approx(
        states.master_weight_bytes(QWEN3_235B, z1, "bf16"))
    assert states.optimizer_state_bytes(QWEN3_235B, z1e) == pytest.approx(
        states.optimizer_state_bytes(QWEN3_235B, z1))
    # ZeRO-3: weights too; the gathered layer holds only the rank's experts
    z3, z3e = TrainConfig(num_gpus=64, zero_stage=3), TrainConfig(num_gpus=64, zero_stage=3, ep=8)
    assert states.weight_bytes(QWEN3_235B, z3e, "bf16") == pytest.approx(
        states.weight_bytes(QWEN3_235B, z3, "bf16"))
    per_layer = 128 * 3 * 4096 * 1536
    # FSDP: GATHERED_UNITS layers + one layer's gradient, 2 B each, hold 7/8 of the experts
    # fewer; the root unit (embedding, head) as before
    fs, fse = TrainConfig(num_gpus=64, fsdp=True), TrainConfig(num_gpus=64, fsdp=True, ep=8)
    units = cal.GATHERED_UNITS + 1
    assert states.gathered_bytes(QWEN3_235B, fs, "bf16") - states.gathered_bytes(
        QWEN3_235B, fse, "bf16") == pytest.approx(per_layer * 7 / 8 * 2 * units)


def test_ep_spreads_lora_adapters_on_experts():
    lora = TrainConfig(num_gpus=8, method="lora", lora_rank=8)
    routed = states.trainable_routed(QWEN3_30B, lora)
    # 48 layers x 128 experts x (gate, up: 8 x (2048 + 768); down: 8 x (768 + 2048))
    assert routed == 48 * 128 * 3 * 8 * (2048 + 768)
    eight = lora.model_copy(update={"ep": 8})
    assert states.trainable_on_gpu(QWEN3_30B, lora) - states.trainable_on_gpu(
        QWEN3_30B, eight) == pytest.approx(routed * 7 / 8)


def test_dense_and_ep_one_unchanged():
    cfg = TrainConfig(num_gpus=8, zero_stage=3)
    assert states.trainable_routed(DENSE_7B, cfg) == 0.0
    assert states.trainable_shard(QWEN3_30B, cfg, 8) == states.trainable_on_gpu(QWEN3_30B,
                                                                                 cfg) / 8


# --- time ------------------------------------------------------------------------------------
from planner.models import gemm, network  # noqa: E402
from planner.models.throughput import estimate_throughput  # noqa: E402

H100 = CATALOG.gpu("h100-sxm")


def test_rows_per_expert_grow_with_ep():
    one = TrainConfig(num_gpus=8, seq_len=4096)
    # 4096 tokens x 8 / 128 experts = 256 rows; x ep 8 = 2048: 2 x 2048 x 2048 x 768
    assert gemm.expert_gemm_flops(QWEN3_30B, one) == 2 * 256 * 2048 * 768
    eight = one.model_copy(update={"ep": 8})
    assert gemm.expert_gemm_flops(QWEN3_30B, eight) == 8 * gemm.expert_gemm_flops(QWEN3_30B,
                                                                                   one)
    assert gemm.linear_time_scale(QWEN3_30B, eight) < gemm.linear_time_scale(QWEN3_30B, one)


def test_all_to_all_bytes():
    cfg = TrainConfig(num_gpus=8, ep=8, seq_len=4096, micro_batch_size=2, grad_accum=3,
                      checkpointing="none")
    # per MoE layer: forward dispatch + combine, backward the same: 4 all-to-alls of
    # 2 x 4096 tokens x top_k 8 x h 2048 x 2 B, 7/8 of it leaving the GPU; 48 layers, GA 3
    message = 2 * 4096 * 8 * 2048 * 2
    assert network.ep_bytes_per_step(QWEN3_30B, cfg) == pytest.approx(
        3 * 48 * 4 * 7 / 8 * message)
    full = cfg.model_copy(update={"checkpointing": "full"})  # the recomputed forward: 2 more
    assert network.ep_bytes_per_step(QWEN3_30B, full) == pytest.approx(
        3 * 48 * 6 * 7 / 8 * message)
    assert network.ep_bytes_per_step(QWEN3_30B, cfg.model_copy(update={"ep": 1})) == 0.0


def test_all_to_all_link_inside_and_across_nodes():
    links = network.resolve_links(H100)  # 8 per node
    inside = TrainConfig(num_gpus=64, ep=8)
    assert network.ep_link_gbps(inside, links) == links.intra_node_gbps
    # ep 16 across two nodes: 8 of the 15 peers are off-node, so 8/15 of the bytes take the
    # network, 7/15 NVLink; the network sets the time
    across = TrainConfig(num_gpus=64, ep=16)
    expected = 1 / max((8 / 15) / links.inter_node_gbps, (7 / 15) / links.intra_node_gbps)
    assert network.ep_link_gbps(across, links) == pytest.approx(expected)


def test_ep_step_terms_and_fsdp_gathers_local_experts():
    base = TrainConfig(num_gpus=64, fsdp=True, seq_len=4096)
    one = estimate_throughput(QWEN3_235B, H100, base)
    eight = estimate_throughput(QWEN3_235B, H100, base.model_copy(update={"ep": 8}))
    assert "ep_comm" not in one.terms and eight.terms["ep_comm"] > 0
    # FSDP gathers and reduces 1/8 of the experts (over 8 ranks, not 64): far less dp traffic
    assert eight.raw["dp_comm"] < one.raw["dp_comm"] / 4
    assert eight.tokens_per_s > 2 * one.tokens_per_s


def test_ep_one_keeps_dense_terms():
    cfg = TrainConfig(num_gpus=8, zero_stage=2, seq_len=2048)
    est = estimate_throughput(DENSE_7B, H100, cfg)
    assert "ep_comm" not in est.terms and "ep_comm" not in est.raw


def test_framework_without_ep_refuses_it(capsys):
    code, _, err = _run(capsys, "check", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm",
                        "--num-gpus", "8", "--ep", "8", "--framework", "hf-trainer")
    assert code == 2 and "parallelism ep" in err
