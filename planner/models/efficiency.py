"""Every calibrated efficiency factor of the throughput model, in one place, with its cases.

Physics lives in throughput.py (FLOPs, bytes, bandwidths, overlap). What cannot be derived from
first principles, namely how close a software stack gets to the hardware, is a named number here.
Case ids refer to validation/throughput_cases.yaml. A calibrated factor is the median of
its cases' implied values (validate_throughput.implied_utilisation / implied_decode_efficiency),
computed by benchmarks/fit.py and read from planner/models/fitted.yaml, which only `python
benchmarks/fit.py --write` writes; tests/test_fit.py checks that the file equals what the
script computes now, so change a factor only by changing the physics or the cases, then rerun
the script.

Compute efficiency is a product of two parts:

* ``matmul_fraction(gpu, precision)``: the vendor fact. The maximum achievable matmul TFLOPS (MAMF)
  that stas00/ml-engineering measured, over the dense peak (../shared/reference/gpus_README.md,
  caveat 3), or a square-matmul benchmark's where that table has no row. It says how much of
  the datasheet peak any software can get.
* ``STACK_UTILISATION[stack][precision class]``: the calibrated part. The share of that achievable
  matmul rate that a training stack sustains over a whole step, including everything that is not
  modelled explicitly (norms, activations, rotary, loss, kernel launches, data loading).

The time terms that ARE modelled explicitly (communication, pipeline bubble, CPU offload, QLoRA
dequantisation, optimizer step) are not inside these factors.
"""

from __future__ import annotations

from typing import Literal

from planner.catalog.request import TrainConfig
from planner.catalog.specs import GpuSpec
from planner.models.fitted import fitted

Stack = Literal["megatron", "deepspeed", "fsdp", "hf", "unsloth", "prime-rl", "torchtune"]
DecodeStack = Literal["tensorrt-llm", "vllm", "tgi"]
STACKS: tuple[str, ...] = Stack.__args__  # type: ignore[attr-defined]
DECODE_STACKS: tuple[str, ...] = DecodeStack.__args__  # type: ignore[attr-defined]
# Fitted values: computed by benchmarks/fit.py from the cases named here, written to
# planner/models/fitted.yaml (never by hand).
_FITTED = fitted()["efficiency"]

# ---------------------------------------------------------------------------------------------
# Vendor facts: the measured maximum achievable matmul fraction (MAMF / dense peak) lives in each
# GPU's catalog file (mamf_bf16_fraction, mamf_fp8_fraction, with mamf_source; written by
# tools/gpus_from_csv.py from stas00/ml-engineering @744d01e, gpus_README caveat 3, and for the
# GPUs that table lacks (RTX 3090 / 4090 / 5090 / A6000 / PRO 6000, L4, L40S, H100 PCIe, H20,
# T4, V100) the square-matmul database zzc0721/torch-performance-test-data @9d82827, which
# agrees with stas00 within 3 % where both measured).
# ---------------------------------------------------------------------------------------------
# GPUs without a measurement: the median of the NVIDIA bf16 rows (H100 0.80, A100 SXM 0.87,
# A100 PCIe 0.81, B200 0.78, GB200 0.73) is 0.80; fp8 rows (H100 0.71, H200 0.73, B200 0.76,
# GB200 0.72) give 0.72. AMD parts are measured far lower (0.51-0.60) and have their own rows.
DEFAULT_MAMF_BF16 = 0.80
DEFAULT_MAMF_FP8 = 0.72


def matmul_fraction(gpu: GpuSpec, precision: str) -> float:
    """MAMF / peak of ``gpu`` for matmuls in ``precision`` (fp8, else the 16-bit row), from the
    GPU's catalog file; the stated default where the GPU has no measurement."""
    if precision == "fp8":
        return gpu.mamf_fp8_fraction or DEFAULT_MAMF_FP8
    return gpu.mamf_bf16_fraction or DEFAULT_MAMF_BF16


