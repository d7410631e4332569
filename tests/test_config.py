"""Config parsing, presets, and the bad-input matrix (exit 2, one line, nothing written)."""

import os

import pytest

from jaxrl import config_for, parse, train, validate
from jaxrl.core.config import RESUMABLE, seed_ids, sweep_refusal
from jaxrl.core.errors import ConfigError
from jaxrl.core.fields import traced_names
from jaxrl.run.overrides import PRESETS


def test_defaults_presets_and_overrides():
    config = parse([])
    assert config.env.name == "cartpole" and config.algo.name == "ppo"
    preset = PRESETS[("CartPole-v1", "ppo")]
    assert config.num_envs == preset["num_envs"]
    assert config.algo.lr == pytest.approx(preset["algo.lr"])
    config = parse(["algo.lr=1e-3", "total_timesteps=2e5", "num_envs=64", "seeds=[0,5]", "algo.hidden_sizes=[32,32]"])
    assert config.algo.lr == pytest.approx(1e-3)  # the user's value wins over the preset
    assert config.total_timesteps == 200_000 and isinstance(config.total_timesteps, int)
    assert config.num_envs == 64
    assert seed_ids(config) == (0, 5)
    assert config.algo.hidden_sizes == (32, 32)
    assert hash(config)  # frozen and hashable
    assert seed_ids(parse(["seeds=3", "seed=10"])) == (10, 11, 12)


def test_env_without_preset_uses_defaults():
    config = parse(["env=Catch-bsuite"])
    assert config.num_envs == 4 and config.algo.lr == pytest.approx(2.5e-4)


BAD = [
    (["env=cartpol"], "env=cartpol", "cartpole"),
    (["env=NoSuchThing-v9"], "env=NoSuchThing-v9", "unknown environment"),
    (["foo=1"], "foo=1", "unknown config key"),
    (["algo.lrr=0.1"], "algo.lrr=0.1", "algo.lr"),
    (["algo=muzero"], "algo=muzero", "unknown algorithm"),
    (["algo=rainbow", "algo.replay=ranked"], "algo.replay=ranked", "prioritized or uniform"),
    (["algo=rainbow", "algo.priority_exponent=1.5"], "algo.priority_exponent=1.5", "[0, 1]"),
    (["algo=rainbow", "algo.priority_weight=-0.1"], "algo.priority_weight=-0.1", "[0, 1]"),
    (["algo=rainbow", "algo.noise_std=0"], "algo.noise_std=0", "> 0"),
    (["algo=rainbow", "algo.atoms=1"], "algo.atoms=1", "≥ 2"),
    (["algo=rainbow", "algo.buffer_size=5000"], "algo.buffer_size=5000", "prioritized replay"),
    (["algo=dqn", "algo.n_step=5", "algo.learning_starts=0"], "algo.learning_starts=0", "no whole 5-step window"),
    (["seeds=0"], "seeds=0", "positive integer"),
    (["seeds=-3"], "seeds=-3", "positive integer"),
    (["seeds=[1,1]"], "seeds=[1, 1]", "distinct"),
    (["num_envs=0"], "num_envs=0", "positive integer"),
    (["num_envs=abc"], "num_envs=abc", "must be an integer"),
    (["algo.lr=fast"], "algo.lr=fast", "float"),
    (["total_timesteps=1.5"], "total_timesteps=1.5", "integer"),
    (["num_envs=4", "algo.num_steps=10", "algo.num_minibatches=3"], "algo.num_minibatches=3", "divide"),
    (["total_timesteps=10"], "total_timesteps=10", "below one rollout"),
    (["algo.gamma=1.5"], "algo.gamma=1.5", "[0, 1]"),
    (["algo.gae_lambda=-0.1"], "algo.gae_lambda=-0.1", "[0, 1]"),
    (["algo.lr=-1"], "algo.lr=-1", "> 0"),
    (["algo.activation=sigmoidal"], "algo.activation=sigmoidal", "one of"),
    (["+extra=1"], "+extra=1", "not allowed"),
    (["algo._target_=os.system"], "_target_", "not allowed"),
    (["cartpole"], "cartpole", "env=cartpole"),
    (["resume=/nonexistent/run"], "resume=/nonexistent/run", "does not exist"),
    (["plots=maybe"], "plots=maybe", "true or false"),
    (["progress=maybe"], "progress=maybe", "true, false or chunk"),
    (["parallel=both"], "parallel=both", "seeds or data"),
    (["devices=-1"], "devices=-1", "≥ 0"),
    (["compile_cache="], "compile_cache=", "auto, off or a directory"),
    (["dist.coordinator=nohost"], "dist.coordinator=nohost", "HOST:PORT"),
    (["dist.num_processes=2"], "dist.coordinator=", "is needed"),
    (["dist.num_processes=2", "dist.coordinator=h:1", "dist.process_id=5"], "dist.process_id=5", "[0, 1]"),
    (["env=pendulum", "algo=sac", "parallel=data"], "parallel=data", "seeds only"),
]


