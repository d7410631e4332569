"""Render one episode of a trained policy to a GIF (gymnax envs).

The episode runs as one compiled ``lax.scan`` (deterministic or sampled
actions); frames are drawn on the host from the observations with Pillow:
pictures for the classic-control envs, the grid for image-like observations
(MinAtar), and a bar chart of the observation vector for anything else.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["episode_observations", "save_gif", "save_frames_gif", "draw_frame"]

SIZE = (320, 240)


def episode_observations(
    env: Any, act: Any, agent_state: Any, key: Any, max_steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Observations ``[T+1, *obs]`` of the first episode (initial one included)
    and its rewards ``[T]``; ``T`` ≤ ``max_steps``. ``act``: a memoryless
    ``act(state, obs, key) -> action`` or the ``(init_carry, step)`` pair of
    :func:`jaxrl.core.contract.policy_step` (recurrent policies)."""
    import jax
    import jax.numpy as jnp

    if isinstance(act, tuple):
        init_carry, policy = act
    else:
        init_carry, policy = (lambda s, shape: None), (lambda s, c, o, k: (None, act(s, o, k)))

    def run(key):
        key_reset, key_run = jax.random.split(key)
        state, obs = env.reset(key_reset)

        def step(carry, _):
            state, obs, key, finished, memory = carry
            key, key_act, key_env = jax.random.split(key, 3)
            memory, action = policy(agent_state, memory, obs, key_act)
            state, out = env.step(key_env, state, action)
            return (state, out.obs, key, finished | out.done, memory), (out.final_obs, out.reward, finished)

        _, (next_obs, rewards, was_finished) = jax.lax.scan(
            step, (state, obs, key_run, jnp.asarray(False), init_carry(agent_state, ())), None, length=max_steps
        )
        return obs, next_obs, rewards, was_finished

    obs0, next_obs, rewards, was_finished = jax.jit(run)(key)
    live = ~np.asarray(was_finished)
    steps = int(live.sum())
    observations = np.concatenate([np.asarray(obs0)[None], np.asarray(next_obs)[:steps]])
    return observations, np.asarray(rewards)[:steps]


def _cartpole(draw, obs, w, h):
    x, theta = float(obs[0]), float(obs[2])
    scale = w / 4.8
    ground = int(h * 0.7)
    draw.line([(0, ground), (w, ground)], fill=(0, 0, 0), width=1)
    cx = w / 2 + x * scale
    draw.rectangle([cx - 25, ground - 15, cx + 25, ground + 5], fill=(40, 40, 40))
    length = scale * 1.0
    tip = (cx + length * math.sin(theta), ground - 15 - length * math.cos(theta))
    draw.line([(cx, ground - 15), tip], fill=(202, 152, 101), width=8)


def _pendulum(draw, obs, w, h):
    cos, sin = float(obs[0]), float(obs[1])
    cx, cy, r = w / 2, h / 2, min(w, h) * 0.35
    draw.line([(cx, cy), (cx + r * sin, cy - r * cos)], fill=(204, 77, 77), width=10)
    draw.ellipse([cx - 5, cy - 5, cx + 5, cy + 5], fill=(0, 0, 0))


def _acrobot(draw, obs, w, h):
    t1 = math.atan2(float(obs[1]), float(obs[0]))
    t2 = math.atan2(float(obs[3]), float(obs[2]))
    cx, cy, r = w / 2, h / 2, min(w, h) * 0.22
    p1 = (cx + r * math.sin(t1), cy + r * math.cos(t1))
    p2 = (p1[0] + r * math.sin(t1 + t2), p1[1] + r * math.cos(t1 + t2))
    draw.line([(0, cy - r), (w, cy - r)], fill=(0, 0, 0), width=1)
    draw.line([(cx, cy), p1], fill=(0, 204, 204), width=8)
    draw.line([p1, p2], fill=(0, 204, 204), width=8)


