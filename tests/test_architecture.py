"""The package layout's rules, checked on the source (no JAX compile):

* import-linter's contracts in pyproject.toml hold (the layers, no cycles
  between the modules of a package) — and break on a copy with an upward or a
  cyclic import, so the check can fail;
* no jaxrl module imports another inside a function (the layers count those
  too), except the adapters of optional heavy dependencies;
* no private name crosses a module boundary;
* ``import jaxrl`` changes no environment variable and no jax setting;
* no module keeps state it mutates (no ``global``), reads the environment
  outside the CLI's process settings (:mod:`jaxrl.perf.platform`) or imports
  jax's private ``jax._src``;
* the host side reads in small pieces: no function of ``jaxrl/run`` is longer
  than 80 lines.
"""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jaxrl"
# (importing module, imported module) pairs allowed inside a function: a module
# whose own top-level imports load an optional, heavy dependency. None today
# (the brax adapter imports brax inside its functions).
# (module, imported module) pairs allowed inside a function, each for a reason:
OPTIONAL: set[tuple[str, str]] = {
    # jaxrl.perf's kernels load jax on first use, so that importing jaxrl.perf.platform
    # (what the CLI does first) leaves the process unsettled until configure() has run
    ("jaxrl.perf", "jaxrl.perf"),
}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> list[tuple[str, pathlib.Path, ast.Module]]:
    return [(_module_name(p), p, ast.parse(p.read_text())) for p in sorted(PACKAGE.rglob("*.py"))]


def _lint_imports(cwd: pathlib.Path) -> subprocess.CompletedProcess:
    exe = pathlib.Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "statement", "broken"),
    [
        # an upward import inside a function: core may not know the run layer
        ("core/errors.py", "def _upward():\n    from jaxrl.run import loop  # noqa\n", "CLI -> run"),
        # a sideways import between independent layers
        ("rl/advantages.py", "from jaxrl.envs import core as _envs  # noqa\n", "CLI -> run"),
        # a cycle inside the run package: checkpoint -> loop -> checkpoint
        ("run/checkpoint.py", "def _cycle():\n    from jaxrl.run import loop  # noqa\n", "No import cycles"),
        # one algorithm reaching into another instead of the shared building blocks
        ("algos/a2c.py", "from jaxrl.algos import ppo as _ppo  # noqa\n", "No algorithm imports another"),
    ],
)
def test_the_contracts_break_on_a_bad_import(tmp_path, module, statement, broken):
    copy = tmp_path / "src"
    shutil.copytree(PACKAGE, copy / "jaxrl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    target = copy / "jaxrl" / module
    target.write_text(target.read_text() + "\n\n" + statement)
    result = _lint_imports(copy)
    assert result.returncode != 0, result.stdout[-2000:]
    assert f"{broken}" in result.stdout and "BROKEN" in result.stdout


def test_no_jaxrl_import_inside_a_function():
    found = []
    for name, path, tree in _sources():
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("jaxrl")):
                    if (name, node.module) not in OPTIONAL:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module}")
                elif isinstance(node, ast.Import) and any(a.name.startswith("jaxrl") for a in node.names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} import")
    assert not found, "function-local jaxrl imports:\n" + "\n".join(found)


def test_no_private_name_crosses_a_module():
    found = []
    for _, path, tree in _sources():
        modules = set()  # local names bound to jaxrl modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxrl"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{alias.name}")
                    modules.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                modules |= {a.asname or a.name for a in node.names if a.name.startswith("jaxrl")}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not found, "\n".join(found)


def test_importing_jaxrl_leaves_the_process_settings_alone():
    code = (
        "import os, jax\n"
        "env, flags = dict(os.environ), dict(jax.config.values)\n"
        "import jaxrl, jaxrl.algos.ppo, jaxrl.run.loop, jaxrl.train\n"
        "changed = sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k))\n"
        "changed += sorted(k for k, v in jax.config.values.items() if flags.get(k) != v)\n"
        "print(changed)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def test_parsing_and_validating_a_config_starts_no_jax_backend():
    """The CLI sets the XLA:CPU device split and joins jax.distributed after
    validating the config: both need a backend that has not started."""
    code = (
        "from jax._src import xla_bridge\n"
        "import jaxrl.train, jaxrl.sweep, jaxrl.evaluate, jaxrl.export, jaxrl.report\n"
        "from jaxrl import parse, validate\n"
        "for argv in (['env=cartpole'], ['env=pendulum', 'algo=sac'], ['env=Breakout-MinAtar'], ['env=ant']):\n"
        "    validate(parse(argv))\n"
        "print(sorted(xla_bridge._backends))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def test_the_contract_names_jaxrl_ppo_and_jaxrl_sac_hold_the_algorithm_modules_names():
    import jaxrl
    import jaxrl.algos.ppo
    import jaxrl.algos.sac
    from jaxrl.ppo import loss_from_outputs

    for public, module in ((jaxrl.ppo, jaxrl.algos.ppo), (jaxrl.sac, jaxrl.algos.sac)):
        assert public.__all__ == module.__all__
        assert all(getattr(public, name) is getattr(module, name) for name in module.__all__)
    assert loss_from_outputs is jaxrl.algos.ppo.loss_from_outputs
    assert all(hasattr(jaxrl, name) for name in (*jaxrl.__all__, "Config", "ConfigError", "Trainer"))


def test_no_module_state_environment_reads_or_private_jax():
    found = []
    for name, path, tree in _sources():
        text = path.read_text()
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} global {', '.join(node.names)}")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(n.startswith("jax._src") for n in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports jax._src")
        if name != "jaxrl.perf.platform" and ("os.environ" in text or "getenv" in text):
            found.append(f"{path.relative_to(ROOT)} reads the environment")
    assert not found, "\n".join(found)


def test_no_long_function_on_the_host_side():
    long = []
    for _, path, tree in _sources():
        if path.parent.name != "run":
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80:
                long.append(
                    f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
                )
    assert not long, "\n".join(long)


def test_help_of_the_package_is_an_index_not_a_dump():
    """``help(jaxrl)`` shows the package guide and its functions, not pages of
    dataclass and tuple dunders; loading the names it lists is what imports jax."""
    import pydoc

    import jaxrl

    text = pydoc.render_doc(jaxrl, renderer=pydoc.plaintext)
    assert len(text.splitlines()) < 200, len(text.splitlines())
    for name in ("config_for", "make_train", "load_policy", "gae"):
        assert f"\n    {name}(" in text, name
    assert "Config" in text and "__eq__" not in text and "_asdict" not in text
    assert jaxrl.Trainer.train_chunk.__doc__.startswith("train_chunk(state, hparams)")  # not "Alias for field 3"
