"""Agent programs for `rollout.agent.pool: process` (tests/rollout/test_agent_process.py), loaded by
file path in fresh worker processes: only the `openai` client, nothing of agentic-rl or the tests.
Each episode appends `pid task group` to `$AGENT_PIDS` before it calls the model; the first episode
(group 0) of task HANGS, RAISES, EXITS or KILLED does so when the file `$AGENT_FAILS` names it (its task and
group are read off its base URL, `-t{task}-g{group}`)."""

from __future__ import annotations

import os
import re
import signal
import time

import openai

HANGS, RAISES, EXITS, KILLED = 0, 1, 2, 3  # the task whose first episode (group 0) does each


def agent(task: dict, base_url: str) -> float:
    i, g = map(int, re.search(r"-t(\d+)-g(\d+)/v1$", base_url).groups())
    with open(os.environ["AGENT_PIDS"], "a") as f:
        f.write(f"{os.getpid()} {i} {g}\n")
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    client.chat.completions.create(model="policy", messages=[{"role": "user", "content": task["prompt"]}])
    fails = open(os.environ["AGENT_FAILS"]).read().split(",") if os.path.exists(os.environ["AGENT_FAILS"]) else ()
    if g == 0 and i == HANGS and "hangs" in fails:
        time.sleep(3600)  # a system call: only killing the process ends it
    if g == 0 and i == RAISES and "raises" in fails:
        raise RuntimeError("the agent died")
    if g == 0 and i == EXITS and "exits" in fails:
        os._exit(3)
    if g == 0 and i == KILLED and "killed" in fails:
        os.kill(os.getpid(), signal.SIGKILL)
    return 0.5
