"""The host's kernel launches bound an eager training step (throughput.host_launch_seconds):
the kernel counts are tools/host_kernels.py's, the time per launch the DeepSpeed#8352 vLLM
eager row over its counted GPT-2 block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import tiny_config

from planner.models import efficiency as eff
from planner.models import throughput as tp

RECORDED = json.loads((Path(__file__).parent / "data" / "host_kernels.json").read_text())


def _counts(arch: str, method: str) -> tuple[int, int]:
    row = RECORDED["archs"][arch][method]
    return row["forward"], row["backward"]


def test_kernel_counts_are_the_recorded_ones():
    per = eff.HOST_KERNELS_PER_ADAPTER
    for norm, arch, every in (("rmsnorm", "llama", 7), ("layernorm", "opt", 6)):
        k = eff.HOST_KERNELS_PER_LAYER[norm]
        assert k["full"] == _counts(arch, "full")
        # PEFT: the frozen layer plus per adapted matrix, on q and v (2) and on all of them
        for method, adapted in (("lora-qv", 2), ("lora", every)):
            assert (k["peft"][0] + adapted * per[0],
                    k["peft"][1] + adapted * per[1]) == _counts(arch, method)
    # 154.1 ms per 32 tokens of 12 GPT-2 blocks of 11 kernels
    assert abs(eff.HOST_S_PER_KERNEL - 36.5e-6) < 0.05e-6


def test_launches_scale_with_micro_batches_layers_and_recomputation(tiny):
    per = eff.HOST_S_PER_KERNEL
    base = tp.host_launch_seconds(tiny, tiny_config())
    assert base == pytest.approx(tiny.num_layers * (38 + 71) * per)
    assert tp.host_launch_seconds(tiny, tiny_config(grad_accum=4)) == pytest.approx(4 * base)
    # full checkpointing launches the forward again
    again = tp.host_launch_seconds(tiny, tiny_config(checkpointing="full"))
    assert again == pytest.approx(tiny.num_layers * (2 * 38 + 71) * per)
    # a pipeline stage launches its own layers only
    staged = tp.host_launch_seconds(tiny, tiny_config(pp=2, num_gpus=2))
    assert staged == pytest.approx(base / 2)


def test_peft_and_qlora_kernels(tiny):
    per = eff.HOST_S_PER_KERNEL
    lora = tp.host_launch_seconds(tiny, tiny_config(method="lora", lora_rank=8,
                                                    lora_targets=("q", "v")))
    assert lora == pytest.approx(tiny.num_layers * (38 + 8 + 60 + 12) * per)
    # QLoRA adds a dequantisation kernel per 4-bit matrix (7 in a Llama layer) and pass
    q = tp.host_launch_seconds(tiny, tiny_config(method="qlora", lora_rank=8,
                                                 lora_targets=("q", "v")))
    assert q == pytest.approx(lora + tiny.num_layers * 2 * 7 * per)


def test_layernorm_family_launches_fewer(cat):
    """OPT's layer (one LayerNorm kernel, no rotary, ReLU) launches 13 + 27 kernels."""
    opt = cat.model("facebook/opt-1.3b").spec
    assert tp.host_launch_seconds(opt, tiny_config()) == pytest.approx(
        opt.num_layers * (13 + 27) * eff.HOST_S_PER_KERNEL)


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
    assert t == pytest.approx(4 * tiny.num_layers * 38 * eff.HOST_S_PER_KERNEL)
    assert tp.host_launch_seconds(tiny, c, micro_batches=4, backward=False) == pytest.approx(t)
    compiled = forward_seconds(tiny, gpu, tiny_config(compiled=True), tokens=32, gpus=1,
                               stack="hf", batch=1)
    assert compiled < t / 100
