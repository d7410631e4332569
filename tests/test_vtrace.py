"""V-trace (jaxrl.rl.vtrace) against rlax's, a float64 plain loop, and GAE on-policy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from jaxrl.rl.advantages import gae
from jaxrl.rl.vtrace import vtrace

T, N = 13, 5


def _batch(seed: int, truncations: bool):
    rng = np.random.default_rng(seed)
    terminated = rng.random((T, N)) < 0.12
    truncated = (rng.random((T, N)) < 0.1) & ~terminated if truncations else np.zeros((T, N), bool)
    return {
        "log_rhos": rng.normal(0, 0.6, (T, N)).astype(np.float32),
        "rewards": rng.normal(0, 1, (T, N)).astype(np.float32),
        "values": rng.normal(0, 1, (T, N)).astype(np.float32),
        "final": rng.normal(0, 1, (T, N)).astype(np.float32),  # V(final obs) where an episode ended
        "terminated": terminated,
        "done": terminated | truncated,
    }


def _next_values(b):
    """V(s'_{t+1}): the next step's value inside an episode, V(final obs) where it ended or at the end."""
    following = np.concatenate([b["values"][1:], b["final"][-1:]])
    return np.where(b["done"], b["final"], following).astype(np.float32)


def _loop(b, gamma, lam, clip_rho, clip_c, clip_pg):
    """The definition, step by step in float64."""
    f = {k: np.asarray(v, np.float64) for k, v in b.items()}
    nv = _next_values(b).astype(np.float64)
    rho = np.exp(f["log_rhos"])
    vs, adv = np.zeros((T, N)), np.zeros((T, N))
    for j in range(N):
        err = 0.0
        for t in reversed(range(T)):
            cont = gamma * (1 - f["done"][t, j]) * lam * min(clip_c, rho[t, j])
            delta = min(clip_rho, rho[t, j]) * (
                f["rewards"][t, j] + gamma * (1 - f["terminated"][t, j]) * nv[t, j] - f["values"][t, j]
            )
            err = delta + cont * err
            vs[t, j] = f["values"][t, j] + err
        for t in range(T):
            nxt = vs[t + 1, j] if t + 1 < T else nv[t, j]
            boot = nv[t, j] if f["done"][t, j] else lam * nxt + (1 - lam) * nv[t, j]
            q = f["rewards"][t, j] + gamma * (1 - f["terminated"][t, j]) * boot
            adv[t, j] = min(clip_pg, rho[t, j]) * (q - f["values"][t, j])
    return vs, adv


def _ours(b, gamma, lam, clip_rho=1.0, clip_c=1.0, clip_pg=1.0):
    out = jax.jit(vtrace, static_argnames=("clip_rho", "clip_c", "clip_pg_rho"))(
        b["log_rhos"], b["rewards"], b["values"], _next_values(b), b["terminated"], b["done"], gamma, lam,
        clip_rho=clip_rho, clip_c=clip_c, clip_pg_rho=clip_pg,
    )  # fmt: skip
    return np.asarray(out.vs), np.asarray(out.pg_advantage)


@pytest.mark.parametrize("lam", [1.0, 0.9])
@pytest.mark.parametrize("clip_rho, clip_pg", [(1.0, 1.0), (2.0, 0.5)])
def test_equals_rlax_without_truncations(lam, clip_rho, clip_pg):
    b = _batch(0, truncations=False)
    gamma = 0.97
    nv = _next_values(b)

    def one(log_rho, r, v, v_next, term):
        return rlax.vtrace_td_error_and_advantage(
            v, v_next, r, gamma * (1.0 - term.astype(jnp.float32)), jnp.exp(log_rho), lam, clip_rho, clip_pg
        )

    ref = jax.vmap(one, in_axes=1, out_axes=1)(b["log_rhos"], b["rewards"], b["values"], nv, b["terminated"])
    vs, adv = _ours(b, gamma, lam, clip_rho=clip_rho, clip_pg=clip_pg)
    np.testing.assert_allclose(vs, np.asarray(ref.errors) + b["values"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv, np.asarray(ref.pg_advantage), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lam, clips", [(1.0, (1.0, 1.0, 1.0)), (0.8, (1.5, 0.7, 2.0))])
def test_equals_a_float64_loop_with_truncations(lam, clips):
    b = _batch(1, truncations=True)
    assert (b["done"] & ~b["terminated"]).any()
    vs, adv = _ours(b, 0.99, lam, *clips)
    ref_vs, ref_adv = _loop(b, 0.99, lam, *clips)
    np.testing.assert_allclose(vs, ref_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lam", [1.0, 0.95])
def test_on_policy_targets_are_gae(lam):
    b = _batch(2, truncations=True)
    b["log_rhos"] = np.zeros((T, N), np.float32)
    vs, adv = _ours(b, 0.99, lam)
    nv = _next_values(b)
    a = np.asarray(gae(b["rewards"], b["values"], nv, b["terminated"], b["done"], 0.99, lam, method="scan"))
    np.testing.assert_allclose(vs - b["values"], a, rtol=1e-5, atol=1e-5)
    if lam == 1.0:
        np.testing.assert_allclose(adv, a, rtol=1e-5, atol=1e-5)
