"""Bad recipes fail with one message naming the key; the CLI turns it into exit code 2."""

from __future__ import annotations

import pytest

from agentic_rl.cli import main
from agentic_rl.trainer.config import ConfigError, load_config


@pytest.fixture
def recipe(tmp_path):
    def write(text: str):
        path = tmp_path / "r.yaml"
        path.write_text(text)
        return path

    return write


@pytest.mark.parametrize(
    "text, overrides, message",
    [
        ("rl:\n  stepz: 3\n", [], "unknown key 'rl.stepz'"),
        ("bogus: 1\n", [], "unknown key 'bogus'"),
        ("rl:\n  steps: three\n", [], "rl.steps: expected int"),
        ("rl:\n  lr: true\n", [], "rl.lr: expected float"),
        ("rl: 5\n", [], "rl: expected a section"),
        ("", ["rl.group_size=1", "rl.steps=2"], "rl.group_size must be >= 2"),
        ("", ["rollout.top_p=1.5"], "rollout.top_p"),
        ("", ["rl.steps=2", "rl.group_size=4", "rollout.greedy_per_group=4"], "rollout.greedy_per_group must be below rl.group_size"),
        ("", ["rollout.greedy_per_group=-1"], "rollout.greedy_per_group must be >= 0"),
        ("", ["rl.advantage=grpoo"], "rl.advantage: unknown advantage estimator 'grpoo'; known: dr_grpo"),
        ("", ["rl.policy_loss=ppo"], "rl.policy_loss: unknown policy loss 'ppo'"),
        ("", ["rl.advantage=gae"], "rl.advantage: gae needs a critic"),
        ("", ["rl.minibatches=0"], "rl.minibatches must be >= 1"),
        ("", ["model.precision=fp8"], "model.precision"),
        ("", ["rl.steps"], "expected key=value"),
        ("", ["rl.train_observations=true", "rl.epochs=2"], "rl.train_observations needs rl.epochs: 1"),
        ("", ["rl.splits=[train, rl_extr]"], "rl.splits: env 'calculator' has no split 'rl_extr'"),
        ("", ["rl.splits=[train, heldout_out]"], "rl.splits: 'heldout_out' is also an eval split"),
        ("", ["rl.splits=[]"], "rl.splits must name at least one split"),
        ("", ["eval.splits=[test]"], "eval.splits: env 'calculator' has no split 'test'"),
        ("", ["sft.mix={bare: -1}"], "sft.mix.bare: a share must be a number >= 0"),
        ("", ["sft.mix={bare: 0}"], "sft.mix: the shares add up to 0"),
        ("", ["sft.mix=[1, 2]"], "sft.mix: expected a dict"),
        ("", ["rl.mix={two_step: -1}"], "rl.mix.two_step: a share must be a number >= 0"),
        ("", ["rl.mix={bare: 0, two_step: 0}"], "rl.mix: the shares add up to 0"),
        ("", ["hindsight.teacher=no/such/dir"], "hindsight.teacher: no such model directory"),
    ],
)
def test_bad_recipes_name_the_key(recipe, text, overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("'", "'")):
        load_config(recipe(text), overrides)


def test_good_recipe_and_overrides(recipe):
    cfg = load_config(recipe("rl:\n  steps: 3\n  lr: 1\n"), ["rl.group_size=4", "env.options={fewshot: true}"])
    assert cfg.rl.steps == 3 and cfg.rl.lr == 1.0 and cfg.rl.group_size == 4
    assert load_config(recipe("sft:\n  lr: 3e-6\n")).sft.lr == 3e-6  # YAML 1.1 reads 3e-6 as a string
    assert cfg.env.options == {"fewshot": True}
    # the env's own demonstrations as the hindsight teacher: a keyword, not a model directory
    assert load_config(recipe(""), ["hindsight.teacher=demonstration"]).hindsight.teacher == "demonstration"


def test_cli_exits_2_with_one_line(recipe, capsys, tmp_path):
    assert main(["train", str(tmp_path / "missing.yaml")]) == 2
    assert "recipe file not found" in capsys.readouterr().err
    assert main(["train", str(recipe("rl:\n  stepz: 3\n"))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rl.stepz" in err[0]
    assert main(["eval", str(recipe("")), "--checkpoint", str(tmp_path / "nope")]) == 2
    assert "--checkpoint" in capsys.readouterr().err


def test_a_recipe_can_name_an_algorithm_from_an_installed_package(monkeypatch):
    from importlib import metadata

    from agentic_rl.algorithms import plugins
    from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS

    ep = metadata.EntryPoint(name="plugin_adv", value="agentic_rl.algorithms.advantages:grpo",
                             group="agentic_rl.advantages")
    monkeypatch.setattr(metadata, "entry_points", lambda group: [ep] if group == ep.group else [])
    monkeypatch.setattr(plugins, "_loaded", set())
    monkeypatch.setattr(ADVANTAGE_ESTIMATORS, "_items", dict(ADVANTAGE_ESTIMATORS._items))
    assert load_config(None, ["rl.advantage=plugin_adv"]).rl.advantage == "plugin_adv"
