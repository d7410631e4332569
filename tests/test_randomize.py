"""Domain randomization (jaxrl.envs.randomize): the specification, the draws'
distributions and independence, parameters held for a whole episode, and the
step/step_drawn contract."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxrl import envs
from jaxrl.core.errors import ConfigError
from jaxrl.envs.randomize import Randomized, parse_randomize
from jaxrl.envs.sets import parse_sets

SPEC = "length=uniform(0.25,1.0) gravity=loguniform(8,12) masscart=choice(0.5,1,2)"


@pytest.fixture(scope="module")
def cartpole():
    return envs.make("cartpole")


@pytest.fixture(scope="module")
def randomized(cartpole):
    return Randomized(cartpole, parse_randomize(SPEC, cartpole))


def test_parse_reads_every_kind(cartpole):
    dists = parse_randomize(SPEC, cartpole)
    assert [(d.name, d.kind, d.values) for d in dists] == [
        ("length", "uniform", (0.25, 1.0)),
        ("gravity", "loguniform", (8.0, 12.0)),
        ("masscart", "choice", (0.5, 1.0, 2.0)),
    ]


BAD = [
    ("lenght=uniform(0.2,1)", "'lenght' is not a parameter of CartPole-v1"),
    ("length=uniform(1,1)", "needs two numbers lo < hi"),
    ("length=uniform(2,1)", "needs two numbers lo < hi"),
    ("length=uniform(1)", "needs two numbers lo < hi"),
    ("length=loguniform(0,1)", "needs 0 < lo"),
    ("length=choice()", "is empty"),
    ("length=normal(0,1)", "must be one of uniform, loguniform, choice"),
    ("length=uniform(0.2,1) length=choice(1,2)", "'length' is randomized twice"),
    ("length=uniform(a,b)", "must be numbers"),
    ("length=uniform(0,inf)", "must be finite"),
    ("length", "is not name=kind(values)"),
    ("", "names no parameter"),
]


@pytest.mark.parametrize("text, expected", BAD, ids=[b[0] or "empty" for b in BAD])
def test_bad_specifications_name_the_field_value_constraint_and_fix(text, expected, cartpole):
    with pytest.raises(ConfigError) as error:
        parse_randomize(text, cartpole)
    message = str(error.value)
    assert message.startswith(f"env.randomize={text}") and expected in message and "fix: " in message, message


@pytest.fixture(scope="module")
def resets(randomized):
    """The parameters of 20,000 env copies' first episodes."""
    keys = jax.random.split(jax.random.key(0), 20000)
    state, _ = jax.jit(jax.vmap(randomized.reset))(keys)
    return jax.tree.map(np.asarray, state.inner.params)


def test_draws_follow_the_stated_distributions(resets):
    assert stats.kstest(resets.length, stats.uniform(0.25, 0.75).cdf).pvalue > 1e-3
    assert stats.kstest(np.log(resets.gravity), stats.uniform(np.log(8), np.log(12 / 8)).cdf).pvalue > 1e-3
    values, counts = np.unique(resets.masscart, return_counts=True)
    np.testing.assert_allclose(values, [0.5, 1.0, 2.0])
    assert stats.chisquare(counts).pvalue > 1e-3
    # derived parameters recomputed from the drawn ones; the rest at their defaults
    np.testing.assert_allclose(resets.polemass_length, resets.masspole * resets.length, rtol=1e-6)
    np.testing.assert_allclose(resets.total_mass, resets.masspole + resets.masscart, rtol=1e-6)
    np.testing.assert_allclose(resets.masspole, 0.1)


def test_draws_are_independent_across_parameters_envs_and_members(randomized, resets):
    assert abs(np.corrcoef(resets.length, resets.gravity)[0, 1]) < 0.03
    assert abs(stats.spearmanr(resets.length, resets.masscart)[0]) < 0.03
    # two members: the same env index of two differently keyed members
    a, b = (
        np.asarray(jax.vmap(randomized.reset)(jax.random.split(jax.random.key(s), 5000))[0].inner.params.length)
        for s in (1, 2)
    )
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.05 and not np.array_equal(a, b)


