"""mini-swe-agent on the repository-repair env (`swe_repair`): its `DefaultAgent` with its own
default configuration (`config/default.yaml`: the prompts, the `mswea_bash_command` action blocks,
the observation and format-error templates), as its Python-bindings example runs it; only the model
and the environment are ours.

- The model: mini-swe-agent's model protocol over the OpenAI SDK, at the recording proxy. Its
  shipped models go through litellm, whose import fetches a price list over the network (retrying
  for seconds on a machine without one); this one is its text-based model (`LitellmTextbasedModel`:
  one bash block a reply, parsed and formatted by mini-swe-agent's own helpers) on `openai.OpenAI`.
- The environment: each shell command runs in agentic-rl's sandbox on the episode's own copy of
  the instance's repository (`RepoSession.shell`: bubblewrap, no network, a fresh bash in the
  copy's root), where mini-swe-agent's `LocalEnvironment` would run it on the host.

Trained with `rollout.agent.program: examples/mini_swe_agent.py:run` on `swe_repair` (docs/proxy.md,
Harnesses). `run(task, base_url)` returns the env's verdict on the patch: the files the commands
changed, applied to a fresh copy with the test files restored, FAIL_TO_PASS and PASS_TO_PASS run
there (`RepoTestsReward.score_patch`): 1.0 when resolved.
"""

from __future__ import annotations

import time
from typing import Any

import openai
import yaml
from minisweagent import package_dir
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.utils.actions_text import format_observation_messages, parse_regex_actions

from agentic_rl.data.swe_instances import instance_of
from agentic_rl.envs.builtin.swe_repair import changed_files, make_reward, repo_config, session_for
from agentic_rl.tools.sandbox.repo import RepoError, RepoSession
from agentic_rl.types import Task

CONFIG = yaml.safe_load((package_dir / "config" / "default.yaml").read_text())
STEP_LIMIT = 8  # model calls; the default config sets none (a budget of cost instead)
ACTION_REGEX = r"```mswea_bash_command\s*\n(.*?)\n```"


class OpenAITextModel:
    """mini-swe-agent's Model protocol: one bash block a reply, over `openai.OpenAI(base_url=...)`."""

    def __init__(self, *, base_url: str, model_name: str = "policy", observation_template: str,
                 format_error_template: str, model_kwargs: dict | None = None):
        self.config = {"model_name": model_name, "observation_template": observation_template,
                       "format_error_template": format_error_template, "action_regex": ACTION_REGEX}
        # litellm's drop_params means nothing to the OpenAI SDK
        self.kwargs = {k: v for k, v in (model_kwargs or {}).items() if k != "drop_params"}
        self.client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)

    def query(self, messages: list[dict], **kwargs) -> dict:
        response = self.client.chat.completions.create(
            model=self.config["model_name"], messages=[{k: v for k, v in m.items() if k != "extra"} for m in messages],
            **(self.kwargs | kwargs))
        choice = response.choices[0]
        extra = {"response": response.model_dump(), "cost": 0.0, "timestamp": time.time()}
        try:  # a FormatError carries the reply's response, as mini-swe-agent's models persist it
            actions = parse_regex_actions(choice.message.content or "", action_regex=ACTION_REGEX,
                                          format_error_template=self.config["format_error_template"],
                                          template_kwargs={"finish_reason": choice.finish_reason})
        except Exception as e:
            for message in getattr(e, "messages", ()):
                message["extra"].update(extra)
            raise
        return {**choice.message.model_dump(exclude_none=True), "extra": {"actions": actions, **extra}}

    def format_message(self, **kwargs) -> dict:
        return kwargs

    def format_observation_messages(self, message: dict, outputs: list[dict], template_vars: dict | None = None) -> list[dict]:
        return format_observation_messages(outputs, observation_template=self.config["observation_template"],
                                           template_vars=template_vars)

    def get_template_vars(self, **kwargs) -> dict[str, Any]:
        return dict(self.config)

    def serialize(self) -> dict:
        return {"info": {"config": {"model": dict(self.config), "model_type": f"{__name__}.{type(self).__name__}"}}}


class SandboxEnvironment(LocalEnvironment):
    """mini-swe-agent's local environment with its commands run in the episode's repository sandbox."""

    def __init__(self, session: RepoSession, **kwargs):
        super().__init__(**kwargs)
        self.session = session

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        try:
            run = self.session.shell(action.get("command", ""), timeout or self.config.timeout, self.config.env)
            output = {"output": run.output, "returncode": run.returncode,
                      "exception_info": "" if run.status == "ok" else f"The command ended: {run.status}"}
        except RepoError as e:
            output = {"output": "", "returncode": -1, "exception_info": f"An error occurred while executing the command: {e}"}
        self._check_finished(output)  # `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` submits
        return output


def run(task: dict, base_url: str) -> float:
    episode = Task(task["id"], task["prompt"], tuple(task["answer"]), task["meta"])
    inst = instance_of(episode)
    with session_for(inst, repo_config({})) as session:
        agent = DefaultAgent(OpenAITextModel(base_url=base_url, **CONFIG["model"]),
                             SandboxEnvironment(session, **CONFIG["environment"]),
                             **{**CONFIG["agent"], "step_limit": STEP_LIMIT})
        try:
            agent.run(task["prompt"])
        except openai.BadRequestError:
            pass  # the proxy refused a call past the episode's budget: the patch so far is judged
        patch = changed_files(inst, session.snapshot())
    return make_reward({}).score_patch(episode, patch).value
