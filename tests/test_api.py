"""The public API: every name `agentic_rl` exports resolves, a recipe runs from it, and importing an
env or the data contract does not pull in torch (an env must load in a worker without a model)."""

from __future__ import annotations

import json
import subprocess
import sys

import agentic_rl


def test_every_exported_name_resolves():
    for name in agentic_rl.__all__:
        assert getattr(agentic_rl, name) is not None, name


def test_train_a_recipe_from_the_package(tmp_path):
    from agentic_rl import load_config, train, with_values

    cfg = with_values(load_config("recipes/tiny.yaml", ["rl.steps=1", "eval.baselines=false", "sft.examples=0"]),
                      {"output_dir": str(tmp_path)})
    results = train(cfg)
    assert set(results["rl"]) == {"heldout_in", "heldout_out", "overall", "overall_ci"}
    assert json.loads((tmp_path / "eval.json").read_text())["rl"]["overall"] == results["rl"]["overall"]


def test_envs_and_the_contract_import_without_torch():
    code = ("import sys, agentic_rl, agentic_rl.types, agentic_rl.envs.registry, agentic_rl.rewards.base;"
            "agentic_rl.get_env('calculator'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_editors_see_every_exported_name_where_it_is_defined():
    """The TYPE_CHECKING block names each export from the module the lazy import loads it from, so
    `from agentic_rl import train` resolves in editors and type checkers as it does at run time."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(agentic_rl.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert seen == agentic_rl._API
    assert sorted(agentic_rl.__all__) == sorted(agentic_rl._API)


def test_the_readme_reading_path_names_what_is_there():
    """Every stop of the README's reading path names a function or class defined in the file it links,
    and each stop calls the next one where the path says it does (train -> run_rl -> rl_step)."""
    import re
    from pathlib import Path

    root = Path(agentic_rl.__file__).parents[1]
    readme = (root / "README.md").read_text()
    section = readme.split("## Reading the code", 1)[1].split("\n## ", 1)[0]
    stops = re.findall(r"\[`(\w+)(?:\(\))?`\]\(([\w/.]+\.py)\)", section)
    assert len(stops) >= 8
    for name, path in stops:
        assert re.search(rf"^(?:def|class) {name}\b", (root / path).read_text(), re.M), (name, path)
    calls = {"agentic_rl/trainer/loop.py": "run_rl(", "agentic_rl/trainer/rl_loop.py": "rl_step(",
             "agentic_rl/trainer/rl_step.py": "rl_update("}
    for path, call in calls.items():
        assert call in (root / path).read_text(), (path, call)
