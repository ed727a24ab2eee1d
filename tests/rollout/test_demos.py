"""SFT demonstrations use the rollout's token layout: the decoded sequence is the chat template's
render of the conversation, and the trained tokens are exactly the assistant's own text."""

from __future__ import annotations

import pytest

from agentic_rl.data.calculator_demos import demonstration
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.demos import demonstration_trajectory


@pytest.mark.parametrize("name", ["calculator", "calculator_plan", "calculator_compound", "calculator_mixed", "calculator_chain"])
def test_demo_sequence_equals_template_render_and_masks_actions(tokenizer, name):
    spec = get_env(name)
    env = spec.make_env({})
    for task in spec.tasks("train", 12, 5):
        demo = spec.demonstration(task, env)
        traj = demonstration_trajectory(task, env, demo, tokenizer)
        messages = env.reset(task) + demo
        rendered = tokenizer.apply_chat_template(messages, tools=env.tool_schemas, tokenize=False)
        # the episode ends at the final <|im_end|>; the template adds the newline that would follow
        assert tokenizer.decode(traj.token_ids()) + "\n" == rendered
        trained = tokenizer.decode([t for t, m in zip(traj.token_ids(), traj.loss_mask()) if m])
        actions = "".join(env.format.render_assistant_body(m) for m in demo if m["role"] == "assistant")
        # the final action's <|im_end|> is trained (the policy must learn to end its turn); the
        # <|im_end|> after a tool call is glue (generation stopped at </tool_call>)
        assert trained == actions + "<|im_end|>"
        n_calls = sum(len(m.get("tool_calls") or []) for m in demo)
        if name != "calculator_mixed":  # mixed: either count (tests/data/test_calculator_tasks.py)
            assert n_calls == (1 if name in ("calculator_compound", "calculator_chain") else len(task.meta["steps"]))


def test_recovery_demonstrations_train_the_recovery_not_the_mistake(tokenizer):
    # Invariant: calculator_recover shows the unit carried into a call and the error it gets, in the
    # very sequence the policy reads, but only the corrected call and the answer are trained.
    spec = get_env("calculator_recover")
    env = spec.make_env({})
    seen = eligible = 0
    for task in spec.tasks("train", 80, 5):
        demo = spec.demonstration(task, env)
        eligible += any(m.get("weight") == 0 for m in demonstration(task, style="compound", recover=1.0))
        if not any(m.get("weight") == 0 for m in demo):
            continue
        seen += 1
        mistake, error, fixed = demo[0], demo[1], demo[2]
        bad = mistake["tool_calls"][0]["function"]["arguments"]["expression"]
        good = fixed["tool_calls"][0]["function"]["arguments"]["expression"]
        unit = bad.rsplit(" ", 1)[1]
        assert bad == f"{good} {unit}" and unit.isalpha()
        assert error["content"].startswith(f"Error: '{unit}' is a word")
        traj = demonstration_trajectory(task, env, demo, tokenizer)
        rendered = tokenizer.apply_chat_template(env.reset(task) + demo, tools=env.tool_schemas, tokenize=False)
        assert tokenizer.decode(traj.token_ids()) + "\n" == rendered
        trained = tokenizer.decode([t for t, m in zip(traj.token_ids(), traj.loss_mask()) if m])
        actions = "".join(env.format.render_assistant_body(m) for m in demo[2:] if m["role"] == "assistant")
        assert trained == actions + "<|im_end|>"
        assert [t.trained for t in traj.turns] == [False, True, True]
    # a coin per task: about a quarter of the word problems whose sentence names a unit
    assert eligible > 30 and 0.1 <= seen / eligible <= 0.45, (seen, eligible)
