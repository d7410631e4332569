"""The documentation site: it builds with ``mkdocs build --strict`` (what
``make docs`` runs), its generated configuration reference lists every key of
the schema, and every ```python block on it runs.

The blocks of one page run in order in one namespace (a reader who runs them
top to bottom), each page in a fresh process from the repository root. Budgets
are shrunk, and fragments given what the prose around them assumes, only by
the substitutions of :data:`SUBSTITUTIONS`, each of which must find its
original text in the block, so an example that drifts fails here loudly.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import CARTPOLE_TINY

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MKDOCS = Path(sys.executable).with_name("mkdocs")
RECIPE = "$(BIN)/mkdocs build --strict"  # the Makefile's docs recipe
MARKER = "<!-- config-keys -->"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)

TINY = ", ".join(f'"{arg}"' for arg in CARTPOLE_TINY)
# (page, block index) → [(original text, replacement)]; TMP is a fresh directory
SUBSTITUTIONS: dict[tuple[str, int], list[tuple[str, str]]] = {
    # the runs of research.md at CARTPOLE_TINY (2 chunks of 16 updates)
    ("docs/research.md", 0): [('config_for("cartpole")', f'config_for("cartpole", {TINY})')],
    # the contributing pages' worked examples train through the CLI into the test's directory
    ("docs/contributing/algorithm.md", 3): [('"num_evals=2"])', '"num_evals=2", f"runs_root={TMP}"])')],
    ("docs/contributing/env.md", 1): [('"num_evals=2"])', '"num_evals=2", f"runs_root={TMP}"])')],
}
# pages whose python blocks another module runs (on what they need: a Ray cluster) → that test
RUN_ELSEWHERE: dict[str, str] = {
    "docs/cluster.md": "tests/test_launchers.py::test_run_on_ray_gives_the_one_process_report",
}
# what each page's namespace must hold after its blocks ran (beyond not raising)
CHECKS: dict[str, str] = {
    "docs/contributing/algorithm.md": "assert int(metrics.loop.episodes) > 0 and 'linear_pg' in jaxrl.algos.names()",
    "docs/contributing/env.md": "assert 'Corridor-8' in jaxrl.envs.names()",
    "docs/contributing/network.md": "assert metrics.eval.returns.shape[0] == 2",
    "docs/research.md": (
        "assert adv.shape == (128, 4)\n"
        "assert 'LayerNorm_0' in state.agent.params['params']['actor_torso']\n"
        "assert step.reward.shape == (8,)"
    ),
}

DRIVER = r"""
import json, sys
blocks, check, tmp = json.loads(sys.stdin.read()), sys.argv[1], sys.argv[2]
namespace = {"__name__": "__docs__", "TMP": tmp}
for i, (name, code) in enumerate(blocks):
    exec(compile(code, name, "exec"), namespace)
    print(f"ran block {i + 1} of {len(blocks)}", flush=True)
