"""``gym``'s old interface over ``gymnasium``, for replaying real faults of scripts written
for gym < 0.26 (issue 32).

The replay writes this file as ``gym.py`` beside the script, the same file for the faulty and
the fixed version: neither script's text changes. gym 0.25 itself does not run with NumPy 2
(its environment checker uses ``np.bool8``); gymnasium's classic-control environments need no
download. What the shim changes, and only that:

- ``reset()`` returns the observation alone, and ``step()`` four values (``done`` is
  ``terminated or truncated``, as gym's time limit made it);
- the first ``reset()`` seeds the environment and its action space from the run's seed
  (``torch.initial_seed()``, which the harness set), so a run is reproducible and the two
  versions see the same episodes until their policies differ;
- ``Pendulum-v0`` is gymnasium's ``Pendulum-v1`` (the same dynamics, renamed in gym 0.21);
- ``EPISODES`` (set by the replay when it writes the file): the ``reset()`` that would
  start one episode more ends the run cleanly (``SystemExit(0)``), the budget of scripts
  that loop over 10,000 episodes.

It imports nothing of trainwreck: it runs inside the script's process as its ``gym``.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import torch

EPISODES = 0  # the replay writes the fault's episode budget here (0: no budget)
RENAMED = {"Pendulum-v0": "Pendulum-v1"}


class OldApi:
    """An environment with gym's pre-0.26 ``reset``/``step``; the rest passes through."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self._resets = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def reset(self, **kwargs: Any) -> Any:
        if EPISODES and self._resets >= EPISODES:
            raise SystemExit(0)
        if self._resets == 0 and "seed" not in kwargs:
            seed = torch.initial_seed() % 2**31
            self._env.action_space.seed(seed)
            kwargs["seed"] = seed
        self._resets += 1
        observation, _info = self._env.reset(**kwargs)
        return observation

    def step(self, action: Any) -> tuple[Any, float, bool, dict]:
        observation, reward, terminated, truncated, info = self._env.step(action)
        return observation, reward, bool(terminated or truncated), info


def make(name: str, **kwargs: Any) -> OldApi:
    return OldApi(gymnasium.make(RENAMED.get(name, name), **kwargs))
