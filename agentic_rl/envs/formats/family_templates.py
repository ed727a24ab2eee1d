"""Chat templates in the published tool-calling formats of Llama 3.1+, Mistral (v3 tokenizer) and
Gemma 3, written for this project from each family's documented layout (what the text looks like),
for tokenizers that do not ship one and for the tests. Each renders an assistant message exactly as
the policy writes it (content untrimmed, calls in the family's syntax), so it is prefix-preserving:
`ChatTemplateFormat` cuts actions and glue out of its full renders. Where a family's own template
differs, docs/envs/README.md says how ("what does not map").

`bos_token` is rendered when the caller passes one (Hugging Face's `apply_chat_template` does); the
rollout encodes text without special tokens, so a real tokenizer's BOS comes from the template.
"""

from __future__ import annotations

# Llama 3.1+: JSON tool calls answered by an `ipython` turn, every turn closed by <|eot_id|>; the
# tool list goes into the first user message, as Meta's template does by default.
LLAMA3_JSON_TEMPLATE = r"""
{%- set ns = namespace(system='', start=0, tools_done=false) -%}
{%- if messages and messages[0]['role'] == 'system' -%}{%- set ns.system = messages[0]['content'] | trim -%}{%- set ns.start = 1 -%}{%- endif -%}
{{- bos_token if bos_token is defined else '' -}}
{{- '<|start_header_id|>system<|end_header_id|>\n\n' -}}
{%- if tools -%}{{- 'Environment: ipython\n' -}}{%- endif -%}
{{- 'Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n' + ns.system + '<|eot_id|>' -}}
{%- for message in messages[ns.start:] -%}
{%- if message['role'] == 'assistant' -%}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' + (message['content'] or '') -}}
{%- for call in (message['tool_calls'] or []) -%}
{%- set fn = call['function'] if call['function'] is defined else call -%}
{{- ('; ' if not loop.first else '') + '{"name": "' + fn['name'] + '", "parameters": ' + (fn['arguments'] if fn['arguments'] is string else (fn['arguments'] | tojson)) + '}' -}}
{%- endfor -%}
{{- '<|eot_id|>' -}}
{%- elif message['role'] == 'tool' -%}
{{- '<|start_header_id|>ipython<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' -}}
{%- else -%}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' -}}
{%- if tools and message['role'] == 'user' and not ns.tools_done -%}
{%- set ns.tools_done = true -%}
{{- 'Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n' -}}
{{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' -}}
{%- for tool in tools -%}{{- (tool | tojson(indent=4)) + '\n\n' -}}{%- endfor -%}
{%- endif -%}
{{- (message['content'] | trim) + '<|eot_id|>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}
"""

# Mistral (v3 tokenizer, Mistral-7B-Instruct-v0.3 and the models that share its control tokens):
# [AVAILABLE_TOOLS] before the first user message, [INST] user turns with the system prompt in
# front of the first, [TOOL_CALLS] JSON lists, [TOOL_RESULTS] JSON objects, </s> after each reply.
MISTRAL_TEMPLATE = r"""
{%- set ns = namespace(system='', start=0, first=true) -%}
{%- if messages and messages[0]['role'] == 'system' -%}{%- set ns.system = messages[0]['content'] -%}{%- set ns.start = 1 -%}{%- endif -%}
{{- bos_token if bos_token is defined else '' -}}
{%- for message in messages[ns.start:] -%}
{%- if message['role'] == 'user' -%}
{%- if ns.first and tools -%}
{{- '[AVAILABLE_TOOLS] [' -}}
{%- for tool in tools -%}{{- ('' if loop.first else ', ') + ({'type': 'function', 'function': tool['function'] if tool['function'] is defined else tool} | tojson) -}}{%- endfor -%}
{{- '][/AVAILABLE_TOOLS]' -}}
{%- endif -%}
{{- '[INST] ' + ((ns.system + '\n\n') if ns.first and ns.system else '') + message['content'] + '[/INST]' -}}
{%- set ns.first = false -%}
{%- elif message['role'] == 'assistant' -%}
{{- message['content'] or '' -}}
{%- if message['tool_calls'] -%}
{{- '[TOOL_CALLS] [' -}}
{%- for call in message['tool_calls'] -%}
{%- set fn = call['function'] if call['function'] is defined else call -%}
{{- ('' if loop.first else ', ') + '{"name": "' + fn['name'] + '", "arguments": ' + (fn['arguments'] if fn['arguments'] is string else (fn['arguments'] | tojson)) + '}' -}}
{%- endfor -%}
{{- ']' -}}
{%- endif -%}
{{- '</s>' -}}
{%- elif message['role'] == 'tool' -%}
{{- '[TOOL_RESULTS] ' + ({'content': message['content']} | tojson) + '[/TOOL_RESULTS]' -}}
{%- endif -%}
{%- endfor -%}
"""

