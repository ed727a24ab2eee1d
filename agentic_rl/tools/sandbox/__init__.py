"""Model-written code runs here: bubblewrap isolation, rlimits, timeouts, capped output.

`run_python(code, config)` runs a program once; `PythonSession(config)` keeps variables between cells
of one episode. `agentic-rl sandbox FILE.py` runs a file exactly as the agent's code runs.
"""

from agentic_rl.tools.sandbox.runner import ExecResult, SandboxConfig, SandboxUnavailable, run_python
from agentic_rl.tools.sandbox.session import PythonSession

__all__ = ["ExecResult", "PythonSession", "SandboxConfig", "SandboxUnavailable", "run_python"]
