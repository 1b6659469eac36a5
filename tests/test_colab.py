"""Colab, faked: a ``google.colab`` module in sys.modules (in a subprocess) makes gpulab pick the figure path that
renders there, redraw it on every change, and leave the custom widget manager alone; the install cell never
replaces torch or Triton, and an old torch/Triton pair is refused by name."""

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gpulab
from gpulab.figures import widgets

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sync_links  # noqa: E402  (tools/ is not a package: on the path only from here)

FAKE_COLAB = """
import sys, types
calls = []
colab = types.ModuleType("google.colab")
output = types.ModuleType("google.colab.output")
output.enable_custom_widget_manager = lambda *a, **k: calls.append("enable")
colab.output = output
google = types.ModuleType("google")
google.colab = colab
sys.modules.update({"google": google, "google.colab": colab, "google.colab.output": output})
"""

PROBE = """
import json
import IPython.display
shown, draws = [], []
IPython.display.display = lambda *objs, **kw: shown.extend(objs)
import plotly.graph_objects as go
from gpulab.figures import widgets
draw = widgets.LiveFigure._draw
def counted(self):  # off Colab, fig.show() would pick a renderer for a plain process: count only
    draws.append(1)
    if widgets.FIGURE_PATH == "colab":
        draw(self)
widgets.LiveFigure._draw = counted
live = widgets.LiveFigure(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])))
first = len(draws)
live.update(lambda fig: fig.data[0].update(y=[5.5, 6.5]))
html = [getattr(o, "data", "") for o in shown]
print(json.dumps({"on_colab": widgets.ON_COLAB, "path": widgets.FIGURE_PATH, "static": live.static,
                  "draws": [first, len(draws)], "shown": len(shown),
                  "plotly_inline": bool(html) and all("plotly.js v" in h for h in html),
                  "new_data": bool(html) and "6.5" in html[-1] and "5.5" in html[-1],
                  "manager_calls": calls if "calls" in globals() else None}))
"""


def _probe(fake_colab: bool, **env) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GPULAB_")}
    full.update(env)
    code = (FAKE_COLAB if fake_colab else "") + PROBE
    r = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=180, cwd=ROOT, check=False
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_colab_gets_the_static_path_redrawn_with_plotly_inline():
    got = _probe(fake_colab=True)
    assert got["on_colab"] and got["path"] == "colab" and got["static"]
    assert got["draws"] == [1, 2] and got["shown"] == 2, "one draw at creation, one more per update"
    assert got["plotly_inline"], "each Colab draw must carry plotly.js itself (colabtools#5889)"
    assert got["new_data"], "the redraw shows the updated trace"
    assert got["manager_calls"] == [], "the static path needs no custom widget manager"


def test_jupyterlab_gets_figurewidgets_and_the_switch_forces_static():
    lab = _probe(fake_colab=False)
    assert lab["path"] == "widget" and not lab["static"] and lab["draws"] == [0, 0]
    forced = _probe(fake_colab=False, GPULAB_STATIC_FIGURES="1")
    assert forced["path"] == "static" and forced["static"] and forced["draws"] == [1, 2]


@pytest.mark.parametrize(
    "colab, static, anywidget_figures, path",
    [
        (True, False, True, "colab"),
        (True, True, False, "colab"),
        (False, False, True, "widget"),
        (False, True, True, "static"),
        (False, False, False, "static"),
    ],
)
def test_figure_path_table(colab, static, anywidget_figures, path):
    assert widgets.figure_path(colab, static, anywidget_figures) == path


def test_version_floor():
    gpulab.check_versions("2.11.0+cu128", "3.6.0")  # Colab's GPU image (docs/colab.md)
    gpulab.check_versions("2.5.0", "3.2.0")
    for torch_v, triton_v, named in [
        ("2.4.1+cu121", "3.6.0", "torch 2.4.1"),
        ("2.11.0", "3.1.0", "Triton 3.1.0"),
        ("2.11.0", None, "Triton (not installed)"),
        ("1.13.1", "2.0.0", "torch 1.13.1"),
    ]:
        with pytest.raises(RuntimeError, match=re.escape(named)):
            gpulab.check_versions(torch_v, triton_v)


def _pyproject_minimums() -> dict:
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*?)\]", text, flags=re.MULTILINE | re.DOTALL).group(1)
    return dict(re.findall(r'"([A-Za-z_-]+)>=([\d.]+)"', deps))


def test_version_floor_matches_pyproject():
    mins = _pyproject_minimums()
    assert mins["torch"] == ".".join(map(str, gpulab.MIN_TORCH))
    assert mins["triton"] == ".".join(map(str, gpulab.MIN_TRITON))


def test_install_cell_never_replaces_torch_or_triton():
    _, install = sync_links.expected(sync_links.repo_url())
    cell = sync_links.install_cell(install)
    pip_lines = [ln for ln in cell.splitlines() if "%pip" in ln]
    assert f'--no-deps "{install}"' in pip_lines[0]
    rest = " ".join(pip_lines[1:])
    for heavy in ("torch", "triton", "ipywidgets", "numpy", "jupyterlab"):
        assert heavy not in rest.lower(), f"the install cell must not install {heavy}"
    mins = _pyproject_minimums()
    for dep in sync_links.LIGHT_DEPS:  # each light dependency at pyproject's own floor
        name, floor = dep.strip('"').split(">=")
        assert mins[name] == floor, dep
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
        assert cell in cells, f"{path.name}: install cell stale; run python tools/sync_links.py"


