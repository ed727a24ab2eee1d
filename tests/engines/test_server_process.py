"""A managed server's process beside its trainer (`engines/managed.py`): it dies with the trainer,
even a SIGKILLed one; one a killed run left behind is stopped at the next start; one that exits
while starting, or fails its first completion and exits as vLLM does, is reported with its log;
vLLM's command serves the model's whole context and the dtype the run started it with. The
"server" of the process tests is a few lines of Python's `http.server` answering every request
with 200 (`SERVER`, or a failing first completion: `FAILING`): the lifecycle is the same whatever
the command, and it starts in a fraction of a second.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from agentic_rl.engines.managed import (
    EngineError,
    max_model_len,
    start_server,
    stop_leftover,
    stop_server,
    vllm_command,
)
from agentic_rl.trainer.config import load_config

ROOT = Path(__file__).resolve().parents[2]
GONE_S = 10.0  # a SIGTERMed http.server exits in well under a second; ten leave room for a loaded machine

SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    do_POST = do_GET
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

# answers /health, then fails its first completion and exits, as vLLM's CPU build does on the tiny model
FAILING = """
import http.server, os, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def do_POST(self):
        print("RuntimeError: Unsupported CPU attention configuration: head_dim=16", flush=True)
        self.send_response(500); self.end_headers(); self.wfile.write(b'{"error": "EngineCore encountered an issue"}')
        self.wfile.flush()
        threading.Timer(0.2, os._exit, (1,)).start()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "served"
    site.mkdir(parents=True)
    return site


def _command(site: Path, script: str = SERVER) -> list[str]:
    return [sys.executable, "-c", script, "{port}", str(site)]  # the run folder on its command line, as a real one


def _alive(pid: int) -> bool:
    """Running (a zombie, exited and not yet reaped, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _orphan(command: list[str]) -> int:
    """`command` started in a session of its own by a process that then exits: its pid."""
    spawn = ("import subprocess, sys; print(subprocess.Popen(sys.argv[1:], start_new_session=True, "
             "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")
    return int(subprocess.run([sys.executable, "-c", spawn, *command], capture_output=True, text=True,
                              check=True).stdout)


TRAINER = """
import sys, time
from pathlib import Path
from agentic_rl.engines.managed import start_server
site = Path(sys.argv[1])
proc, url = start_server({command!r}, site / "server.log", site / "server.pid")
print(proc.pid, flush=True)
time.sleep(600)
"""


def test_a_sigkilled_trainer_takes_its_server_with_it(tmp_path):
    site = _site(tmp_path)
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER.format(command=_command(site)), str(site)], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        server = int(trainer.stdout.readline())
        assert _alive(server) and int((site / "server.pid").read_text()) == server
        trainer.send_signal(signal.SIGKILL)
        trainer.wait(timeout=30)
        assert _gone_within(server, GONE_S), "the managed server outlived its SIGKILLed trainer"
    finally:
        trainer.kill()
        trainer.wait()


def test_a_server_a_killed_run_left_is_stopped_at_the_next_start(tmp_path):
    """A server the parent-death signal did not reach (its trainer on another host's pid namespace,
    a run started before this one was written): the pid file names it, its command line names this
    run's folder, so the next start stops it. A pid file naming some other process stops nothing."""
    site = _site(tmp_path)
    left = _orphan([a.replace("{port}", "0") for a in _command(site)])  # no child of this process, as it would be
    (site / "server.pid").write_text(f"{left}\n")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        proc, _ = start_server(_command(site), site / "server.log", site / "server.pid")
        assert _gone_within(left, GONE_S)
        assert int((site / "server.pid").read_text()) == proc.pid
        stop_server(proc, site / "server.pid")
        assert not (site / "server.pid").exists() and not _alive(proc.pid)
        (site / "server.pid").write_text(f"{other.pid}\n")
        stop_leftover(site / "server.pid")
        assert other.poll() is None and not (site / "server.pid").exists()
    finally:
        if _alive(left):
            os.kill(left, signal.SIGKILL)
        other.kill()
        other.wait()


def test_a_server_that_fails_its_first_completion_and_exits_says_why_and_where(tmp_path):
    site = _site(tmp_path)
    with pytest.raises(EngineError) as e:
        start_server(_command(site, FAILING), site / "server.log", site / "server.pid")
    message = str(e.value)
    assert "failed its first completion (status 500" in message and "exited with status 1" in message
    assert "head_dim=16" in message and str(site / "server.log") in message
    assert not (site / "server.pid").exists()


def test_a_server_that_exits_while_starting_says_why_and_where(tmp_path):
    log = tmp_path / "served" / "server.log"
    crash = [sys.executable, "-c", "import sys; print('ValueError: head size 16 is not supported'); sys.exit(3)"]
    with pytest.raises(EngineError) as e:
        start_server(crash, log, tmp_path / "served" / "server.pid")
    assert "status 3" in str(e.value) and "head size 16 is not supported" in str(e.value) and str(log) in str(e.value)
    assert not (tmp_path / "served" / "server.pid").exists()


def test_vllm_serves_the_models_context_and_refuses_a_recipe_past_it(tiny):
    ro = load_config("recipes/tiny.yaml").rollout
    context = tiny.config.max_position_embeddings
    assert max_model_len(tiny, ro, prompt=300) == context
    command = vllm_command(Path("ckpt"), "fp32", max_len=context)
    assert command[command.index("--max-model-len") + 1] == str(context)
    assert command[command.index("--dtype") + 1] == "float32"
    long = load_config("recipes/tiny.yaml", [f"rollout.max_episode_tokens={context}"]).rollout
    with pytest.raises(ValueError, match=f"past the model's context of {context}"):
        max_model_len(tiny, long, prompt=300)


def test_a_server_that_says_no_dtype_computes_in_the_one_it_was_started_with(tokenizer):
    from fastapi import FastAPI

    from agentic_rl.engines.probe import SyncProbe
    from agentic_rl.engines.served import ServedEngine
    from tests.engines.test_served import Server

    app = FastAPI()
    app.get("/health")(lambda: {})  # as vLLM's: an empty 200
    server = Server(app)
    try:
        fp32 = ServedEngine(server.url, tokenizer, dtype=torch.float32)
        assert fp32.dtype == torch.float32 and SyncProbe.build(fp32, tokenizer, "fp32").tolerance == 1e-3
        assert ServedEngine(server.url, tokenizer).dtype == torch.bfloat16  # a URL's server, which says nothing
    finally:
        server.stop()
