"""Write validation/project_cases_hfmeasured.yaml from tools/measure_hf_trainer.py's output.

Each successful run becomes two cases: its peak (torch.cuda.max_memory_allocated over model
build and training) and its throughput (tokens per second from the median step time). The
source of every case is the results file at the commit that added it (SOURCE_COMMIT).

    python tools/hf_measured_cases.py            # rewrite the yaml
    python tools/hf_measured_cases.py --check    # exit 1 when the yaml differs from the results
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from planner.catalog.load import load_catalog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from measure_hf_trainer import SHAPES  # noqa: E402  (the measured models' catalog ids)

# each results file with the commit that added it
RESULTS = (("tools/measured/hf_trainer_h200.jsonl", "ff64df7e860bee8886ff8b4ecca0e7eb2da0625a"),
           ("tools/measured/hf_trainer_h200_set2.jsonl",
            "8a64828f085a485a2a08db1a0feab5d9b955fcb8"),
           ("tools/measured/hf_trainer_h200_set3.jsonl",
            "2a47b862b8a950be72dfbfb415f045ee1ff1d919"),
           ("tools/measured/hf_trainer_h200_set5.jsonl",
            "f009dbf47f4d8a7a33d07406a356e15cdcb5cc8e"),
           ("tools/measured/hf_trainer_h200_set4.jsonl",
            "6fd634bdceccaf242d6335d76ca6f11b0a371334"))
OUT = ROOT / "validation" / "project_cases_hfmeasured.yaml"
HEADER = """\
# Peak memory and throughput of transformers' Trainer on one H200, measured by this project
# (tools/measure_hf_trainer.py --set 1 to 5 on the device machine a session was lent,
# 2026-11-26, five machines; results in tools/measured/hf_trainer_h200*.jsonl; this file is written
# from them by tools/hf_measured_cases.py). What ran: torch
# {torch}, transformers {transformers}, PEFT {peft}, one NVIDIA H200 (bf16 8192^3 matrix product
# {tflops} TFLOP/s on random data in the same process). Models: random weights in the
# published config.json shapes (the catalog's), SDPA attention, every sequence full length with
# no padding and no attention mask, labels = inputs (the Trainer's causal LM loss:
# ForCausalLMLoss upcasts logits to fp32). Trainer defaults otherwise: adamw_torch_fused, GA 1,
# non-reentrant gradient checkpointing when on, bf16=True autocast. "bf16" weights = model built
# in bfloat16 (what from_pretrained's dtype="auto" gives for these checkpoints: bf16 weights,
# gradients and AdamW states, no fp32 master); "fp32" = built in float32 with bf16 autocast.
# LoRA: r 16 (one run 64), alpha 2r, dropout 0, the targets named; enable_input_require_grads
# as PEFT scripts do. Peak = max_memory_allocated over build + the optimizer steps (minus what
# the process held before the run: nothing). Throughput = micro-batch x GA x sequence /
# median of steps 3-7
# (set 3: 12 steps, steps 3-12, 128-token sequences: the loop's own per-step time; set 4:
# use_liger_kernel=True, liger-kernel 0.8.5, framework hf-trainer-liger; set 5: cross-entropy
# on the 16-bit shifted logits without autocast, bf16=False on the bf16 model: loss_dtype 16bit).
# Out-of-sample: kept out of every fit (efficiency.STACK_CASES) like OLMo-core's and
# Megatron-Bridge's rows; benchmarks/README.md reports their errors.
"""


def cases_of(run: dict, head: dict, results: str, commit: str, repos: dict[str, str]
             ) -> list[dict]:
    lora = run["method"] == "lora"
    targets = run["lora_targets"]
    target_text = targets if isinstance(targets, str) else " ".join(targets or [])
    base = {
        "source": f"planner/blob/{commit}/{results}",
        "trust": "high", "framework": "hf-trainer-liger" if run.get("liger") else "hf-trainer",
        "framework_version": f"transformers {head['transformers']}, PEFT {head['peft']}, "
                             f"torch {head['torch']}"
                             + (f", liger-kernel {head['liger_kernel']}" if run.get("liger")
                                else ""),
        "model": repos[run["model"]], "params_b": round(run["params"] / 1e9, 2),
        "workload": "sft", "method": run["method"],
        "lora_rank": run.get("lora_rank", 16) if lora else None,
        "optimizer": "adamw", "precision": "bf16", "gpu": "h200-sxm", "num_gpus": 1,
        "tp": 1, "pp": 1, "dp": 1, "cp": 1, "sharding": "none", "offload": "none",
        "grad_checkpointing": "full" if run["grad_checkpointing"] else "none",
        "micro_batch_size": run["micro_batch"],
        "global_batch_size": run["micro_batch"] * run.get("grad_accum", 1),
        "seq_len": run["seq_len"], "rl": None,
    }
    extra = {"attention": "sdpa", "grad_accum": run.get("grad_accum", 1), "packed": False,
             "optimizer_impl": run["optim"].split(".")[-1].lower(),
             "optimizer_state_dtypes": " ".join(run["optimizer_state_dtypes"])}
    if not run.get("liger"):  # the whole logits (Liger's fused loss is its profile's fact)
        extra["chunked_ce"] = False
    if run.get("loss16"):  # cross-entropy on the 16-bit logits, no autocast (bf16=False)
        extra["loss_dtype"] = "16bit"
    if lora:
        extra.update(lora_dropout=0.0, lora_alpha=2 * run.get("lora_rank", 16),
                     target_modules=target_text)
    elif run["weights_dtype"] == "bf16":
        extra["pure_bf16"] = True
    else:
        extra["master_weights_dtype"] = "fp32"
    what = (f"{run['model']} {run['method']}{' ' + target_text if lora else ''}, "
            f"{run['weights_dtype']} weights, checkpointing "
            f"{'on' if run['grad_checkpointing'] else 'off'}, micro-batch {run['micro_batch']} x "
            f"{run['seq_len']}, GA {run.get('grad_accum', 1)}, {extra['optimizer_impl']}")
    location = f"{results} id {run['id']}"
    memory = {"id": f"hfmeasured_{run['id']}_mem", **base, "location": location,
              "outcome": {"kind": "peak", "peak_gib": round(run["peak_allocated_gib"], 3),
                          "measured_as": "allocated"},
              "usable_for_accuracy": True,
              "note": f"{what}. Peak {run['peak_allocated_gib']:.3f} GiB allocated, "
                      f"{run['peak_reserved_gib']:.3f} GiB reserved.",
              "extra": {**extra, "peak_reserved_gib": round(run["peak_reserved_gib"], 3)}}
    speed = {"id": f"hfmeasured_{run['id']}_tps", **base, "location": location,
             "metric": "tokens_per_sec_per_gpu", "value": round(run["tokens_per_s"], 1),
             "derived": True, "usable_for_accuracy": True,
             "note": f"{what}. Median step {run['median_step_s']:.4f} s of steps 3-7 "
                     f"(all: {run['step_times_s']}).",
             "extra": {**extra, "step_time_s": round(run["median_step_s"], 4)}}
    return [memory, speed]


def build() -> str:
    cases, heads = [], []
    catalog = load_catalog()
    repos = {m: catalog.model(m).spec.hf_repo for m in SHAPES}
    for results, commit in RESULTS:
        lines = [json.loads(x) for x in (ROOT / results).read_text().splitlines() if x]
        heads.append(lines[0])
        cases += [c for run in lines[1:] if "peak_allocated_gib" in run
                  for c in cases_of(run, lines[0], results, commit, repos)]
    tflops = " and ".join(f"{h['bf16_matmul_tflops']:.0f}" for h in heads)
    text = HEADER.format(tflops=tflops, **heads[0])
    return text + yaml.safe_dump({"schema_version": 1, "cases": cases}, sort_keys=False,
                                 width=100)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    text = build()
    if ap.parse_args().check:
        return 0 if OUT.exists() and OUT.read_text() == text else 1
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