def test_colab_detection_is_read_once_from_sys_modules():
    code = textwrap.dedent("""
        import sys, types
        from gpulab.figures import widgets
        before = widgets.ON_COLAB
        sys.modules["google.colab"] = types.ModuleType("google.colab")
        import importlib
        print(before, widgets.ON_COLAB)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert r.stdout.split() == ["False", "False"], r.stderr[-2000:]


# Colab's GPU image as far as the install cell meets it: docs/colab.md's table (googlecolab/backend-info's
# pip-freeze.gpu.txt), read here so the two cannot disagree. Python and JupyterLab (not installed) are no packages.
COLAB_DOC = ROOT / "docs" / "colab.md"
# what Colab's versions require, where it matters: a seeded package is installed without its dependencies
COLAB_REQUIRES = {"anywidget": ["ipywidgets>=7.6.0"]}


def colab_packages() -> dict[str, str]:
    """{package: version} from docs/colab.md's table of the Colab GPU image (its second column's first word)."""
    text = COLAB_DOC.read_text()
    table = text[text.index("| package | Colab GPU image |") :].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    versions = {name: cell.split()[0] for name, cell, *_ in rows}
    return {n: v for n, v in versions.items() if n != "Python" and re.fullmatch(r"\d[\w.+]*", v)}


def newest_on_the_index(names) -> dict[str, tuple[str, list[str]]]:
    """{package: (version, requirements)} for ``names`` and what they require, as this environment holds them: the
    versions pip took from PyPI when ``make setup`` built it, the newest then (the cell's pip takes the newest)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    found: dict[str, tuple[str, list[str]]] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        dist = metadata.distribution(name)
        requires = dist.requires or []
        found[name] = (dist.version, requires)
        needed = [Requirement(r) for r in requires]
        todo += [q.name for q in needed if q.marker is None or q.marker.evaluate({"extra": ""})]
    return found


def test_the_colab_table_is_read_whole():
    colab = colab_packages()
    assert colab["numpy"] == "2.1.3" and colab["platformdirs"] == "4.11.3" and colab["ipywidgets"] == "7.7.1"
    assert "jupyterlab" not in colab and "Python" not in colab
    # every package gpulab requires, and every one the cell names, is in the table
    _, install = sync_links.expected(sync_links.repo_url())
    named = re.findall(r'"([a-z_-]+)>=', sync_links.install_cell(install))
    assert named and set(named) | set(_pyproject_minimums()) <= set(colab), set(named) | set(_pyproject_minimums())


def _fake_wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A wheel holding only its metadata: pip resolves and checks it as it would the real package."""
    import zipfile

    dist = f"{name}-{version}.dist-info"
    files = {
        f"{dist}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: gpulab-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{f},,\n" for f in files) + f"{dist}/RECORD,,\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for arc, text in files.items():
            z.writestr(arc, text)
    return path


def test_install_cell_on_colabs_packages_prints_no_error(tmp_path):
    """The cell's %pip lines, run by pip offline in an environment holding Colab's versions (metadata-only wheels;
    gpulab's from pyproject.toml): pip's resolver reports no conflict, and torch and Triton stay Colab's."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    colab, index = tmp_path / "colab", tmp_path / "index"
    colab.mkdir(), index.mkdir()
    pinned = colab_packages()
    base = [_fake_wheel(colab, n, v, COLAB_REQUIRES.get(n, [])) for n, v in pinned.items()]
    _, install = sync_links.expected(sync_links.repo_url())
    cell = sync_links.install_cell(install)
    served = newest_on_the_index(re.findall(r'"([a-z_-]+)>=', cell))
    for n, (v, r) in served.items():
        _fake_wheel(index, n, v, r)
    gpulab_wheel = _fake_wheel(index, "gpulab", project["version"], project["dependencies"])

    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    pip = [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "--disable-pip-version-check"]
    offline = ["--no-index", "--find-links", str(index), "--no-cache-dir"]
    # no machine-wide index or constraints, and none of this interpreter's packages seen from the venv
    # (a PYTHONPATH would show pip its ipywidgets beside Colab's)
    env = {**os.environ, "PIP_NO_INPUT": "1", "PIP_CONFIG_FILE": os.devnull, "PYTHONNOUSERSITE": "1"}
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONSTRAINT", "PIP_REQUIRE_VIRTUALENV"):
        env.pop(var, None)
    for var in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE"):
        env.pop(var, None)

    def pip_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*pip, *args], capture_output=True, text=True, timeout=300, env=env, check=False)

    seeded = pip_run("install", "--no-deps", *offline, *map(str, base))
    assert seeded.returncode == 0, seeded.stderr[-3000:]

    lines = [ln.split("%pip", 1)[1] for ln in cell.splitlines() if "%pip" in ln]
    assert len(lines) == 2, lines
    for line in lines:
        args = [str(gpulab_wheel) if a == install else a for a in shlex.split(line)]
        ran = pip_run(*args, *offline)
        said = ran.stdout + ran.stderr
        assert ran.returncode == 0 and "ERROR" not in said, f"%pip{line}\n{said[-3000:]}"

    listed = pip_run("list", "--format", "json")
    have = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout)}
    assert have["gpulab"] == project["version"] and have["plotly"] == served["plotly"][0], "the newest plotly"
    kept = {n: have[n] for n in pinned if n != "plotly"}
    assert kept == {n: v for n, v in pinned.items() if n != "plotly"}, (
        "every other package stays Colab's (docs/colab.md)"
    )
