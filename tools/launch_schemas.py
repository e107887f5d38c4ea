"""Record the config schemas of three frameworks that cannot be installed on a CPU test machine
(NeMo-RL, prime-rl, DeepSpeed-Chat) from their sources at the commits the exporters target,
into tests/data/launch_schemas.json, which tests/test_export_frameworks.py checks every export
against (key names, value types, literal choices, flags).

    python tools/launch_schemas.py NEMO_RL_GIT PRIME_RL_GIT DEEPSPEED_EXAMPLES_GIT

Each argument is a git directory (a clone or a bare mirror) holding the commit in COMMITS.

* NeMo-RL: every key path of examples/configs/{sft,dpo,grpo_math_1B}.yaml with the YAML type of
  its value (the exports inherit one of them and may only set keys it has).
* prime-rl: per pydantic class of packages/prime-rl-configs/src/prime_rl/configs/*.py, its fields
  (the class's own and its bases') with a coarse type (bool, int, float, str, list, table) and,
  for Literal annotations, the choices; read with ast, never imported.
* DeepSpeed-Chat: per step, the add_argument calls of training/<step>/main.py: flag, type,
  action and choices; read with ast.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import yaml

COMMITS = {"nemo-rl": "7ea279abfbeb698b092856d0dab61e7cf39bc909",
           "prime-rl": "559b44772e471d1538537b8805cc77f3824a5e64",
           "deepspeed-chat": "3d83278f2b27c79339a36e5974537c8a2833a176"}
NEMO_RECIPES = ("sft.yaml", "dpo.yaml", "grpo_math_1B.yaml")
PRIME_FILES = ("shared.py", "trainer.py", "sft.py", "rl.py", "orchestrator.py", "inference.py")
DSCHAT_STEPS = ("step1_supervised_finetuning", "step2_reward_model_finetuning",
                "step2_dpo_finetuning", "step3_rlhf_finetuning")
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "launch_schemas.json"


def show(git_dir: str, commit: str, path: str) -> str:
    """A file's text at a commit."""
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def yaml_type(value: object) -> str:
    """The coarse type of a YAML value (int also counts where a float is read); an OmegaConf
    interpolation ("${...}") takes its type from the key it names."""
    if isinstance(value, str) and value.startswith("${"):
        return "interpolation"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"),
                       (list, "list"), (dict, "table")):
        if isinstance(value, kind):
            return name
    return "null"


def flatten(doc: dict, prefix: str = "") -> dict[str, str]:
    """{dotted key: type} of every key of a nested YAML mapping."""
    keys: dict[str, str] = {}
    for key, value in doc.items():
        path = f"{prefix}{key}"
        keys[path] = yaml_type(value)
        if isinstance(value, dict):
            keys.update(flatten(value, f"{path}."))
    return keys


def nemo_rl(git_dir: str) -> dict:
    base = "examples/configs/"
    return {name: flatten(yaml.safe_load(show(git_dir, COMMITS["nemo-rl"], base + name)))
            for name in NEMO_RECIPES}


def _annotation(node: ast.expr | None) -> dict:
    """The annotation's text, and the choices of the Literal[...] it holds, if any."""
    spec: dict = {"type": ast.unparse(node) if node is not None else ""}
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Subscript) and ast.unparse(sub.value) == "Literal":
            elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            spec.setdefault("literal", []).extend(ast.literal_eval(e) for e in elts)
    return spec


def prime_rl(git_dir: str) -> dict:
    """{"file.py:Class": {"bases": [...], "fields": {name: type}}} of the config modules (a
    name can be defined in more than one of them: sft.py and rl.py each have their own
    SingleNodeDeploymentConfig)."""
    classes: dict[str, dict] = {}
    root = "packages/prime-rl-configs/src/prime_rl/configs/"
    for name in PRIME_FILES:
        tree = ast.parse(show(git_dir, COMMITS["prime-rl"], root + name))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {s.target.id: _annotation(s.annotation) for s in node.body
                      if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            classes[f"{name}:{node.name}"] = {"bases": [ast.unparse(b) for b in node.bases],
                                              "fields": fields}
    return classes


def _argument(call: ast.Call) -> tuple[str, dict] | None:
    names = [a.value for a in call.args if isinstance(a, ast.Constant)]
    flags = [n for n in names if isinstance(n, str) and n.startswith("--")]
    if not flags:
        return None
    spec: dict = {}
    for kw in call.keywords:
        if kw.arg == "type":
            spec["type"] = ast.unparse(kw.value)
        elif kw.arg == "action":
            spec["action"] = ast.literal_eval(kw.value)
        elif kw.arg == "choices":
            spec["choices"] = ast.literal_eval(kw.value)
        elif kw.arg == "nargs":
            spec["nargs"] = ast.literal_eval(kw.value)
    return flags[0], spec


def deepspeed_chat(git_dir: str) -> dict:
    steps = {}
    for step in DSCHAT_STEPS:
        path = f"applications/DeepSpeed-Chat/training/{step}/main.py"
        tree = ast.parse(show(git_dir, COMMITS["deepspeed-chat"], path))
        flags = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                found = _argument(node)
                if found:
                    flags[found[0]] = found[1]
        steps[step] = flags
    return steps


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[5].strip(), file=sys.stderr)
        return 2
    doc = {"commits": COMMITS, "nemo-rl": nemo_rl(argv[0]), "prime-rl": prime_rl(argv[1]),
           "deepspeed-chat": deepspeed_chat(argv[2])}
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
