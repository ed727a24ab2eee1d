"""Bad recipes fail with one message naming the key; the CLI turns it into exit code 2."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from agentic_rl.cli import main
from agentic_rl.trainer.checks import check_config
from agentic_rl.trainer.config import Config, ConfigError, load_config, with_values


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
        ("rl:\n  optim:\n    lr: true\n", [], "rl.optim.lr: expected float"),
        ("rl:\n  lr: 1.0e-5\n", [], "unknown key 'rl.lr'"),  # a knob of the flat RL section: now rl.optim.lr
        ("rl: 5\n", [], "rl: expected a section"),
        ("", ["rl.tasks.group_size=1", "rl.steps=2"], "rl.tasks.group_size must be >= 2"),
        ("", ["rollout.top_p=1.5"], "rollout.top_p"),
        ("", ["rl.steps=2", "rollout.temperature=0"], "rollout.temperature: 0 is greedy decoding"),
        ("", ["rl.steps=2", "rollout.top_p=0.9"], "rollout.top_p < 1 samples from a truncated distribution"),
        ("", ["rollout.greedy_per_group=1"], "unknown key 'rollout.greedy_per_group'"),  # removed knobs
        ("", ["rl.freeze_layers=10"], "unknown key 'rl.freeze_layers'"),
        ("", ["rl.train_observations=true"], "unknown key 'rl.train_observations'"),
        ("", ["rl.algorithm.advantage=grpoo"], "rl.algorithm.advantage: unknown advantage estimator 'grpoo'; known: dr_grpo"),
        ("", ["rl.algorithm.policy_loss=ppo"], "rl.algorithm.policy_loss: unknown policy loss 'ppo'"),
        ("", ["rl.algorithm.advantage=gae"], "rl.algorithm.advantage: gae needs a critic"),
        ("", ["rl.algorithm.dual_clip=0.5"], "rl.algorithm.dual_clip must be > 1"),
        ("", ["rl.algorithm.dual_clip=3", "rl.algorithm.policy_loss=gspo"], "with rl.algorithm.policy_loss: ppo_clip"),
        ("", ["rl.algorithm.kl_coef=0.1", "rl.algorithm.kl_estimator=k1"], "rl.algorithm.kl_estimator: 'k1' cannot be a KL loss term"),
        ("", ["rl.optim.minibatches=0"], "rl.optim.minibatches must be >= 1"),
        ("", ["model.precision=fp8"], "model.precision: unknown precision 'fp8'; known: auto, bf16, fp32"),
        ("", ["rl.optim.schedule=exp"], "rl.optim.schedule: unknown lr schedule 'exp'; known: constant, cosine, linear"),
        ("", ["rl.algorithm.kl_mode=both"], "rl.algorithm.kl_mode: unknown kl mode 'both'; known: loss, reward"),
        ("", ["rl.critic.kind=head"], "rl.critic.kind: unknown critic 'head'; known: model, none, value_head"),
        ("", ["distill.merge=mean"], "distill.merge: unknown teacher merge 'mean'; known: logits, probs"),
        ("", ["hindsight.restart=end"], "hindsight.restart: unknown hindsight restart 'end'; known: failure, start"),
        ("", ["checkpoint.best_mode=top"], "checkpoint.best_mode: unknown best mode 'top'; known: max, min"),
        ("", ["rl.collapse.actions=[panic]"], "rl.collapse.actions: unknown collapse remediation 'panic'"),
        ("", ["rl.steps"], "expected key=value"),
        ("", ["rl.tasks.splits=[train, rl_extr]"], "rl.tasks.splits: env 'calculator' has no split 'rl_extr'"),
        ("", ["rl.tasks.splits=[train, heldout_out]"], "rl.tasks.splits: 'heldout_out' is a held-out or eval split"),
        ("", ["rl.tasks.splits=[]"], "rl.tasks.splits must name at least one split"),
        ("", ["rl.tasks.splits=[train, heldout_fresh]"], "rl.tasks.splits: 'heldout_fresh' is a held-out or eval split"),
        ("", ["sft.examples=4", "sft.split=heldout_fresh"], "sft.split: 'heldout_fresh' is a held-out or eval split"),
        ("", ["sft.examples=4", "sft.split=trian"], "sft.split: env 'calculator' has no split 'trian'"),
        ("", ["eval.splits=[test]"], "eval.splits: env 'calculator' has no split 'test'"),
        ("", ["sft.mix={bare: -1}"], "sft.mix.bare: a share must be a number >= 0"),
        ("", ["sft.mix={bare: 0}"], "sft.mix: the shares add up to 0"),
        ("", ["sft.mix=[1, 2]"], "sft.mix: expected a dict"),
        ("", ["rl.tasks.mix={two_step: -1}"], "rl.tasks.mix.two_step: a share must be a number >= 0"),
        ("", ["rl.tasks.mix={bare: 0, two_step: 0}"], "rl.tasks.mix: the shares add up to 0"),
        ("", ["hindsight.teacher=no/such/dir"], "hindsight.teacher: no such model directory"),
        ("", ["model.parallel=zero3"], "model.parallel: 'zero3' is not one of ddp, fsdp"),
        ("", ["model.parallel=fsdp", "model.lora_rank=8"], "model.lora_rank: not with model.parallel: fsdp"),
        ("", ["model.parallel=fsdp", "rl.algorithm.advantage=gae", "rl.critic.kind=value_head"],
         "rl.critic.kind: not with model.parallel: fsdp"),
        ("", ["model.parallel=fsdp", "rl.collapse.actions=[rollback]"], "rl.collapse.actions: not with model.parallel"),
        ("", ["model.parallel=fsdp", "rollout.engine.name=managed"], "rollout.engine.name: not with model.parallel: fsdp"),
    ],
)
def test_bad_recipes_name_the_key(recipe, text, overrides, message):
    """Types and ranges fail in `load_config`; names that must exist (registries, the env, its splits,
    directories) in `check_config`, which `train()` runs first."""
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("'", "'")):
        check_config(load_config(recipe(text), overrides))


@pytest.mark.parametrize("text, overrides, message", [
    ("rollout:\n  engine: managed\n", [], "rollout.engine moved to rollout.engine.name"),
    ("", ["rollout.workers=2"], "rollout.workers moved to rollout.workers.count"),
    ("", ["rollout.agent=examples/openai_calculator_agent.py:run"], "rollout.agent moved to rollout.agent.program"),
    ("", ["rollout.agent_timeout_s=5"], "rollout.agent_timeout_s moved to rollout.agent.timeout_s"),
    ("rollout:\n  weight_update: vllm_reload\n", [], "rollout.weight_update moved to rollout.engine.weight_update"),
    ("", ["rollout.worker_cpus=0.5"], "rollout.worker_cpus moved to rollout.workers.cpus"),
])
def test_a_moved_key_names_where_it_is_now(recipe, text, overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_config(recipe(text), overrides)


def test_the_split_rollout_sections_load():
    """The engine, workers and agent sections, written as a recipe would, land in their fields."""
    cfg = load_config(None, ["rollout.engine.name=http://127.0.0.1:8000", "rollout.engine.timeout_s=30",
                             "rollout.workers.count=2", "rollout.workers.cpus=0.5",
                             "rollout.agent.history=template"])
    ro = cfg.rollout
    assert (ro.engine.name, ro.engine.timeout_s, ro.workers.count, ro.workers.cpus, ro.agent.history) == \
        ("http://127.0.0.1:8000", 30.0, 2, 0.5, "template")


@pytest.mark.parametrize("key, value", [("rollout.rng", "step"), ("rollout.agent.history", "drop"),
                                        ("model.parallel", "zero3"), ("rollout.engine.weight_update", "nccl")])
def test_a_closed_choice_lists_its_values(key, value):
    """A `Literal` field refuses any other value at load, and the message lists the values."""
    with pytest.raises(ConfigError, match=re.escape(key) + rf": '{value}' is not one of \w+, \w+"):
        load_config(None, [f"{key}={value}"])


def test_the_config_is_frozen_and_changes_make_a_new_one():
    cfg = load_config("recipes/calculator.yaml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.rl.optim.lr = 1.0
    raised = with_values(cfg, {"rl.optim.lr": 1.0, "rl.filters.variance_keep": 0.25})
    assert raised.rl.optim.lr == 1.0 and raised.rl.filters.variance_keep == 0.25
    assert cfg.rl.optim.lr == 1e-5 and cfg.rl.filters.variance_keep == 0.5  # the recipe's, unchanged
    assert raised.rl.tasks == cfg.rl.tasks  # the rest is shared


@pytest.mark.parametrize("recipe_file", sorted(Path("recipes").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_recipe_loads_and_checks(recipe_file):
    """Each recipe in recipes/ parses, and everything it names exists (the OPD recipe's teacher is the
    main job's output, so its directory is not required here)."""
    cfg = load_config(recipe_file)
    if cfg.distill.teachers:
        cfg = with_values(cfg, {"distill.teachers": []})
        cfg = with_values(cfg, {"distill.only": False})
    check_config(cfg)
    assert cfg.name == recipe_file.stem


@pytest.mark.parametrize("recipe_file", sorted(Path("recipes").glob("*.yaml")), ids=lambda p: p.stem)
def test_no_recipe_line_restates_a_default(recipe_file):
    """A recipe says what differs from the defaults: every value it sets is not the default's, but for
    what names the job (its model and env), which a reader of the recipe needs to see."""
    raw = yaml.safe_load(recipe_file.read_text())
    defaults = dataclasses.asdict(Config())

    def walk(section: dict, default: dict, where: str) -> None:
        for key, value in section.items():
            if isinstance(value, dict) and isinstance(default.get(key), dict) and key not in ("mix", "options", "routes"):
                walk(value, default[key], f"{where}{key}.")
            elif f"{where}{key}" not in ("model.name", "env.name"):
                assert value != default[key], f"{recipe_file.name}: {where}{key}: {value!r} is the default"

    walk(raw, defaults, "")


def test_good_recipe_and_overrides(recipe):
    cfg = load_config(recipe("rl:\n  steps: 3\n  optim:\n    lr: 1\n"), ["rl.tasks.group_size=4", "env.options={fewshot: true}"])
    assert cfg.rl.steps == 3 and cfg.rl.optim.lr == 1.0 and cfg.rl.tasks.group_size == 4
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
    cfg = load_config(None, ["rl.algorithm.advantage=plugin_adv"])
    check_config(cfg)
    assert cfg.rl.algorithm.advantage == "plugin_adv"


def test_eval_writes_into_the_run_folder_never_into_the_checkpoint_it_reads(tmp_path, capsys):
    """`agentic-rl eval --checkpoint DIR`: the results land in the recipe's run folder, named after the
    checkpoint (not over the run's own eval.json); the checkpoint is left as it was."""
    from agentic_rl.models.checkpoint import save_checkpoint
    from agentic_rl.models.loader import load_tokenizer, tiny_model

    tokenizer = load_tokenizer("tiny")
    ckpt = save_checkpoint(tiny_model(tokenizer, seed=0), tokenizer, tmp_path / "ckpt" / "rl")
    before = sorted(p.name for p in ckpt.iterdir())
    assert main(["eval", "recipes/tiny.yaml", "--checkpoint", str(ckpt), "--set", "eval.tasks_per_split=1",
                 "--set", f"output_dir={tmp_path / 'out'}"]) == 0
    assert sorted(p.name for p in ckpt.iterdir()) == before
    written = json.loads((tmp_path / "out" / "eval_rl.json").read_text())
    assert set(written) == {"heldout_in", "heldout_out", "overall", "overall_ci"}