@pytest.mark.parametrize("argv, field_value, hint", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_input_exits_2_with_one_line(argv, field_value, hint, tmp_path, capsys, monkeypatch):
    _assert_rejected(argv, field_value, hint, tmp_path, capsys, monkeypatch)


BAD_ENVIRONMENT = [
    ("JAXRL_CPU_OPT_LEVEL", "fast", "JAXRL_CPU_OPT_LEVEL=fast", "0, 1, 2, 3 or default"),
    ("JAXRL_CPU_OPT_LEVEL", "7", "JAXRL_CPU_OPT_LEVEL=7", "0, 1, 2, 3 or default"),
    ("JAXRL_CPU_DEVICES", "two", "JAXRL_CPU_DEVICES=two", "whole number"),
    ("JAXRL_CPU_THREADS", "0", "JAXRL_CPU_THREADS=0", "positive whole number"),
    ("JAXRL_CPU_THREADS", "many", "JAXRL_CPU_THREADS=many", "positive whole number"),
]


@pytest.mark.parametrize(
    "name, value, field_value, hint", BAD_ENVIRONMENT, ids=[f"{b[0]}={b[1]}" for b in BAD_ENVIRONMENT]
)
def test_bad_environment_variable_exits_2_with_one_line(name, value, field_value, hint, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(name, value)
    _assert_rejected([], field_value, hint, tmp_path, capsys, monkeypatch)


def _assert_rejected(argv, field_value, hint, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = train.main(argv + [f"runs_root={tmp_path / 'runs'}"])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    message = lines[0]
    assert message.startswith("error: ")
    assert field_value in message and hint in message
    assert "fix:" in message
    assert "Traceback" not in captured.err + captured.out
    assert not (tmp_path / "runs").exists()  # nothing half-written
    assert os.listdir(tmp_path) == []


def test_resume_dir_without_config(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert train.main([f"resume={tmp_path / 'empty'}"]) == 2
    assert "no config.yaml" in capsys.readouterr().err


def test_resume_with_corrupt_config(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("env: [unclosed\n")
    assert train.main([f"resume={run}"]) == 2
    err = capsys.readouterr().err
    assert "config.yaml is corrupt" in err and len(err.strip().splitlines()) == 1


def test_validate_raises_config_error_with_parts():
    with pytest.raises(ConfigError) as info:
        validate(parse(["num_envs=0"]))
    assert info.value.field == "num_envs" and info.value.value == 0
    assert "positive" in info.value.constraint and info.value.fix


def test_help(capsys):
    assert train.main(["--help"]) == 0
    assert "usage" in capsys.readouterr().out


def test_config_for_is_the_cli_config():
    """Research code gets the config the CLI runs: the env's preset, then the overrides."""
    assert config_for("cartpole") == parse(["env=cartpole"])
    config = config_for("pendulum", "algo.lr=1e-3", algo="sac", seeds=4, eval={"episodes": 3})
    assert config == validate(parse(["env=pendulum", "algo.lr=1e-3", "algo=sac", "seeds=4", "eval.episodes=3"]))
    assert config.algo.name == "sac" and config.num_envs == PRESETS[("Pendulum-v1", "sac")]["num_envs"]
    with pytest.raises(ConfigError, match="unknown environment"):
        config_for("cartpol")


def test_field_policies_are_declared_once_and_derived():
    """What may change on resume, what may be swept and what is traced come
    from each field's own declaration (jaxrl.core.fields)."""
    assert set(RESUMABLE) == {
        *(f"actor.{k}" for k in ("kind", "threads", "max_lag", "sync", "envs", "timeout_s", "runners")),
        *(f"actor.{k}" for k in ("envs_per_runner", "cpus_per_runner", "strategy", "address", "max_replaced")),
        "progress",
        "plots",
        "keep",
        "checkpoint",
        "logger",
        "wandb_project",
        "compile_cache",
        "profile",
        "devices",
        "dist.coordinator",
        "dist.num_processes",
        "dist.process_id",
        "dist.auto",
        "dist.heartbeat_s",
    }
    assert "once" in sweep_refusal("devices") and "per environment" in sweep_refusal("env")
    assert sweep_refusal("eval.episodes") and sweep_refusal("pbt.population") and sweep_refusal("dist.coordinator")
    assert not sweep_refusal("num_envs") and not sweep_refusal("algo.lr") and not sweep_refusal("env.params")
    assert "per algorithm" in sweep_refusal("algo")
    assert traced_names(type(parse([]).algo)) == (
        "lr", "gamma", "gae_lambda", "clip_eps", "vf_coef", "ent_coef", "max_grad_norm", "target_kl", "min_lr",
        "max_lr", "reward_scale",
    )  # fmt: skip


@pytest.mark.parametrize("algo", ["td3", "sac", "ppo"])
def test_fields_added_at_their_defaults_leave_older_runs_hash(algo):
    """Runs written before ``algo.critic``/``atoms``/``v_min``/``v_max`` (TD3, SAC) and
    ``env.module`` existed hashed a config without them, and runs written before
    ``preset`` and the fast recipe's ``algo.weight_decay``/``norm``/``critic_hidden_sizes``
    (TD3, SAC; TD3's ``noise_scales``/``noise_min``) a config with the first but not
    these, nor the later ``algo.policy_delay`` (SAC) and ``algo.n_step`` (TD3, SAC):
    at their defaults the fields stay out of the digest, and the digests a resume
    accepts include each older version's (so those runs resume); any other value
    is in it."""
    import dataclasses

    import jax
    import numpy as np

    from jaxrl.core.fields import policy_of
    from jaxrl.run.checkpoint import config_hash
    from jaxrl.run.overrides import resolve, to_dict
    from jaxrl.run.rundir import config_digest, config_digests, jsonable
    from jaxrl.run.spec import prepare

    config = resolve(["env=pendulum", f"algo={algo}", "total_timesteps=2048"])
    spec = prepare(config, "unused", layout=False)
    members = spec.members

    def written_by(dropped: dict[str, tuple[str, ...]]) -> str:
        """The hash a version without the ``dropped`` fields ({section: names}; "": top level) wrote."""
        data = to_dict(config)
        for f in dataclasses.fields(type(config)):
            if not policy_of(f).hashed:
                data.pop(f.name, None)
        for section, names in dropped.items():
            for name in names:
                (data[section] if section else data).pop(name)
        data["_members"] = {
            "seeds": list(members.seeds),
            "config_index": list(members.config_index),
            "labels": list(members.labels),
            "hparams": jsonable(jax.tree.map(np.asarray, members.hparams).to_dict()),
        }
        return config_hash(data)

    critic = ("critic", "atoms", "v_min", "v_max") if algo != "ppo" else ()
    fast = {"td3": ("critic_hidden_sizes", "norm", "weight_decay", "noise_scales", "noise_min"), "ppo": ()}
    fast_fields = fast.get(algo, ("critic_hidden_sizes", "norm", "weight_decay"))
    # added after the fast recipe: SAC's policy_delay, then TD3's and SAC's n_step
    later = {"sac": ("policy_delay", "n_step"), "td3": ("n_step",)}.get(algo, ())
    first = written_by({"env": ("module",), "algo": critic + fast_fields + later, "": ("preset",)})
    # the version that added preset= and the fast recipe hashed those at their defaults too
    fast_version = written_by({"env": ("module",), "algo": critic + later})
    assert config_digest(spec) == first and fast_version in config_digests(spec)
    # host runs (jaxrl.run.host) hashed every field that existed, at any value
    from jaxrl.run.rundir import HOST_KEPT_BEFORE, accepted_hashes

    data = to_dict(config)
    host = accepted_hashes(data, config, HOST_KEPT_BEFORE)
    for existed in (later, later + fast_fields):  # before policy_delay; before the fast recipe too
        older = to_dict(config)
        for name in existed:
            older["algo"].pop(name)
        if existed == later + fast_fields:
            older.pop("preset")
        assert config_hash(older) in host
    if algo != "ppo":
        categorical = resolve(["env=pendulum", f"algo={algo}", "total_timesteps=2048", "algo.critic=categorical"])
        assert config_digest(prepare(categorical, "unused", layout=False)) != config_digest(spec)
        decayed = resolve(["env=pendulum", f"algo={algo}", "total_timesteps=2048", "algo.weight_decay=0.1"])
        assert config_digest(prepare(decayed, "unused", layout=False)) != config_digest(spec)