# ---------------------------------------------------------------------------------------------
# Calibrated: share of the achievable matmul rate a stack sustains over a training step
# ---------------------------------------------------------------------------------------------
# Each fitted value is the median over the stack's usable cases of the utilisation at which the
# prediction equals the measurement (validate_throughput.implied_utilisation, with the
# communication, bubble, offload and overhead terms in place), per precision class (fp8 rows
# apart from 16-bit rows), i.e. fitted on those cases; STACK_CASES lists them. The values are
# computed by benchmarks/fit.py and read from planner/models/fitted.yaml (never edited by hand). The
# spread inside a stack is the model's honest error: e.g. torchtune's single-GPU rows imply
# 0.82-1.39, its 8x A100 rows 0.59-0.77. A case implying more than 1 (faster than the achievable
# matmul rate allows with its recorded settings) sets no factor (fit.py MAX_IMPLIED_UTILISATION).
# The per-stack ranges below were measured with attention at the matmul rate; since attention
# is timed at its fused kernel's rate (attention.py, x the same factor) the implied ranges are
# (2026-11-25, benchmarks/README.md): megatron fp8 0.47-0.91, deepspeed 0.41-0.73, torchtune
# 0.60-1.44, fsdp bf16 0.37-1.44 and fp8 0.52-0.76, hf 0.48-1.00, unsloth 0.73, prime-rl
# 0.37-0.70 (0.42-0.80, 0.35-0.69, 0.59-1.39, 0.31-1.39, 0.39-0.57, 0.47-0.95, 0.71, 0.31-0.49
# before).
#   megatron fp8: the NeMo/MLPerf rows (implied 0.42-0.80 with LoRA's matmul traffic timed
#       apart, LORA_GEMM_BYTES; 0.43-0.72 without it).
#   deepspeed: 3 MLPerf LoRA rows (implied 0.35-0.69; end-to-end rates incl. evaluation) and
#       DeepSpeed-Chat's step-1 OPT-1.3b log on 16 V100s (0.58), with the eager elementwise
#       traffic (ELEMENTWISE_BYTES) timed apart (0.33-0.64 and 0.52 without it).
#   torchtune: 8 torchtune README rows (implied 0.59-1.39); the RTX A6000 full (1.17), RTX
#       4090 LoRA (1.18) and RTX A6000 LoRA (1.39) rows set no factor. Not a counting artefact:
#       the recipes count batch["tokens"].numel() (every packed position, padding included) per
#       rank and divide by the wall time between optimizer steps, each closed by a
#       running_loss.item() sync (recipes/lora_finetune_single_device.py and
#       full_finetune_distributed.py @ pytorch/torchtune 30b8519e8, the commit that added the
#       README table): no token is counted twice and no GPU work is left out of the time.
#   fsdp: the base of the frameworks that train on PyTorch FSDP2 without cases of their own
#       (pytorch-fsdp, and through it torchtitan, LitGPT, LLM Foundry, NeMo AutoModel): every
#       case of the frameworks measured on FSDP(2), torchtune's and prime-rl's plus the rows of
#       frameworks that inherit fsdp (validation/project_cases_training.yaml): 11 torchtitan
#       benchmark rows (3 files, 2 teams; H100 at 500 W imply 0.40-0.56, Trainy's H200 fp8 0.55,
#       0.57) and 12 llm-foundry MPT rows (H100 0.55-0.69, A100 0.73-0.83; the 7B 128x H100 row
#       implies 1.20 and sets no factor: its FSDP network time is modelled as partly exposed);
#       one evidence pool for the runtime they share (bf16 0.59, fp8 0.51 over 5 fp8 rows),
#       and 8 fms-fsdp README rows (7B HSDP, TrainConfig.dp_shard; 34B/70B full AC; its 13B-70B
#       "selective AC" rows state no block fraction and stay unusable).
#   hf: the Hugging Face modeling path (transformers Trainer / TRL / PEFT, alone, under FSDP
#       or on DeepSpeed ZeRO), pooled over three sources, 23 rows: LLaMA-Factory's 2 HF-backend
#       rows (Dec 2023, LoRA/QLoRA, bs 4 padded to 1024; implied 0.47, 0.48), fms-acceleration's
#       19 plain-HF A100 reference rows (TRL SFTTrainer, packed 4096, FlashAttention-2,
#       checkpointing; implied 0.52-0.83: full > LoRA > QLoRA, Mixtral lowest) and ms-swift's 2
#       DeepSpeed ZeRO-2/3 rows (Qwen2.5-14B, packed 8K; 0.91-0.95). Median 0.664. The choice
#       was measured both ways (benchmarks/README.md, 2026-11-25): on every usable training case
#       held out by source (86, ten sources) the pooled fit gives 16.3 / 42.5 % against 20.9 /
#       42.4 % on LLaMA-Factory's rows alone; on the shared validation cases alone 16.3 / 48.5
#       against 14.1 / 40.0 %, the difference being LLaMA-Factory's three rows (held out, +40 %)
#       and verl's trainer phases. Kept pooled: the shared rows are one 2023 source of padded
#       short sequences, and the planner is judged on frameworks it has not seen.
#       ms-swift's Megatron row (implied 0.72) checks the stated megatron bf16 value (0.65).
#   unsloth: one LLaMA-Factory Unsloth+FA2 row (implied 0.71; 0.62 before LoRA's matmul
#       traffic was timed apart): in-sample by construction.
#   prime-rl: 5 prime-rl CI SFT benchmarks (FSDP2, torch.compile, Hugging Face model code;
#       implied 0.31-0.49, the Qwen3-30B-A3B MoE row lowest). FSDP2 like torchtune, but its rows
#       imply half of torchtune's: each framework keeps its own factor; fsdp pools both. Since
#       the routed experts' small GEMMs are timed at their measured rate (gemm.py, 2026-11-25)
#       the rows imply 0.40-0.70 and the MoE row 0.59 (0.37 before): it no longer sits apart.
#   Since dense linears too are timed at their GEMM size's measured rate (gemm.py
#   DENSE_GEMM_POINTS, gemm18) the small models' rows (Qwen3-0.6B, OPT-1.3b/350m) imply more:
#   deepspeed 0.624 -> 0.644, prime-rl 0.576 -> 0.593 (benchmarks/README.md).
# Stated, not fitted (STATED_UTILISATION): megatron bf16. No usable bf16 Megatron case; from the
# published Megatron-LM A100 MFUs (megatron_readme_mfu_22b/175b/530b/1t_A100: 0.415, 0.514,
# 0.56, 0.563; not usable, no public checkpoint) as MFU / MAMF(A100 SXM 0.87) / (1 - ~5 %
# bubble and exposed communication): 0.50-0.68, median 0.65. Arithmetic, not a fit of this model.
STATED_UTILISATION: dict[str, dict[str, float]] = {"megatron": {"bf16": 0.65}}