# Gemma 3: `user` and `model` turns; the system prompt and the tool list open the first user turn;
# a call is a ```tool_code``` block of Python calls, its result a ```tool_output``` block in the
# next user turn.
GEMMA3_TEMPLATE = r"""
{%- set ns = namespace(prefix='', start=0, first=true) -%}
{%- if messages and messages[0]['role'] == 'system' -%}{%- set ns.prefix = messages[0]['content'] + '\n\n' -%}{%- set ns.start = 1 -%}{%- endif -%}
{%- if tools -%}
{%- set ns.prefix = ns.prefix + 'You can call functions. To call one, write a Python call in a tool_code block:\n```tool_code\nfunction_name(argument=value)\n```\nIts result comes back in a tool_output block. The functions, as JSON schemas:\n' + (tools | tojson(indent=4)) + '\n\n' -%}
{%- endif -%}
{{- bos_token if bos_token is defined else '' -}}
{%- for message in messages[ns.start:] -%}
{%- set prev = messages[ns.start + loop.index0 - 1]['role'] if ns.start + loop.index0 > 0 else '' -%}
{%- set next = messages[ns.start + loop.index0 + 1]['role'] if not loop.last else '' -%}
{%- if message['role'] == 'assistant' -%}
{{- '<start_of_turn>model\n' + (message['content'] or '') -}}
{%- if message['tool_calls'] -%}
{{- ('\n' if message['content'] else '') + '```tool_code\n' -}}
{%- for call in message['tool_calls'] -%}
{%- set fn = call['function'] if call['function'] is defined else call -%}
{{- fn['name'] + '(' -}}
{%- for key, value in fn['arguments'].items() -%}{{- ('' if loop.first else ', ') + key + '=' + (value | tojson) -}}{%- endfor -%}
{{- ')\n' -}}
{%- endfor -%}
{{- '```' -}}
{%- endif -%}
{{- '<end_of_turn>\n' -}}
{%- elif message['role'] == 'tool' -%}
{{- ('<start_of_turn>user\n' if prev != 'tool' else '\n') + '```tool_output\n' + message['content'] + '\n```' -}}
{%- if next != 'tool' -%}{{- '<end_of_turn>\n' -}}{%- endif -%}
{%- else -%}
{{- '<start_of_turn>user\n' + (ns.prefix if ns.first else '') + message['content'] + '<end_of_turn>\n' -}}
{%- set ns.first = false -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}
"""

# Qwen2.5: ChatML with hermes calls, as `TOOL_CHATML_TEMPLATE`, but Qwen's default system prompt and
# no blank line in front of a call with no prose (`<|im_start|>assistant\n<tool_call>`).
_QWEN_TOOLS = (
    r"{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' -}}"
    r"{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}"
    r"""{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}"""
)
_QWEN_CALLS = r"""
{%- for call in (message['tool_calls'] or []) -%}
{%- set fn = call['function'] if call['function'] is defined else call -%}
{{- ('\n' if content or not loop.first else '') + '<tool_call>\n{"name": "' + fn['name'] + '", "arguments": ' + (fn['arguments'] if fn['arguments'] is string else (fn['arguments'] | tojson)) + '}\n</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\n' -}}
"""
_QWEN_TOOL_RESULT = r"""
{%- set prev = messages[loop.index0 - 1]['role'] if not loop.first else '' -%}
{%- set next = messages[loop.index0 + 1]['role'] if not loop.last else '' -%}
{{- ('<|im_start|>user' if prev != 'tool' else '') + '\n<tool_response>\n' + message['content'] + '\n</tool_response>' -}}
{%- if next != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
"""

# both Qwen templates after an assistant message: tool results, the other turns, the generation prompt
_QWEN_REST = r"""{%- elif message['role'] == 'tool' -%}""" + _QWEN_TOOL_RESULT + r"""
{%- elif not (loop.first and message['role'] == 'system') -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""

QWEN2_5_TEMPLATE = r"""
{%- set system = messages[0]['content'] if messages and messages[0]['role'] == 'system' else 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' -%}
{%- if tools -%}{{- '<|im_start|>system\n' + system + '\n\n' -}}""" + _QWEN_TOOLS + r"""
{%- else -%}{{- '<|im_start|>system\n' + system + '<|im_end|>\n' -}}{%- endif -%}
{%- for message in messages -%}
{%- if message['role'] == 'assistant' -%}
{%- set content = message['content'] or '' -%}
{{- '<|im_start|>assistant' + ('\n' + content if content else '\n') -}}""" + _QWEN_CALLS + r"""
""" + _QWEN_REST

# Qwen3: the same without a default system prompt, and reasoning: an assistant message's
# `<think>...</think>` is shown (as `<think>\n...\n</think>\n\n`) only after the latest real user
# message (a user turn of tool responses does not count; with none, nowhere), where it is kept when
# not empty and always on the last message; elsewhere it is dropped. `enable_thinking=false` is not rendered (the policy
# always thinks).
QWEN3_TEMPLATE = r"""
{%- set ns = namespace(last_query=(messages | length) - 1) -%}
{%- for m in messages -%}
{%- if m['role'] == 'user' and not ((m['content'] or '').startswith('<tool_response>') and (m['content'] or '').endswith('</tool_response>')) -%}{%- set ns.last_query = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- set has_system = messages and messages[0]['role'] == 'system' -%}
{%- if tools -%}{{- '<|im_start|>system\n' + ((messages[0]['content'] + '\n\n') if has_system else '') -}}""" + _QWEN_TOOLS + r"""
{%- elif has_system -%}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' -}}{%- endif -%}
{%- for message in messages -%}
{%- if message['role'] == 'assistant' -%}
{%- set content = message['content'] or '' -%}
{%- set reasoning = '' -%}
{%- if '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') -%}
{%- set content = content.split('</think>')[-1].lstrip('\n') -%}
{%- endif -%}
{%- if loop.index0 > ns.last_query and (loop.last or reasoning) -%}
{{- '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') -}}
{%- else -%}
{{- '<|im_start|>assistant\n' + content -}}
{%- endif -%}""" + _QWEN_CALLS + r"""
""" + _QWEN_REST
