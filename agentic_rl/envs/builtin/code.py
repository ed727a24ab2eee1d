"""Code with unit tests: complete a Python function so its hidden tests pass (docs/envs/code.md).

The prompt is a signature and docstring (HumanEval's shape). Tools: `run_python` (a program in the
sandbox; what it printed) and `run_tests` (the function against its docstring's examples, in the
sandbox; which pass and which fail), so the agent can revise after a failure. The final answer is
the function in a ```python``` block. Reward: the verifier ladder over the hidden tests — syntax,
then the first three asserts in a warm sandbox, then the whole suite in a fresh one — so a candidate
that fails cheaply never pays for the dear tier; the format term (a code block, calls that ran) is
gated. Every execution of model code is in the bubblewrap sandbox, never the package's own executor.

Options: `format` (hermes), `format_weight` (0.1), `timeout_s` (5: a tool's program), `fewshot`,
`ladder_budget` (the ladder's declared cost a step may spend, in rough seconds; 0 = no limit: a
candidate past it is not verified and scores 0, counted in `ladder/over_budget`). Each RL step logs
the ladder's `ladder/...` figures: per tier its calls, pass rate and time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentic_rl.data import code_tasks as data
from agentic_rl.envs.base import ToolEnv
from agentic_rl.envs.builtin.retool import interpreter_text
from agentic_rl.envs.formats import call_action, get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.rewards.base import Score
from agentic_rl.rewards.code_tiers import ExamplesCheck, code_tiers, example_asserts, program
from agentic_rl.rewards.ladder import VerifierLadder
from agentic_rl.rewards.rubric import GatedOutcome
from agentic_rl.rewards.verifiers import final_code
from agentic_rl.types import Task, Trajectory

SYSTEM_PROMPT = (
    "You write Python functions. Complete the function you are given. You can run code with run_python "
    "and check your function against its examples with run_tests; fix it if a test fails. Give the final, "
    "complete function in one ```python code block."
)
OPTIONS = ("format", "format_weight", "timeout_s", "ladder_budget")


class CodeEnv(ToolEnv):
    def __init__(self, options: Mapping[str, Any]):
        from agentic_rl.tools.sandbox import SandboxConfig

        self.sandbox = SandboxConfig(timeout_s=float(options.get("timeout_s", 5.0)))
        fewshot = fewshot_messages() if options.get("fewshot") else ()
        super().__init__([self.run_python, self.run_tests], SYSTEM_PROMPT, fewshot=fewshot,
                         format=get_format(options.get("format", "hermes")), timeout_s=self.sandbox.timeout_s + 10)

    def reset(self, task: Task) -> list[dict]:
        messages = super().reset(task)  # the signature and docstring, fenced, are the user turn
        return [*messages[:-1], {"role": "user", "content": user_turn(task)}]

    def run_python(self, code: str) -> str:
        """Run a Python program in a sandbox; returns what it printed (and the error, if it failed).

        Args:
            code: the program.
        """
        from agentic_rl.tools.sandbox import run_python

        return interpreter_text(run_python(code, self.sandbox))

    def run_tests(self, code: str) -> str:
        """Run your function against the examples in its docstring; says which pass and which fail.

        Args:
            code: the complete function.
        """
        from agentic_rl.tools.sandbox import run_python

        task = self.task
        asserts = example_asserts(task.meta["test"], 3, task.meta["entry_point"])
        lines = "".join(f"try:\n    {a}\n    print('PASS', {a!r})\nexcept Exception as e:\n"
                        f"    print('FAIL', {a!r}, type(e).__name__, e)\n" for a in asserts)
        result = run_python(f"{program(task, code)}\n{lines}", self.sandbox)
        return interpreter_text(result)


def user_turn(task: Task) -> str:
    return f"Complete this function:\n```python\n{task.meta['prompt']}```"


@dataclass(frozen=True)
class CodeFormat:
    """Well formed: the final action holds a code block (or <code>), and every tool call ran."""

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        return Score(float(final_code(trajectory) is not None and trajectory.num_tool_errors == 0
                           and trajectory.terminated))


def make_reward(options: Mapping[str, Any]) -> GatedOutcome:
    budget = float(options.get("ladder_budget", 0.0))
    ladder = VerifierLadder(code_tiers(ExamplesCheck()), extract=final_code, budget_per_step=budget or None)
    return GatedOutcome(ladder, float(options.get("format_weight", 0.1)), CodeFormat())


def demonstration(task: Task, env: CodeEnv) -> list[dict]:
    """The canonical solution: tried with run_tests (the sandbox's real output), then given."""
    env.task = task
    code = task.meta["prompt"] + task.answer
    call = {"type": "function", "function": {"name": "run_tests", "arguments": {"code": code}}}
    return [{"role": "assistant", "content": "Let me write the function and run its examples.", "tool_calls": [call]},
            {"role": "tool", "name": "run_tests", "content": env.run_tests(code)},
            {"role": "assistant", "content": f"The examples pass.\n```python\n{code}```"}]


def fewshot_messages() -> tuple[dict, ...]:
    """One worked example from the training pool (the prompt-engineering baseline)."""
    task = data.make_tasks(1, 777, "train")[0]
    return ({"role": "user", "content": user_turn(task)}, *demonstration(task, CodeEnv({})))


def hostile_actions(task: Task, env: CodeEnv) -> list[str]:
    """Code that loops, forks, fills memory or writes outside: each ends in the sandbox's error."""
    def call(name: str, code: str) -> str:
        return call_action(env.format, name, code=code)
    return [call("run_python", "while True:\n    pass"),
            call("run_python", "import os\nfor _ in range(500):\n    os.fork()"),
            call("run_python", "x = bytearray(10 ** 10)"),
            call("run_python", "open('/etc/agentic_escape', 'w').write('x')"),
            call("run_tests", f"def {task.meta['entry_point']}(*a):\n    while True:\n        pass")]


SPEC = EnvSpec(name="code", make_env=CodeEnv, make_reward=make_reward,
               tasks=lambda split, n, seed: data.make_tasks(n, seed, split), splits=data.SPLITS,
               demonstration=demonstration, options=OPTIONS, hostile_actions=hostile_actions)
SPECS = (SPEC,)
