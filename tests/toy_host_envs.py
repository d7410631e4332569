"""Gymnasium envs for the host-env tests, registered on import
(``env.module=tests.toy_host_envs``): one that raises, one that hangs, one
that is slow (sleeping, or busy on the CPU holding the interpreter), and
one with a Dict observation."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np


class Toy(gym.Env):
    """Observes 4 numbers; action 1 adds 1 to the reward; ends after 20 steps (terminated)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, raise_at: int = 0, hang_at: int = 0, sleep_s: float = 0.0, busy_s: float = 0.0):
        self.raise_at, self.hang_at, self.sleep_s, self.busy_s = raise_at, hang_at, sleep_s, busy_s
        self.t = self.total = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        self.total += 1
        if self.raise_at and self.total >= self.raise_at:
            raise RuntimeError("the simulator lost its state")
        if self.hang_at and self.total >= self.hang_at:
            time.sleep(3600)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.busy_s:  # a simulator's Python work: one core, the interpreter held
            end = time.perf_counter() + self.busy_s
            while time.perf_counter() < end:
                pass
        obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        return obs, float(action), self.t >= 20, False, {}


class DictObs(gym.Env):
    """A Dict observation ({"pos": Box(2), "gear": Discrete(3)}): flattened to 5 numbers."""

    observation_space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "gear": gym.spaces.Discrete(3)}
    )
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return {"pos": np.zeros(2, np.float32), "gear": 0}, {}

    def step(self, action):
        self.t += 1
        return {"pos": np.full(2, 0.1 * self.t, np.float32), "gear": int(action)}, 1.0, False, self.t >= 7, {}


for name, kwargs in {
    "JaxrlToy-v0": {},
    "JaxrlRaises-v0": {"raise_at": 300},
    "JaxrlHangs-v0": {"hang_at": 300},
    "JaxrlSlow-v0": {"sleep_s": 0.002},
    "JaxrlBusy-v0": {"busy_s": 0.001},
}.items():
    if name not in gym.registry:
        gym.register(name, entry_point=Toy, kwargs=kwargs, max_episode_steps=50)
if "JaxrlDict-v0" not in gym.registry:
    gym.register("JaxrlDict-v0", entry_point=DictObs)
