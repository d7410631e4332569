"""The env backend seam: a backend defined in this file (a corridor walk, written
from scratch on the Env contract) is registered with jaxrl.envs.register_backend
and then works by name everywhere: names, resolution, validation (which asks
the backend for the action kind), training through the CLI's job, and the
evaluate CLI on the run directory — with no edit to the library."""

from __future__ import annotations

import json

import jax.numpy as jnp
import pytest

from jaxrl import envs, parse, validate
from jaxrl import evaluate as evaluate_cli
from jaxrl.core.errors import ConfigError
from jaxrl.envs import Backend, Discrete, Env, gymnax_env
from jaxrl.run import training
from jaxrl.run.overrides import resolve

pytestmark = pytest.mark.timeout(600)


class Corridor(Env):
    """Walk a corridor of ``length`` cells from the left end (action 1: right,
    0: left); reaching the right end terminates with reward 1; a time limit
    of ``4 × length`` steps truncates."""

    def __init__(self, length: int):
        self.name = f"Corridor-{length}"
        self.length = length
        self.obs_shape = (1,)
        self.action_space = Discrete(2)
        self.default_params = None
        self.max_episode_steps = 4 * length

    def _reset(self, key, params):
        return (jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)), jnp.zeros((1,), jnp.float32)

    def _step(self, key, inner, action, params):
        pos, t = inner
        pos = jnp.clip(pos + 2 * action - 1, 0, self.length - 1)
        t = t + 1
        terminated = pos == self.length - 1
        truncated = (t >= self.max_episode_steps) & ~terminated
        final_obs = (pos / (self.length - 1)).astype(jnp.float32)[None]
        done = terminated | truncated
        inner = (jnp.where(done, 0, pos), jnp.where(done, 0, t))
        obs = jnp.where(done, jnp.zeros_like(final_obs), final_obs)
        return inner, obs, terminated.astype(jnp.float32), terminated, truncated, final_obs


def _resolve(text: str, explicit: bool) -> str | None:
    prefix, _, n = text.strip().lower().partition("-")
    return f"Corridor-{int(n)}" if prefix == "corridor" and n.isdigit() and int(n) >= 2 else None


BACKEND = Backend(
    name="corridor",
    names=lambda: ["Corridor-8"],
    resolve=_resolve,
    make=lambda canonical, **options: Corridor(int(canonical.split("-")[1])),
    actions=lambda canonical: "discrete",
)


@pytest.fixture(scope="module", autouse=True)
def registered():
    envs.register_backend(BACKEND, replace=True)
    yield
    envs.unregister_backend("corridor")
    assert envs.canonical_name("corridor-8") is None


def test_names_resolution_and_make():
    assert "corridor" in envs.backend_names() and "Corridor-8" in envs.names()
    for text in ("Corridor-8", "corridor-8", "corridor:Corridor-8", " CORRIDOR:corridor-8 "):
        assert envs.canonical_name(text) == "Corridor-8"
        assert envs.backend_of(text) == "corridor"
    assert envs.canonical_name("corridor:nope") is None
    env = envs.make("corridor:Corridor-5")
    assert isinstance(env, Corridor) and env.length == 5 and env.obs_shape == (1,)
    # the built-in backends are unchanged beside it
    assert envs.canonical_name("cartpole") == "CartPole-v1" and envs.backend_of("cartpole") == "gymnax"
    assert envs.canonical_name("ant") == "ant" and envs.backend_of("brax:ant") == "brax"
    assert envs.canonical_name("brax:fetch") == "brax:fetch"
    assert envs.suggest("Coridor-8") == ["Corridor-8"]


def test_validation_asks_the_backend_for_the_action_kind():
    assert validate(parse(["env=Corridor-8", "algo=ppo"])).env.name == "Corridor-8"
    with pytest.raises(ConfigError, match="needs continuous actions and Corridor-8 has discrete ones"):
        validate(parse(["env=Corridor-8", "algo=sac"]))
    # gymnax: the env's own action space, not a list of names
    assert envs.action_kind("pendulum") == "continuous" and envs.action_kind("Breakout-MinAtar") == "discrete"
    assert envs.action_kind("brax:ant") == "continuous"


def test_the_gymnax_adapter_knows_each_envs_action_kind():
    """Its answers (known without building an env) against every env's own
    action space."""
    backend = envs.get_backend("gymnax")
    for name in gymnax_env.gymnax_ids():
        env = envs.make(name)
        kind = "discrete" if isinstance(env.action_space, Discrete) else "continuous"
        own = name in (gymnax_env.builtin_ids() or ()) or name in gymnax_env.VARIANTS
        # an id user code registered into gymnax (other tests do): unknown until built
        assert backend.actions(name) == (kind if own else None), name


def test_the_gymnax_ids_read_from_source_are_gymnax_own():
    import gymnax

    # (ids other tests register into gymnax, "...-test", come after the built-in ones)
    assert list(gymnax_env.builtin_ids()) == [n for n in gymnax.registered_envs if not n.endswith("-test")]


def test_register_rejects_a_taken_name_and_a_non_backend():
    with pytest.raises(ValueError, match="registered already"):
        envs.register_backend(Backend("corridor", BACKEND.names, BACKEND.resolve, BACKEND.make, BACKEND.actions))
    with pytest.raises(TypeError, match="jaxrl.envs.Backend"):
        envs.register_backend(object())
    with pytest.raises(ValueError, match="identifier"):
        envs.register_backend(Backend("my suite", BACKEND.names, BACKEND.resolve, BACKEND.make, BACKEND.actions))


def test_a_kind_known_only_once_built_is_checked_before_anything_is_written(tmp_path):
    """A backend that cannot tell the action kind by name (``actions`` → None):
    the built env is checked before the run directory exists."""
    envs.register_backend(
        Backend(
            "lazycorridor", lambda: [], lambda text, explicit: _resolve(text, explicit), BACKEND.make, lambda c: None
        )
    )
    try:
        assert envs.action_kind("lazycorridor:Corridor-4") is None
        config = validate(parse(["env=lazycorridor:Corridor-4", "algo=sac", f"run_dir={tmp_path / 'run'}"]))
        with pytest.raises(ConfigError, match="needs continuous actions and Corridor-4 has discrete ones"):
            training.run(config)
        assert not (tmp_path / "run").exists()
    finally:
        envs.unregister_backend("lazycorridor")


def test_trains_and_evaluates_by_name(tmp_path, capsys):
    run_dir = tmp_path / "run"
    config = resolve(
        [
            "env=corridor:Corridor-8",
            "seeds=2",
            "total_timesteps=40000",
            "algo.lr=1e-3",
            "num_evals=4",
            "plots=false",
            f"run_dir={run_dir}",
        ]
    )
    assert training.run(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    finals = summary["final_eval_return"]
    assert finals == pytest.approx([1.0, 1.0]), finals  # every evaluation episode reaches the end
    assert evaluate_cli.main([str(run_dir), "episodes=4"]) == 0
    assert "Corridor-8" in capsys.readouterr().out
