"""The behaviour guard: fixed runs whose outputs a refactor must leave exactly as they were.

Each case is a recipe with overrides, run in fp32 on one thread at a fixed seed. What it leaves is
reduced to what training decided — `metrics.jsonl`, `trajectories/*.jsonl`, `eval.json` without
their timing and memory fields, keys sorted — plus a checksum of every weight tensor of the saved
models. `python -m tests.guard record [CASE ...]` writes the reference under `tests/guard/reference/`;
`tests/test_behaviour_guard.py` runs the cases again and compares file by file.

Each case runs in a fresh process whose float kernels are pinned (`PINNED`): one thread, and MKL's
code branch fixed (`MKL_CBWR`), since MKL otherwise picks its GEMM kernels by the CPU's vendor and
features — an Intel Xeon with AVX-512 and an AMD EPYC with AVX-512 sum a product in different
orders, under one `get_cpu_capability()`. A reference holds on machines that match the key recorded
beside it (`machine.json`: CPU vendor, torch's CPU capability, torch and MKL versions, the pinned
settings). A case keeps one reference per machine key, `reference/CASE/VENDOR_CAPABILITY/`, so the
guard holds on each kind of machine a reference was recorded on; elsewhere it skips and names the
fields that differ. A deliberate change of behaviour re-records every machine key it has.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import torch

from agentic_rl.monitor.metrics import MACHINE_PREFIXES

REFERENCE = Path(__file__).parent / "reference"
ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
# the environment every case runs in: what decides its bytes besides the code and the machine's key
PINNED = {"MKL_CBWR": "AVX2", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}

_QUIET = ["log.progress=false", "log.tensorboard=false"]
# the recorded cases forward padded (`rl.optim.pack=false`, as when they were recorded); tiny_packed
# guards the default padding-free layout
_TINY = ["model.precision=fp32", "model.threads=1", "rl.optim.pack=false", *_QUIET]
_TINY_PACKED = ["model.precision=fp32", "model.threads=1", *_QUIET]
_AGENT_REWARD = ["rollout.agent.program=tests/trainer/scored_agent.py:run", "sft.examples=0", "eval.baselines=false",
                 "eval.tasks_per_split=2", "rollout.max_episode_tokens=128",
                 "rollout.max_turns=4",  # the agent's 4 calls: within the budget
                 "rl.algorithm.clip_low=0.1", "rl.algorithm.clip_high=0.1", "rl.optim.minibatches=2", "rl.optim.epochs=2",
                 "rl.rollout_correction.mode=mis", "rl.rollout_correction.threshold=1.000001", "rollout.max_concurrent=1",
                 "rollout.agent.concurrency=1"]

# name -> (recipe, overrides). The tiny model never solves a task, so in-process its rewards are all 0
# and its policy-gradient term is empty: those variants turn on every other loss term (KL, entropy,
# value, hindsight NLL) and the minibatch / epoch machinery. tiny_agent_reward has reward spread: an
# agent program through the recording proxy rewards the parity of its first reply's token ids
# (`tests/trainer/scored_agent.py`), and its clip range and MIS band (1e-6: the fp32 sampler-trainer
# rounding gap) are narrow enough that tokens are clipped and masked; its agents run one at a time
# (rollout.agent.concurrency: concurrent agents' requests are batched as they arrive, and the batch's
# shape moves the float results). The calculator case is the real model with real reward spread.
CASES: dict[str, tuple[str, list[str]]] = {
    "tiny": ("tiny.yaml", _TINY),
    "tiny_kl_entropy": ("tiny.yaml", [*_TINY, "eval.baselines=false", "rl.steps=3", "rl.algorithm.kl_coef=0.05",
                                      "rl.algorithm.entropy_coef=0.01", "rl.optim.minibatches=2", "rl.optim.epochs=2",
                                      "rl.optim.schedule=cosine", "rl.optim.warmup_steps=1"]),
    "tiny_gae": ("tiny.yaml", [*_TINY, "eval.baselines=false", "rl.steps=3", "rl.algorithm.advantage=gae",
                               "rl.critic.kind=value_head", "rl.algorithm.kl_coef=0.05", "rl.algorithm.kl_mode=reward", "rl.algorithm.gamma=0.99",
                               "rl.algorithm.lam=0.95", "rl.algorithm.entropy_coef=0.01"]),
    "tiny_lora_opd": ("tiny.yaml", [*_TINY, "eval.baselines=false", "model.lora_rank=4", "rl.algorithm.kl_coef=0.05",
                                    "distill.teachers=[{teacher}]", "distill.loss=topk", "distill.topk=8"]),
    "tiny_hindsight": ("tiny.yaml", [*_TINY, "eval.baselines=false", "sft.examples=0",
                                     "hindsight.teacher=demonstration", "hindsight.coef=0.5",
                                     "rl.filters.dynamic_sampling=true", "rl.filters.max_refill_rounds=1",
                                     "rl.tasks.sampler=pass_rate"]),
    "tiny_agent_reward": ("tiny.yaml", [*_TINY, *_AGENT_REWARD]),
    # the default padding-free layout, with a KL term beside the clipped and masked policy gradient
    "tiny_packed": ("tiny.yaml", [*_TINY_PACKED, *_AGENT_REWARD, "rl.algorithm.kl_coef=0.05"]),
    # memory_check off: whether RL starts must not depend on what else the machine runs (the estimate is still logged)
    "calculator": ("calculator.yaml", ["model.precision=fp32", "model.threads=1", "rl.optim.pack=false", "model.memory_check=false", "rl.steps=2",
                                       "eval.tasks_per_split=8", "eval.batch_size=16",
                                       "log.trajectories_per_step=16", *_QUIET]),
}

# besides the machine's keys: the reward-hacking rates every RL step logs (`hacking/<name>`), which
# observe the episodes and decide nothing (a recipe's penalties act through `reward/<name>`, compared)
_VOLATILE_PREFIXES = (*MACHINE_PREFIXES, "hacking/")


def _stable(obj):
    """`obj` without the fields that measure the machine rather than the run."""
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items()
                if not (isinstance(k, str) and (k.startswith(_VOLATILE_PREFIXES) or k == "timing_s"))}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def _jsonl(path: Path) -> str:
    return "".join(json.dumps(_stable(json.loads(line)), sort_keys=True) + "\n"
                   for line in path.read_text().splitlines())


def weight_checksums(run_dir: Path) -> dict[str, str]:
    """sha256 of every tensor of each saved model, by checkpoint and tensor name."""
    from safetensors.torch import load_file

    out = {}
    for path in sorted((run_dir / "checkpoints").glob("*/model.safetensors")):
        tensors = load_file(path)
        for name in sorted(tensors):
            t = tensors[name].contiguous()
            out[f"{path.parent.name}/{name}"] = hashlib.sha256(t.view(torch.uint8).numpy().tobytes()
                                                              if t.numel() else b"").hexdigest()
    return out


def normalized(run_dir: Path) -> dict[str, str]:
    """File name -> the text the guard compares."""
    out = {"metrics.jsonl": _jsonl(run_dir / "metrics.jsonl")}
    for path in sorted((run_dir / "trajectories").glob("*.jsonl")):
        out[f"trajectories/{path.name}"] = _jsonl(path)
    if (run_dir / "eval.json").exists():
        out["eval.json"] = json.dumps(_stable(json.loads((run_dir / "eval.json").read_text())), indent=1,
                                      sort_keys=True) + "\n"
    out["weights.json"] = json.dumps(weight_checksums(run_dir), indent=1) + "\n"
    return out


def machine() -> dict[str, str]:
    """What decides a case's bytes besides the code: the CPU's vendor (MKL's kernel choice), torch's
    kernel set for it, the library versions, and the pinned settings."""
    mkl = re.search(r"Math Kernel Library Version (\S+)", torch.__config__.show())
    return {"cpu_vendor": _cpu_vendor(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch": torch.__version__, "mkl": mkl.group(1) if mkl else "none",
            **{k.lower(): v for k, v in PINNED.items()}}


def _cpu_vendor() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    found = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.M)
    return found.group(1) if found else "unknown"


def mismatch(name: str) -> str | None:
    """Why no reference of `name` holds here (the key fields that differ from each recorded one), or None."""
    here = machine()
    if reference_dir(name) is not None:
        return None
    recorded = recorded_machines(name) or [{}]
    bad = ["; ".join(f"{k} {r.get(k)!r} there, {here.get(k)!r} here" for k in sorted(here.keys() | r.keys())
                     if r.get(k) != here.get(k)) for r in recorded]
    return f"reference recorded on another machine key ({' | '.join(bad)})"


def run_pinned(name: str, out_dir: Path) -> dict[str, str]:
    """`run_case` in a fresh process with the `PINNED` environment; its normalized files."""
    env = {**os.environ, **PINNED, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "tests.guard", "run", name, "--out", str(out_dir)], cwd=ROOT, env=env,
                   check=True)
    return json.loads((out_dir.parent / f"{name}.normalized.json").read_text())


def run_case(name: str, out_dir: Path) -> dict[str, str]:
    """Runs one case into `out_dir` in this process and returns its normalized files."""
    from agentic_rl.trainer.config import load_config
    from agentic_rl.trainer.loop import train

    recipe, overrides = CASES[name]
    torch.set_num_threads(1)
    teacher = out_dir.parent / f"{name}-teacher"
    if any("{teacher}" in o for o in overrides):
        _save_teacher(teacher)
    train(load_config(RECIPES / recipe, [*(o.format(teacher=teacher) for o in overrides), f"output_dir={out_dir}"]))
    return normalized(out_dir)


def _save_teacher(where: Path) -> None:
    """A tiny random model of its own seed on the same tokenizer: an on-policy distillation teacher."""
    from agentic_rl.models.loader import load_tokenizer, tiny_model

    tokenizer = load_tokenizer("tiny")
    tiny_model(tokenizer, seed=7).save_pretrained(where)
    tokenizer.save_pretrained(where)


def machine_label(key: dict[str, str]) -> str:
    """The folder of a machine key's reference: its CPU vendor and torch's kernel set for it."""
    return f"{key['cpu_vendor']}_{key['cpu_capability']}"


def record(name: str, out_dir: Path) -> None:
    files = run_pinned(name, out_dir)
    where = REFERENCE / name / machine_label(machine())
    where.mkdir(parents=True, exist_ok=True)
    for old in where.rglob("*"):
        if old.is_file():
            old.unlink()
    for rel, text in {**files, "machine.json": json.dumps(machine(), indent=1) + "\n"}.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text)


def reference_dir(name: str) -> Path | None:
    """The folder of the reference of `name` recorded on this machine's key, or None."""
    here = machine()
    for path in sorted((REFERENCE / name).glob("*/machine.json")):
        if json.loads(path.read_text()) == here:
            return path.parent
    return None


def reference(name: str) -> dict[str, str]:
    where = reference_dir(name)
    if where is None:
        raise LookupError(f"{name}: {mismatch(name)}")
    return {str(p.relative_to(where)): p.read_text() for p in sorted(where.rglob("*"))
            if p.is_file() and p.name != "machine.json"}


def recorded_machines(name: str) -> list[dict[str, str]]:
    """The machine keys `name` has a reference for."""
    return [json.loads(p.read_text()) for p in sorted((REFERENCE / name).glob("*/machine.json"))]
