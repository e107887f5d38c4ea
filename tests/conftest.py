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
