"""Framework releases: a release string as a comparable tuple, the first releases a fact's
``since`` names, and what a two-valued fact was before the release it holds from
(frameworks.Profile.value reads them; validation.case_releases too)."""

from __future__ import annotations

import re
from typing import Any

from planner.catalog.specs import Fact
from planner.errors import PlannerError


def release(text: object, *, what: str = "release") -> tuple[int, ...]:
    """A release string as a comparable tuple of its leading numbers ("0.42.0" -> (0, 42, 0));
    PlannerError naming ``what`` on one without them."""
    parts = re.findall(r"\d+", str(text).split("+")[0])[:3]
    if not parts:
        raise PlannerError(f"{what} {str(text)[:40]!r}: not a release number such as 0.42.0")
    return tuple(int(p) for p in parts)


def since_bounds(since: str | None) -> list[tuple[str, tuple[int, ...]]]:
    """The (package, first release) pairs a Fact.since names, in order: "transformers 4.54.0,
    torch 2.8.0" -> [("transformers", (4, 54, 0)), ("torch", (2, 8, 0))]."""
    return [(pkg, release(first)) for pkg, first in
            re.findall(r"([a-z][\w.+/-]*)[ =v]*(\d+\.\d+(?:\.\d+)?)", (since or "").lower())]


def named_before(version: str | None, since: str | None, names: set[str]) -> bool:
    """``version``, the release a framework's name carried (``trl==0.20``), is older than the
    first release ``since`` names, where its first package is one of ``names`` (the
    framework's: "trl 0.26.0" for trl; "transformers 4.54.0, torch 2.8.0" for the Hugging Face
    Trainer, whose aliases hold transformers)."""
    bounds = since_bounds(since)
    if not (version and bounds and bounds[0][0] in names and re.match(r"\d", version)):
        return False
    return release(version, what="framework version") < bounds[0][1]


# What a two-valued fact was before the release it holds from (Fact.since).
_BEFORE = {"16bit": "fp32", "fp32": "16bit"}


def before_release(fact: Fact[Any]) -> Any:
    """The value of a fact with a first release (Fact.since) in the releases before it: the
    other of its two values (a bool, or one of the 16bit / fp32 pair)."""
    if isinstance(fact.value, bool):
        return not fact.value
    return _BEFORE[fact.value]
