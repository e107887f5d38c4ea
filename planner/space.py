"""Memory coefficients of the planner's decision space, read off the memory model.

The solver cannot call Python functions, so the per-GPU memory of a configuration must become
integer coefficients. The memory model has a fixed shape in the data-parallel degree dp: in each
phase (forward/backward, optimizer step) the reserved bytes are

    states(dp) = a + b / dp + c * [dp > 1]     model states, buffers, gathered parameters
    + activations                                activations and loss buffers (no dp)
    + overhead(num_gpus)                         CUDA context, NCCL

with a, b, c depending on the other choices only. ``states_coefficients`` reads a, b and c off
``memory.phase_terms`` at dp = 1, 2 and 4; no physics is re-derived here, and a test checks that
the decomposition reproduces ``estimate_memory`` exactly at other dp values.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.memory import (
    FWD_PHASE,
    STEP_PHASE,
    phase_terms,
    reserved_weight,
)
from planner.request import TrainConfig
from planner.specs import ModelSpec

ACTIVATION_TERMS = ("activations", "logits_and_loss")
PHASES = (FWD_PHASE, STEP_PHASE)


@dataclass(frozen=True)
class StatesCoefficients:
    """Reserved bytes of the dp-dependent terms of one phase: a + b/dp + c*[dp > 1]."""

    a: float
    b: float
    c: float

    def at(self, dp: int) -> float:
        return self.a + self.b / dp + (self.c if dp > 1 else 0.0)


def _with_dp(cfg: TrainConfig, dp: int) -> TrainConfig:
    return cfg.model_copy(update={"num_gpus": cfg.tp * cfg.pp * cfg.cp * dp})


def _reserved_part(terms: dict[str, float], *, activations: bool) -> float:
    """Reserved bytes of the activation terms (activations=True) or of all other terms."""
    return sum(
        reserved_weight(k) * v for k, v in terms.items() if (k in ACTIVATION_TERMS) == activations
    )


def states_coefficients(
    model: ModelSpec, cfg: TrainConfig, precision: str
) -> dict[str, StatesCoefficients]:
    """a, b, c of every phase for the choices in ``cfg`` (its num_gpus is ignored)."""
    m1, m2, m4 = (
        phase_terms(model, _with_dp(cfg, dp), precision) for dp in (1, 2, 4)
    )
    out = {}
    for phase in PHASES:
        s1 = _reserved_part(m1[phase], activations=False)
        s2 = _reserved_part(m2[phase], activations=False)
        s4 = _reserved_part(m4[phase], activations=False)
        b = 4 * (s2 - s4)
        out[phase] = StatesCoefficients(a=s1 - b, b=b, c=s2 - s1 + b / 2)
    return out


def activation_reserved_bytes(
    model: ModelSpec, cfg: TrainConfig, precision: str
) -> dict[str, float]:
    """Reserved bytes of activations and loss buffers in every phase (independent of dp)."""
    terms = phase_terms(model, cfg, precision)
    return {phase: _reserved_part(terms[phase], activations=True) for phase in PHASES}

