"""How often the bfcl env's verdict agrees with BFCL's own evaluation of the same model outputs.

A checkpoint plays held-out single-turn tasks (`heldout_in`, `heldout_out`) through the env at the
rollout's temperature, so the outputs hold right, wrong and broken calls. Each episode is scored
twice: by the env's reward (`rewards/bfcl.py`: our parse, then bfcl-eval's ast_checker), and by
bfcl-eval's own evaluation of the episode's text — its actions joined, BFCL's one response — through
its Qwen function-calling handler's decoder and its runner's `_evaluate_single_ast_entry` /
`_evaluate_single_relevance_entry`, as `bfcl evaluate` scores a Qwen FC model's result file.

BFCL's handler modules import tree-sitter and overrides, which the dev install leaves out
(bfcl-eval is installed --no-deps); put them on the path for this script only:

    pip install --target /tmp/bfcl-deps --no-deps overrides tree_sitter==0.21.3 \
        tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4
    PYTHONPATH=/tmp/bfcl-deps:. python benchmarks/bfcl_agreement.py --checkpoint RUN/checkpoints/sft --tasks 40 \
        --out benchmarks/results/bfcl_agreement.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import types

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import load_model
from agentic_rl.rewards.bfcl import CHECKER_MODEL, checker_module
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.config import load_config


def bfcl_runner():
    """bfcl-eval's eval_runner and its Qwen FC handler, with the stand-in model_config the env's
    checker uses (the runner imports it for the handlers' table only)."""
    checker_module()  # the checker first: it holds the stand-in's one entry
    stand_in = types.ModuleType("bfcl_eval.constants.model_config")
    stand_in.MODEL_CONFIG_MAPPING = {CHECKER_MODEL: types.SimpleNamespace(underscore_to_dot=False)}
    sys.modules.setdefault("bfcl_eval.constants.model_config", stand_in)
    from bfcl_eval.eval_checker import eval_runner
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

    return eval_runner, QwenFCHandler("Qwen/Qwen3-8B", 0.0, CHECKER_MODEL, True)


def bfcl_verdict(runner, handler, task, text: str) -> bool:
    from bfcl_eval.constants.enums import Language, ReturnFormat

    entry = {"id": task.meta["bfcl_id"], "question": [task.meta["messages"]], "function": task.meta["functions"]}
    name, category = CHECKER_MODEL.replace("/", "_"), task.meta["category"]
    if task.answer is None:
        return runner._evaluate_single_relevance_entry(handler, entry["id"], text, entry, name, category)["valid"]
    return runner._evaluate_single_ast_entry(handler, entry["id"], text, task.answer, entry, name, category,
                                             Language.PYTHON, ReturnFormat.PYTHON, False)["valid"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="recipes/bfcl.yaml")
    p.add_argument("--checkpoint", default="smollm2")
    p.add_argument("--tasks", type=int, default=100, help="tasks per held-out split")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=20, help="episodes decoded together")
    p.add_argument("--out", default="")
    args = p.parse_args()
    cfg = load_config(args.recipe, [])
    spec = get_env(cfg.env.name)
    tasks = [t for s in ("heldout_in", "heldout_out") for t in spec.tasks(s, args.tasks, 7)]
    model, tok = load_model(args.checkpoint)
    fmt = spec.make_env({}).format
    params = SamplingParams(temperature=args.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                            stop_strings=fmt.stop_strings)
    budget = Budget(cfg.rollout.max_turns, cfg.rollout.max_new_tokens, cfg.rollout.max_episode_tokens)
    engine, groups = HFEngine(model, tok, cfg.model.precision), []
    for i in range(0, len(tasks), args.batch):  # a batch of episodes at a time: long prompts, bounded memory
        groups += rollout(engine, lambda: spec.make_env({}), tasks[i : i + args.batch], 1, params, budget, seed=i)[0]
    runner, handler = bfcl_runner()
    reward, rows = spec.make_reward({}), []
    for g in groups:
        traj = g.trajectories[0]
        text = "".join(t.action_text.removesuffix(fmt.end_of_turn) for t in traj.turns)
        ours = reward(traj.task, traj).details["correct"] == 1.0
        rows.append({"id": traj.task.meta["bfcl_id"], "category": traj.task.meta["category"], "ours": ours,
                     "bfcl": bool(bfcl_verdict(runner, handler, traj.task, text)), "text": text})
    agree = sum(r["ours"] == r["bfcl"] for r in rows)
    table = collections.Counter((r["ours"], r["bfcl"]) for r in rows)
    summary = {"checkpoint": args.checkpoint, "temperature": args.temperature, "episodes": len(rows),
               "agree": agree, "agreement": agree / len(rows),
               "ours_right_bfcl_wrong": table[(True, False)], "ours_wrong_bfcl_right": table[(False, True)],
               "both_right": table[(True, True)], "both_wrong": table[(False, False)]}
    print(json.dumps(summary, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**summary, "disagreements": [r for r in rows if r["ours"] != r["bfcl"]]}, f, indent=1)


if __name__ == "__main__":
    main()
