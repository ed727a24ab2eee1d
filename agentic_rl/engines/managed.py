"""`rollout.engine: managed | managed_vllm | URL`: the trainer's sampler behind a server.

A URL names a server the user runs (`agentic-rl serve`, or vLLM: docs/engines/vllm.md). `managed`
starts `agentic-rl serve`, and `managed_vllm` a vLLM OpenAI server (with the flags our contract
needs: processed logprobs, prefix caching, the development-mode weight endpoints, runtime LoRA for
`rollout.weight_update: vllm_lora`), as a child process on a free local port with the policy's
current weights; the run waits until it answers `/health` and stops it when the run ends
(`close_engine`), so the user's one command still does everything. Either way the trainer's
weights are sent to the server before the first rollout, so sampler and trainer start equal.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from agentic_rl.engines.served import EngineError, ServedEngine
from agentic_rl.models.checkpoint import save_checkpoint
from agentic_rl.models.device import device_of

START_S = 600.0  # a server that does not answer /health by then did not start (vLLM compiles first)


def served_engine(model, tokenizer, cfg, version: int = 0) -> ServedEngine:
    """The served engine `cfg.rollout.engine` names, holding the trainer's weights as `version` (the
    run's count of its syncs: a resumed run's goes on from its state)."""
    ro = cfg.rollout
    weights = cfg.run_dir / "served"
    if ro.engine in ("managed", "managed_vllm"):
        path = save_checkpoint(model, tokenizer, weights / "policy")
        if ro.engine == "managed":
            command = serve_command(path, cfg.model.precision, str(device_of(model)))
        else:
            command = vllm_command(path, cfg.model.precision, ro.vllm_python, ro.vllm_args,
                                   cfg.model.lora_rank if ro.weight_update == "vllm_lora" else 0)
        proc, url = start_server(command, weights / "server.log")
        engine = ServedEngine(url, tokenizer, model, ro.engine_timeout_s, weights_dir=str(weights),
                              weight_update=ro.weight_update, version=version, dtype=_dtype(cfg.model.precision))
        engine.process = proc
        if ro.engine == "managed_vllm":
            engine.send_weights()  # vLLM loads the weights it started from again (and a LoRA writer its adapter)
        return engine
    engine = ServedEngine(ro.engine, tokenizer, model, ro.engine_timeout_s, weights_dir=str(weights),
                          weight_update=ro.weight_update, version=version)
    engine.send_weights()
    return engine


def _dtype(precision: str):
    """The dtype a managed server computes in: the run's (the server is started with it)."""
    import torch

    return torch.float32 if precision == "fp32" else torch.bfloat16


def serve_command(checkpoint: Path, precision: str, device: str) -> list[str]:
    return [sys.executable, "-m", "agentic_rl.cli", "serve", str(checkpoint), "--precision", precision,
            "--device", device, "--port", "{port}"]


def vllm_command(checkpoint: Path, precision: str, python: str = "", extra: str = "", lora_rank: int = 0) -> list[str]:
    """vLLM's OpenAI server over `checkpoint`, as the served engine needs it (docs/engines/vllm.md).
    `extra` (rollout.vllm_args) goes last, so it can override a default (the memory fraction)."""
    command = [python or sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(checkpoint),
               "--port", "{port}", "--dtype", str(_dtype(precision)).removeprefix("torch."),
               "--logprobs-mode", "processed_logprobs", "--enable-prefix-caching",
               "--gpu-memory-utilization", "0.15", "--max-model-len", "4096"]
    if lora_rank:
        command += ["--enable-lora", "--max-lora-rank", str(lora_rank), "--max-loras", "1"]
    return command + shlex.split(extra)


VLLM_ENV = {"VLLM_SERVER_DEV_MODE": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}


def free_port() -> int:
    """A local TCP port free at the moment of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(command: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    """`command` (its "{port}" filled with a free local port) as a child; (the process, its URL) once
    it answers /health."""
    import httpx

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen([a.replace("{port}", str(port)) for a in command], stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, **VLLM_ENV})
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineError(f"the managed server exited with status {proc.returncode} before it answered: "
                              f"{log.read_text()[-800:]}")
        try:
            if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise EngineError(f"the managed server did not answer /health within {START_S:.0f} s (log: {log})")


def close_engine(engine) -> None:
    """Stop a managed server (an engine of another kind has nothing to stop)."""
    proc = getattr(engine, "process", None)
    if proc is not None:
        stop_server(proc)


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
