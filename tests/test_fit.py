"""Every fitted constant comes from benchmarks/fit.py (issue 17: "the fitting is a script, not
hand edits"): planner/models/fitted.yaml equals what the script computes from the validation cases
now, and benchmarks/loso.py groups cases by source as documented. One in-sample fit (~5 s) per
run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from planner.catalog.load import load_catalog
from planner.models import calibration as cal
from planner.models.fitted import fitted
from planner.validation.validate import predict_case

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    """benchmarks/<name>.py as the module ``name`` (loso.py imports fit.py by that name)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


fit = _load("fit")
loso = _load("loso")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def cases():
    return fit.load()


@pytest.fixture(scope="module")
def full(cases, catalog):
    return fit.fit_constants(cases, catalog)


def test_fitted_file_is_what_the_script_computes(full):
    computed, shipped = fit.flat(full.values), fit.flat(fitted())
    assert computed.keys() == shipped.keys()
    for k, v in computed.items():
        assert shipped[k] == pytest.approx(v, abs=0.0015), (
            f"{k}: planner/models/fitted.yaml has {shipped[k]}, benchmarks/fit.py computes {v}; "
            "run `python benchmarks/fit.py --write`")
    assert full.fallbacks == ()


def test_each_memory_case_list_exercises_its_constant(cases, catalog):
    # a listed case whose prediction does not move with the constant cannot set it
    for name, ids in cal.FITTED_CASES.items():
        for i in ids:
            case = cases.memory[i]
            assert case["usable_for_accuracy"], i
            before = predict_case(case, catalog).predicted_gib
            with fit.patched({cal: {name: getattr(cal, name) + 1.0}}):
                assert predict_case(case, catalog).predicted_gib != before, (name, i)


def test_patched_restores(catalog):
    old = cal.LOGIT_BYTES_CHUNKED
    with fit.patched({cal: {"LOGIT_BYTES_CHUNKED": old + 5}}):
        assert old + 5 == cal.LOGIT_BYTES_CHUNKED
    assert old == cal.LOGIT_BYTES_CHUNKED


def test_a_stack_without_cases_falls_back_to_the_default_stack(cases, catalog):
    held = {c for c in fit.fitted_ids()
            if loso.source_key(cases.throughput.get(c, cases.memory.get(c, {})).get("source", ""))
            == "github.com/primeintellect-ai/prime-rl"}
    refit = fit.fit_constants(cases, catalog, exclude=held)
    table = refit.values["efficiency"]["stack_utilisation"]
    assert table["prime-rl"] == table["hf"]
    assert refit.fallbacks == ("stack_utilisation.prime-rl.bf16: hf's",)


@pytest.mark.parametrize("url, key", [
    ("https://github.com/pytorch/torchtune/blob/30c75d4/README.md#memory",
     "github.com/pytorch/torchtune"),
    ("https://github.com/pytorch/torchtune/blob/main/README.md", "github.com/pytorch/torchtune"),
    ("https://github.com/microsoft/DeepSpeedExamples/blob/master/applications/x.md",
     "github.com/deepspeedai/deepspeedexamples"),
    ("https://github.com/mlcommons/training_results_v4.0/tree/main/NVIDIA/results/x",
     "github.com/mlcommons/training_results_v4.0"),
    ("https://www.philschmid.de/fsdp-qlora-llama3?x=1", "philschmid.de/fsdp-qlora-llama3"),
    ("https://arxiv.org/pdf/2305.14314v2.pdf", "arxiv.org/2305.14314"),
    ("https://arxiv.org/abs/2305.14314", "arxiv.org/2305.14314"),
    ("https://huggingface.co/datasets/org/name/blob/main/x.json",
     "huggingface.co/datasets/org/name"),
    ("https://docs.example.com/en/guide/memory/", "docs.example.com/en/guide/memory"),
])
def test_source_key(url, key):
    assert loso.source_key(url) == key


def test_every_case_has_one_source(cases):
    groups = loso.by_source(cases)
    ids = [i for v in groups.values() for i in v]
    assert sorted(ids) == sorted([*cases.memory, *cases.throughput])


def test_no_fitted_factor_implies_more_than_the_achievable_peak(cases, catalog):
    """Issue 18: on every case a stack factor is fitted on, the predicted executed FLOP/s stay
    within the GPU's measured achievable matmul rate (peak x MAMF fraction): the factors are
    shares of it (at most 1), not corrections of the datasheet."""
    from planner.models import efficiency as eff
    from planner.models.flops import peak_tflops
    from planner.validation.throughput_cases import training_estimate
    for stack, classes in eff.STACK_UTILISATION.items():
        assert all(0 < u <= 1 for u in classes.values()), stack
    for ids in eff.STACK_CASES.values():
        for i in ids:
            est, _cfg, gpu = training_estimate(cases.throughput[i], catalog)
            ceiling = peak_tflops(gpu, est.precision) * eff.matmul_fraction(gpu, est.precision)
            assert est.achieved_tflops_per_gpu <= ceiling, i


def test_a_stack_without_cases_falls_back_to_its_profiles_base(catalog):
    """efficiency.STACK_BASE says what the catalog says: the profile whose own efficiency is
    the stack has a base whose efficiency is STACK_BASE[stack]; a pooled stack pools stacks
    that exist."""
    from planner.catalog.frameworks import efficiency_of, resolve
    from planner.models import efficiency as eff

    base_of = {f: spec.base for f, spec in catalog.frameworks.items() if spec.base}
    own = {efficiency_of(p)[0]: p.id for p in (resolve(catalog, f) for f in base_of)
           if p.inherited("efficiency") is None}
    for stack, base in eff.STACK_BASE.items():
        framework = own[stack]
        assert efficiency_of(resolve(catalog, base_of[framework]))[0] == base, stack
    for stack, members in eff.STACK_POOLS.items():
        assert set(members) <= set(eff.STACKS) and stack in eff.STACKS
        pooled = {i for m in members for i in eff.STACK_CASES[m]}
        assert pooled == set(eff.STACK_CASES[stack]), stack


def test_withheld_torchtune_rows_take_the_fsdp_base_fitted_on_the_rest(catalog):
    """Leaving torchtune's source out, its stack takes the pooled FSDP2 base, which is then
    fitted on the rest of its pool (prime-rl's rows and the rows of frameworks inheriting fsdp)."""
    from planner.models import efficiency as eff

    cases = fit.load()
    held = frozenset(eff.STACK_CASES["torchtune"])
    result = fit.fit_constants(cases, catalog, exclude=held)
    table = result.values["efficiency"]["stack_utilisation"]
    assert table["torchtune"]["bf16"] == table["fsdp"]["bf16"]
    assert "stack_utilisation.torchtune.bf16: fsdp's" in result.fallbacks
    # fitted on what is left of its pool: prime-rl's rows and the torchtitan / llm-foundry rows
    assert not any(f.startswith("stack_utilisation.fsdp.") for f in result.fallbacks)
    assert table["fsdp"]["bf16"] != table["prime-rl"]["bf16"]
