"""The install routes name what a learner needs, from pyproject.toml: binder/requirements.txt lists its
dependencies and its `lab` extra (no test tools); environment.yml installs gpulab itself from the checkout.

The environment.yml checks are static (the file's structure): conda is not installed on the machines this suite
runs on, and ``test_conda_dry_run`` skips itself where it is missing."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import setup_env  # noqa: E402  (tools/ is not a package: on the path only from here)

NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def norm(requirement: str) -> str:
    """PEP 503 name of a PEP 508 requirement line."""
    return re.sub(r"[-_.]+", "-", NAME.match(requirement.strip()).group()).lower()


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def environment_yml() -> tuple[list[str], list[str]]:
    """The conda dependencies and the items of the `- pip:` list: a line-based read, so PyYAML is not needed."""
    conda, pip, pip_indent, deps_indent = [], [], None, None
    for line in (ROOT / "environment.yml").read_text().splitlines():
        text = line.split(" #")[0].rstrip()
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        indent = len(text) - len(text.lstrip())
        if text.strip() == "dependencies:":
            deps_indent = indent
        elif re.fullmatch(r"\s*-\s*pip:", text):
            pip_indent = indent
        elif pip_indent is not None and indent > pip_indent and text.lstrip().startswith("- "):
            pip.append(text.lstrip()[2:].strip().strip("'\""))
        elif deps_indent is not None and indent > deps_indent and text.lstrip().startswith("- "):
            pip_indent = None
            conda.append(text.lstrip()[2:].strip())
        elif indent <= (deps_indent or 0):
            deps_indent = pip_indent = None
    return conda, pip


def from_requirements_txt() -> set:
    lines = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    return {norm(s) for s in (l.split(" #")[0].strip() for l in lines) if s and s[0] not in "#-."}


def test_binder_installs_what_a_learner_needs_and_no_test_tools():
    p = project()
    want = {norm(r) for r in p["dependencies"] + p["optional-dependencies"]["lab"]}
    have = from_requirements_txt()
    assert have == want, f"binder/requirements.txt: missing {sorted(want - have)}, extra {sorted(have - want)}"
    tools = {norm(r) for r in p["optional-dependencies"]["test"]}
    assert not have & tools, f"binder/requirements.txt installs test tools {sorted(have & tools)}"


def test_environment_yml_installs_gpulab_with_a_pinned_python_and_cpu_torch():
    conda, pip = environment_yml()
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip().removeprefix("python-")
    assert f"python={runtime}" in conda, f"environment.yml must pin python={runtime} (binder/runtime.txt), has {conda}"
    assert "pip" in conda
    editable = [i for i in pip if re.fullmatch(r"-e\s+\.(\[[a-z,]+\])?", i)]
    assert editable, f"environment.yml's pip list must install gpulab from the checkout (- -e .[lab]), has {pip}"
    extras = re.search(r"\[([a-z,]+)\]", editable[0])
    assert extras and "lab" in extras.group(1).split(","), "gpulab's lab extra brings JupyterLab"
    assert setup_env.CPU_TORCH in pip, f"environment.yml must pin {setup_env.CPU_TORCH}"
    assert f"--extra-index-url {setup_env.CPU_INDEX}" in pip, "torch's CPU wheel index, or pip takes a CUDA build"
    named = {norm(i) for i in pip if not i.startswith("-")}
    assert named == {"torch"}, f"everything else comes from pyproject.toml through -e .: {sorted(named)}"


@pytest.mark.network
@pytest.mark.slow
def test_conda_dry_run(tmp_path):
    conda = shutil.which("conda")
    if conda is None:
        pytest.skip("conda is not installed here: environment.yml is checked statically only")
    out = subprocess.run(
        [conda, "env", "create", "--dry-run", "-f", str(ROOT / "environment.yml"), "-p", str(tmp_path / "env")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