def utilisation_table(fitted: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """STACK_UTILISATION from fitted entries (planner/models/fitted.yaml) and the stated ones."""
    return {s: {**STATED_UTILISATION.get(s, {}), **fitted.get(s, {})} for s in STACKS}


STACK_UTILISATION: dict[str, dict[str, float]] = utilisation_table(
    _FITTED["stack_utilisation"])
_TORCHTUNE_CASES = (
    "torchtune_llama31_8b_full_1x4090", "torchtune_llama31_8b_full_1xA6000",
    "torchtune_llama31_8b_lora_1x4090", "torchtune_llama31_8b_lora_1xA6000",
    "torchtune_llama31_8b_qlora_1x4090", "torchtune_llama31_70b_full_8xA100",
    "torchtune_llama31_70b_lora_8xA100", "torchtune_llama31_405b_qlora_8xA100",
)
_PRIME_RL_CASES = (
    "primerl_qwen3_0.6b_sft_full_8k_1xH100", "primerl_qwen3_0.6b_sft_full_16k_1xH100",
    "primerl_qwen3_4b_sft_full_16k_8xH100", "primerl_qwen3_30b_a3b_sft_full_16k_8xH200",
    "primerl_qwen3_0.6b_sft_full_8k_1xA6000",
)
# FSDP2 rows of frameworks that have no factor of their own (their profiles inherit pytorch-fsdp's
# "fsdp"): validation/project_cases_training.yaml.
_FSDP_OWN_CASES = (
    "torchtitan_llama31_8b_fsdp_eager_8xH100", "torchtitan_llama31_8b_fsdp_compile_8xH100",
    "torchtitan_llama31_8b_fsdp_compile_fp8_8xH100", "torchtitan_llama31_8b_fsdp_eager_128xH100",
    "torchtitan_llama31_8b_fsdp_compile_128xH100",
    "torchtitan_llama31_8b_fsdp_compile_fp8_128xH100",
    "torchtitan_llama31_70b_fsdp32_tp8_compile_fp8_256xH100",
    "torchtitan_llama3_70b_fsdp32_tp8_compile_bf16_256xH100",
    "torchtitan_llama3_8b_fsdp8_tp8_compile_bf16_64xH100",
    "torchtitan_trainy_llama31_8b_fsdp_compile_fp8_32xH200",
    "torchtitan_trainy_llama31_8b_fsdp_compile_fp8_64xH200",
    "llmfoundry_mpt_7b_s2048_8xH100", "llmfoundry_mpt_7b_s4096_8xH100",
    "llmfoundry_mpt_7b_s8192_8xH100", "llmfoundry_mpt_30b_s2048_8xH100",
    "llmfoundry_mpt_30b_s4096_8xH100", "llmfoundry_mpt_7b_s2048_128xH100",
    "llmfoundry_mpt_30b_s2048_128xH100", "llmfoundry_mpt_7b_s2048_8xA100_80G",
    "llmfoundry_mpt_7b_s8192_8xA100_80G", "llmfoundry_mpt_30b_s2048_8xA100_80G",
    "llmfoundry_mpt_7b_s2048_8xA100_40G", "llmfoundry_mpt_7b_s2048_64xA100_40G",
    "fmsfsdp_llama2_7b_128xA100", "fmsfsdp_llama2_7b_96xH100",
    "fmsfsdp_nocompile_llama2_7b_128xA100", "fmsfsdp_nocompile_llama2_7b_96xH100",
    "fmsfsdp_nocompile_codellama_34b_128xA100", "fmsfsdp_nocompile_codellama_34b_96xH100",
    "fmsfsdp_nocompile_llama2_70b_128xA100", "fmsfsdp_nocompile_llama2_70b_96xH100",
)
# The Hugging Face modeling path: LLaMA-Factory (shared), ms-swift ZeRO and fms-acceleration
# (validation/project_cases_training.yaml, project_cases_hf.yaml).
_HF_PATH_CASES = (
    "llamafactory_llama2_7b_lora_hf_1xA100", "llamafactory_llama2_7b_qlora_hf_1xA100",
    "msswift_qwen25_14b_full_zero2_8xA800", "msswift_qwen25_14b_full_zero3_8xA800",
    "fmsacc_mistral7b_full_bs4_1xA100", "fmsacc_mistral7b_full_bs2_2xA100",
    "fmsacc_mistral7b_full_bs8_1xA100", "fmsacc_mistral7b_full_bs4_2xA100",
    "fmsacc_mistral7b_lora_bs4_1xA100", "fmsacc_mistral7b_lora_bs2_2xA100",
    "fmsacc_mistral7b_lora_bs8_1xA100", "fmsacc_mistral7b_lora_bs4_2xA100",
    "fmsacc_mixtral8x7b_lora_bs2_2xA100", "fmsacc_mixtral8x7b_lora_bs4_2xA100",
    "fmsacc_mistral7b_qlora_bs4_1xA100", "fmsacc_mistral7b_qlora_bs2_2xA100",
    "fmsacc_mistral7b_qlora_bs8_1xA100", "fmsacc_mistral7b_qlora_bs4_2xA100",
    "fmsacc_mixtral8x7b_qlora_bs4_1xA100", "fmsacc_mixtral8x7b_qlora_bs2_2xA100",
    "fmsacc_mixtral8x7b_qlora_bs8_1xA100", "fmsacc_mixtral8x7b_qlora_bs4_2xA100",
    "fmsacc_llama2_70b_qlora_bs2_2xA100",
)
STACK_CASES: dict[str, tuple[str, ...]] = {
    "megatron": (
        "mlperf40_lora70b_8xH100_nemo-tps", "mlperf40_lora70b_8xH200_nemo-tps",
        "mlperf40_lora70b_64xH100_nemo-tps", "mlperf40_lora70b_1024xH100_nemo-tps",
        "mlperf40_lora70b_64xL40S_nemo-tps", "mlperf40_lora70b_384xL40S_nemo-tps",
        "mlperf50_lora70b_8xB200_nemo-tps", "mlperf50_lora70b_8xGB200_nemo-tps",
        "mlperf50_lora70b_72xGB200_nemo-tps", "mlperf50_lora70b_512xGB200_nemo-tps",
        "mlperf50_llama31_405b_512xH100_step", "mlperf50_llama31_405b_8192xH100_step",
        "mlperf50_llama31_405b_512xH200_nebius_step", "mlperf50_llama31_405b_256xGB200_step",
        "nemo2407_llama3_8b_pretrain_8xH100", "nemo2407_llama3_70b_pretrain_64xH100",
        "nemo2407_llama2_7b_sft_8xH100", "nemo2407_llama2_70b_sft_16xH100",
        "nemo2407_llama2_7b_lora_8xH100", "nemo2407_llama2_70b_lora_8xH100",
    ),
    "deepspeed": (
        "mlperf40_lora70b_64xA100_deepspeed-tps", "mlperf40_lora70b_8xH100_deepspeed-tps",
        "mlperf40_lora70b_32xH100_deepspeed-tps", "dschat_log_sft_opt1.3b_16xV100",
    ),
    "torchtune": _TORCHTUNE_CASES,
    "fsdp": _FSDP_OWN_CASES + _TORCHTUNE_CASES + _PRIME_RL_CASES,
    "hf": _HF_PATH_CASES,
    "unsloth": ("llamafactory_llama2_7b_lora_unsloth_fa2_1xA100",),
    "prime-rl": _PRIME_RL_CASES,
}
# Stacks fitted on the pooled cases of others (and their own: frameworks whose profile inherits
# the stack): the runtime several measured frameworks share.
STACK_POOLS: dict[str, tuple[str, ...]] = {"fsdp": ("fsdp", "torchtune", "prime-rl")}
# The stack whose factor a stack takes when it has no case (leave-one-source-out; a framework
# whose rows are withheld): its framework profile's base (catalog/frameworks: torchtune's base
# pytorch-fsdp runs fsdp, unsloth's hf-trainer runs hf; tests/test_fit.py checks it against the
# catalog). Stacks not named take the default (validation.throughput_cases.DEFAULT_STACK).
STACK_BASE: dict[str, str] = {"torchtune": "fsdp", "unsloth": "hf"}


def stack_utilisation(stack: str, precision: str) -> float:
    """The calibrated factor of ``stack`` for ``precision`` ("fp8" or 16-bit); a stack without
    an fp8 value runs fp8 as bf16-class work (no fp8 recipe measured for it)."""
    table = STACK_UTILISATION[stack]
    if precision == "fp8" and "fp8" in table:
        return table["fp8"]
    return table["bf16"]


# Whether the stack utilisation also scales the attention core's time (attention.py gives the
# kernel's own measured rate). DECISION PENDING (measured both ways in benchmarks/README.md).
ATTENTION_TAKES_UTILISATION = True


def attention_utilisation(util: float) -> float:
    """The factor on the attention kernel's measured rate: the stack utilisation ``util``
    where ATTENTION_TAKES_UTILISATION, else 1 (the kernel's benchmark rate as it stands)."""
    return util if ATTENTION_TAKES_UTILISATION else 1.0


# Host-side time per optimizer step that does not shrink with the work per GPU (optimizer and
# gradient-norm launches over many tensors, synchronisation, logging, data loading). It is
# what separates the MLPerf llama2_70b_lora rows with grad_accum 4 and 1: per micro-batch work
# halves from mlperf40_lora70b_8xH100_nemo-tps (GA 4, ~3.7 s/step) to
# mlperf40_lora70b_64xH100_nemo-tps (cp 2, GA 1, ~0.64 s/step) but the step keeps ~0.2 s more;
# the GB200 pair (8 -> 72 GPUs, cp 8) keeps ~0.06 s (v5.0, CUDA graphs). Applied to every
# stack but those in MEASURED_STEP_OVERHEAD_S. benchmarks/fit.py fits it jointly with every stack
# factor: on a 0.025 s grid from 0 to 0.1 s (fit.STEP_OVERHEAD_GRID; a wider grid lets the fit
# absorb model error into a per-step constant), the least value whose refitted factors give a
# mean |error| over all usable training cases within 0.1 point of the lowest (2026-11-26: 0 /
# 0.025 / 0.05 / 0.075 / 0.1 s give 13.6 / 13.1 / 12.7 / 12.54 / 12.52 %: flat, so 0.075 s;
# 2026-11-25: 14.3 / 13.3 / 12.5 / 12.1 / 12.2 %; the median objective, 9.0 / 9.9 / 9.5 / 7.7 /
# 8.6 %, was flat and fell to 0 s without the MLPerf v5.0 rows).
STEP_OVERHEAD_S: float = _FITTED["step_overhead_s"]
# Per-step host time measured on a stack's own loop, which replaces the fitted constant there.
# hf (transformers' Trainer, eager Hugging Face models): tools/measure_hf_trainer.py --set 9 (an
# H200 machine, transformers 5.17, torch 2.11): step time at 0 layers of the full line at GA 1,
# 2, 4, 8 is 3.89 ms per step + 3.73 ms per micro-batch (least squares), the latter counted with
# the layers (host_launches.HOST_LAUNCHES_PER_MICRO_BATCH); 3.89 ms is 95.5 launches at that
# machine's 40.8 us, 3.40 ms at HOST_S_PER_KERNEL (tests/test_host_launches.py). The ten GA-1
# lines of sets 6-8 keep -0.2 to 7.1 ms at 0 layers (median 5.1 ms; the model: 6.6 ms).
MEASURED_STEP_OVERHEAD_S: dict[str, float] = {"hf": 0.0034}


def step_overhead(stack: str, fitted: float | None = None) -> float:
    """Seconds per optimizer step no GPU work hides under ``stack``: its measured one
    (MEASURED_STEP_OVERHEAD_S), else ``fitted`` (a calibration trial), None: STEP_OVERHEAD_S.
    The analytic model and the solver's step-time columns both read it."""
    return MEASURED_STEP_OVERHEAD_S.get(stack, STEP_OVERHEAD_S if fitted is None else fitted)


# ---------------------------------------------------------------------------------------------
# Communication and overlap: framework behaviour (assumed, not fitted). The accuracy on the
# public cases is insensitive to them: TP overlap 0 / 0.5 / 0.9, DP overlap 0.5 / 1.0, CP 0.5,
# NVLink efficiency 0.6-0.9 all leave the median |error| at 6.8-8.0 % and p90 at 28-30 %.
# ---------------------------------------------------------------------------------------------
# NCCL bus bandwidth reached on large messages, as a fraction of the link's one-way bandwidth:
# 8x A100 SXM NVLink3 230-250 GB/s of 300; 8x H100 PCIe 35-45 GB/s of 64 (nccl-tests reference
# table, docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests). Inter-node rings reach
# about the same share of the NIC rate.
NVLINK_BUS_EFFICIENCY = 0.80
PCIE_BUS_EFFICIENCY = 0.62
NETWORK_BUS_EFFICIENCY = 0.80
# Pinned host<->device copies reach ~80 % of the PCIe one-way rate (e.g. ~25 GB/s on gen4 x16).
# Measured on one H200 machine (tools/measure_offload_rates.py, tools/measured/
# offload_rates_h200.json, gen5 x16 = 64 GB/s): pinned 55.2 GB/s each way (0.86), pageable
# 18.4 / 15.3 GB/s; a pinned copy on a side stream ran 98 % hidden behind bf16 matrix products,
# so what OVERLAP["pcie"] leaves exposed is the framework's scheduling, not the hardware's.
HOST_LINK_EFFICIENCY = 0.80
# Latency of one small intra-node all-reduce (decode-time TP all-reduces of a few hundred KB):
# ~10 us on NVLink (nccl-tests small-message rows).
ALLREDUCE_LATENCY_S = 10e-6

# Fraction of the overlappable compute time behind which a stack hides each kind of
# communication (0 = fully exposed, 1 = time = max(compute, comm)):
#   dp: gradient reduction bucketed into backward (PyTorch DDP, DeepSpeed, Megatron
#       --overlap-grad-reduce), and ZeRO-3/FSDP parameter prefetch;
#   tp: Megatron/NeMo overlap TP collectives with GEMMs (TransformerEngine userbuffers,
#       --tp-comm-overlap in the NeMo performance recipes); the others run them in line;
#   cp: ring attention overlaps the KV exchange with the attention of the previous chunk;
#   pcie: offload copies run on side streams (DeepSpeed ZeRO-Offload, FSDP CPUOffload);
#   gather: the all-gather of the updated weights after a ZeRO-1/2 (distributed-optimizer) step:
#       Megatron overlaps it with the next forward (--overlap-param-gather,
#       megatron/core/distributed/param_and_grad_buffer.py); DeepSpeed's stage 1/2 step
#       gathers after the update (stage_1_and_2.py step: all_gather_dp_groups), exposed;
#   ep: the MoE token all-to-alls sit between the router and the experts' GEMMs on the critical
#       path: exposed everywhere (Megatron-Core hides them only under its opt-in
#       --overlap-moe-expert-parallel-comm schedule, which no framework profile states).
# Every stack but Megatron overlaps the same way (data-parallel reductions with the backward;
# no comm-GEMM overlap for tp; DeepSpeed-style exposed gathers).
_DATA_PARALLEL_OVERLAP = {"dp": 0.8, "tp": 0.0, "cp": 0.5, "pp": 0.5, "pcie": 0.5, "gather": 0.0,
                          "ep": 0.0}
OVERLAP: dict[str, dict[str, float]] = {
    "megatron": {"dp": 0.9, "tp": 0.7, "cp": 0.9, "pp": 0.9, "pcie": 0.5, "gather": 0.9,
                 "ep": 0.0},
    **{stack: dict(_DATA_PARALLEL_OVERLAP)
       for stack in ("deepspeed", "fsdp", "hf", "unsloth", "prime-rl", "torchtune")},
}

# ---------------------------------------------------------------------------------------------
# Memory-bound terms
# ---------------------------------------------------------------------------------------------
# Share of the peak HBM bandwidth that streaming kernels (dequantisation, optimizer step) reach.
HBM_EFFICIENCY = 0.80
# bitsandbytes/torchao NF4 dequantisation per weight and pass: read 0.5 B codes (+ constants),
# write the 2 B bf16 copy the matmul then reads: ~2.5 B of extra traffic per quantized weight.
# Checked at bitsandbytes-foundation/bitsandbytes 95f9af30: a training micro-batch (M > 1536
# rows) takes the dequantize + F.linear path of gemm_4bit (backends/cuda/ops.py,
# _gemm_4bit_custom_max_m; the fused 4-bit kernel serves small-M inference only), and
# MatMul4Bit.backward dequantizes again for the input gradient (autograd/_functions.py): one
# dequantisation per forward, recomputed forward and backward. Double quantisation adds 1 B of
# 8-bit absmax per 64-weight block (0.016 B per weight), within the rounding of 2.5.
DEQUANT_BYTES_PER_PARAM = 2.5
# DoRA (PEFT): per adapted weight and forward, W + s*B@A is materialised (read 2 B, write 2 B)
# and its column norms read it again (2 B): 6 B per adapted weight per pass.
DORA_BYTES_PER_PARAM = 6.0
# GPU AdamW step (mixed precision): read fp32 master, fp32 m, fp32 v and the 16-bit gradient,
# write master, m, v and the 16-bit weight: 4+4+4+2 + 4+4+4+2 = 28 B per trainable parameter
# shard; pure bf16 states: half of the fp32 traffic (2+2+2+2 + 2+2+2 = 14 B); 8-bit AdamW:
# 2+1+1 + 2+1+1 (+ 2 B gradient read) = 10 B.
OPTIMIZER_STEP_BYTES = {"adamw": 28.0, "adamw-pure-bf16": 14.0, "adamw-8bit": 10.0,
                        "sgd": 6.0, "adafactor": 12.0}
# Elementwise ops that run as separate kernels (eager Hugging Face modeling code): HBM bytes
# each moves per element of its width in one forward, 16-bit activations, counted from
# transformers src/transformers/models/llama/modeling_llama.py @ 5dd4a63 (LlamaRMSNorm.forward,
# apply_rotary_pos_emb, LlamaMLP.forward, LlamaDecoderLayer.forward) and peft's LoRA Linear
# (result + lora_B(lora_A(x)) * scaling; lora_dropout 0 is an Identity):
#   rmsnorm 36: to(fp32) 2+4, pow 4+4, mean 4, x*rsqrt 4+4, to(bf16) 4+2, weight* 2+2;
#   layernorm 4: nn.LayerNorm is one kernel, read 2 + write 2;
#   rotary 20 (q and k each): x*cos 2+2, neg half 1+1, cat 2+2, *sin 2+2, add 4+2;
#   gated_act 10 (per MLP width f): act(gate) 2+2, * up 4+2; act 4 for a plain MLP;
#   residual_add 6: read 2 x 2, write 2 (two per layer);
#   lora_out 10 (per adapted output width): * scaling 2+2, + base 4+2.
# Backward of an elementwise op reads the output gradient and the saved inputs and writes
# the input gradients: a cast moves as much as forward (1x), a unary op 3 tensors for 2
# (1.5x), a binary one 5 for 3 (1.7x): ELEMENTWISE_BACKWARD_RATIO 1.5 (arithmetic).
ELEMENTWISE_BYTES = {"rmsnorm": 36.0, "layernorm": 4.0, "rotary": 20.0, "gated_act": 10.0,
                     "act": 4.0, "residual_add": 6.0, "lora_out": 10.0}
ELEMENTWISE_BACKWARD_RATIO = 1.5
# Who runs them unfused is the framework's model code, not its stack: a profile's fact
# fused_elementwise (catalog/frameworks) says where its kernels fuse them without torch.compile
# (Megatron/NeMo through TransformerEngine's fused norms, RoPE and SwiGLU; Unsloth's Triton
# kernels; Liger; XLA), else they run eager (Hugging Face modeling code under the HF Trainer,
# PEFT, DeepSpeed or FSDP; torchtitan, torchtune and LitGPT's plain PyTorch modules) unless the
# job compiles (TrainConfig.fuses_elementwise). Measured: torchtitan's Llama 3.1 8B on 8 / 128
# H100 runs 5,762 / 5,605 tokens/s eager and 6,667 / 6,514 compiled (pytorch/torchtitan@820504e
# benchmarks/llama3_h100_202412_torchtitan.md, Table 1), 1.16x; these byte counts give 1.13x.
# LoRA's low-rank matmuls are memory-bound on every stack (r FLOPs per byte moved, far below any
# GPU's ridge point): x -> A x (r wide) -> B (A x) runs as two extra GEMMs beside the frozen
# one, in peft (src/peft/tuners/lora/layer.py Linear.forward @ huggingface/peft 5d602fdbf:
# result + lora_B(lora_A(dropout(x))) * scaling), torchtune (torchtune/modules/peft/lora.py
# LoRALinear.forward @ pytorch/torchtune 30b8519e8) and NeMo's adapters alike; no stack fuses
# them into the frozen GEMM. HBM bytes per token and adapted matrix, per element of its input
# width (d_in) and output width (d_out), 16-bit activations, the r-wide tensors neglected:
#   forward: A reads x (2 d_in), B writes its output (2 d_out);
#   backward: dB and the gradient into A's output each read the output gradient (2 + 2 d_out),
#       dA reads x again (2 d_in), the input gradient through A is written (2 d_in) and added
#       to the frozen path's (read 2 + 2, write 2: 6 d_in): 10 d_in + 4 d_out.
# Where the model code fuses elementwise ops (TrainConfig.fuses_elementwise) the scale and the
# add into the frozen output are one kernel: read both outputs, write the sum (6 d_out)
# forward, the scaled gradient (read 2, write 2: 4 d_out) backward; eager code counts them as
# ELEMENTWISE_BYTES["lora_out"]. Arithmetic from the code named, not fitted.
LORA_GEMM_BYTES = {"forward": (2.0, 2.0), "backward": (10.0, 4.0)}  # (per d_in, per d_out)
LORA_FUSED_COMBINE_BYTES = {"forward": 6.0, "backward": 4.0}  # per d_out
# CPU optimizer step (ZeRO-Offload CPU-Adam, FSDP CPU offload): host-memory roofline over the
# same 28-30 B per parameter, at HOST_MEMORY_GBPS_PER_CORE x cores (DDR4/DDR5 servers: 8-12
# channels x ~25 GB/s over 32-64 cores per socket ~ 3-6 GB/s per core). Measured on that H200
# machine's 16 cores with torch's AdamW on 2^27 fp32 parameters (28 B each): fused 7.8 GB/s per
# thread at 16 threads (23.0 at 1), foreach 1.9 (5.0 at 1); DeepSpeed's CPU-Adam, which the
# ZeRO-Offload case below checks at 3 GB/s per core, was not among them.
CPU_ADAM_BYTES_PER_PARAM = 30.0
HOST_MEMORY_GBPS_PER_CORE = 3.0
# Published runs with CPU offload that the offload terms (HOST_LINK_EFFICIENCY, OVERLAP "pcie",
# CPU_ADAM_BYTES_PER_PARAM, HOST_MEMORY_GBPS_PER_CORE) are checked against, not fitted: one run
# per stack, and OVERLAP is per stack. Case id -> (offload kind, the run). Step-time error at
# this commit (benchmarks/loso.py; neither case sets a fitted constant but the torchtune factor):
#   deepspeed_zerooffload_gpt2_10b_1xV100 (validation/project_cases.yaml): -7.9 % with the
#     copies 50 % hidden, +4.6 % fully exposed; its log's optimizer phase, 7.6-8.0 s of which
#     the CPU-Adam step 6.2-6.5 s, against 7.3 s predicted (14 cores x 3 GB/s x 30 B/param);
#   torchtune_llama31_70b_full_8xA100: +19.9 % tokens/s (step too short) at 50 %, +3.1 %
#     fully exposed. Both point to less overlap than assumed; two runs of two stacks do not
#     fit a per-stack constant.
OFFLOAD_CASES: dict[str, tuple[str, str]] = {
    "deepspeed_zerooffload_gpt2_10b_1xV100": (
        "optimizer", "DeepSpeed ZeRO-Offload tutorial, GPT-2 10B on 1 x V100"),
    "torchtune_llama31_70b_full_8xA100": (
        "optimizer+params", "torchtune FSDP2 CPU offload, Llama 3.1 70B on 8 x A100"),
}

# ---------------------------------------------------------------------------------------------
# Decoding (generation)
# ---------------------------------------------------------------------------------------------
# Share of the roofline a serving stack reaches: of the peak HBM bandwidth in memory-bound
# steps, and of the achievable matmul rate (MAMF) in prefill and compute-bound steps. Median of
# the implied factor over the stack's usable decode cases (DECODE_CASES), computed by
# benchmarks/fit.py (planner/models/fitted.yaml).
# tensorrt-llm: 9 rows (implied 0.19-0.79; the single-GPU rows 0.67-0.79, the tensor-parallel
# 70B rows 0.19-0.57: TP decoding is slower than the roofline plus the all-reduce terms
# explain). vllm: one row (0.60).
# TGI has no usable case: assumed equal to vLLM (both continuous-batching PyTorch servers with
# paged attention), stated wherever it is used.


def decode_table(fitted: dict[str, float]) -> dict[str, float]:
    """DECODE_EFFICIENCY from the fitted serving stacks; TGI takes vLLM's (assumed)."""
    return {**fitted, "tgi": fitted["vllm"]}


DECODE_EFFICIENCY: dict[str, float] = decode_table(_FITTED["decode_efficiency"])
DECODE_CASES: dict[str, tuple[str, ...]] = {
    "tensorrt-llm": (
        "trtllm061_llama7b_1xH100_fp8_128in_2048out", "trtllm061_llama7b_1xA100_fp16_128in_2048out",
        "trtllm05_llama7b_1xL40S_fp8_128in_2048out", "trtllm061_llama70b_4xA100_fp16_128in_2048out",
        "trtllm061_llama70b_4xH100_fp8_128in_2048out",
        "trtllm10_llama31_8b_1xH100_fp8_1000in_1000out",
        "trtllm10_llama31_8b_1xH200_fp8_1000in_1000out",
        "trtllm10_llama31_8b_1xH100_fp8_128in_2048out",
        "trtllm10_llama33_70b_2xH100_fp8_1000in_1000out",
    ),
    "vllm": ("nmvllm_llama2_7b_1xA10G_256in_128out",),
}
# Share of the decode roofline a rollout engine reaches inside an RL iteration (rltime's
# generation and generation-tail phases), far below offline serving (DECODE_EFFICIENCY). The
# implied values (validate_throughput.implied_rl_decode_efficiency, every other phase as
# modelled) agree across engines and frameworks: NeMo-RL's vLLM GRPO steps 0.18-0.33 (median
# 0.29), DeepSpeed-Chat's hybrid-engine PPO epochs 0.10-0.46 (median 0.30 with its 16-bit
# log-probs; 0.32 before); so one factor serves every engine (the hybrid engine took the
# serving vLLM share before, assumed). Runs on vLLM's V0 engine (decode.VLLM_V0_CASES) set its
# per-sequence host term instead (verl's MI300X logs implied 0.04 / 0.09 here). They cannot be
# told apart from slow phases elsewhere in the iteration (the sources give few per-phase
# times), so this factor carries whatever an iteration loses outside the modelled physics.
# Fitted on RL_ROLLOUT_CASES, every usable shared PPO/GRPO case not run on V0, by
# benchmarks/fit.py: the median of the implied values at most 1 (a case no engine speed can
# match, e.g. DS-Chat's OPT-30B at the batch its memory allows, sets nothing), with the fitted
# trainer factors in place (planner/models/fitted.yaml; leave-one-source-out in
# benchmarks/README.md).
RL_ROLLOUT_DECODE_EFFICIENCY: float = _FITTED["rl_rollout_decode_efficiency"]
RL_ROLLOUT_CASES: tuple[str, ...] = (
    "nemorl_v05_grpo_llama31_8b_16xH100_fp8_offpolicy", "nemorl_v05_grpo_llama31_8b_8xGB200",
    "nemorl_v05_grpo_qwen3_32b_32xH100", "nemorl_v05_grpo_qwen3_32b_16xGB200",
    "nemorl_v06_grpo_qwen3_30b_a3b_32xH100",
    "dschat_ppo_opt1.3b_1xV100", "dschat_ppo_opt1.3b_1xA6000", "dschat_ppo_opt1.3b_1xA100-40",
    "dschat_ppo_opt6.7b_1xA100-40", "dschat_ppo_opt13b_1xA100-80", "dschat_ppo_opt13b_8xA100-40",
    "dschat_ppo_opt6.7b_8xA100-80", "dschat_ppo_opt13b_8xA100-80", "dschat_ppo_opt30b_8xA100-80",
    "dschat_ppo_opt66b_8xA100-80", "dschat_ppo_opt13b_64xA100-80", "dschat_ppo_opt66b_64xA100-80",
    "dschat_log_ppo_opt1.3b_critic350m_16xV100",
)
# Hugging Face generate inside an RL iteration (the trainer's own model, hf-generate): each new
# token is one forward pass over the whole batch, bound by reading the weights (and the KV
# cache) from HBM (DESIGN.md s.4; Pope et al. 2022, "Efficiently Scaling Transformer
# Inference", s.2: small-batch decoding is memory-bandwidth bound), with no paged or
# continuous batching: a batch runs until its longest response ends. No measured case of HF
# generate in an RL iteration: assumed equal to the vLLM engine's in-iteration share
# (RL_ROLLOUT_DECODE_EFFICIENCY), which flatters generate (no CUDA graphs: kernel launches
# add to every step of a small model). One measured serving point supports the per-step part:
# default generate, LLaMA-7B fp16, one A10G, batch 1, 23.15 tokens/s, implies 0.96 of vLLM's
# offline share (tests/test_hf_generate.py, with its source); none exists at RL batch sizes.
HF_GENERATE_DECODE_EFFICIENCY: float = RL_ROLLOUT_DECODE_EFFICIENCY
# Largest batch a serving engine schedules at once when memory allows more: vLLM's
# max_num_seqs default is 256 (engine arguments); the same cap is used for the others.
# Cases that state their batch use it.
MAX_DECODE_BATCH = 256


def default_stack(cfg: TrainConfig) -> str:
    """The software stack a layout usually runs on, when the user names none: Megatron for
    tensor/pipeline parallelism, PyTorch FSDP for --fsdp, DeepSpeed for ZeRO or offload, else
    Hugging Face Trainer/PEFT."""
    if cfg.tp > 1 or cfg.pp > 1:
        return "megatron"
    if cfg.fsdp:
        return "fsdp"
    if cfg.zero_stage or cfg.offload != "none":
        return "deepspeed"
    return "hf"
