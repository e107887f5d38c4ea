"""Measure the rates CPU offload runs at on one GPU host (a device-machine script).

Offloaded training (DeepSpeed ZeRO-Offload, FSDP CPU offload) moves gradients and parameters over
the host link and steps the optimizer on the CPU. The planner times those from
efficiency.HOST_LINK_EFFICIENCY (pinned copies as a share of the PCIe rate) and
HOST_MEMORY_GBPS_PER_CORE (the CPU Adam step as host-memory traffic per core); this script
measures both on the machine it runs on and writes one JSON object:

- host link: pinned and pageable host->device and device->host copies of 1 GiB (median of 5);
- overlap: a pinned copy on a side stream while bf16 matrix products run on the default one
  (each alone, then together): how much of the copy the GPU hides behind compute;
- CPU Adam: torch.optim.AdamW (fused CPU kernel where it exists, else foreach) on 2^27 fp32
  parameters with fp32 gradients, at 1, 2, 4, 8 and all threads: GB/s of its 28 B per
  parameter (read p, g, m, v; write p, m, v) and per thread.

    python3 tools/measure_offload_rates.py --out rates.json          # on the GPU machine
    python3 tools/measure_offload_rates.py --out /tmp/r.json --tiny  # a CPU smoke test
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Any

ADAM_BYTES_PER_PARAM = 28.0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _timed(fn: Any, sync: Any, reps: int) -> float:
    """Median seconds of ``reps`` calls after one warm-up."""
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def host_link(torch: Any, nbytes: int) -> dict[str, float]:
    n = nbytes // 2
    dev = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    out: dict[str, float] = {}
    for kind, pin in (("pinned", True), ("pageable", False)):
        host = torch.empty(n, dtype=torch.bfloat16, pin_memory=pin)
        h2d = _timed(lambda h=host, p=pin: dev.copy_(h, non_blocking=p), torch.cuda.synchronize, 5)
        d2h = _timed(lambda h=host, p=pin: h.copy_(dev, non_blocking=p), torch.cuda.synchronize, 5)
        out[f"{kind}_h2d_gbps"] = round(nbytes / h2d / 1e9, 2)
        out[f"{kind}_d2h_gbps"] = round(nbytes / d2h / 1e9, 2)
    return out


def overlap(torch: Any, nbytes: int) -> dict[str, float]:
    """Copy and compute alone and together; hidden = share of the copy's time the pair saves."""
    n = nbytes // 2
    host = torch.empty(n, dtype=torch.bfloat16, pin_memory=True)
    dev = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    sync = torch.cuda.synchronize

    def copy() -> None:
        with torch.cuda.stream(side):
            dev.copy_(host, non_blocking=True)

    copy_s = _timed(copy, sync, 5)
    reps = max(1, int(copy_s / 1.5e-3))  # about as long as the copy (~1.4 ms per product)

    def compute() -> None:
        for _ in range(reps):
            a @ a

    compute_s = _timed(compute, sync, 5)

    def both() -> None:
        copy()
        compute()

    both_s = _timed(both, sync, 5)
    hidden = (copy_s + compute_s - both_s) / min(copy_s, compute_s)
    return {"copy_s": round(copy_s, 5), "compute_s": round(compute_s, 5),
            "together_s": round(both_s, 5), "hidden_share": round(hidden, 3)}


def cpu_adam(torch: Any, n: int, threads: list[int]) -> list[dict[str, Any]]:
    rows = []
    p = torch.nn.Parameter(torch.randn(n))
    p.grad = torch.randn(n)
    for fused in (True, False):
        try:
            opt = torch.optim.AdamW([p], lr=1e-4, fused=fused, foreach=None if fused else True)
            opt.step()
        except (RuntimeError, TypeError) as exc:
            rows.append({"fused": fused, "error": str(exc)[:200]})
            continue
        for t in threads:
            torch.set_num_threads(t)
            s = _timed(opt.step, lambda: None, 3)
            gbps = n * ADAM_BYTES_PER_PARAM / s / 1e9
            rows.append({"fused": fused, "threads": t, "step_s": round(s, 4),
                         "gbps": round(gbps, 2), "gbps_per_thread": round(gbps / t, 2)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    import torch
    cores = os.cpu_count() or 1
    threads = sorted({t for t in (1, 2, 4, 8, cores) if t <= cores})
    res: dict[str, Any] = {"torch": torch.__version__, "cpu": _cpu_name(), "cpu_count": cores}
    if not a.tiny:
        res["gpu"] = torch.cuda.get_device_name()
        res["host_link"] = host_link(torch, 2**30)
        res["overlap"] = overlap(torch, 2**30)
    res["cpu_adam"] = cpu_adam(torch, 2**20 if a.tiny else 2**27, threads)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
