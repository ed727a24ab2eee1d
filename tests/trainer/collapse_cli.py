"""The CLI with the collapse monitor warning at the RL steps named in `AGENTIC_RL_TEST_WARN_AT` (comma-separated),
and quiet at every other: a test that kills and resumes the real CLI rolls back at a step it
chooses (the tiny model's metrics never trip the real monitor). Run as
`python -m tests.trainer.collapse_cli train ...` from the repository root."""

from __future__ import annotations

import os
import sys

from agentic_rl import cli
from agentic_rl.monitor.collapse import CollapseMonitor

WARN_AT = {int(s) for s in os.environ.get("AGENTIC_RL_TEST_WARN_AT", "").split(",") if s}


def _update(self, indicators) -> dict | None:
    return {"event": "collapse_warning", "evidence": {}} if indicators.step in WARN_AT else None


CollapseMonitor.update = _update

if __name__ == "__main__":
    sys.exit(cli.main())
