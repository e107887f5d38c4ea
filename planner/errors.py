"""Exceptions for bad input. Each message is one line naming the bad value and what is allowed."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PlannerError(Exception):
    """Bad input of any kind; the CLI prints the message on one line and exits with code 2.
    The message is one line whatever it quotes (line breaks become spaces)."""

    def __init__(self, message: object = "") -> None:
        super().__init__(str(message).replace("\r", " ").replace("\n", " "))


class CatalogError(PlannerError):
    """The catalog (shipped or a user overlay) has invalid entries."""


class UnknownNameError(PlannerError):
    """A model, GPU or platform name that the catalog does not hold."""


def did_you_mean(name: str, choices: Iterable[str], *, limit: int = 3) -> str:
    """A ' (did you mean: a, b?)' suffix with the closest choices, or '' if none is close."""
    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=limit, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean: " + ", ".join(lowered[c] for c in close) + "?)"
