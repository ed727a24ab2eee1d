"""`train(cfg)`: the whole run, top to bottom — baselines, SFT, RL, held-out evaluation.

Each stage ends in a state checkpoint (and RL every `checkpoint.every` steps), so `train(cfg,
resume="auto")` after a kill skips what is done and continues from the last state exactly.
"""

from __future__ import annotations

import json
import random
import time

import numpy as np
import torch
import yaml

from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import enable_gradient_checkpointing, load_model
from agentic_rl.models.lora import apply_lora, is_lora, start_rl_adapter
from agentic_rl.monitor.logger import MetricsLogger
from agentic_rl.monitor.report import write_report
from agentic_rl.trainer.checkpoint import save_checkpoint
from agentic_rl.trainer.config import Config, to_dict
from agentic_rl.trainer.evaluate import accuracies, evaluate
from agentic_rl.trainer.graduation import graduation_report
from agentic_rl.trainer.stages import run_rl, run_sft
from agentic_rl.trainer.state import Progress, StateStore, restore_rng


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def prepare(cfg: Config):
    """Seeds, threads, the policy (with LoRA if asked) and the env spec."""
    seed_everything(cfg.seed)
    if cfg.model.threads:
        torch.set_num_threads(cfg.model.threads)
    model, tokenizer = load_model(cfg.model.name, seed=cfg.seed)
    if cfg.model.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    if cfg.model.lora_rank:
        model = apply_lora(model, cfg.model.lora_rank, cfg.model.lora_alpha)
    return model, tokenizer, get_env(cfg.env.name)


class NotGraduated(ValueError):
    """`sft.require_graduation` and the graduation report said not ready."""


def train(cfg: Config, resume: str | None = None) -> dict:
    """`resume`: "auto" (the latest state of this run, if any) or a state directory."""
    run_dir = cfg.run_dir
    model, tokenizer, spec = prepare(cfg)  # first: a model that fails to load leaves the folder as it was
    store = StateStore(run_dir, cfg.checkpoint)
    saved = store.open(resume)
    progress = saved.progress if saved else Progress()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    if progress.rl_adapter:
        model = _rl_shape(model, cfg)
    if saved is not None:
        _restore(model, saved)
    engine = HFEngine(model, tokenizer, cfg.model.precision)
    engine.version = progress.engine_version
    logger = MetricsLogger(run_dir, cfg.log.tensorboard, cfg.log.mlflow, cfg.log.wandb, cfg.name, to_dict(cfg))
    logger.global_step = progress.logger_step
    results = progress.results

    def timed(name: str, fn):
        t0 = time.perf_counter()
        out = fn()
        results["timing_s"][name] = round(time.perf_counter() - t0, 1)
        return out

    def held_out(name: str, fewshot: bool = False, step: int = 0, episodes: dict | None = None) -> None:
        # `step` is the RL step the weights have seen, so the final point sits at the end of the
        # `eval.every` curve (the baselines and the SFT model are step 0)
        results[name] = timed(f"eval_{name}", lambda: evaluate(engine, tokenizer, spec, cfg, fewshot, name,
                                                              episodes=episodes))
        logger.log({"step": step, "stage": "eval", "model": name, **accuracies(results[name])})

    def stage_done(stage: str, weights: bool) -> None:
        progress.stages.append(stage)
        progress.logger_step, progress.engine_version = logger.global_step, engine.version
        store.save(stage, progress, model if weights else None, config=cfg)

    if cfg.eval.baselines and "baselines" not in progress.stages:
        held_out("base_zero_shot")
        held_out("base_few_shot", fewshot=True)
        stage_done("baselines", weights=False)
    if (cfg.sft.examples or cfg.sft.data) and "sft" not in progress.stages:
        losses = timed("sft", lambda: run_sft(model, tokenizer, spec, cfg, logger, store, progress, saved))
        engine.sync_weights()
        save_checkpoint(model, tokenizer, run_dir / "checkpoints" / "sft")
        episodes: dict = {}
        held_out("sft", episodes=episodes)
        if cfg.sft.graduation or cfg.sft.require_graduation:  # its format check reads the eval's episodes
            _graduate(engine, tokenizer, spec, cfg, losses, results, logger, timed,
                      episodes.get(cfg.eval.splits[0], ()) if cfg.eval.splits else ())
        stage_done("sft", weights=True)
    if cfg.rl.steps and "rl" not in progress.stages:
        if not progress.rl_adapter and is_lora(model):  # the KL reference (adapters off) becomes the SFT model
            model, progress.rl_adapter = _rl_shape(model, cfg), True
            engine = HFEngine(model, tokenizer, cfg.model.precision)
        timed("rl", lambda: run_rl(model, tokenizer, engine, spec, cfg, logger, store, progress, saved))
        progress.stages.append("rl")
    if cfg.rl.steps:
        save_checkpoint(model, tokenizer, run_dir / "checkpoints" / "rl")
        held_out("rl", step=cfg.rl.steps)
    logger.close()
    (run_dir / "eval.json").write_text(json.dumps(results, indent=2))
    write_report(run_dir, tokenizer)
    store.wait()  # the last state, written while the model was evaluated
    return results


def _rl_shape(model, cfg: Config):
    return start_rl_adapter(model, cfg.model.lora_rank, cfg.model.lora_alpha)


def _restore(model, saved) -> None:
    """The saved weights (when the state has any) and the RNG streams as they were at the save."""
    weights = saved.load("model")
    if weights is not None:
        model.load_state_dict(weights)
    restore_rng(saved.load("extras")["rng"])


def _graduate(engine, tokenizer, spec, cfg: Config, losses, results: dict, logger, timed, evaluated=()) -> None:
    report = timed("graduation", lambda: graduation_report(engine, tokenizer, spec, cfg, losses, evaluated))
    results["graduation"] = report.to_dict()
    (cfg.run_dir / "graduation.json").write_text(json.dumps(report.to_dict(), indent=2))
    print(report.summary())
    if cfg.sft.require_graduation and not report.graduated:
        logger.close()
        (cfg.run_dir / "eval.json").write_text(json.dumps(results, indent=2))
        raise NotGraduated(f"SFT did not graduate, so RL does not start ({cfg.run_dir / 'graduation.json'}): "
                           f"{report.summary()}")
