"""What the trainer does when the collapse monitor warns (`rl.collapse.actions`).

The monitor (`monitor/collapse.py`) only detects; these remedies act. Each returns a `Remedied`: the
config it leaves (a remedy that changes a knob returns a new one; the config itself never changes),
the change, which the loop logs as an event and keeps in the run's state so a resumed run goes on
with it, and whether it changed the weights:

  variance_filter  StarPO-S: train only on the groups with the highest reward spread (keep ratio down)
  entropy_bonus    add or raise the entropy bonus
  clip_high        raise the upper clip (DAPO's clip-higher: room for low-probability tokens)
  lower_lr         halve the learning rate (of every parameter group, schedule included)
  rollback         restore the weights and the optimizer of the last healthy step
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from agentic_rl.registry import Registry
from agentic_rl.trainer.config import Config, get_value, with_values
from agentic_rl.trainer.loss_terms import policy_settings


@dataclass
class Remedies:
    """What the remedies act on besides the config: the optimizer, the model, and a copy of the last
    healthy weights for `rollback`."""

    optimizer: torch.optim.Optimizer
    model: torch.nn.Module
    healthy: dict | None = None

    def mark_healthy(self) -> None:
        self.healthy = {"model": copy.deepcopy(self.model.state_dict()),
                        "optimizer": copy.deepcopy(self.optimizer.state_dict())}

    def apply(self, names: Sequence[str], cfg: Config) -> tuple[Config, list[dict], bool]:
        """The config after the named remedies, in order, one event per remedy, and whether a remedy
        changed the weights (the sampler then needs them: `engine.sync_weights()`)."""
        events, weights = [], False
        for name in names:
            done = REMEDIES.get(name)(self, cfg)
            cfg = done.cfg
            events.append({"event": "remediation", "action": name, **done.details})
            weights = weights or done.weights_changed
        return cfg, events, weights


@dataclass(frozen=True, kw_only=True)
class Remedied:
    """What a remedy did: the config it leaves, its event's details, whether it changed the weights."""

    cfg: Config
    details: dict
    weights_changed: bool = False


Remedy = Callable[[Remedies, Config], Remedied]
REMEDIES: Registry[Remedy] = Registry("collapse remediation")


def _knob(cfg: Config, key: str, change: Callable[[float], float]) -> Remedied:
    before = get_value(cfg, key)
    after = change(before)
    return Remedied(cfg=with_values(cfg, {key: after}), details={key.rsplit(".", 1)[-1]: [before, after]})


@REMEDIES.register("variance_filter")
def _variance_filter(r: Remedies, cfg: Config) -> Remedied:
    return _knob(cfg, "rl.filters.variance_keep", lambda keep: max(0.25, keep * 0.5))


@REMEDIES.register("entropy_bonus")
def _entropy_bonus(r: Remedies, cfg: Config) -> Remedied:
    return _knob(cfg, "rl.algorithm.entropy_coef", lambda coef: max(coef * 2, 1e-3))


@REMEDIES.register("clip_high")
def _clip_high(r: Remedies, cfg: Config) -> Remedied:
    before = policy_settings(cfg.rl.algorithm).clip_high  # the recipe's, or the policy loss's paper value
    return Remedied(cfg=with_values(cfg, {"rl.algorithm.clip_high": before + 0.08}),
                    details={"clip_high": [before, before + 0.08]})


@REMEDIES.register("lower_lr")
def _lower_lr(r: Remedies, cfg: Config) -> Remedied:
    before = r.optimizer.param_groups[0]["lr"]
    for g in r.optimizer.param_groups:
        g["lr"] *= 0.5
        if "base_lr" in g:  # the scheduled base, so the next step's schedule keeps the halving
            g["base_lr"] *= 0.5
    return Remedied(cfg=cfg, details={"lr": [before, r.optimizer.param_groups[0]["lr"]]})


@REMEDIES.register("rollback")
def _rollback(r: Remedies, cfg: Config) -> Remedied:
    if r.healthy is None:
        return Remedied(cfg=cfg, details={"rolled_back": False})
    lrs = [(g["lr"], g.get("base_lr")) for g in r.optimizer.param_groups]  # keep what other remedies changed
    r.model.load_state_dict(r.healthy["model"])
    r.optimizer.load_state_dict(r.healthy["optimizer"])
    for g, (lr, base) in zip(r.optimizer.param_groups, lrs):
        g["lr"] = lr
        if base is not None:
            g["base_lr"] = base
    return Remedied(cfg=cfg, details={"rolled_back": True}, weights_changed=True)
