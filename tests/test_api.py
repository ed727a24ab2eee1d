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
