"""Tools an agent can call, and the schema machinery that describes them to the model.

Standard library only: these modules are imported inside sandboxed tool workers that have no model.
"""

from __future__ import annotations

from agentic_rl.tools.calculator import calculator, safe_eval
from agentic_rl.tools.schema import function_schema, validate_arguments

__all__ = ["calculator", "function_schema", "safe_eval", "validate_arguments"]
