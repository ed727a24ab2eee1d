"""`versioned_agent.run` that also leaves, for each episode, the process it ran in and the versions its
replies were sampled by, as `{OUT}/{episode id}.json`: a test reads there what ran on Ray workers."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from tests.trainer import versioned_agent

OUT = Path(tempfile.gettempdir()) / "agentic-rl-worker-agent"


def run(task: dict, base_url: str) -> None:
    versioned_agent.run(task, base_url)
    eid = versioned_agent._episode(base_url)
    OUT.mkdir(exist_ok=True)
    (OUT / f"{eid}.json").write_text(json.dumps({"pid": os.getpid(), "versions": versioned_agent.VERSIONS[eid]}))
