"""The host's kernel launches bound an eager training step (throughput.host_launch_seconds):
the kernel counts are tools/host_kernels.py's, the time per launch the DeepSpeed#8352 vLLM
eager row over its counted GPT-2 block, and the host's cost of PEFT's adapters and of
checkpointing the measured training loop's (tools/measure_hf_trainer.py --set 6 and 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import tiny_config

from planner.models import efficiency as eff
from planner.models import host_launches as hl
from planner.models import throughput as tp

RECORDED = json.loads((Path(__file__).parent / "data" / "host_kernels.json").read_text())
MEASURED = Path(__file__).parents[1] / "tools" / "measured"


def _rows(name: str) -> list[dict]:
    """One measured set's runs (each process of a set writes its own header line first)."""
    rows = (json.loads(line) for line in (MEASURED / name).read_text().splitlines())
    return [row for row in rows if "id" in row]


def _step_s(name: str) -> dict[str, dict[int, float]]:
    """Median step seconds by run (depth prefix dropped) and layers, from one measured set."""
    out: dict[str, dict[int, float]] = {}
    for row in _rows(name):
        out.setdefault(row["id"].split("_", 1)[1], {})[row["layers"]] = row["median_step_s"]
    return out


def _per_layer_ms(runs: dict[str, dict[int, float]], run: str) -> float:
    steps = runs[run]
    return (steps[32] - steps[2]) / 30 * 1e3


def _counts(arch: str, method: str) -> tuple[int, int]:
    row = RECORDED["archs"][arch][method]
    return row["forward"], row["backward"]


def test_kernel_counts_are_the_recorded_ones():
    per = hl.HOST_KERNELS_PER_ADAPTER
    for norm, arch, every in (("rmsnorm", "llama", 7), ("layernorm", "opt", 6)):
        k = hl.HOST_KERNELS_PER_LAYER[norm]
        assert k["full"] == _counts(arch, "full")
        # PEFT: the frozen layer plus per adapted matrix, on q and v (2) and on all of them
        for method, adapted in (("lora-qv", 2), ("lora", every)):
            assert (k["peft"][0] + adapted * per[0],
                    k["peft"][1] + adapted * per[1]) == _counts(arch, method)
    # 154.1 ms per 32 tokens of 12 GPT-2 blocks of 11 kernels: the training loops' rate +3 %
    assert abs(hl.VLLM_EAGER_S_PER_KERNEL - 36.5e-6) < 0.05e-6
    ratio = hl.VLLM_EAGER_S_PER_KERNEL / hl.HOST_S_PER_KERNEL
    assert 1.02 < ratio < 1.04


def test_host_costs_are_the_measured_training_loops():
    """The H200 Trainer rows at 2 and 32 layers (sets 6, 7, 8: three machines): full
    fine-tuning's host time per layer over its 109 counted launches gives HOST_S_PER_KERNEL (the
    median machine); an adapted matrix and checkpointing cost what host_launches.py says, in
    launches of each machine's own full rate."""
    s6, s7, s8, s9 = (_step_s(f"hf_trainer_h200_set{n}.jsonl") for n in (6, 7, 8, 9))
    full = _per_layer_ms(s6, "llama32_1b_full_bf16_nogc_mb1_s128")
    full2 = _per_layer_ms(s7, "llama32_1b_full_bf16_nogc_mb1_s128_m2")
    full3 = _per_layer_ms(s8, "llama32_1b_full_bf16_nogc_mb1_s128_m3")
    full4 = _per_layer_ms(s9, "llama32_1b_full_bf16_nogc_mb1_s128_ga1")
    rates = sorted(ms / 109 * 1e-3 for ms in (full, full2, full3, full4))
    assert (rates[1] + rates[2]) / 2 == pytest.approx(hl.HOST_S_PER_KERNEL, rel=0.001)
    assert rates[0] / hl.HOST_S_PER_KERNEL > 0.8 and rates[3] / hl.HOST_S_PER_KERNEL < 1.2
    lora, qv = (_per_layer_ms(s6, f"llama32_1b_{m}_nogc_mb1_s128") for m in ("lora", "loraqv"))
    lora3 = _per_layer_ms(s8, "llama32_1b_lora_nogc_mb1_s128_m3")
    per_adapter = [(ratio * 109 - (38 + 60)) / 7 for ratio in (lora / full, lora3 / full3)]
    assert sum(per_adapter) / 2 == pytest.approx(hl.HOST_LAUNCHES_PER_ADAPTER, abs=0.01)
    # set 6's q, v line: the frozen base within 3 % of its 38 + 60 counted launches
    assert (qv - 2 * (lora - qv) / 5) / full * 109 == pytest.approx(38 + 60, rel=0.03)
    host = full2 / full
    extras = [_per_layer_ms(s6, "llama32_1b_full_bf16_gc_mb1_s128") - full,
              _per_layer_ms(s7, "llama32_1b_lora_gc_mb1_s128") / host - lora,
              _per_layer_ms(s7, "llama32_1b_loraqv_gc_mb1_s128") / host - qv]
    assert max(extras) - min(extras) < 0.15  # ms: no term per adapter
    launches = sum(extras) / 3 / full * 109
    assert launches / 38 == pytest.approx(hl.HOST_CHECKPOINT_PER_FORWARD_LAUNCH, abs=0.005)
    assert launches > 3 * 38  # 3 x the former model's replay of the forward


