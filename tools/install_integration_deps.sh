#!/usr/bin/env bash
# The integration tier's packages (tests/test_export_parsers.py): the parsers of the framework
# versions the exports target (planner.outputs.export.TARGETS), CPU wheels only. Run it in the
# environment that runs the tests (a virtual environment: it pip-installs into the active one),
# then: python -m pytest -m integration -n 2
#
# Into the active environment: torch (CPU), DeepSpeed, Accelerate, TRL and its transformers,
# Hydra (verl's config) and the few packages verl's validate_config imports.
# Into .integration/ (the tests read them from there, each without its dependencies):
#   verl-0.9.1          verl itself (its wheel also ships a top-level "tests" package that would
#                       shadow the project's, so it stays off sys.path but for verl's config)
#   openrlhf-0.11.2     OpenRLHF's wheels: their cli/ argument parsers are run from the files
#   openrlhf-0.8.9      (vLLM and flash-attn, hard dependencies, have no CPU wheels)
#   llamafactory-0.9.5  LLaMA-Factory and the versions it pins (transformers, TRL, PEFT,
#                       Accelerate, datasets conflict with TRL 1.16's): put first on the path
#   llamafactory-0.9.5-examples  its shipped DeepSpeed configs (examples/deepspeed) from the
#                       source distribution, which the LLaMA-Factory export names
#   nemo-automodel-0.5.0  NeMo AutoModel's config loader and section parsers (load_yaml_config,
#                       RecipeConfig, parse_distributed_section, PeftConfig), with the two
#                       packages its loader resolves targets from (torchao, torchdata); its other
#                       dependencies (transformers 5.8.1 pinned, wandb, mlflow, ...) are not
#                       needed to parse a config
#   megatron-core-0.17.1  Megatron-LM's argument parser (megatron/training/arguments.py, in the
#                       wheel since 0.17.0; its file equals git tag core_v0.17.1, commit 266f1c97):
#                       0.17 is the last release that imports on Python 3.11 without Triton
#                       (0.18 imports triton at package import, 0.19 typing.override); its
#                       Requires-Python says >=3.12, but PyPI has a cp311 wheel
#   torchtune-0.6.1     torchtune (its config validation and recipes/ files, in the wheel)
#   torchtune-0.6.1-deps  what importing torchtune needs beyond the shared packages: torchao
#                       0.13.0 (imports on torch 2.13 CPU), torchdata, the tokenizer libraries
#   torchtitan-0.2.2    torchtitan's ConfigManager (the last release read from TOML) and tyro
#   tyro-deps           tyro's docstring-parser and typeguard
#   litgpt-0.5.13       LitGPT and its CLI's parser stack (Lightning 2.6.1, jsonargparse 4.41,
#                       the newest its pin <=4.41 allows); torch, huggingface-hub, safetensors,
#                       tokenizers come from the environment
#   llmfoundry-0.22.0   llm-foundry and Composer (mosaicml) 0.32.1, files only: their pins
#                       (torch 2.7.0, transformers 4.51) clash with the environment's, so the
#                       test runs their config rules from the files (tests/test_export_parsers.py)
#   axolotl-0.18.0      Axolotl's config schema and validate_config (its hard dependencies
#                       include triton, xformers, bitsandbytes and vLLM-era pins: only addict is
#                       needed beside the shared transformers/accelerate/pydantic to import it)
#   axolotl-0.18.0-deepspeed  its shipped deepspeed_configs/ from the source distribution,
#                       which the Axolotl export names
#   ms-swift-4.5.2      ms-swift's argument dataclasses (swift.arguments), read by transformers'
#                       HfArgumentParser; with the few packages its import needs (modelscope,
#                       PEFT 0.19 as ms-swift's peft<0.20 pin asks, aiohttp and its parts)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.integration
PIP=(python -m pip install --quiet --disable-pip-version-check --no-cache-dir)
# pip builds each --target install in a temporary folder first (llamafactory-0.9.5 and
# ms-swift-4.5.2 are 120-160 MB): that folder is on the project's disk, not in /tmp, which may be
# a small separate file system (a CI run failed there with "No space left on device").
mkdir -p "$DEST/.tmp"
export TMPDIR="$PWD/$DEST/.tmp"
trap 'rm -rf "$TMPDIR"' EXIT

