"""`train()`'s start: the recipe's `model.threads: 0` and `model.precision: auto` resolved for this
machine, written into the run's config and said in the startup line."""

from __future__ import annotations

import torch

from agentic_rl.models import precision
from agentic_rl.models.threads import ThreadChoice
from agentic_rl.trainer import loop
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.distributed import World


def test_auto_threads_and_precision_are_resolved_into_the_config(monkeypatch):
    monkeypatch.setattr(loop, "auto_threads", lambda: ThreadChoice(1, "2 cores, 1.0 busy elsewhere"))
    monkeypatch.setattr(precision, "cpu_choice", lambda: precision.CPUChoice(True, 1.41, "cached"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    threads_before = torch.get_num_threads()
    try:
        cfg, line = loop.resolve_machine(load_config("recipes/tiny.yaml", ["model.threads=0", "model.precision=auto"]),
                                         World())
        assert (cfg.model.threads, cfg.model.precision) == (1, "bf16") and torch.get_num_threads() == 1
        assert line == "cpu, bf16 (auto: bf16 1.41x fp32, cached; bf16 needs 1.25x), 1 torch thread (2 cores, 1.0 busy elsewhere)"
        cfg, line = loop.resolve_machine(load_config("recipes/tiny.yaml", ["model.threads=1", "model.precision=fp32"]),
                                         World())
        assert (cfg.model.threads, cfg.model.precision) == (1, "fp32") and line.endswith("fp32, 1 torch thread (model.threads)")
    finally:
        torch.set_num_threads(threads_before)


def test_the_run_logs_what_it_resolved(tmp_path):
    import json

    from agentic_rl.trainer.loop import train

    train(load_config("recipes/tiny.yaml", ["rl.steps=0", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=1", f"output_dir={tmp_path}"]))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0] == {"step": 0, "stage": "event", "event": "machine", "threads": 1, "precision": "fp32"}
    assert "precision: fp32" in (tmp_path / "config.yaml").read_text()


def test_the_runs_the_stages_share_are_keyword_only_and_the_stages_take_them():
    """`Run` (what train()'s stages share) and `RLRun` (what the RL loop carries) are built by name,
    field by field, and the SFT and RL stages take the `Run` whole, not its fields one by one."""
    import inspect

    from agentic_rl.trainer.rl_loop import run_rl
    from agentic_rl.trainer.rl_step import RLRun
    from agentic_rl.trainer.sft import run_sft

    for record in (loop.Run, RLRun):
        kinds = {p.kind for p in inspect.signature(record).parameters.values()}
        assert kinds == {inspect.Parameter.KEYWORD_ONLY}, record.__name__
    for stage in (run_sft, run_rl):
        assert list(inspect.signature(stage).parameters) == ["shared", "saved"], stage.__name__
