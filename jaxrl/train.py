"""``python -m jaxrl.train env=NAME [algo=ppo] [seeds=N] [key=value ...]``

Trains one algorithm on one environment over many seeds in one compiled
program, then prints a robustness table. The run directory (printed at start
and end) holds ``config.yaml``, ``metrics.jsonl``, ``summary.json``,
``curves.png`` and orbax checkpoints; ``resume=<run_dir>`` continues a stopped
run with the same numbers an uninterrupted run gives.

Exit codes: 0 done, 2 bad input (one line on stderr), 130/143 stopped by
SIGINT/SIGTERM after writing a checkpoint.
"""

from __future__ import annotations

import sys
import time

LAUNCHED = time.perf_counter()  # before the imports: python -m jaxrl.train's wall time includes them

from jaxrl.perf import platform  # noqa: E402, I001  (first: it settles the process before jax loads)

if __name__ == "__main__":  # python -m jaxrl.train: XLA's log level and flags before jaxlib loads
    platform.configure()

from jaxrl.core.errors import ConfigError  # noqa: E402
from jaxrl.run import training  # noqa: E402
from jaxrl.run.overrides import resolve, to_dict  # noqa: E402
from jaxrl.run.signals import StopRequest  # noqa: E402

__all__ = ["USAGE", "main"]

USAGE = """usage: python -m jaxrl.train env=NAME [algo=ppo] [seeds=N] [key=value ...]

  env=cartpole            short name (cartpole, acrobot, mountaincar, pendulum,
                          mountaincar-continuous) or any gymnax id (Breakout-MinAtar);
                          brax:ant, and the optional suites SUITE:ID, each its extra
                          (pip install 'jaxrl[SUITE]'): craftax:Craftax-Classic-Symbolic-v1,
                          jumanji:Snake-v1, navix:Navix-DoorKey-5x5-v0,
                          xminigrid:MiniGrid-DoorKey-5x5, playground:CartpoleBalance
                          (every id: python -c "import jaxrl.envs; print(jaxrl.envs.names())");
                          host envs: gymnasium:CartPole-v1 (any gymnasium id; env.module=M
                          imports M first), trained by actor threads + one learner:
                          actor.threads=1 actor.max_lag=1 actor.sync=false actor.envs=sync|async;
                          or by env runners on Ray: actor=ray actor.runners=2 actor.address=HOST:PORT
  algo=ppo                ppo | a2c | reinforce | impala (policy gradient), sac | td3 (continuous,
                          replay), pqn | dqn (discrete, Q-learning); jaxrl.algos.register adds yours
  seeds=16 | seeds=[0,5]  number of seeds (ids seed..seed+N-1) or explicit ids
  preset=fast             a named preset over the env's own (td3's fast off-policy recipe; ENV@NAME in
                          jaxrl/algos/presets/<algo>.yaml adds one)
  num_envs=4 total_timesteps=5e5 num_evals=20 eval.episodes=16 eval.perturb="length=0.5,1"
  env.randomize="length=uniform(0.25,1)" (parameters drawn per episode) env.params="gravity=12"
  eval.sets="nominal; test: length=1.5,2" (named sets tracked at every evaluation point)
  algo.lr=2.5e-4 algo.num_steps=128 algo.update_epochs=4 algo.num_minibatches=4
  algo.gamma=0.99 algo.gae_lambda=0.95 algo.clip_eps=0.2 algo.ent_coef=0.01
  algo.vf_coef=0.5 algo.max_grad_norm=0.5 algo.lr_schedule=linear|constant|adaptive
  algo.hidden_sizes=[64,64] algo.activation=tanh algo.normalize_obs=false algo.network=mlp
  run_dir=PATH resume=RUN_DIR progress=true|chunk|false plots=true keep=2 on_nan=stop|drop
  profile=true (time per update: rollout / advantages / learner, plus a jax.profiler trace)
  perf=auto|on|off (jaxrl's XLA:CPU kernels; auto: on for the CPU backend only)
  compile_cache=auto|off|DIR (persistent XLA cache; auto: $JAXRL_COMPILE_CACHE or ~/.cache/jaxrl/xla/<cpu>)
  algo=pqn: algo.q_lambda=0.65 algo.eps_end=0.05 algo.exploration_fraction=0.2 algo.norm=layer_norm
  algo=dqn: algo.buffer_size=50000 algo.tau=0.02 algo.target_update_interval=1 algo.n_step=1 algo.dueling=false
  algo=td3: algo.exploration_noise=0.1 algo.noise_correlation=0 algo.policy_delay=2 algo.target_noise=0.2
  pbt.population=16 pbt.interval=20 pbt.hparams=[lr,ent_coef,clip_eps] pbt.fitness=SET (an eval.sets name)
  (sweeps: python -m jaxrl.sweep …; comparisons: python -m jaxrl.report RUN_DIR …)

Per-env presets apply first; your overrides win. `--help env=NAME [key=value ...]` prints
the resolved config without training (jaxrl.config_for(NAME, ...) gives it to Python code).
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    helps = ("-h", "--help", "help")
    if any(a in helps for a in argv):
        return _help([a for a in argv if a not in helps])
    stopper = StopRequest()  # from the start: Ctrl-C while compiling also exits cleanly
    stopper.install()
    try:
        platform.configure()  # process settings, before jax starts its backend
        platform.quiet_libraries()
        platform.check_environment()
        config = resolve(argv)
        # both before jax starts its backend; a one-thread pool keeps one device
        # (with a second XLA:CPU device beside it, the single thread measured no faster)
        threads = platform.size_cpu_pool(*training.cpu_job(config))
        devices = platform.split_cpu_devices() if threads != 1 else 0
        return training.run(
            config,
            platform.process_settings(devices, threads, started=LAUNCHED if __name__ == "__main__" else 0.0),
            stopper=stopper,
        )
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        stopper.restore()


def _help(overrides: list[str]) -> int:
    """``--help``: the usage; ``--help env=NAME …``: the config those overrides
    run (the env's preset, then the overrides), as ``config.yaml`` would hold it."""
    if not overrides:
        print(USAGE)
        return 0
    import yaml

    platform.quiet_libraries()
    try:
        config = resolve(overrides)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"# python -m jaxrl.train {' '.join(overrides)}: the resolved config (the env's preset, then yours)")
    print(yaml.safe_dump(to_dict(config), sort_keys=False, default_flow_style=None), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
