"""Did a tool produce this value? The test behind hindsight's `grounded` corrections and the
`milestones` process reward.

A value counts as produced by a tool when it appears, as a whole value, in an observation whose
call did not already contain it: copying a known number into an answer, or asking a calculator to
echo it, proves nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agentic_rl.types import Turn


def grounded(value, turns: Sequence[Turn]) -> bool:
    """`value` appears in the observation of one of `turns` whose action did not contain it."""
    text = str(value).strip()
    if not text:
        return False
    pattern = value_pattern(text)
    return any(pattern.search(t.observation) and not pattern.search(t.action_text) for t in turns)


def value_pattern(text: str) -> re.Pattern:
    """`text` as a whole value: 7 matches "7" and "7.0", not "17", "7.5" or "x7"."""
    zeros = r"(\.0+)?" if re.fullmatch(r"-?\d+", text) else ""
    return re.compile(rf"(?<![\w.]){re.escape(text)}{zeros}(?![\w]|\.\d)")
