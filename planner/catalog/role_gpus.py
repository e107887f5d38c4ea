"""--role-gpus as text: "actor=4,critic=2,..." <-> ((role, gpus), ...) (split placement)."""

from __future__ import annotations

from planner.errors import PlannerError


def format_role_gpus(role_gpus: tuple[tuple[str, int], ...]) -> str:
    """((role, gpus), ...) -> "role=gpus,..." (the inverse of parse_role_gpus)."""
    return ",".join(f"{n}={g}" for n, g in role_gpus)


def parse_role_gpus(text: str) -> tuple[tuple[str, int], ...]:
    """--role-gpus actor=4,critic=2,reference=1,reward=1 -> (('actor', 4), ...)."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, count = part.partition("=")
        if not (count.strip().isascii() and count.strip().isdigit()):
            raise PlannerError(f"--role-gpus {part!r}: write role=GPUs, e.g. "
                               "actor=4,critic=2,reference=1,reward=1")
        out.append((name.strip(), int(count)))
    if not out:
        raise PlannerError(f"--role-gpus {text!r}: write role=GPUs, e.g. actor=4,critic=2")
    return tuple(out)
