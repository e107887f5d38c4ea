"""Output files (issue 20, part 2): every target is checked before any work, written to a
temporary file beside it and renamed over it (a full disk or a crash leaves the old file whole),
and the message says whether a file was written or replaced.

``check_targets`` refuses: an output folder that does not exist or cannot be written, a target
that is a folder, two outputs to the same file, an output onto an input file, and ``-`` (stdout)
where stdout already carries the command's own output.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerError
from planner.inputs import short

STDOUT = "-"


@dataclass(frozen=True)
class Target:
    """One output: the flag that named it and its path (``-`` = stdout)."""

    flag: str
    path: str

    @property
    def stdout(self) -> bool:
        """True when the output goes to standard output."""
        return self.path == STDOUT


def check_targets(targets: Iterable[tuple[str, str | None]], *, inputs: Iterable[str] = (),
                  stdout_ok: Iterable[str] = ()) -> dict[str, Target]:
    """The outputs named by ``(flag, path)`` pairs (None = not asked), checked before any work.

    ``inputs`` are the files the command reads; ``stdout_ok`` the flags whose ``-`` means
    stdout (where that does not mix with the command's own output). Returns {flag: Target}.
    """
    stdout_ok = set(stdout_ok)
    chosen = {flag: Target(flag, str(path)) for flag, path in targets if path is not None}
    seen: dict[str, str] = {}
    for target in chosen.values():
        if target.stdout:
            if target.flag not in stdout_ok:
                raise PlannerError(f"{target.flag} - would mix with the command's own output on "
                                   "stdout; give a file name")
            key = STDOUT
        else:
            key = _check_path(target)
        if key in seen:
            raise PlannerError(f"{seen[key]} and {target.flag} name the same output "
                               f"{short(target.path, 200)}; give each its own file")
        seen[key] = target.flag
    for name in inputs:
        if name == STDOUT or not os.path.isfile(name):
            continue
        for target in chosen.values():
            if not target.stdout and _same_file(target.path, name):
                raise PlannerError(f"{target.flag} {short(target.path, 200)} is the input file "
                                   f"{short(name, 200)}; writing would destroy it")
    return chosen


def _check_path(target: Target) -> str:
    """The resolved path of a writable file target, or PlannerError naming the flag."""
    name = short(target.path, 200)
    if not target.path:
        raise PlannerError(f"{target.flag} needs a file name")
    try:
        path = Path(target.path).resolve()
        is_dir = path.is_dir()
        parent = path.parent
        parent_ok = parent.is_dir()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise PlannerError(f"{target.flag} {name}: {reason}") from None
    if is_dir:
        raise PlannerError(f"{target.flag} {name} is a folder; give a file name")
    if not parent_ok:
        raise PlannerError(f"{target.flag} {name}: folder {short(str(parent), 200)} does not "
                           "exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PlannerError(f"{target.flag} {name}: folder {short(str(parent), 200)} is not "
                           "writable")
    return str(path)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.exists(a) and os.path.samefile(a, b) or \
            Path(a).resolve() == Path(b).resolve()
    except (OSError, ValueError):
        return False


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> str:
    """Run ``write(temporary path)`` beside ``path``, then rename it over ``path``.

    Returns "wrote" or "replaced" (the file existed). The temporary file keeps ``path``'s
    suffix (writers that pick a format by it); it is removed when ``write`` fails.
    """
    target = Path(path)
    existed = target.exists()
    mode = target.stat().st_mode & 0o777 if existed else _default_mode()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                               suffix=f".tmp{target.suffix}")
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb+") as handle:  # on disk before it takes the old file's name
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return "replaced" if existed else "wrote"


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
