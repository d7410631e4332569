"""``perf=auto|on|off``: jaxrl's XLA:CPU kernels behind one switch, the plain
flax/optax/JAX path equal to them to float tolerance, both solving CartPole."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrl
from jaxrl import parse, perf, train, validate
from jaxrl.nets.networks import ActorCritic
from tests.helpers import CARTPOLE_TINY


def _trainer(*args: str):
    return jaxrl.make_train(validate(parse(list(args))))


def test_auto_is_on_for_the_cpu_only():
    assert perf.resolve("auto", "cpu") and not perf.resolve("auto", "gpu") and not perf.resolve("auto", "tpu")
    assert perf.resolve("on", "gpu") and not perf.resolve("off", "cpu")
    assert perf.resolve("auto") == (jax.default_backend() == "cpu")


def test_off_is_plain_jax_on_has_the_kernels():
    on, off = (_trainer("env=cartpole", *CARTPOLE_TINY, f"perf={mode}") for mode in ("on", "off"))
    state = jax.jit(on.init)(jax.random.key(0), on.hparams)
    text = {name: str(jax.make_jaxpr(t.update)(state, t.hparams)) for name, t in (("on", on), ("off", off))}
    assert "custom_vjp_call" in text["on"] and "custom_vmap_call" in text["on"]  # the Dense product and its vmap rule
    assert "custom_vjp" not in text["off"] and "custom_vmap" not in text["off"]
    assert off.agent.network.perf is False and on.agent.network.perf is True


def test_off_networks_take_forward_mode_and_module_init_gives_the_parameters():
    trainer = _trainer("env=cartpole", *CARTPOLE_TINY, "perf=off")
    network = trainer.agent.network
    key = jax.random.key(7)
    state = trainer.agent.init(key, trainer.hparams)
    key_params = jax.random.split(key, 3)[0]  # ppo.init_state's first key
    want = network.init(key_params, jnp.zeros((1, 4)))
    for got, ref in zip(jax.tree.leaves(state.params), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    obs = jnp.linspace(-0.1, 0.1, 4)
    jac = jax.jacfwd(lambda o: network.apply(state.params, o)[0])(obs)  # [2, 4]
    rev = jax.jacrev(lambda o: network.apply(state.params, o)[0])(obs)
    np.testing.assert_allclose(np.asarray(jac), np.asarray(rev), rtol=1e-5, atol=1e-7)
    on_net = ActorCritic(action_dim=2, discrete=True, perf=True)
    with pytest.raises(TypeError, match="custom_vjp"):
        jax.jacfwd(lambda o: on_net.apply(state.params, o)[0])(obs)


@pytest.mark.parametrize(
    "args",
    [
        # one minibatch: the shuffle's order (the one thing the paths draw differently) cannot matter
        ("env=cartpole", *CARTPOLE_TINY, "algo.num_minibatches=1", "algo.update_epochs=2"),
        ("env=pendulum", "algo=sac", "num_envs=4", "total_timesteps=1024", "algo.learning_starts=256"),
        ("env=cartpole", *CARTPOLE_TINY[:4], "algo=a2c"),
    ],
    ids=["ppo", "sac", "a2c"],
)
def test_on_and_off_agree_on_one_update(args):
    on, off = _trainer(*args, "perf=on"), _trainer(*args, "perf=off")
    state = jax.jit(on.init)(jax.random.key(0), on.hparams)  # the same start for both
    (after_on, m_on), (after_off, m_off) = (jax.jit(t.update)(state, t.hparams) for t in (on, off))
    for a, b in zip(jax.tree.leaves(after_on.agent), jax.tree.leaves(after_off.agent), strict=True):
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=2e-4, atol=2e-5)
    for a, b in zip(jax.tree.leaves(m_on), jax.tree.leaves(m_off), strict=True):  # the loop's metrics and its own
        np.testing.assert_allclose(float(a), float(b), rtol=2e-4, atol=1e-5)


# The CartPole preset with perf=off solving 16 / 16 seeds is the docs' command,
# run in the CLI's default layout by tests/test_readme.py::test_perf_off_solves_every_seed.


def test_a_bad_perf_is_one_line_and_exit_2(tmp_path, capsys):
    assert train.main(["env=cartpole", "perf=fast", f"run_dir={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "perf=fast: must be auto, on or off" in err and "pass perf=auto" in err
    assert not (tmp_path / "r").exists()