def test_an_episode_keeps_its_parameters_until_it_ends_then_draws_new_ones(randomized):
    num_envs, steps = 64, 300
    state, _ = jax.vmap(randomized.reset)(jax.random.split(jax.random.key(3), num_envs))
    draws = randomized.draw_steps(jax.random.split(jax.random.key(4), (steps, num_envs)))
    actions = jax.random.randint(jax.random.key(5), (steps, num_envs), 0, 2)
    step = jax.vmap(randomized.step_drawn)

    def body(state, inputs):
        drawn, action = inputs
        state, out = step(drawn, state, action)
        return state, (state.inner.params.length, out.done)

    _, (length, done) = jax.jit(lambda s: jax.lax.scan(body, s, (draws, actions)))(state)
    length, done = np.asarray(length), np.asarray(done)
    assert done.sum() > 200  # random play ends CartPole episodes every ≈ 20 steps
    np.testing.assert_array_equal(length[1:][~done[1:]], length[:-1][~done[1:]])  # held within an episode
    assert np.all(length[1:][done[1:]] != length[:-1][done[1:]])  # redrawn at each end (continuous: a.s.)


def test_step_drawn_equals_step_and_the_dynamics_use_the_episodes_parameters(cartpole, randomized):
    state, _ = randomized.reset(jax.random.key(7))
    key = jax.random.key(8)
    a = randomized.step(key, state, jnp.int32(1))
    b = randomized.step_drawn(jax.tree.map(lambda x: x[0], randomized.draw_steps(key[None])), state, jnp.int32(1))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # a step that does not end the episode is the wrapped env's step under the stored parameters
    key_step, _ = jax.random.split(key)
    base_state = state.replace(inner=state.inner.base)
    _, want = cartpole.step(key_step, base_state, jnp.int32(1), state.inner.params)
    _, nominal = cartpole.step(key_step, base_state, jnp.int32(1))
    assert not bool(a[1].done)
    np.testing.assert_array_equal(np.asarray(a[1].obs), np.asarray(want.obs))
    assert not np.allclose(np.asarray(want.obs), np.asarray(nominal.obs))  # the drawn parameters matter


def test_a_randomized_env_trains_through_the_env_seam(randomized):
    """make_train(config, env=Randomized(...)): the rollout, the learner and the
    in-program evaluation run on per-episode parameters."""
    from jaxrl import make_train, parse

    config = parse(["env=cartpole", "total_timesteps=2048", "num_envs=4", "num_evals=1", "eval.episodes=4"])
    trainer = make_train(config, env=randomized)
    state, metrics = jax.jit(trainer.train)(jax.random.key(0), trainer.hparams)
    returns = np.asarray(metrics.eval.returns)
    assert returns.shape == (1, 4) and np.all(np.isfinite(returns)) and np.all(returns >= 1)
    params = state.agent.env_state.inner.params
    assert np.asarray(params.length).shape == (4,) and len(np.unique(np.asarray(params.length))) == 4


def test_heldout_settings_are_evaluated_exactly_on_a_randomized_run():
    """Given parameters (eval.perturb's settings) are used as they are: the
    same policy state evaluated under length=1.5 on a run randomized over
    length=choice(0.5) equals the nominal run's evaluation under length=1.5 —
    and differs from the randomized distribution's own evaluation."""
    from jaxrl import make_train, parse

    args = ["env=cartpole", "total_timesteps=2048", "num_envs=4", "num_evals=1", "eval.episodes=8"]
    nominal = make_train(parse(args))
    randomized = make_train(parse([*args, "env.randomize=length=choice(0.5)"]))
    assert isinstance(randomized.env, Randomized)
    state, _ = jax.jit(nominal.train)(jax.random.key(0), nominal.hparams)
    heldout = envs.with_params(nominal.env, length=1.5)
    _, a = jax.jit(nominal.evaluate)(state, heldout)
    _, b = jax.jit(randomized.evaluate)(state, heldout)
    _, c = jax.jit(randomized.evaluate)(state)  # its training distribution: length 0.5
    np.testing.assert_array_equal(np.asarray(a.returns), np.asarray(b.returns))
    assert not np.array_equal(np.asarray(b.lengths), np.asarray(c.lengths))
    assert np.asarray(c.returns).mean() != pytest.approx(np.asarray(a.returns).mean())


