"""A smolagents CodeAgent, written as smolagents' own docs write one over an OpenAI-compatible
server; only the model's `api_base` points at the recording proxy, and the agent's code runs in
agentic-rl's sandbox instead of smolagents' in-process interpreter.

Trained with `rollout.agent.program: examples/smolagents_code_agent.py:run` on a calculator env
(docs/proxy.md, Harnesses). The agent writes Python, the executor runs each code action as a cell
of one sandboxed interpreter (`PythonSession`: bubblewrap, no network, rlimits; its variables
live from one action to the next), and `final_answer(x)` ends the run. `run(task, base_url)`
returns 1.0 when the final answer is the task's number, else 0.0.

The executor is the one smolagents lets an agent bring (`CodeAgent(executor=...)`, a
`PythonExecutor`). Only `final_answer` is defined in the sandbox: a tool that has to run on the
host (a web search) would need a call back out of it, which this executor does not make.
"""

from __future__ import annotations

import json
import re

from smolagents import CodeAgent, LogLevel, OpenAIServerModel
from smolagents.local_python_executor import CodeOutput, PythonExecutor
from smolagents.utils import AgentError, AgentGenerationError

from agentic_rl.tools.sandbox import PythonSession, SandboxConfig

MAX_STEPS = 4
_MARK = "\x00final_answer\x00"  # printed by the sandbox's final_answer, never by the agent's own prints
_PRELUDE = f"""
class _FinalAnswer(BaseException):
    pass

def final_answer(answer):
    raise _FinalAnswer(answer)

def _action(code):
    try:
        exec(compile(code, "<code>", "exec"), globals())
    except _FinalAnswer as e:
        print({_MARK!r} + repr(e.args[0]), end="")
"""


class SandboxExecutor(PythonExecutor):
    """smolagents' executor protocol over one `PythonSession`: each code action a cell."""

    def __init__(self, config: SandboxConfig | None = None):
        self.session = PythonSession(config or SandboxConfig(timeout_s=10.0))

    def send_tools(self, tools: dict) -> None:
        self._cell(_PRELUDE)  # final_answer only: the other tools' code would run on the host

    def send_variables(self, variables: dict) -> None:
        if variables:
            self._cell(f"import json as _json\nglobals().update(_json.loads({json.dumps(variables)!r}))")

    def __call__(self, code_action: str) -> CodeOutput:
        logs = self._cell(f"_action({code_action!r})")
        logs, final, answer = logs.partition(_MARK)
        return CodeOutput(output=answer if final else None, logs=logs, is_final_answer=bool(final))

    def _cell(self, code: str) -> str:
        """The cell's stdout; its error (with the stdout before it) raised for the agent to read."""
        result = self.session.run(code)
        if result.exit_code != 0 or result.killed_by:
            raise AgentError(f"{result.stdout}{result.stderr}".strip() or f"killed by {result.killed_by}", None)
        return result.stdout

    def cleanup(self) -> None:
        self.session.close()


def run(task: dict, base_url: str) -> float:
    model = OpenAIServerModel(model_id="policy", api_base=base_url, api_key="unused", client_kwargs={"max_retries": 0},
                              flatten_messages_as_text=True)  # content as a string: the server takes no content parts
    # quiet: a step's episodes run at once, and their consoles would interleave
    with CodeAgent(tools=[], model=model, executor=SandboxExecutor(), max_steps=MAX_STEPS,
                   verbosity_level=LogLevel.OFF) as agent:
        try:
            answer = agent.run(task["prompt"])
        except AgentGenerationError:  # the model could not answer (the proxy refused a call past the budget)
            return 0.0
    return float(_number(answer) == _number(task["answer"]))


def _number(value) -> float | None:
    m = re.search(r"-?\d[\d,]*\.?\d*", str(value))
    return round(float(m.group().replace(",", "")), 6) if m else None
