"""Binder: the files in binder/ build a working CPU environment the way repo2docker does.

repo2docker's Python build pack, for a repository with ``binder/runtime.txt`` and ``binder/requirements.txt``:
creates an environment of the Python named in runtime.txt, runs ``pip install -r binder/requirements.txt`` in it,
copies the repository in, and runs ``./binder/postBuild`` from the repository root. This test does the same in a
fresh virtual environment (no system site-packages) on a copy of the checkout, adds pytest and nbval (binder/
installs no test tools), then runs one notebook under nbval with that environment's Python, and checks that the notebook imported gpulab from the copy and that torch
is the CPU build.

Differences from repo2docker, on purpose: pip's cache is used (repo2docker passes ``--no-cache-dir``), so a second
run takes about a minute; where torch's CPU wheel index does not answer, the requirements are installed without
that line, from pip's other configured sources, and the test is skipped unless those hold a CPU build of the
pinned torch (a CUDA build is several GB). Skipped offline (PyPI unreachable): ``-m "not network"``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
NOTEBOOK = "notebooks/02_warp_divergence.ipynb"  # figures, slider explorers, kernels in the interpreter; ~30 s

pytestmark = [pytest.mark.network, pytest.mark.slow]


def _answers(url: str, seconds: float = 5.0) -> bool:
    """True if url answers within `seconds` (a thread bounds DNS lookups too)."""
    ok: list[bool] = []

    def probe() -> None:
        request = urllib.request.Request(url, method="HEAD")
        # any failure means "does not answer"
        with contextlib.suppress(Exception), urllib.request.urlopen(request, timeout=seconds) as r:
            ok.append(r.status < 400)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(seconds)
    return bool(ok and ok[0])


def _run(cmd: list[str], cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed ({out.returncode}):\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    )
    return out


def _copy_checkout(dest: Path) -> None:
    """The files repo2docker would see: tracked and untracked-but-not-ignored ones (no .venv, site/, caches)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: cannot tell which files repo2docker would copy")
    for rel in filter(None, listed.stdout.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)  # keeps postBuild's executable bit


def _requirement_lines() -> tuple[list[str], str | None]:
    """binder/requirements.txt's lines, and its --extra-index-url (None if it names none)."""
    lines = (BINDER / "requirements.txt").read_text().splitlines()
    index = next((l.split(None, 1)[1].strip() for l in lines if l.strip().startswith("--extra-index-url")), None)
    return lines, index


def test_runtime_names_the_python_of_the_pinned_torch():
    """repo2docker's default Python (3.10 in current releases) is not the one the torch pin was tested with:
    runtime.txt must name it, as ``python-X.Y``."""
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert runtime == "python-3.11", f"binder/runtime.txt says {runtime!r}"
    lines, index = _requirement_lines()
    assert any(l.strip() == "torch==2.13.0" for l in lines), "binder/requirements.txt must pin the CPU torch"
    assert index == "https://download.pytorch.org/whl/cpu", f"torch's CPU wheel index, got {index!r}"
    assert os.access(BINDER / "postBuild", os.X_OK), "repo2docker runs ./binder/postBuild: it must be executable"


def test_binder_environment_runs_a_notebook(tmp_path):
    want = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    have = f"{sys.version_info.major}.{sys.version_info.minor}"
    if have != want:
        pytest.skip(f"binder/runtime.txt asks for Python {want}; this is {have}")
    if not _answers("https://pypi.org/simple/pip/"):
        pytest.skip("PyPI does not answer (offline)")

    repo, venv = tmp_path / "repo", tmp_path / "env"
    _copy_checkout(repo)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPULAB_", "PYTHON", "VIRTUAL_ENV", "JUPYTER", "TRITON_"))
    }
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env, 120)
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    pip = [str(venv / "bin" / "python"), "-m", "pip"]

    # repo2docker's pip step: pip install -r binder/requirements.txt
    lines, index = _requirement_lines()
    requirements = "binder/requirements.txt"
    if index and not _answers(index.rstrip("/") + "/"):
        print(f"\n{index} does not answer: installing binder/requirements.txt without it")
        requirements = str(tmp_path / "requirements.txt")
        Path(requirements).write_text("\n".join(l for l in lines if not l.strip().startswith("--extra-index-url")))
        dry = _run([*pip, "install", "--dry-run", "--quiet", "--report", "-", "torch==2.13.0"], repo, env, 300)
        picked = [
            i["metadata"]["version"]
            for i in json.loads(dry.stdout).get("install", [])
            if i["metadata"]["name"].lower() == "torch"
        ]
        if not picked or "+cpu" not in picked[0]:
            pytest.skip(f"without {index}, pip would take torch {picked}, not a CPU build")
    _run([*pip, "install", "--quiet", "-r", requirements], repo, env, 900)

    # repo2docker's last step: ./binder/postBuild from the repository root
    _run(["./binder/postBuild"], repo, env, 300)
    news = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "gpulab.json"
    assert json.loads(news.read_text()) == {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}

    python = str(venv / "bin" / "python")
    probe = _run(
        [python, "-c", "import json, gpulab, torch; print(json.dumps([gpulab.__file__, torch.version.cuda]))"],
        tmp_path,
        env,
        120,
    )
    where, cuda = json.loads(probe.stdout.strip().splitlines()[-1])
    assert Path(where).resolve().is_relative_to(repo.resolve()), f"gpulab imported from {where}, not the checkout"
    assert cuda is None, f"torch is a CUDA build ({cuda}); Binder is CPU only"

    # binder/ installs no test tools (a learner needs none): the test brings its own, at pyproject's floors
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    tools = [r for r in test_extra if r.split(">=")[0] in ("pytest", "nbval")]
    _run([*pip, "install", "--quiet", *tools], repo, env, 300)
    run = _run([python, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "-q", NOTEBOOK], repo, env, 600)
    assert " passed" in run.stdout and " failed" not in run.stdout, run.stdout[-3000:]