def test_liger_kernels_launched_from_python_take_the_eager_time(tiny):
    """Set 8: Liger halves the kernels per layer but its host time per layer is within 3 % of
    the same machine's eager one, full and LoRA; so the planner counts its layers as eager."""
    s8 = _step_s("hf_trainer_h200_set8.jsonl")
    kernels = {r["id"]: r["kernels"] for r in _rows("hf_trainer_h200_set8.jsonl")}
    for method in ("full_bf16", "lora"):
        eager = _per_layer_ms(s8, f"llama32_1b_{method}_nogc_mb1_s128_m3")
        liger = _per_layer_ms(s8, f"liger_llama32_1b_{method}_nogc_mb1_s128")
        assert liger == pytest.approx(eager, rel=0.03)
    fused = (kernels["depth32_liger_llama32_1b_full_bf16_nogc_mb1_s128"]
             - kernels["depth2_liger_llama32_1b_full_bf16_nogc_mb1_s128"]) / 30
    plain = (kernels["depth32_llama32_1b_full_bf16_nogc_mb1_s128_m3"]
             - kernels["depth2_llama32_1b_full_bf16_nogc_mb1_s128_m3"]) / 30
    assert fused < 0.5 * plain
    liger = tiny_config(fused_elementwise=True, python_launched_fusion=True)
    assert tp.host_launch_seconds(tiny, liger) == pytest.approx(
        tp.host_launch_seconds(tiny, tiny_config()))
    assert tp.host_launch_seconds(tiny, tiny_config(fused_elementwise=True)) == 0
    assert tp.host_launch_seconds(
        tiny, tiny_config(fused_elementwise=True, python_launched_fusion=True,
                          compiled=True)) == 0


def test_launches_scale_with_micro_batches_layers_and_recomputation(tiny):
    per, out = hl.HOST_S_PER_KERNEL, hl.HOST_LAUNCHES_PER_MICRO_BATCH
    base = tp.host_launch_seconds(tiny, tiny_config())
    assert base == pytest.approx((tiny.num_layers * (38 + 71) + out) * per)
    assert tp.host_launch_seconds(tiny, tiny_config(grad_accum=4)) == pytest.approx(4 * base)
    # full checkpointing replays the forward, with its saved-tensor hooks
    again = tp.host_launch_seconds(tiny, tiny_config(checkpointing="full"))
    ckpt = hl.HOST_CHECKPOINT_PER_FORWARD_LAUNCH
    assert again == pytest.approx((tiny.num_layers * ((1 + ckpt) * 38 + 71) + out) * per)
    # a pipeline stage launches its own layers only
    staged = tp.host_launch_seconds(tiny, tiny_config(pp=2, num_gpus=2))
    assert staged == pytest.approx((tiny.num_layers / 2 * (38 + 71) + out) * per)


def test_peft_and_qlora_kernels(tiny):
    per = hl.HOST_S_PER_KERNEL
    lora = tp.host_launch_seconds(tiny, tiny_config(method="lora", lora_rank=8,
                                                    lora_targets=("q", "v")))
    assert lora == pytest.approx((tiny.num_layers * (38 + 60 + 2 * hl.HOST_LAUNCHES_PER_ADAPTER)
                                  + hl.HOST_LAUNCHES_PER_MICRO_BATCH) * per)
    # a forward-only pass launches the adapters' forward kernels alone
    fwd = tp.host_launch_seconds(tiny, tiny_config(method="lora", lora_rank=8,
                                                   lora_targets=("q", "v")), backward=False)
    assert fwd == pytest.approx(tiny.num_layers * (38 + 2 * 4) * per)
    # QLoRA adds a dequantisation kernel per 4-bit matrix (7 in a Llama layer) and pass
    q = tp.host_launch_seconds(tiny, tiny_config(method="qlora", lora_rank=8,
                                                 lora_targets=("q", "v")))
    assert q == pytest.approx(lora + tiny.num_layers * 2 * 7 * per)


def test_layernorm_family_launches_fewer(cat):
    """OPT's layer (one LayerNorm kernel, no rotary, ReLU) launches 13 + 27 kernels."""
    opt = cat.model("facebook/opt-1.3b").spec
    assert tp.host_launch_seconds(opt, tiny_config()) == pytest.approx(
        (opt.num_layers * (13 + 27) + hl.HOST_LAUNCHES_PER_MICRO_BATCH) * hl.HOST_S_PER_KERNEL)