def _mountaincar(draw, obs, w, h):
    lo, hi = -1.2, 0.6
    to_px = lambda p: ((p - lo) / (hi - lo) * w, h * 0.8 - math.sin(3 * p) * h * 0.3)  # noqa: E731
    points = [to_px(lo + (hi - lo) * i / 100) for i in range(101)]
    draw.line(points, fill=(0, 0, 0), width=2)
    gx, gy = to_px(0.5)
    draw.line([(gx, gy), (gx, gy - 30)], fill=(0, 0, 0), width=2)
    x, y = to_px(float(obs[0]))
    draw.ellipse([x - 8, y - 16, x + 8, y], fill=(30, 30, 200))


def _grid(obs: np.ndarray) -> Any:
    from PIL import Image

    grid = np.asarray(obs, np.float32)
    if grid.ndim == 3:  # [H, W, C] channels → colours
        palette = np.array(
            [
                [int(255 * c) for c in (math.sin(i) ** 2, math.sin(i + 2) ** 2, math.sin(i + 4) ** 2)]
                for i in range(grid.shape[-1])
            ]
        )
        img = np.full(grid.shape[:2] + (3,), 255, np.uint8)
        occupied = grid.max(axis=-1) > 0
        img[occupied] = palette[grid.argmax(axis=-1)[occupied]]
    else:
        g = grid - grid.min()
        g = g / max(float(g.max()), 1e-8)
        img = np.repeat((255 * (1 - g))[..., None], 3, axis=-1).astype(np.uint8)
    return Image.fromarray(img).resize(SIZE, Image.NEAREST)


def _bars(draw, obs, w, h):
    v = np.asarray(obs, np.float32).ravel()[:64]
    scale = max(float(np.abs(v).max()), 1e-6)
    bw = w / max(1, v.size)
    mid = h / 2
    draw.line([(0, mid), (w, mid)], fill=(0, 0, 0), width=1)
    for i, value in enumerate(v):
        top = mid - value / scale * (h * 0.45)
        draw.rectangle([i * bw + 1, min(mid, top), (i + 1) * bw - 1, max(mid, top)], fill=(70, 110, 200))


_DRAW = {
    "CartPole-v1": _cartpole,
    "Pendulum-v1": _pendulum,
    "Acrobot-v1": _acrobot,
    "MountainCar-v0": _mountaincar,
    "MountainCarContinuous-v0": _mountaincar,
}


def draw_frame(env_name: str, obs: np.ndarray, caption: str = "") -> Any:
    """One ``SIZE`` RGB frame (a PIL image) of observation ``obs``."""
    from PIL import Image, ImageDraw

    if env_name not in _DRAW and np.ndim(obs) >= 2:
        image = _grid(obs)
    else:
        image = Image.new("RGB", SIZE, (255, 255, 255))
        (_DRAW.get(env_name, _bars))(ImageDraw.Draw(image), np.asarray(obs), *SIZE)
    if caption:
        ImageDraw.Draw(image).text((5, 5), caption, fill=(0, 0, 0))
    return image


def save_gif(path: str, env_name: str, observations: np.ndarray, rewards: np.ndarray, fps: int = 30) -> int:
    """Write the episode as an animated GIF; returns the frame count (T + 1)."""
    total = np.concatenate([[0.0], np.cumsum(rewards)])
    frames = [
        draw_frame(env_name, obs, f"{env_name}  t={t}  return={total[t]:.1f}") for t, obs in enumerate(observations)
    ]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=max(1, 1000 // fps), loop=0)
    return len(frames)


def save_frames_gif(path: str, name: str, frames: list[np.ndarray], rewards: np.ndarray, fps: int = 30) -> int:
    """Write an env's own frames (uint8 ``[H, W, 3]``, the start and one per
    step) as an animated GIF captioned with the return so far; returns the
    frame count."""
    from PIL import Image, ImageDraw

    total = np.concatenate([[0.0], np.cumsum(rewards)])
    images = []
    for t, frame in enumerate(frames):
        image = Image.fromarray(np.asarray(frame, np.uint8)[..., :3])
        ImageDraw.Draw(image).text((5, 5), f"{name}  t={t}  return={total[t]:.1f}", fill=(0, 0, 0))
        images.append(image)
    images[0].save(path, save_all=True, append_images=images[1:], duration=max(1, 1000 // fps), loop=0)
    return len(images)
