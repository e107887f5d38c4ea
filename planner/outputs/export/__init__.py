"""Launch configs from a plan: DeepSpeed JSON, Accelerate YAML, torchrun, verl, OpenRLHF and
LLaMA-Factory (pure conversion: a plan or a saved ``planner plan --json`` in, text out).

``export_plan(plan, fmt)`` returns an ExportResult: the text, a file name to suggest, the
*warnings* (a plan setting the format can only approximate: it runs, but differs from the plan
in a stated way) and *notes* (what the launch still needs from the user: data paths, the
script that reads the flags). A setting the format cannot express at all is a one-line
PlannerError naming it and the format to use instead. Nothing the plan decides is dropped
silently: each TrainConfig field is either written, warned about, refused, or has no effect in
that format (the optimizer of a DeepSpeed JSON lives in the training script: a note says so).

One module per format family, each stating the semantics it follows (the flags each framework
documents): ``deepspeed``, ``hf`` (torchrun and Accelerate), ``verl``, ``openrlhf`` and
``llamafactory``; ``_common`` holds the Job, the result and the helpers they share.
``litgpt`` (LitGPT's --config YAML) and ``llmfoundry`` (LLM Foundry's Composer train YAML)
write those frameworks' own configs.
documents): ``deepspeed``, ``hf`` (torchrun and Accelerate), ``verl``, ``openrlhf``,
``llamafactory``, ``nemo`` (NeMo 2 recipe script), ``megatron_bridge`` (its recipe runner) and
``automodel`` (NeMo AutoModel YAML); ``_common`` holds the Job, the result and the helpers they
share, ``_mcore`` the Megatron-Core fields NeMo 2 and Megatron-Bridge both set.
write those frameworks' own configs, as do ``axolotl`` (Axolotl's training YAML) and
``ms_swift`` (a script running ms-swift's ``swift sft`` / ``pt`` / ``rlhf``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from planner.catalog.launches import SUPERVISED, WRITES_FOR, launch_format_of
from planner.catalog.load import Catalog
from planner.errors import PlannerError, did_you_mean
from planner.inputs import check_type, short
from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    HF_MODULES,
    RL_HINT,
    ExportResult,
    Job,
    _every_format,
    _Out,
    job_of,
)
from planner.outputs.export.automodel import AUTOMODEL_VERSIONS, export_automodel
from planner.outputs.export.axolotl import AXOLOTL_VERSIONS, export_axolotl
from planner.outputs.export.deepspeed import DEEPSPEED_VERSIONS, export_deepspeed
from planner.outputs.export.deepspeed_chat import DEEPSPEED_CHAT_VERSIONS, export_deepspeed_chat
from planner.outputs.export.hf import (
    ACCELERATE_VERSIONS,
    TORCHRUN_VERSIONS,
    TRL_SCRIPTS,
    export_accelerate,
    export_torchrun,
)
from planner.outputs.export.litgpt import LITGPT_VERSIONS, export_litgpt
from planner.outputs.export.llamafactory import (
    LLAMAFACTORY_DATA,
    LLAMAFACTORY_DS,
    LLAMAFACTORY_STAGES,
    LLAMAFACTORY_VERSIONS,
    TEMPLATES,
    export_llamafactory,
)
from planner.outputs.export.llmfoundry import LLMFOUNDRY_VERSIONS, export_llmfoundry
from planner.outputs.export.megatron_bridge import (
    MEGATRON_BRIDGE_VERSIONS,
    export_megatron_bridge,
)
from planner.outputs.export.ms_swift import MS_SWIFT_VERSIONS, export_ms_swift
from planner.outputs.export.nemo import NEMO_VERSIONS, export_nemo
from planner.outputs.export.nemo_rl import NEMO_RL_VERSIONS, export_nemo_rl
from planner.outputs.export.openrlhf import (
    OPENRLHF_CURRENT,
    OPENRLHF_MODULES,
    OPENRLHF_VERSIONS,
    export_openrlhf,
)
from planner.outputs.export.prime_rl import PRIME_RL_VERSIONS, export_prime_rl
from planner.outputs.export.torchtitan import TORCHTITAN_VERSIONS, export_torchtitan
from planner.outputs.export.torchtune import (
    TORCHTUNE_VERSIONS,
    export_torchtune,
)
from planner.outputs.export.verl import VERL_VERSIONS, export_verl

__all__ = [
    "EXPORTERS", "FORMATS", "GRADIENT_CLIPPING", "HF_MODULES", "LLAMAFACTORY_DATA",
    "LLAMAFACTORY_DS", "LLAMAFACTORY_STAGES", "OPENRLHF_MODULES", "RL_HINT", "TEMPLATES",
    "TRL_SCRIPTS", "ExportResult", "Job", "check_format", "export_accelerate", "export_deepspeed",
    "export_llamafactory", "export_openrlhf", "export_nemo", "export_megatron_bridge",
    "export_automodel", "export_plan", "export_torchrun", "export_verl",
    "job_of", "launch_format_of", "SUPERVISED", "WRITES_FOR", "TARGETS", "LAYOUTS",
    "export_torchtune",
    "export_torchtitan",
    "export_litgpt", "export_llmfoundry",
    "export_nemo_rl", "export_prime_rl", "export_deepspeed_chat",
]


FORMATS: tuple[str, ...] = (
    "deepspeed", "accelerate", "torchrun", "verl", "openrlhf", "llamafactory",
    "torchtune",
    "torchtitan",
    "litgpt", "llmfoundry",
    "nemo-rl", "prime-rl", "deepspeed-chat",
    "nemo", "megatron-bridge", "nemo-automodel",
    "axolotl", "ms-swift",
)

# Which profiles and workloads each format launches: planner.catalog.launches (WRITES_FOR,
# launch_format_of), read by the plan space too.


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------
def export_plan(plan: Any, fmt: str, *, model_path: str | None = None,
                catalog: Any = None) -> ExportResult:
    """Convert a Plan, PlanResult or `planner plan --json` document (or its "plan" member)
    into launch config text of format ``fmt`` (one of FORMATS).

    ``model_path`` is what the launch loads; by default the plan's checkpoint (the Hugging
    Face repo id the request named), else the model's repo from ``catalog`` (the shipped one
    if None), else the catalog id."""
    key = check_format(fmt)
    if catalog is not None:
        check_type(catalog, Catalog, name="catalog")
    if model_path is not None:
        check_type(model_path, str, name="model_path")
    job = job_of(plan, model_path=model_path, catalog=catalog)
    out = _Out(key, TARGETS[key])
    _every_format(job, out)
    _case_settings(job, out)
    return EXPORTERS[key](job, out)


def _case_settings(job: Job, out: _Out) -> None:
    """Settings of check and validation inputs that plans never choose: refused where no
    launch writer expresses them."""
    cfg = job.cfg
    if cfg.checkpoint_fraction < 1:
        out.refuse(f"checkpointing on part of the layers (checkpoint_fraction "
                   f"{cfg.checkpoint_fraction:g}: no launch writer expresses it yet)",
                   "re-plan without it")
    if cfg.peft_trains_embeddings and cfg.is_peft:
        out.refuse("LoRA training the embedding and head too (peft_trains_embeddings: no "
                   "launch writer expresses it yet)", "re-plan without it")
    if cfg.offload_activations and out.fmt != "torchtune":  # torchtune's own switch
        out.refuse("activation offloading (offload_activations)", "export --format torchtune")


def check_format(fmt: str) -> str:
    """The format key, lower-cased: a format name (its current layout) or ``name@version`` for
    a format with more than one layout (LAYOUTS); anything else is a one-line error naming the
    known ones."""
    key = fmt.strip().lower() if isinstance(fmt, str) else ""
    name, at, version = key.partition("@")
    if name not in FORMATS:
        raise PlannerError(f"unknown export format {short(fmt)}{did_you_mean(name, FORMATS)}; "
                           f"known: {', '.join(FORMATS)}")
    if not at:
        return name
    layouts = LAYOUTS.get(name, {})
    if version not in layouts:
        known = ", ".join(f"{name}@{v}" for v in layouts) if layouts else \
            f"{name} (one layout: {TARGETS[name]})"
        raise PlannerError(f"unknown {name} version {short(version)}; known: {known}")
    return layouts[version]


# ---------------------------------------------------------------------------------------------
# Format dispatch
# ---------------------------------------------------------------------------------------------
EXPORTERS: dict[str, Callable[[Job, _Out], ExportResult]] = {
    "deepspeed": export_deepspeed,
    "accelerate": export_accelerate,
    "torchrun": export_torchrun,
    "verl": export_verl,
    "openrlhf": export_openrlhf,
    "llamafactory": export_llamafactory,
    "torchtune": export_torchtune,
    "torchtitan": export_torchtitan,
    "litgpt": export_litgpt,
    "llmfoundry": export_llmfoundry,
    "nemo-rl": export_nemo_rl,
    "prime-rl": export_prime_rl,
    "deepspeed-chat": export_deepspeed_chat,
    "nemo": export_nemo,
    "megatron-bridge": export_megatron_bridge,
    "nemo-automodel": export_automodel,
    "axolotl": export_axolotl,
    "ms-swift": export_ms_swift,
}
# Formats with more than one layout: the version a user names after @ and the key it exports
# with (the bare name is the current release's layout).
LAYOUTS: dict[str, dict[str, str]] = {
    "openrlhf": {v: "openrlhf" if v == OPENRLHF_CURRENT else f"openrlhf@{v}"
                 for v in OPENRLHF_VERSIONS},
}
for _v in OPENRLHF_VERSIONS:
    if _v != OPENRLHF_CURRENT:
        EXPORTERS[f"openrlhf@{_v}"] = partial(export_openrlhf, version=_v)
# The framework versions each format's text is written for (stated in its header and notes).
TARGETS: dict[str, str] = {
    "deepspeed": DEEPSPEED_VERSIONS, "accelerate": ACCELERATE_VERSIONS,
    "torchrun": TORCHRUN_VERSIONS, "verl": VERL_VERSIONS,
    "llamafactory": LLAMAFACTORY_VERSIONS,
    "torchtune": TORCHTUNE_VERSIONS,
    "torchtitan": TORCHTITAN_VERSIONS,
    "litgpt": LITGPT_VERSIONS, "llmfoundry": LLMFOUNDRY_VERSIONS,
    "nemo-rl": NEMO_RL_VERSIONS, "prime-rl": PRIME_RL_VERSIONS,
    "deepspeed-chat": DEEPSPEED_CHAT_VERSIONS,
    "nemo": NEMO_VERSIONS, "megatron-bridge": MEGATRON_BRIDGE_VERSIONS,
    "nemo-automodel": AUTOMODEL_VERSIONS,
    **{key: OPENRLHF_VERSIONS[v] for v, key in LAYOUTS["openrlhf"].items()},
    "axolotl": AXOLOTL_VERSIONS, "ms-swift": MS_SWIFT_VERSIONS,
}