exec(compile(check, "checks", "exec"), namespace)
print("checks passed", flush=True)
"""


def docs_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def python_blocks(path: Path) -> list[str]:
    """The ```python blocks of a Markdown file, dedented (they may sit in a list item)."""
    return [textwrap.dedent(m.group("body")) for m in FENCE.finditer(path.read_text())]


def blocks_by_page() -> dict[str, list[str]]:
    out = {}
    for path in [REPO / "README.md", *docs_pages()]:
        found = python_blocks(path)
        if found:
            out[str(path.relative_to(REPO))] = found
    return out


BLOCKS = blocks_by_page()
RUN_HERE = sorted(page for page in BLOCKS if page not in RUN_ELSEWHERE)


def substituted(page: str, index: int, code: str) -> str:
    for old, new in SUBSTITUTIONS.get((page, index), []):
        assert old in code, f"{page}, python block {index + 1}: the example changed, no {old!r} in it"
        code = code.replace(old, new)
    return code


def make_recipe(target: str) -> list[str]:
    makefile = (REPO / "Makefile").read_text()
    body = makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in body.splitlines()[1:] if line.startswith("\t")]


def test_make_docs_is_the_build_here():
    """``make docs`` runs exactly the build :func:`site` runs (into its own directory)."""
    assert make_recipe("docs") == [RECIPE]
    assert "docs" in re.search(r"^\.PHONY:(.*)$", (REPO / "Makefile").read_text(), re.M).group(1).split()
    assert "\ndocs: $(DEV)" in (REPO / "Makefile").read_text()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    argv = [str(MKDOCS), *RECIPE.split()[1:], "--site-dir", str(out)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's banner about its end of life
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not re.search(r"^(WARNING|ERROR)\b", proc.stderr, re.M), proc.stderr[-4000:]
    return out


def test_the_site_builds_strictly(site):
    import yaml

    def pages(nav):
        for item in nav:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            yield from pages(value) if isinstance(value, list) else [value]

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)  # mkdocs' !!python/name tags
    nav = list(pages(yaml.load((REPO / "mkdocs.yml").read_text(), Loader)["nav"]))
    assert sorted(nav) == sorted(str(p.relative_to(DOCS)) for p in docs_pages())  # every page is in the nav
    for page in nav:
        built = site / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert built.is_file(), page
    assert (site / "curves.png").is_file()
    assert "jaxrl.make_train" in (site / "api" / "index.html").read_text()


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def _rows(table: str) -> list[list[str]]:
    """The body rows of an HTML table, each cell as text."""
    cells = (re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S))
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in row] for row in cells if row]


def test_the_configuration_reference_lists_every_key(site):
    from jaxrl.core.fields import traced_names
    from jaxrl.run.launch import LauncherConfig
    from jaxrl.run.overrides import ALGOS, schema

    marked = [p for p in docs_pages() if MARKER in p.read_text()]
    assert [str(p.relative_to(DOCS)) for p in marked] == ["cli.md"]
    for page in marked:
        built = site / page.relative_to(DOCS).with_suffix("") / "index.html"
        raw = built.read_text()
        codes = {html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", raw)}
        assert set(ALGOS) >= {"ppo", "a2c", "reinforce", "sac", "td3", "pqn", "dqn"}
        for algo in ALGOS:
            assert f"algo={algo}" in codes, algo
            missing = [key for key in schema(algo) if key not in codes]
            assert not missing, (algo, missing)
        launcher = [
            "launcher" if f.name == "name" else f"launcher.{f.name}" for f in dataclasses.fields(LauncherConfig)
        ]
        assert not [key for key in launcher if key not in codes]
        for algo in ALGOS:  # its traced hyperparameters are marked so, on the algorithm's own table
            heading = re.search(rf"<h4[^>]*>.*?<code>algo={algo}</code>", raw, re.S).end()
            rows = {cells[0]: cells[-1] for cells in _rows(raw[heading:].split("</table>", 1)[0])}
            assert set(rows) == {k for k in schema(algo) if k.startswith("algo.")}, algo
            assert {k for k, kind in rows.items() if kind == "traced"} == {
                f"algo.{n}" for n in traced_names(ALGOS[algo])
            }
        text = _text(built)
        assert "usage: python -m jaxrl.train" in text and "usage: python -m jaxrl.sweep" in text


def test_descriptions_come_from_the_field_comments():
    import importlib.util

    from jaxrl.algos.ppo import PPOConfig
    from jaxrl.core.config import EnvConfig

    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    env = hooks.comments(EnvConfig)
    assert env["name"] == "short name, gymnax id, brax name or brax:<name>"  # the comment after the field
    assert env["randomize"].startswith("domain randomization: parameters drawn per env")  # the lines above it
    ppo = hooks.comments(PPOConfig)
    assert ppo["num_steps"] == "rollout length T per env per update"
    assert ppo["lr"] == "Adam step size (schedules start here)"  # a "# --- traced … ---" separator describes nothing
    assert hooks.default(dataclasses.fields(PPOConfig)[-1]) == "1.0"  # reward_scale, as the CLI takes it
    values = (True, None, (64, 64), "", 2.5e-4, 1e10)
    assert [hooks._value(v) for v in values] == ["true", "null", "[64,64]", '""', "0.00025", "1e+10"]


def test_the_committed_cli_reference_is_current():
    """cli.md reads whole as a file: the generated text between its markers is
    committed, and equals what the code generates now."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = (DOCS / "cli.md").read_text()
    assert "usage: python -m jaxrl.train" in page and "`algo.clip_eps`" in page
    assert hooks.fill(page) == page, "docs/cli.md is stale: run python docs/hooks.py"


def test_the_substitutions_name_real_blocks():
    for page, index in SUBSTITUTIONS:
        assert index < len(BLOCKS.get(page, [])), (page, index)
    assert set(CHECKS) <= set(RUN_HERE)
    for page, test in RUN_ELSEWHERE.items():  # the other module reads that page's blocks
        module, _, name = test.partition("::")
        source = (REPO / module).read_text()
        assert f"def {name}(" in source and page.removeprefix("docs/") in source, test


@pytest.mark.parametrize("page", RUN_HERE)
def test_every_python_block_runs(page, tmp_path):
    blocks = [(f"{page}[{i + 1}]", substituted(page, i, code)) for i, code in enumerate(BLOCKS[page])]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, CHECKS.get(page, ""), str(tmp_path)],
        input=json.dumps(blocks),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{page}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    ran = re.findall(r"^ran block (\d+) of (\d+)$", proc.stdout, re.M)
    assert len(ran) == len(BLOCKS[page]) == int(ran[-1][1]), proc.stdout  # no block skipped
    assert "checks passed" in proc.stdout


def test_no_python_block_is_left_out():
    """Every ```python fence of the site is one :data:`BLOCKS` holds (an unclosed
    or oddly indented fence would otherwise drop out of the count silently), and
    every page with blocks is run here or by the test :data:`RUN_ELSEWHERE` names."""
    for path in [REPO / "README.md", *docs_pages()]:
        opened = len(re.findall(r"^[ \t]*```python", path.read_text(), re.M))
        assert opened == len(BLOCKS.get(str(path.relative_to(REPO)), [])), path
    assert sorted(BLOCKS) == sorted([*RUN_HERE, *(p for p in RUN_ELSEWHERE if p in BLOCKS)])
