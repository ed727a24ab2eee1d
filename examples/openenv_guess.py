"""A small OpenEnv environment written with openenv's server API (openenv-core ships none of its
own): guess a number from 1 to 20, told higher or lower, reward 1 for the number, six guesses.
Served as openenv serves one: `uvicorn examples.openenv_guess:app`."""

from __future__ import annotations

import random
from uuid import uuid4

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

GUESSES = 6


class GuessAction(Action):
    message: str = Field(..., description="a number from 1 to 20")


class GuessObservation(Observation):
    text: str = Field(default="", description="what the game says")


def secret_of(seed: int | None) -> int:
    return random.Random(seed).randint(1, 20)


class GuessEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        self._state, self.secret = State(episode_id=str(uuid4()), step_count=0), 0

    def reset(self, seed=None, episode_id=None, **kwargs) -> GuessObservation:
        self._state, self.secret = State(episode_id=episode_id or str(uuid4()), step_count=0), secret_of(seed)
        return GuessObservation(text="I picked a number from 1 to 20.", done=False, reward=0.0)

    def step(self, action: GuessAction, timeout_s=None, **kwargs) -> GuessObservation:
        self._state.step_count += 1
        guess = int(action.message) if action.message.strip().isdigit() else 0
        if guess == self.secret:
            return GuessObservation(text="correct", done=True, reward=1.0)
        text = "higher" if guess < self.secret else "lower"
        return GuessObservation(text=text, done=self._state.step_count >= GUESSES, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess", max_concurrent_envs=64)
