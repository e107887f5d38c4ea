"""User rules over the batch settings of `planner tune --require EXPR` (issue 19 item 3), e.g.
seed 001's ``rollout_n % micro_batch == 0`` and ``rollout_batch % num_gpus == 0``, or bounds
such as ``micro_batch <= 16``.

An expression is parsed with Python's ``ast`` into a small tree of integer arithmetic (+, -, *,
//, %), comparisons and and/or/not over the names in NAMES and integer literals; nothing is
evaluated by ``eval``. Bad syntax, other names or other operations are one-line errors naming
the expression and what is allowed.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any

from planner.catalog.request import TrainConfig
from planner.errors import PlannerError

MAX_CHARS = 200

# Names a rule may use: the tune flags without dashes, and the job's GPU and data-parallel counts.
NAMES = ("micro_batch", "grad_accum", "global_batch", "rollout_batch", "rollout_n",
         "logprob_micro_batch", "num_gpus", "dp")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
ALLOWED = "names " + ", ".join(NAMES) + "; integers; + - * // %; == != < <= > >=; and or not"


def _check(node: ast.AST, text: str) -> None:
    ok = (isinstance(node, ast.Expression | ast.Compare | ast.BoolOp | ast.And | ast.Or
                     | ast.Not | ast.Load)
          or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub))
          or (isinstance(node, ast.BinOp) and type(node.op) in _BINARY)
          or (isinstance(node, ast.Name) and node.id in NAMES)
          or (isinstance(node, ast.Constant) and type(node.value) is int)
          or type(node) in _BINARY or type(node) in _COMPARE)
    if not ok:
        what = node.id if isinstance(node, ast.Name) else type(
            node.op if isinstance(node, ast.BinOp | ast.UnaryOp) else node).__name__
        raise PlannerError(f"--require {text!r}: {what!r} is not allowed ({ALLOWED})")


@dataclass(frozen=True)
class Requirement:
    """One parsed rule: its text and its tree."""

    text: str
    tree: ast.Expression

    def holds(self, values: dict[str, int | None]) -> bool:
        """The rule on ``values``; a rule naming a setting the job does not have (None) holds."""
        used = {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)}
        if any(values.get(name) is None for name in used):
            return True
        return bool(_eval(self.tree.body, values))


def _eval(node: ast.AST, values: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, values)
        return (not v) if isinstance(node.op, ast.Not) else -v
    if isinstance(node, ast.BinOp):
        right = _eval(node.right, values)
        if isinstance(node.op, ast.FloorDiv | ast.Mod) and right == 0:
            return 0 if isinstance(node.op, ast.FloorDiv) else _eval(node.left, values)
        return _BINARY[type(node.op)](_eval(node.left, values), right)
    if isinstance(node, ast.BoolOp):
        parts = (_eval(v, values) for v in node.values)
        return all(parts) if isinstance(node.op, ast.And) else any(parts)
    left = _eval(node.left, values)
    for op, comp in zip(node.ops, node.comparators, strict=True):
        right = _eval(comp, values)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def parse(text: str) -> Requirement:
    """A rule from its text (PlannerError on anything but the allowed grammar)."""
    text = str(text).strip()
    if not text or len(text) > MAX_CHARS:
        raise PlannerError(f"--require needs a rule of 1 to {MAX_CHARS} characters "
                           "(e.g. 'rollout_batch % num_gpus == 0')")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise PlannerError(f"--require {text!r} is not an expression ({ALLOWED})") from None
    for node in ast.walk(tree):
        _check(node, text)
    if not isinstance(tree.body, ast.Compare | ast.BoolOp) and not (
            isinstance(tree.body, ast.UnaryOp) and isinstance(tree.body.op, ast.Not)):
        raise PlannerError(f"--require {text!r} must be a comparison, e.g. 'micro_batch <= 16'")
    return Requirement(text, tree)


def values_of(cfg: TrainConfig) -> dict[str, int | None]:
    """The rule names of a configuration (RL settings None for other workloads)."""
    rl = cfg.is_rl
    return {"micro_batch": cfg.micro_batch_size, "grad_accum": cfg.grad_accum,
            "global_batch": cfg.global_batch_size, "num_gpus": cfg.num_gpus, "dp": cfg.dp,
            "rollout_batch": cfg.rollout_batch if rl else None,
            "rollout_n": cfg.samples_per_prompt if rl else None,
            "logprob_micro_batch": (cfg.logprob_micro_batch or cfg.micro_batch_size)
            if rl else None}


def all_hold(rules: tuple[Requirement, ...], cfg: TrainConfig) -> bool:
    """True when every rule holds for ``cfg``."""
    values = values_of(cfg)
    return all(r.holds(values) for r in rules)
