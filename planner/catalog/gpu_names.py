"""GPU names as vendors, nvidia-smi, papers and users write them, matched to catalog ids (the one
home of the forgiving lookup behind ``Catalog.gpu``).

The rules, in order:
1. Case, vendor and brand words (NVIDIA, Tesla, GeForce, AMD, Instinct, ...) do not matter;
   spaces and underscores are hyphens (gpu_key): ``NVIDIA H200`` is ``h200``.
2. The id itself, else the one id that begins or ends with the name (``H200`` is h200-sxm,
   ``4090`` rtx-4090).
3. A product name as nvidia-smi and datasheets print it: a memory size (``80GB``, ``80G``),
   a form factor (``SXM``, ``SXM2`` .. ``SXM6``: sxm; ``PCIe``: any PCIe card) and memory-type
   or marketing words (``HBM3``, ``HBM2e``, ``GDDR6X``, ``Generation``) are read apart from
   the model name; the ids that are or begin with the model name are narrowed to those whose
   memory is within MEMORY_TOLERANCE of the size and whose form factor is the one named
   (``A100-SXM4-80GB`` is a100-80gb-sxm, ``Tesla V100-SXM2-32GB`` v100-32gb, ``NVIDIA RTX 6000
   Ada Generation`` rtx-6000-ada, ``H200 141GB`` h200-sxm, ``GeForce RTX 4090 24GB``
   rtx-4090).
Where several ids are left the name is ambiguous: ``candidates`` returns them all and
Catalog.gpu names them (``H100 80GB HBM3`` is h100-pcie or h100-sxm). A validation case may
settle it with its stated memory and the SXM convention (validate.case_gpu).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from planner.catalog.specs import PCIE_CARD_FORM_FACTORS, GpuSpec

_VENDOR_WORDS = re.compile(r"^(?:nvidia|amd|intel|tesla|geforce|instinct|habana)[\s_-]+")
_MEMORY_WORD = re.compile(r"(\d+)gb?")
# form-factor words -> whether they name the SXM part (True) or a PCIe card (False)
_FORM_WORDS = {"sxm": True, "sxm2": True, "sxm3": True, "sxm4": True, "sxm5": True,
               "sxm6": True, "pcie": False}
_DROPPED_WORDS = frozenset({"hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6", "gddr6x", "gddr7",
                            "generation", "gpu", "tensor", "core"})
MEMORY_TOLERANCE = 0.1  # a printed "80GB" is the 80 GiB card; 143 GB reads as 141 GiB


def gpu_key(name: str) -> str:
    """Rule 1: a GPU name as the catalog's ids spell it: lower case, the vendor and brand words
    dropped, spaces and underscores as hyphens ("RTX 5090" -> rtx-5090, "NVIDIA H200" ->
    h200)."""
    key = name.strip().lower()
    while _VENDOR_WORDS.match(key):
        key = _VENDOR_WORDS.sub("", key, count=1)
    return re.sub(r"[\s_-]+", "-", key).strip("-")


def _prefixed(stem: str, gpus: Mapping[str, GpuSpec]) -> list[str]:
    return sorted(i for i in gpus if i == stem or i.startswith(stem + "-"))


def _sized(found: list[str], gpus: Mapping[str, GpuSpec], memory: float) -> list[str]:
    """The ids of ``found`` whose memory is within MEMORY_TOLERANCE of ``memory`` GB."""
    return [i for i in found if abs(gpus[i].memory_gib - memory) <= MEMORY_TOLERANCE * memory]


def candidates(name: str, gpus: Mapping[str, GpuSpec]) -> list[str]:
    """The catalog ids ``name`` may mean by rules 1-3: one where it is unambiguous, several
    where it is not, none where it names no catalog GPU."""
    key = gpu_key(name)
    if key in gpus:
        return [key]
    # rule 2: a model name, not a memory size or a form factor alone ("80gb", "sxm")
    if re.search(r"\d", key) and not re.fullmatch(r"\d+gb", key):
        found = sorted(i for i in gpus if i.startswith(key + "-") or i.endswith("-" + key))
        if found:
            return found
    return _product(key, gpus)


def _product(key: str, gpus: Mapping[str, GpuSpec]) -> list[str]:
    """Rule 3: the model name's ids narrowed by the memory size and form factor the name
    prints."""
    memory: float | None = None
    sxm: bool | None = None
    stem: list[str] = []
    for word in key.split("-"):
        size = _MEMORY_WORD.fullmatch(word)
        if size and stem:
            memory = float(size.group(1))
        elif word in _FORM_WORDS:
            sxm = _FORM_WORDS[word]
        elif word not in _DROPPED_WORDS:
            stem.append(word)
    if not stem or (memory is None and sxm is None and len(stem) == len(key.split("-"))):
        return []
    found = _prefixed("-".join(stem), gpus)
    if memory is not None:
        found = _sized(found, gpus, memory)
    if sxm is not None:  # SXM named: the SXM part; PCIe named: a PCIe card
        kinds = {"sxm"} if sxm else PCIE_CARD_FORM_FACTORS
        found = [i for i in found if gpus[i].form_factor in kinds]
    return found


def settle(found: list[str], gpus: Mapping[str, GpuSpec],
           memory_gib: float | None = None) -> list[str]:
    """Rule 4, for measured cases (validate.case_gpu), not for the CLI's flags: an ambiguous
    name narrowed by the memory the case states (within MEMORY_TOLERANCE), then, where exactly
    one candidate left is an SXM part, to it: a GPU named by its model alone in a training
    report ("H100", "NVIDIA H100 80GB HBM3", nvidia-smi's name of the SXM5 card) runs on the
    HGX / DGX boards, whose GPUs are SXM."""
    if memory_gib:
        found = _sized(found, gpus, memory_gib) or found
    sxm = [i for i in found if gpus[i].form_factor == "sxm"]
    return sxm if len(found) > 1 and len(sxm) == 1 else found
