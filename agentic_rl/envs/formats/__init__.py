"""Tool-call protocols, by name: how messages become text, where generation stops, how calls parse.

  hermes     ChatML with <tool_call>{json}</tool_call> and <tool_response> turns (the main job)
  openai     OpenAI function-calling messages rendered by a Jinja chat template (default: ours)
  openai_reasoning  the same with a Qwen3-style reasoning block; the template rewrites history, and
             each rewrite starts a new context (`history: template`)
  qwen2_5, qwen3, llama3_json, mistral, gemma3  each family's own template and call syntax (`families.py`)
  search_r1  <search>query</search> -> <information>...</information> inside the assistant turn
  retool     <code>python</code> -> <interpreter>...</interpreter> inside the assistant turn

Third parties add theirs with `register_format` or the `agentic_rl.formats` entry-point group.
"""

from __future__ import annotations

from importlib import metadata

from agentic_rl.envs.formats.base import IM_END, IM_START, ParsedAction, ToolFormat
from agentic_rl.envs.formats.chat_template import ChatTemplateFormat
from agentic_rl.envs.formats.families import GEMMA3, LLAMA3_JSON, MISTRAL, QWEN2_5, QWEN3
from agentic_rl.envs.formats.hermes import HERMES, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, HermesFormat
from agentic_rl.envs.formats.tags import RETOOL, SEARCH_R1, TagAction, TagFormat
from agentic_rl.models.chat_template import REASONING_CHATML_TEMPLATE, TOOL_CHATML_TEMPLATE
from agentic_rl.registry import Registry

FORMATS: Registry = Registry("tool-call format")


def register_format(fmt: ToolFormat) -> ToolFormat:
    return FORMATS.register(fmt.name)(fmt)


def get_format(name: str) -> ToolFormat:
    """A registered format; installed packages' `agentic_rl.formats` entry points are loaded on a miss."""
    if name not in FORMATS:
        for ep in metadata.entry_points(group="agentic_rl.formats"):
            if ep.name == name:
                register_format(ep.load())
    return FORMATS.get(name)


def format_of_template(template: str | None) -> ToolFormat:
    """The format a chat template speaks: the registered format rendered by exactly this template (a
    checkpoint saves its format's: `trainer.loop.speak_the_format`; a hermes run's is `openai`'s, which
    renders what hermes renders), else the model's own template with hermes `<tool_call>` calls and
    the arguments as mappings, as Hugging Face templates index into them."""
    by_template = {getattr(FORMATS[name], "template", None): FORMATS[name] for name in FORMATS}
    if template in by_template:
        return by_template[template]
    return ChatTemplateFormat(template or TOOL_CHATML_TEMPLATE, "own", json_arguments=False)


def bos_text(fmt: ToolFormat, tokenizer) -> str:
    """What goes in front of a prompt `fmt` renders so the model reads it from its first token as the
    family's template and tokenizer produce it (`apply_chat_template`): the tokenizer's BOS where the
    format's template opens with one (`opens_with_bos`: Llama 3, Mistral, Gemma), else nothing
    (ChatML, hermes, the tag protocols). Encoded without special tokens, the BOS text is the BOS id."""
    return (tokenizer.bos_token or "") if getattr(fmt, "opens_with_bos", False) else ""


def call_action(fmt: ToolFormat, name: str, **arguments) -> str:
    """The text of an action that calls tool `name` with `arguments`, as `fmt` writes it (a scripted
    policy's action: hostile actions, replayed demonstrations)."""
    message = {"role": "assistant", "content": "",
               "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}
    return fmt.render_assistant_body(message)


OPENAI_REASONING = ChatTemplateFormat(REASONING_CHATML_TEMPLATE, "openai_reasoning", history="template")
for _fmt in (HERMES, ChatTemplateFormat(), OPENAI_REASONING, QWEN2_5, QWEN3, LLAMA3_JSON, MISTRAL, GEMMA3, SEARCH_R1, RETOOL):
    register_format(_fmt)

__all__ = [
    "FORMATS", "GEMMA3", "HERMES", "IM_END", "IM_START", "LLAMA3_JSON", "MISTRAL", "OPENAI_REASONING", "QWEN2_5", "QWEN3", "RETOOL", "SEARCH_R1", "TOOL_CALL_CLOSE", "TOOL_CALL_OPEN",
    "ChatTemplateFormat", "HermesFormat", "ParsedAction", "TagAction", "TagFormat", "ToolFormat",
    "bos_text", "call_action", "format_of_template", "get_format", "register_format",
]
