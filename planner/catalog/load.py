"""Load and validate the catalog (shipped data plus user overlays) and look entries up.

The catalog is data: one YAML file per GPU, model and platform under ``catalog/``. Loading
validates every file and reports all problems at once, each naming its file and field.
Lookups accept ids, Hugging Face repo ids, size aliases (``7b``) and, for models, a path to a
local Hugging Face ``config.json``; unknown names get a did-you-mean suggestion.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ValidationError

from planner.catalog.gpu_names import candidates, gpu_key
from planner.catalog.slugs import SlugMatch, match
from planner.catalog.specs import FrameworkSpec, GpuSpec, ModelSpec, PlatformSpec
from planner.errors import CatalogError, PlannerError, UnknownNameError, did_you_mean
from planner.inputs import MAX_ARG_CHARS, MAX_FILES, InputError, capped, load_file, short

KINDS: dict[str, type[BaseModel]] = {
    "gpus": GpuSpec,
    "models": ModelSpec,
    "platforms": PlatformSpec,
    "frameworks": FrameworkSpec,
}
OFFERS_DIR = "offers"  # rental offers (planner.catalog.offers reads them)
SIZE_ALIASES_FILE = "size_aliases.yaml"
# Suffixes of quantized checkpoints that share their base model's architecture.
_QUANT_SUFFIX = re.compile(r"-(int4|int8|gptq(-int[48])?|awq|bnb-4bit|4bit|8bit)$", re.IGNORECASE)


@dataclass(frozen=True)
class ResolvedModel:
    """A model lookup: the spec used and the bit width of its stored weights if quantized."""

    spec: ModelSpec
    asked_as: str
    weight_bits: int | None = None  # 4 for -Int4/GPTQ-Int4 checkpoints, None for 16-bit

    @property
    def checkpoint(self) -> str | None:
        """What a launch loads (checkpoint_of)."""
        return checkpoint_of(self.asked_as, self.spec)


def checkpoint_of(asked: str, spec: ModelSpec) -> str | None:
    """The checkpoint a launch of the model asked as ``asked`` loads: a local config.json's
    folder or the folder given, the Hugging Face repo id as asked (``owner/name``: a fine-tune,
    an -Instruct release or a re-upload that shares the catalog entry's architecture is that
    checkpoint, not the entry's), else the catalog entry's hf_repo (a catalog id or size alias).
    """
    text = asked.strip()
    if text.endswith(".json"):
        return str(Path(text).parent)
    if _is_dir(text) or (text.count("/") == 1 and not text.startswith((".", "/"))):
        return text
    return spec.hf_repo


@dataclass(frozen=True)
class Catalog:
    """The loaded GPUs, models, platforms, size aliases and framework profiles, by id."""
    gpus: dict[str, GpuSpec]
    models: dict[str, ModelSpec]
    platforms: dict[str, PlatformSpec]
    size_aliases: dict[str, str] = field(default_factory=dict)
    frameworks: dict[str, FrameworkSpec] = field(default_factory=dict)
    # the overlay folders it was loaded with (offers.load_offers reads their offers/)
    overlays: tuple[str, ...] = ()

    # ----- lookups -------------------------------------------------------------------------
    def gpu(self, name: str) -> GpuSpec:
        """The GPU spec named ``name``: its id, or a name as vendors, nvidia-smi and users
        write it that leads to one id (gpu_names); UnknownNameError naming the candidates
        otherwise."""
        found = candidates(_name(name, "GPU"), self.gpus)
        if len(found) == 1:
            return self.gpus[found[0]]
        if found:
            raise UnknownNameError(f"GPU {name!r} is one of {', '.join(found)}: "
                                   "name the variant")
        raise UnknownNameError(
            f"unknown GPU {name!r}{did_you_mean(gpu_key(name), self.gpus)}; "
            "see 'planner catalog gpus' for the ids"
        )

    def platform(self, name: str) -> PlatformSpec:
        """The platform spec named ``name``; UnknownNameError with close names otherwise."""
        key = _name(name, "platform")
        if key in self.platforms:
            return self.platforms[key]
        raise UnknownNameError(
            f"unknown platform {name!r}{did_you_mean(key, self.platforms)}; "
            "see 'planner catalog platforms'"
        )

    def model(self, name: str) -> ResolvedModel:
        """Resolve an id, HF repo id, size alias, quantized variant, or local config.json path."""
        text = _name(name, "model", lower=False)
        if not text:
            raise PlannerError("--model is empty: give a catalog id (qwen2.5-7b), a HF repo id, "
                               "a size alias (7b) or a config.json path")
        if text.endswith(".json") or _is_dir(text):
            from planner.catalog.hfconfig import model_from_hf_config  # only for config.json paths

            return ResolvedModel(spec=model_from_hf_config(Path(text)), asked_as=text)
        index = self._model_index()
        key = text.lower()
        if key in self.size_aliases:
            key = self.size_aliases[key]
        if key in index:
            return ResolvedModel(spec=index[key], asked_as=text)
        # a repo re-uploaded under another organisation keeps its name (NousResearch/
        # Llama-2-7b-hf, unsloth/..., TheBloke/...): its name, then a quantized variant of it;
        # a name written with spaces or underscores ("Llama 3.1 8B") as its hyphenated id
        tail = key.rsplit("/", 1)[-1]
        for tried in dict.fromkeys((key, tail, re.sub(r"[\s_]+", "-", tail))):
            if tried in index:
                return ResolvedModel(spec=index[tried], asked_as=text)
            base = _QUANT_SUFFIX.sub("", tried)
            if base != tried and base in index:
                bits = 8 if "8" in tried[len(base) :] else 4
                return ResolvedModel(spec=index[base], asked_as=text, weight_bits=bits)
        names = list(self.models) + list(self.size_aliases)
        raise UnknownNameError(
            f"unknown model {name!r}{did_you_mean(key, names)}; use a catalog id "
            "('planner catalog models'), a size alias (7b, 70b, ...), a Hugging Face repo id "
            "in the catalog, or a path to a config.json"
        )

    def framework(self, name: str) -> FrameworkSpec:
        """A framework profile by id or alias, forgiving as catalog.slugs documents (case,
        ``_``/space, a trailing version, ``X+deepspeed``-style combined slugs)."""
        return self.framework_match(name).spec

    def framework_match(self, name: str) -> SlugMatch:
        """A framework slug matched (slugs.match): the profile, the version the slug carried
        and the rule that matched; UnknownNameError in one line with the nearest ids."""
        return match(_name(name, "framework", lower=False), self.frameworks)

    def _model_index(self) -> dict[str, ModelSpec]:
        return _index_models(tuple(self.models.values()))


def _name(name: object, kind: str, *, lower: bool = True) -> str:
    """A lookup name: a string of at most MAX_ARG_CHARS characters, stripped (and lowered)."""
    if not isinstance(name, str):
        raise PlannerError(f"the {kind} name must be a string, got {short(name)}")
    if len(name) > MAX_ARG_CHARS:
        raise PlannerError(f"the {kind} name {short(name, 40)} is {len(name)} characters long; "
                           f"at most {MAX_ARG_CHARS}")
    return name.strip().lower() if lower else name.strip()


def _is_dir(text: str) -> bool:
    """Path(text).is_dir(), False for names the OS cannot hold (too long, NUL bytes)."""
    try:
        return Path(text).is_dir()
    except (OSError, ValueError):
        return False


@lru_cache(maxsize=8)
def _index_models(models: tuple[ModelSpec, ...]) -> dict[str, ModelSpec]:
    index: dict[str, ModelSpec] = {}
    for m in models:
        for name in (m.id, m.hf_repo, *m.aliases):
            if name:
                index.setdefault(name.lower(), m)
                index.setdefault(name.lower().split("/")[-1], m)
    # Ids win over repo-name tails of other entries.
    index.update({m.id: m for m in models})
    return index


def _shipped_dir(folder: str) -> Path:
    """A data folder of the project: the repository's ``<folder>/`` or, installed, the package
    data ``planner/_<folder>``."""
    package = Path(__file__).resolve().parents[1]  # planner/
    repo = package.parent / folder
    if repo.is_dir():
        return repo
    return package / f"_{folder}"  # installed package data


def shipped_catalog_dir() -> Path:
    """The catalog folder: the repository's ``catalog/`` or the installed package data."""
    return _shipped_dir("catalog")


def shipped_validation_dir() -> Path:
    """The project's copy of the validation cases (``validation/``: memory_cases.yaml,
    throughput_cases.yaml and their README)."""
    return _shipped_dir("validation")


def load_catalog(overlays: Sequence[str | Path] = ()) -> Catalog:
    """Load the shipped catalog, then each overlay folder in order (same id replaces).

    Raises CatalogError listing every invalid file and field at once (capped: see
    inputs.capped). One folder may be given as a plain path.
    """
    if isinstance(overlays, str | Path):
        overlays = (overlays,)
    try:
        folders = tuple(str(Path(p)) for p in overlays)
    except TypeError:
        raise PlannerError(f"catalog overlays must be folder paths, got {short(overlays)}") \
            from None
    return _load(folders)


@lru_cache(maxsize=16)
def _load(overlays: tuple[str, ...]) -> Catalog:
    entries: dict[str, dict[str, BaseModel]] = {kind: {} for kind in KINDS}
    aliases: dict[str, str] = {}
    alias_files: dict[str, Path] = {}  # where each alias was last set, for its errors
    errors: list[str] = []
    for folder in (shipped_catalog_dir(), *map(Path, overlays)):
        if not _is_dir(str(folder)):
            errors.append(f"{folder}: catalog folder not found")
            continue
        if not any((folder / kind).is_dir() for kind in KINDS) and \
                not (folder / SIZE_ALIASES_FILE).exists():
            if not (folder / OFFERS_DIR).is_dir():  # rental offers: offers.load_offers
                errors.append(f"{folder}: holds none of {', '.join(f'{k}/' for k in KINDS)}, "
                              f"{OFFERS_DIR}/ or {SIZE_ALIASES_FILE}")
            continue
        read = _read_aliases(folder / SIZE_ALIASES_FILE, errors)
        aliases.update(read)
        alias_files.update(dict.fromkeys(read, folder / SIZE_ALIASES_FILE))
        files = 0
        for kind, schema in KINDS.items():
            paths = sorted((folder / kind).glob("*.yaml"))
            if len(paths) > MAX_FILES:
                errors.append(f"{folder / kind}: {len(paths)} files, more than {MAX_FILES}")
                continue
            for path in paths:
                files += 1
                spec = _read_entry(path, schema, errors)
                if spec is not None:
                    entries[kind][spec.id] = spec  # type: ignore[attr-defined]
        if not files and not (folder / SIZE_ALIASES_FILE).is_file():
            errors.append(f"{folder}: holds no *.yaml entry in {', '.join(f'{k}/' for k in KINDS)}")
    models = entries["models"]
    for alias, target in aliases.items():
        if target not in models:
            errors.append(f"{alias_files[alias]}: alias {alias!r} names unknown model "
                          f"{target!r}")
    errors += _framework_base_errors(entries["frameworks"])  # type: ignore[arg-type]
    if errors:
        raise CatalogError(f"{len(errors)} catalog error(s): {capped(errors)}")
    return Catalog(
        gpus=entries["gpus"],  # type: ignore[arg-type]
        models=models,  # type: ignore[arg-type]
        platforms=entries["platforms"],  # type: ignore[arg-type]
        size_aliases=aliases,
        frameworks=entries["frameworks"],  # type: ignore[arg-type]
        overlays=overlays,
    )


def _framework_base_errors(frameworks: dict[str, FrameworkSpec]) -> list[str]:
    """A profile's base must exist, and inheritance must not run in a circle."""
    errors = []
    for spec in frameworks.values():
        seen = [spec.id]
        base = spec.base
        while base is not None:
            if base not in frameworks:
                errors.append(f"frameworks/{seen[-1]}.yaml: base {base!r} is not a framework "
                              "profile")
                break
            if base in seen:
                errors.append(f"frameworks/{spec.id}.yaml: inheritance runs in a circle "
                              f"({' -> '.join([*seen, base])})")
                break
            seen.append(base)
            base = frameworks[base].base
    return errors


def _read_yaml(path: Path, errors: list[str]) -> object:
    """The file's data through the input boundary; None (and an error) when it is unusable."""
    try:
        data = load_file(path, what="catalog file", kind="yaml")
    except InputError as exc:
        errors.append(str(exc))
        return None
    if data is None:
        errors.append(f"{path}: the file is empty")
    return data


def read_model(path: Path, schema: type[BaseModel], errors: list[str],
               *, expected: str = "a mapping of fields") -> BaseModel | None:
    """The file read through the input boundary and validated against ``schema``; None, with
    one error per bad field in ``errors``, when it is unusable."""
    data = _read_yaml(path, errors)
    if data is None:
        return None
    if not isinstance(data, dict):
        errors.append(f"{path}: expected {expected}, got {type(data).__name__}")
        return None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(file)"
            errors.append(f"{path}: field {where}: {err['msg']}")
        return None


def _read_entry(path: Path, schema: type[BaseModel], errors: list[str]) -> BaseModel | None:
    spec = read_model(path, schema, errors)
    if spec is None:
        return None
    if spec.id != path.stem:  # type: ignore[attr-defined]
        errors.append(f"{path}: id {spec.id!r} differs from the file name")  # type: ignore[attr-defined]
        return None
    return spec


def _read_aliases(path: Path, errors: list[str]) -> dict[str, str]:
    if not path.is_file():
        return {}
    data = _read_yaml(path, errors)
    if data is None:
        return {}
    if not isinstance(data, dict):
        errors.append(f"{path}: expected a mapping alias -> model id")
        return {}
    bad = [f"{short(k)}: {short(v)}" for k, v in data.items()
           if not isinstance(k, str | int | float) or not isinstance(v, str)]
    if bad:
        errors.append(f"{path}: aliases must map a name to a model id string, not "
                      f"{capped(bad, limit=3)}")
        return {}
    return {str(k).lower(): v for k, v in data.items()}
