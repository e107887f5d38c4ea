"""The one boundary every external input passes (issue 20, part 1).

Files (config.json, catalog overlays and size_aliases.yaml, saved plans, validation cases) are
read by ``load_file``: at most ``MAX_FILE_BYTES``, UTF-8, parsed, then walked by ``check_tree``
(nesting depth, node count with YAML aliases expanded, string length, finite numbers, integers
a float holds exactly). Command-line values are bounded by the same constants (``MAX_ARG_CHARS``,
``MAX_COUNT``, ``MAX_FLOAT``). Every problem is an ``InputError`` (a ``PlannerError``: one line,
exit 2) and lists of problems are capped by ``capped``.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from planner.errors import PlannerError

MAX_FILE_BYTES = 4 * 1024 * 1024  # the largest shipped data file is ~170 KB
MAX_DEPTH = 32  # nesting of mappings and lists in a file
MAX_NODES = 200_000  # values in one file, YAML aliases counted as often as they expand
MAX_STRING = 20_000  # characters of one string value in a file
MAX_ARG_CHARS = 4096  # one command-line argument (PATH_MAX)
MAX_EXACT_INT = 2**53  # integers in files: what a float holds exactly
MAX_COUNT = 2**31 - 1  # counts (GPUs, batch sizes, lengths, steps) in flags and requests
MAX_FLOAT = 1e18  # magnitude of a number flag (tokens, dollars, hours)
MAX_ERRORS = 10  # problems listed in one message before "and N more"
MAX_FILES = 5_000  # YAML files in one catalog folder (the shipped catalog has ~200)

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InputError(PlannerError):
    """An external input (flag, file, library argument) outside what the planner accepts."""


def capped(errors: Iterable[str], *, limit: int = MAX_ERRORS) -> str:
    """'a; b; c' with at most ``limit`` items, then '; and N more'."""
    items = list(errors)
    text = "; ".join(items[:limit])
    if len(items) > limit:
        text += f"; and {len(items) - limit} more"
    return text


def short(value: object, limit: int = 60) -> str:
    """repr of ``value``, cut to ``limit`` characters (errors stay one short line)."""
    try:
        text = repr(value)
    except ValueError:  # an integer beyond Python's 4300-digit str() limit
        text = f"<integer of {value.bit_length()} bits>" if isinstance(value, int) else "<value>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_text(path: str | Path, *, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a file of at most ``max_bytes``; InputError naming ``what`` else."""
    name = short(str(path), 200)
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise InputError(f"{what} {name} not found") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InputError(f"cannot read {what} {name}: {reason}") from None
    return decode(data, what=f"{what} {name}", max_bytes=max_bytes)


