"""Byte-identical outputs across a refactor: run a fixed set of requests through the CLI and
record (``record DIR``) or compare (``compare DIR``) their stdout and exit code.

The set covers every command that answers a request (check, plan, pareto, tune, catalog, schema,
export, validate) on SFT, pretraining, reward models, DPO, PPO and GRPO, purchases and rentals,
feasible and infeasible. A move that changes no behaviour leaves every file identical.

    python tools/golden.py record /tmp/golden-before
    ... move code ...
    python tools/golden.py compare /tmp/golden-before
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import sys
from pathlib import Path

# the checkout this file is in, not whatever planner the environment installed (a worktree's
# outputs are its own)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.cli import run  # noqa: E402

REQUESTS: tuple[tuple[str, ...], ...] = (
    ("plan", "--budget", "3000", "--model", "7b"),
    ("plan", "--budget", "3000", "--model", "7b", "--objective", "time"),
    ("plan", "--budget", "20000", "--model", "8b", "--method", "full"),
    ("plan", "--budget", "500", "--model", "70b", "--method", "full"),
    ("plan", "--budget", "300", "--model", "7b", "--pricing", "rent", "--tokens", "1e8"),
    ("plan", "--budget", "2000", "--model", "1.5b", "--workload", "pretrain", "--pricing", "rent",
     "--tokens", "1e9"),
    ("plan", "--budget", "6000", "--model", "8b", "--workload", "rm"),
    ("plan", "--budget", "6000", "--model", "7b", "--workload", "dpo"),
    ("plan", "--budget", "40000", "--model", "7b", "--workload", "grpo", "--prompt-len", "512",
     "--response-len", "1024"),
    ("plan", "--budget", "40000", "--model", "1.5b", "--workload", "ppo", "--prompt-len", "512",
     "--response-len", "512"),
    ("plan", "--budget", "3000", "--model", "7b", "--framework", "llama-factory"),
    ("plan", "--budget", "3000", "--model", "7b", "--method", "qlora"),
    ("plan", "--model", "7b", "--pricing", "owned", "--gpus", "rtx-4090", "--num-gpus", "2",
     "--tokens", "1e8"),
    ("plan", "--budget", "100", "--model", "405b"),
    ("plan", "--budget", "abc", "--model", "7b"),
    ("plan", "--budget", "3000", "--model", "nosuchmodel"),
    ("pareto", "--model", "7b", "--pricing", "rent", "--tokens", "1e8"),
    ("pareto", "--model", "8b", "--budget", "20000"),
    ("check", "--model", "7b", "--gpu", "a100-80gb-sxm"),
    ("check", "--model", "7b", "--gpu", "rtx-4090", "--method", "lora"),
    ("check", "--model", "7b", "--gpu", "rtx-4090", "--method", "qlora", "--micro-batch", "4"),
    ("check", "--model", "8b", "--gpu", "rtx-4090", "--num-gpus", "6", "--workload", "rm",
     "--zero", "3"),
    ("check", "--model", "mistral-7b", "--gpu", "a100-80gb-sxm", "--num-gpus", "8", "--zero", "2"),
    ("check", "--model", "70b", "--gpu", "h100-sxm", "--num-gpus", "8", "--fsdp"),
    ("check", "--model", "70b", "--gpu", "h100-sxm", "--num-gpus", "16", "--tp", "8",
     "--pp", "2"),
    ("check", "--model", "7b", "--gpu", "h100-sxm", "--num-gpus", "8", "--workload", "grpo",
     "--prompt-len", "512", "--response-len", "1024"),
    ("check", "--model", "7b", "--gpu", "a100-80gb-sxm", "--num-gpus", "8", "--workload", "ppo",
     "--prompt-len", "512", "--response-len", "512"),
    ("check", "--model", "7b", "--gpu", "a100-80gb-sxm", "--num-gpus", "4", "--workload", "dpo",
     "--zero", "3"),
    ("check", "--model", "7b", "--gpu", "rtx-3090", "--checkpointing", "none"),
    ("check", "--model", "7b", "--gpu", "a100-80gb-sxm", "--framework", "torchtune"),
    ("check", "--model", "7b", "--gpu", "nosuchgpu"),
    ("check", "--model", "7b", "--gpu", "a100-80gb-sxm", "--tp", "0"),
    ("tune", "--model", "7b", "--gpu", "a100-80gb-sxm", "--num-gpus", "2"),
    ("tune", "--model", "8b", "--gpu", "rtx-4090", "--num-gpus", "6", "--workload", "rm"),
    ("tune", "--model", "7b", "--gpu", "h100-sxm", "--num-gpus", "8", "--workload", "grpo",
     "--prompt-len", "512", "--response-len", "1024"),
    ("catalog", "gpus"),
    ("catalog", "models"),
    ("catalog", "platforms"),
    ("catalog", "frameworks"),
    ("schema", "plan"),
    ("schema", "check"),
    ("validate",),
)
FORMS = ("--json", None)  # every request as JSON and as text, where the command has --json
NO_JSON = {"schema", "validate"}


def _run(argv: list[str]) -> bytes:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return f"exit {code}\n--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}".encode()


def outputs() -> dict[str, bytes]:
    """File name -> recorded output of every request in REQUESTS, in each form."""
    found: dict[str, bytes] = {}
    for request in REQUESTS:
        for form in FORMS:
            if form and request[0] in NO_JSON:
                continue
            argv = [*request, *([form] if form else [])]
            name = hashlib.sha256(" ".join(argv).encode()).hexdigest()[:12]
            header = f"$ planner {' '.join(argv)}\n".encode()
            found[f"{request[0]}-{name}.txt"] = header + _run(argv)
    return found


def main(args: list[str]) -> int:
    if len(args) != 2 or args[0] not in ("record", "compare"):
        print("usage: python tools/golden.py record|compare DIR", file=sys.stderr)
        return 2
    folder = Path(args[1])
    found = outputs()
    if args[0] == "record":
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in found.items():
            (folder / name).write_bytes(data)
        print(f"recorded {len(found)} outputs in {folder}")
        return 0
    changed = [name for name, data in found.items()
               if not (folder / name).is_file() or (folder / name).read_bytes() != data]
    for name in changed:
        print(f"changed: {name}: {found[name].splitlines()[0].decode()}")
    print(f"{len(found) - len(changed)} of {len(found)} outputs identical")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