# torch first (DeepSpeed builds against it): the CPU wheel where the machine has one, else PyPI's.
"${PIP[@]}" 'torch==2.13.0+cpu' 2>/dev/null || "${PIP[@]}" 'torch==2.13.0'
"${PIP[@]}" --no-build-isolation deepspeed==0.19.8 accelerate==1.15.0 trl==1.16.0 \
    transformers==5.24.0 hydra-core==1.3.8 omegaconf==2.3.1 ray==2.60.0 tensordict==0.10.0 \
    codetiming==1.4.0

mkdir -p "$DEST"
target() {  # target FOLDER PACKAGE==VERSION...: installed without dependencies
    local folder="$DEST/$1"
    shift
    [ -f "$folder/.complete" ] && return 0
    rm -rf "$folder"
    "${PIP[@]}" --no-deps --target "$folder" "$@"
    touch "$folder/.complete"
}
target verl-0.9.1 verl==0.9.1
rm -rf "$DEST/verl-0.9.1/tests"
target openrlhf-0.11.2 openrlhf==0.11.2
target openrlhf-0.8.9 openrlhf==0.8.9
target megatron-core-0.17.1 --ignore-requires-python megatron-core==0.17.1
target torchtune-0.6.1 torchtune==0.6.1
target torchtune-0.6.1-deps torchao==0.13.0 torchdata==0.11.0 sentencepiece==0.2.1 \
    tiktoken==0.12.0 blobfile==3.1.0 kagglehub==0.3.13
target torchtitan-0.2.2 torchtitan==0.2.2 tyro==1.0.17
target tyro-deps docstring-parser==0.17.0 typeguard==4.4.4
target nemo-automodel-0.5.0 nemo-automodel==0.5.0 torchao==0.14.1 torchdata==0.11.0
target llamafactory-0.9.5 llamafactory==0.9.5 transformers==5.6.0 trl==0.24.0 peft==0.18.1 \
    accelerate==1.11.0 datasets==4.0.0 huggingface-hub==1.33.0 tokenizers==0.22.2 dill==0.3.8 \
    multiprocess==0.70.16 fsspec==2025.3.0 httpx==0.28.1 httpcore==1.0.9 h11==0.16.0 \
    liger-kernel==0.8.5
target litgpt-0.5.13 litgpt==0.5.13 lightning==2.6.1 lightning-utilities==0.15.3 \
    torchmetrics==1.9.0 'jsonargparse[signatures]==4.41.0' docstring-parser==0.18.0 \
    typeshed-client==2.15.0
target llmfoundry-0.22.0 llm-foundry==0.22.0 mosaicml==0.32.1
target axolotl-0.18.0 axolotl==0.18.0 addict==2.4.0
target ms-swift-4.5.2 ms-swift==4.5.2 modelscope==1.40.2 modelscope-hub==0.5.1 peft==0.19.1 \
    json-repair==0.64.6 cryptography==50.0.2 cffi==2.1.1 aiohttp==3.14.5 multidict==7.2.1 \
    yarl==1.25.1 propcache==0.5.4 aiohappyeyeballs==2.7.1 aiosignal==1.4.0 frozenlist==1.8.0

sdist_part() {  # sdist_part FOLDER PACKAGE VERSION PATH...: paths of its source distribution
    local folder="$DEST/$1" package="$2" version="$3" tmp
    shift 3
    [ -f "$folder/.complete" ] && return 0
    rm -rf "$folder"
    mkdir -p "$folder"
    tmp="$(mktemp -d)"
    python -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$tmp" "$package==$version"
    tar xzf "$tmp/$package-$version.tar.gz" -C "$folder" --strip-components=1 \
        "${@/#/$package-$version/}"
    rm -rf "$tmp"
    touch "$folder/.complete"
}
sdist_part llamafactory-0.9.5-examples llamafactory 0.9.5 examples/deepspeed \
    data/dataset_info.json
sdist_part axolotl-0.18.0-deepspeed axolotl 0.18.0 deepspeed_configs