def test_the_cli_trains_on_a_randomized_env(tmp_path):
    from jaxrl import train

    run_dir = tmp_path / "run"
    spec = "length=uniform(0.25,1.0) masscart=choice(0.5,1,2)"
    argv = ["env=cartpole", f"env.randomize={spec}", "seeds=2", "total_timesteps=2048", "num_envs=4"]
    assert (
        train.main([*argv, "num_evals=1", "eval.episodes=4", "plots=false", "progress=false", f"run_dir={run_dir}"])
        == 0
    )
    import json

    import yaml

    assert yaml.safe_load((run_dir / "config.yaml").read_text())["env"]["randomize"] == spec
    assert all(np.isfinite(json.loads((run_dir / "summary.json").read_text())["final_eval_return"]))


def _brax_runner(env, steps=40, push=0.5):
    """``run(params) -> final observations [steps, obs]`` of a constant action
    (params traced: one compile for every setting)."""
    action = jnp.full(env.action_space.shape, push, jnp.float32)

    @jax.jit
    def run(key, params):
        state, _ = env.reset(key, params)

        def body(state, k):
            state, out = env.step(k, state, action, params)
            return state, out.final_obs

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1]

    return lambda params: np.asarray(run(jax.random.key(3), params))


def test_brax_physical_parameters_are_env_parameters(monkeypatch):
    """A brax env's mass, friction and gravity scales are its parameters:
    scale 1 is the model file's system exactly; a heavier system moves less
    under the same actuator force; other gravity changes the dynamics; and
    env.randomize draws them per env (a batched system under vmap), and
    evaluation sets name them."""
    pytest.importorskip("brax")

    env = envs.make("inverted_pendulum")
    assert envs.param_names(env) == ["mass_scale", "friction_scale", "gravity_scale"]
    # nominal parameters passed through a transformation (vmap rebuilds the
    # dataclass around the same floats) leave the system untouched: no scaling traced
    from jaxrl.envs import brax_env

    scaled = []
    monkeypatch.setattr(brax_env, "scaled_system", lambda sys, p: scaled.append(p) or sys)
    keys = jax.random.split(jax.random.key(0), 2)

    def trace(params):
        jax.eval_shape(lambda k: jax.vmap(env.reset, in_axes=(0, None))(k, params), keys)

    trace(env.default_params)
    assert scaled == []
    trace(envs.with_params(env, mass_scale=2.0))
    assert len(scaled) == 1
    monkeypatch.undo()

    rollout = _brax_runner(env)
    nominal = rollout(None)  # the model file's system, untouched
    np.testing.assert_array_equal(rollout(envs.with_params(env, gravity_scale=1.0)), nominal)
    heavy = rollout(envs.with_params(env, mass_scale=4.0))
    cart = 0  # inverted_pendulum's first observation: the cart's position on its rail
    assert 0 < abs(heavy[-1, cart] - heavy[0, cart]) < 0.5 * abs(nominal[-1, cart] - nominal[0, cart])
    assert np.abs(rollout(envs.with_params(env, gravity_scale=3.0)) - nominal).max() > 1e-2

    spec = "mass_scale=uniform(0.5,2) gravity_scale=choice(0.5,1.5)"
    randomized = Randomized(env, parse_randomize(spec, env))
    keys = jax.random.split(jax.random.key(0), 4)
    action = jnp.full((4, *env.action_space.shape), 0.5, jnp.float32)

    @jax.jit
    def steps(keys):
        state, _ = jax.vmap(randomized.reset)(keys)

        def body(state, key):
            return jax.vmap(randomized.step)(jax.random.split(key, 4), state, action)

        state, out = jax.lax.scan(body, state, keys)
        return state, jax.tree.map(lambda x: x[-1], out)

    state, out = steps(keys)
    drawn = state.inner.params
    assert len(np.unique(np.asarray(drawn.mass_scale))) == 4
    assert set(np.unique(np.asarray(drawn.gravity_scale))) <= {0.5, 1.5}
    assert np.all(np.isfinite(np.asarray(out.obs)))
    sets = parse_sets("nominal; light: mass_scale=0.5 gravity_scale=0.8,1.2", env)
    assert sets[1].points == ({"mass_scale": 0.5, "gravity_scale": 0.8}, {"mass_scale": 0.5, "gravity_scale": 1.2})
