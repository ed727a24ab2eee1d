"""`rollout.engine: managed | URL`: the trainer's sampler behind a server.

A URL names a server the user runs (`agentic-rl serve`, or vLLM: docs/engines/vllm.md). `managed`
starts `agentic-rl serve` as a child process on a free local port with the policy's current
weights, waits until it answers `/health`, and stops it when the run ends (`close_engine`), so the
user's one command still does everything. Either way the trainer's weights are sent to the server
before the first rollout, so sampler and trainer start equal.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from agentic_rl.engines.served import EngineError, ServedEngine
from agentic_rl.models.checkpoint import save_checkpoint
from agentic_rl.models.device import device_of

START_S = 300.0  # a server that does not answer /health by then did not start


def served_engine(model, tokenizer, cfg) -> ServedEngine:
    """The served engine `cfg.rollout.engine` names, holding the trainer's weights."""
    ro = cfg.rollout
    weights = cfg.run_dir / "served"
    if ro.engine == "managed":
        path = save_checkpoint(model, tokenizer, weights / "policy")
        proc, url = start_server(path, cfg.model.precision, str(device_of(model)), weights / "server.log")
        engine = ServedEngine(url, tokenizer, model, ro.engine_timeout_s, weights_dir=str(weights))
        engine.process = proc
        return engine
    engine = ServedEngine(ro.engine, tokenizer, model, ro.engine_timeout_s, weights_dir=str(weights))
    engine.sync_weights()
    return engine


def start_server(checkpoint: Path, precision: str, device: str, log: Path) -> tuple[subprocess.Popen, str]:
    """`agentic-rl serve CHECKPOINT` on a free local port; (the process, its URL) once it answers."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen([sys.executable, "-m", "agentic_rl.cli", "serve", str(checkpoint), "--port",
                                 str(port), "--precision", precision, "--device", device], stdout=out,
                                stderr=subprocess.STDOUT)
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
        time.sleep(0.2)
    proc.kill()
    raise EngineError(f"the managed server did not answer /health within {START_S:.0f} s (log: {log})")


def close_engine(engine) -> None:
    """Stop a managed server (an engine of another kind has nothing to stop)."""
    proc = getattr(engine, "process", None)
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