def test_no_floor_where_kernels_are_fused_compiled_or_routed(tiny, cat):
    assert tp.host_launch_seconds(tiny, tiny_config(compiled=True)) == 0
    assert tp.host_launch_seconds(tiny, tiny_config(fused_elementwise=True)) == 0
    moe = cat.model("mixtral-8x7b").spec
    assert tp.host_launch_seconds(moe, tiny_config()) == 0


def test_a_small_model_on_short_sequences_is_launch_bound(cat):
    """Llama-3.2-1B at 128 tokens a step on an H200 runs at the host's pace; at 4 x 4096
    tokens the GPU's work covers every launch."""
    model, gpu = cat.model("llama-3.2-1b").spec, cat.gpu("h200-sxm")
    short = tp.estimate_throughput(model, gpu, tiny_config(seq_len=128, precision="bf16"),
                                   step_overhead_s=0.0)
    assert short.limited_by == "host kernel launches"
    assert short.terms["host_launches"] > 0
    gpu_work = sum(v for k, v in short.terms.items()
                   if k not in ("host_launches", "cpu_optimizer", "step_overhead"))
    assert gpu_work + short.terms["host_launches"] == pytest.approx(short.raw["host_launches"])
    assert any("eager kernel launches take" in n and "larger micro-batch" in n
               for n in short.notes)
    long = tp.estimate_throughput(model, gpu, tiny_config(seq_len=4096, micro_batch_size=4,
                                                          precision="bf16"), step_overhead_s=0.0)
    assert long.terms["host_launches"] == 0
    assert long.limited_by == "compute"
    assert not any("kernel launches" in n for n in long.notes)


def test_a_forward_only_pass_takes_at_least_its_launches(tiny, gpu):
    """An RL role's log-prob pass (rltime.forward_seconds) launches each micro-step's forward
    kernels once: 4 micro-steps of one 8-token sequence on the tiny model."""
    from planner.models.rltime import forward_seconds

    c = tiny_config()
    t = forward_seconds(tiny, gpu, c, tokens=4 * 8, gpus=1, stack="hf", batch=1)
    assert t == pytest.approx(4 * tiny.num_layers * 38 * hl.HOST_S_PER_KERNEL)
    assert tp.host_launch_seconds(tiny, c, micro_batches=4, backward=False) == pytest.approx(t)
    compiled = forward_seconds(tiny, gpu, tiny_config(compiled=True), tokens=32, gpus=1,
                               stack="hf", batch=1)
    assert compiled < t / 100


def test_the_trainers_host_time_outside_the_layers_is_measured():
    """Set 9: the full line at GA 1, 2, 4, 8 on one machine; step time at 0 layers by least
    squares = per step + GA x per micro-batch, in that machine's launches; per step is hf's
    measured overhead (at HOST_S_PER_KERNEL), per micro-batch counted with the layers."""
    runs = _step_s("hf_trainer_h200_set9.jsonl")
    gas = (1, 2, 4, 8)
    at_zero = []
    for ga in gas:
        steps = runs[f"llama32_1b_full_bf16_nogc_mb1_s128_ga{ga}"]
        at_zero.append(steps[2] - 2 * (steps[32] - steps[2]) / 30)
    mean_ga, mean_t = sum(gas) / 4, sum(at_zero) / 4
    slope = (sum((g - mean_ga) * (t - mean_t) for g, t in zip(gas, at_zero, strict=True))
             / sum((g - mean_ga) ** 2 for g in gas))
    fixed = mean_t - slope * mean_ga
    steps = runs["llama32_1b_full_bf16_nogc_mb1_s128_ga1"]
    launch = (steps[32] - steps[2]) / 30 / 109  # this machine's seconds per launch
    assert slope / launch == pytest.approx(hl.HOST_LAUNCHES_PER_MICRO_BATCH, abs=0.05)
    assert fixed / launch * hl.HOST_S_PER_KERNEL == pytest.approx(
        eff.MEASURED_STEP_OVERHEAD_S["hf"], abs=0.05e-3)
    assert eff.MEASURED_STEP_OVERHEAD_S["hf"] < eff.STEP_OVERHEAD_S / 10
    # the GA-1 lines of sets 6-8 at 0 layers: -0.2 to 7.1 ms, median 5.1 ms
    import statistics

    ga1 = []
    for name in (f"hf_trainer_h200_set{n}.jsonl" for n in (6, 7, 8)):
        rows = _rows(name)
        for run, steps in _step_s(name).items():
            row = next(r for r in rows if r["id"].endswith(run))
            if row["grad_accum"] == 1 and row["seq_len"] == 128 and "liger" not in run:
                top = max(steps)
                ga1.append(steps[2] - 2 * (steps[top] - steps[2]) / (top - 2))
    assert len(ga1) == 10 and statistics.median(ga1) == pytest.approx(5.1e-3, abs=0.05e-3)