def decode(data: bytes, *, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """UTF-8 text of ``data``, at most ``max_bytes`` long."""
    if len(data) > max_bytes:
        raise InputError(f"{what} is larger than {max_bytes // 1024} KiB; nothing was read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start}); save it as UTF-8") from None


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def parse_json(text: str, *, what: str) -> Any:
    """A JSON document: finite numbers, bounded nesting and size (check_tree)."""
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise InputError(f"{what} is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise InputError(f"{what} is not valid JSON ({str(exc).splitlines()[0]})") from None
    return check_tree(data, what=what)


def parse_yaml(text: str, *, what: str) -> Any:
    """A YAML document (safe loader): bounded nesting, size and alias expansion (check_tree)."""
    try:
        data = yaml.load(text, Loader=_LOADER)
    except RecursionError:
        raise InputError(f"{what} is nested deeper than {MAX_DEPTH} levels") from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer of > 4300 digits
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "increasing flow level" in first:  # libyaml's own nesting limit
            raise InputError(f"{what} is nested deeper than {MAX_DEPTH} levels") from None
        raise InputError(f"{what} is not readable YAML ({first})") from None
    return check_tree(data, what=what)


def load_file(path: str | Path, *, what: str, kind: str) -> Any:
    """Read, decode and parse a ``kind`` ('json' or 'yaml') file through the boundary."""
    text = read_text(path, what=what)
    parse = parse_json if kind == "json" else parse_yaml
    return parse(text, what=f"{what} {short(str(path), 200)}")


def check_tree(data: Any, *, what: str) -> Any:
    """``data`` unchanged if every value is bounded; InputError listing the problems else.

    Walks iteratively, so depth is checked without recursion; a YAML alias counts once per
    place it appears, so an alias bomb stops at MAX_NODES instead of expanding.
    """
    errors: list[str] = []
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    nodes = 0
    while stack:
        value, where, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise InputError(f"{what} holds more than {MAX_NODES} values (YAML aliases counted "
                             "as expanded)")
        if depth > MAX_DEPTH:
            raise InputError(f"{what} is nested deeper than {MAX_DEPTH} levels at {where}")
        problem = _scalar_problem(value)
        if problem:
            errors.append(f"{where or '(document)'}: {problem}")
        elif isinstance(value, dict):
            for key, item in value.items():
                key_problem = _key_problem(key)
                if key_problem:
                    errors.append(f"{where or '(document)'}: {key_problem}")
                    continue
                stack.append((item, f"{where}.{key}" if where else str(key), depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))
    if errors:
        raise InputError(f"{what}: {capped(sorted(errors))}")
    return data


def _scalar_problem(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if abs(value) <= MAX_EXACT_INT else \
            f"integer of {value.bit_length()} bits is beyond +-2**53"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a finite number"
    if isinstance(value, str):
        return None if len(value) <= MAX_STRING else f"string of {len(value)} characters is " \
            f"longer than {MAX_STRING}"
    if isinstance(value, dict | list | tuple | datetime.date):
        return None  # containers are walked; dates (unquoted in YAML) are left to the schema
    return f"{type(value).__name__} values are not accepted"


def _key_problem(key: Any) -> str | None:
    if isinstance(key, str):
        return None if len(key) <= 200 else f"key of {len(key)} characters"
    if isinstance(key, int | bool) or key is None:
        return None
    return f"key {short(key)} is not a string"


def check_arg(value: str, *, position: int) -> None:
    """One command-line argument of at most MAX_ARG_CHARS characters."""
    if len(value) > MAX_ARG_CHARS:
        raise InputError(f"argument {position} ({short(value, 30)}) is {len(value)} characters "
                         f"long; at most {MAX_ARG_CHARS}")


class FieldErrors(InputError):
    """A request model (TrainConfig, PlanRequest) rejected its fields: one line listing them
    (capped); ``errors`` keeps pydantic's list so that the CLI can name the flags."""

    def __init__(self, model: str, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        items = [f"{'.'.join(str(p) for p in e['loc']) or '(request)'} {short(e.get('input'))}: "
                 f"{e['msg'].lower()}" for e in errors]
        super().__init__(f"{model}: {capped(items)}")


def check_number(value: Any) -> Any:
    """A count (int) within MAX_COUNT or a number (float) within MAX_FLOAT, walking tuples;
    ValueError otherwise (pydantic turns it into a field error)."""
    if isinstance(value, tuple):
        for item in value:
            check_number(item)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_COUNT:
        raise ValueError(f"must be at most {MAX_COUNT:,}")
    elif isinstance(value, float) and abs(value) > MAX_FLOAT:
        raise ValueError(f"must be at most {MAX_FLOAT:g} in magnitude")
    return value


def check_range(value: Any, *, name: str, lo: float, hi: float, lo_open: bool = False,
                hi_open: bool = False, hint: str = "") -> float:
    """``value`` as a float if it is a number within [lo, hi] (ends open as asked; nan is
    never within); InputError naming ``name`` otherwise."""
    number = not isinstance(value, bool) and isinstance(value, int | float)
    if not (number and (lo < value if lo_open else lo <= value)
            and (value < hi if hi_open else value <= hi)):
        interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise InputError(f"{name} {short(value)} must be in {interval}{hint}")
    return float(value)


def check_confidence(confidence: Any) -> float:
    """The confidence a plan or check holds its memory to (planner.models.bands), in [0, 1)."""
    return check_range(confidence, name="--confidence", lo=0, hi=1, hi_open=True)


def check_margin(margin: Any) -> float:
    """The memory margin: a fraction of GPU memory kept free, in [0, 1)."""
    return check_range(margin, name="--memory-margin", lo=0, hi=1, hi_open=True)


def check_choice(value: Any, choices: Iterable[str], *, name: str) -> str:
    """``value`` if it is one of ``choices``; InputError naming ``name`` otherwise."""
    options = tuple(choices)
    if not isinstance(value, str) or value not in options:
        raise InputError(f"{name} {short(value)} is not one of {', '.join(options)}")
    return value


def check_type(value: Any, kind: type, *, name: str) -> Any:
    """``value`` if it is a ``kind``; InputError naming ``name`` otherwise."""
    if not isinstance(value, kind):
        raise InputError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    return value
