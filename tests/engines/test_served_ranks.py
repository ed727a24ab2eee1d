"""Data-parallel ranks share one served engine (`engines/managed.py::served_engine`): rank 0 owns it —
writes the weights under the run folder and has the server load them, once a sync — and the other
ranks wait for it and sample the same server. Two real gloo processes against our server in a
thread of this process; (slow) the tiny recipe under `torchrun --nproc-per-node 2` with a managed
server.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.server import create_app
from tests.engines.test_served import Server

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 180  # two processes importing torch and syncing twice take ~15 s on the shared machine

RANK = """
import json, sys
from agentic_rl.engines.managed import served_engine
from agentic_rl.models.loader import load_tokenizer, tiny_model
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.distributed import init_world
world = init_world("cpu")
tokenizer = load_tokenizer("tiny")
cfg = load_config("recipes/tiny.yaml", [f"rollout.engine.name={sys.argv[1]}", f"output_dir={sys.argv[2]}"])
engine = served_engine(tiny_model(tokenizer, seed=0), tokenizer, cfg, 0, world)
versions = [engine.sync_weights() for _ in range(2)]
print(json.dumps({"rank": world.rank, "owner": engine.owner, "versions": versions, "url": engine.url}))
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_share_one_server_which_rank_0_alone_writes_to(tiny, tokenizer, tmp_path):
    server = Server(create_app(HFEngine(copy.deepcopy(tiny), tokenizer, "fp32"), tokenizer))
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_port()),
               "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}
        ranks = [subprocess.Popen([sys.executable, "-c", RANK, server.url, str(tmp_path / "run")], cwd=ROOT,
                                  env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for r in range(2)]
        outs = [p.communicate(timeout=HANG_S) for p in ranks]
        assert all(p.returncode == 0 for p in ranks), [err[-2000:] for _, err in outs]
        said = sorted((json.loads(out.splitlines()[-1]) for out, _ in outs), key=lambda d: d["rank"])
        assert [d["owner"] for d in said] == [True, False] and {d["url"] for d in said} == {server.url}
        assert [d["versions"] for d in said] == [[1, 2], [1, 2]]
        # the server loaded the start's weights and two syncs' once each: one rank wrote them
        assert httpx_get(server.url + "/health")["version"] == 3
        assert (tmp_path / "run" / "served" / "policy" / "config.json").exists()
    finally:
        server.stop()


def httpx_get(url: str) -> dict:
    import httpx

    return httpx.get(url, timeout=30).json()


@pytest.mark.slow
def test_the_tiny_recipe_under_two_processes_starts_one_managed_server(tmp_path):
    """torchrun, 2 gloo processes, rollout.engine.name: managed: one server started (one pid, one log),
    every RL step logged once with both ranks' groups and a probe gap within fp32's tolerance."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "agentic_rl.cli",
           "train", "recipes/tiny.yaml", "--set", "rollout.engine.name=managed", "--set", "eval.baselines=false",
           "--set", "eval.tasks_per_split=2", "--set", "sft.examples=4", "--set", "model.memory_check=false", "--set", f"output_dir={out}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (out / "served" / "server.log").read_text()
    assert log.count("Loading weights: 100%") == 1, log[-2000:]  # each server start loads the checkpoint once
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in rows if r.get("stage") == "rl" and "weight_version" in r]
    assert [r["step"] for r in rl] == [1, 2] and all(r["groups_sampled"] == 2 for r in rl)
    assert all(r["sync_probe_gap"] < 1e-3 for r in rl) and [r["weight_version"] for r in rl] == [2, 3]
    assert not (out / "served" / "server.pid").exists()  # stopped at the end
