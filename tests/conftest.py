"""Shared fixtures: the tiny test catalog (tests/data/catalog) and a small-config helper."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig

# Property tests draw the same examples on every run: the suite stays deterministic.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")

DATA = Path(__file__).parent / "data"
TOOLS = Path(__file__).resolve().parents[1] / "tools"


def load_tool(name: str) -> ModuleType:
    """tools/<name>.py as a module (tools/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_decomposition_exact(model, gpu, cfg: TrainConfig, dp: int) -> None:
    """The solver's memory tables (a + b/dp states, activations) give every phase's reserved
    bytes and the device peak of the memory model at ``dp`` (cfg's num_gpus is its dp)."""
    from planner.models.memory import GIB, device_overhead_bytes, phase_terms, reserved_bytes
    from planner.models.workloads import estimate_memory
    from planner.solver.tables import PHASES, activation_reserved_bytes, states_coefficients

    floor = reserved_bytes({})  # the constant allocator floor
    coeffs = states_coefficients(model, cfg, "bf16")
    acts = activation_reserved_bytes(model, cfg, "bf16")
    terms = phase_terms(model, cfg, "bf16")
    for phase in PHASES:
        direct = reserved_bytes(terms[phase]) - floor
        assert coeffs[phase].at(dp) + acts[phase] == pytest.approx(direct, rel=1e-9, abs=1.0)
    device = max(coeffs[p].at(dp) + acts[p] for p in PHASES) + floor
    device += device_overhead_bytes(cfg.num_gpus)
    assert device / GIB == pytest.approx(estimate_memory(model, gpu, cfg).device / GIB, rel=1e-9)


def assert_solver_matches_enumeration(solved, best, kw: dict) -> None:
    """The CP-SAT solution and the independent enumeration's best agree on cost, GPUs,
    strategy, offer, layout, batch and hosts (and the step time of a time objective)."""
    assert best is not None and solved is not None and solved.status == "optimal"
    v = solved.values
    cost = v["cost_usd"] if kw.get("pricing") != "rent" else best.cost
    got = (cost, v["num_gpus"], solved.strategy, solved.offer, v["tp"], v["pp"],
           -v["micro_batch"], v["dp"], v["grad_accum"], v["hosts"])
    assert got == (best.cost, best.num_gpus, best.strategy, best.offer, best.tp, best.pp,
                   best.neg_micro_batch, best.dp, best.grad_accum, best.hosts)
    if kw.get("objective") == "time":
        assert v["step_time_us"] == best.step_time_us


def tiny_config(**kw) -> TrainConfig:
    """A TrainConfig for hand-computed tests: 8 tokens, one sequence, no recomputation."""
    base = {"checkpointing": "none", "seq_len": 8, "micro_batch_size": 1}
    return TrainConfig(**{**base, **kw})


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Never skip a tier silently: say which were deselected and how to run them."""
    marks = config.getoption("markexpr") or ""
    if "not slow" in marks:
        terminalreporter.write_line(
            "slow tier (tests marked slow: the >= 10,000-input fuzz tier) deselected; run it "
            "with: python -m pytest -m slow -n 2", yellow=True)
    if "not integration" in marks:
        terminalreporter.write_line(
            "integration tier (the frameworks' own parsers and transformers) deselected; run it "
            "with: bash tools/install_integration_deps.sh && python -m pytest -m integration -n 2",
            yellow=True)


@pytest.fixture(scope="session")
def cat():
    return load_catalog([DATA / "catalog"])


@pytest.fixture(scope="session")
def tiny(cat):
    return cat.model("tiny-llama").spec


@pytest.fixture(scope="session")
def gpu(cat):
    return cat.gpu("test-gpu")


def pytest_collection_modifyitems(config, items):
    """Tests that drive headless Chromium (the `browser` fixture) carry the browser marker, so
    `-m browser` / `-m "not browser"` select the tier."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
