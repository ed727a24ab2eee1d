"""ReTool: math problems solved by writing Python that runs in the sandbox (ReTool, Feng et al. 2025).

The policy writes `<code>...</code>`; generation stops there; the program runs in a bubblewrap
sandbox that keeps its variables for the rest of the episode; what it printed comes back inside
`<interpreter>...</interpreter>` in the same assistant turn (masked: never trained on).

Options (a recipe's `env.options`):
  timeout_s      wall-clock limit per code cell (default 5)
  memory_mb      address-space limit of the sandboxed interpreter (default 512)
  format_weight  the gated format term of the reward (default 0.1)
  fewshot        prepend two worked examples as real chat turns (the prompt-engineering baseline)
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from agentic_rl.data import retool as data
from agentic_rl.envs.base import ToolEnv
from agentic_rl.envs.formats import RETOOL
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.rewards.math import MathAnswerReward

SYSTEM_PROMPT = (
    "You are a careful math assistant. Solve the problem by writing Python code; do not compute in "
    "your head. Print the values you need."
)
_FENCE = re.compile(r"^```(?:python|py)?\s*\n(.*?)\n?```$", re.DOTALL)


class RetoolEnv(ToolEnv):
    """One episode: one stateful sandboxed interpreter, started on the first code cell."""

    def __init__(self, options: Mapping[str, Any]):
        from agentic_rl.tools.sandbox import SandboxConfig

        self.sandbox = SandboxConfig(timeout_s=float(options.get("timeout_s", 5.0)),
                                     memory_mb=int(options.get("memory_mb", 512)))
        self._session = None
        super().__init__([self.python], SYSTEM_PROMPT, fewshot=fewshot_messages() if options.get("fewshot") else (),
                         format=RETOOL, timeout_s=self.sandbox.timeout_s + 10)

    def python(self, code: str) -> str:
        """Run Python code in a sandbox that keeps variables between calls; returns what it printed.

        Args:
            code: the Python program to run.
        """
        from agentic_rl.tools.sandbox import PythonSession

        if self._session is None:
            self._session = PythonSession(self.sandbox)
        match = _FENCE.match(code.strip())
        return interpreter_text(self._session.run(match.group(1) if match else code))

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def interpreter_text(result) -> str:
    """What the model reads: the program's output, and on failure the error's last lines (the
    traceback's tail says what went wrong; its head is sandbox plumbing)."""
    out = result.stdout.rstrip("\n")
    if result.timed_out:
        return f"{out}\nError: the code ran longer than its time limit and was stopped".strip()
    if result.exit_code != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-3:]) or f"exit code {result.exit_code}"
        return f"{out}\nError: {tail}".strip()
    return out if out else "(no output: print() the values you need)"


@functools.lru_cache(maxsize=1)
def fewshot_messages() -> tuple[dict, ...]:
    """Two worked examples (an expression and an equation search), run once in the real sandbox."""
    env = RetoolEnv({})
    try:
        tasks = data.make_tasks(20, 777, "train")
        picks = [next(t for t in tasks if t.meta["family"] == f) for f in ("basic_arithmetic", "simple_equations")]
        return tuple(m for t in picks for m in [{"role": "user", "content": t.prompt}, *data.demonstration(t, env.python)])
    finally:
        env.close()


def demonstration(task, env: RetoolEnv) -> list[dict]:
    """A worked solution whose interpreter output is the real sandbox's."""
    return data.demonstration(task, env.python)


SPEC = EnvSpec(
    name="retool",
    make_env=RetoolEnv,
    make_reward=lambda options: MathAnswerReward(float(options.get("format_weight", 0.1))),
    tasks=lambda split, n, seed: data.make_tasks(n, seed, split),
    splits=data.SPLITS,
    options=("timeout_s", "memory_mb", "format_weight"),
    demonstration=demonstration,
)
SPECS = (SPEC,)
