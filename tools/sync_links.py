"""Rewrite every notebook's Colab badge and Colab install cell from the URL in pyproject.toml; ``binder_url`` gives
the Binder link that README.md and the static site carry (tests/test_links.py checks the README's).

The repository's public URL lives in one place, ``[project.urls] Repository`` in pyproject.toml. Change it
there and run ``python tools/sync_links.py``; ``tests/test_links.py`` fails until the notebooks agree.

The install cell (the code cell starting with ``INSTALL_MARK``) is written whole from ``install_cell``. Its
rule (docs/colab.md): never replace Colab's torch or Triton. gpulab goes in with ``--no-deps``; then only the
light pure-Python dependencies, each a no-op where Colab's version already satisfies it. ipywidgets, numpy,
jupyterlab, torch and Triton are Colab's own; ``import gpulab`` refuses a torch/Triton pair older than it needs.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BADGE = re.compile(r"https://colab\.research\.google\.com/github/[^\"')\s]+?/blob/[^/\"')\s]+/notebooks/")
INSTALL = re.compile(r"gpulab @ git\+[^\"'\s]+")
INSTALL_MARK = "# Colab only: install gpulab"
LIGHT_DEPS = ('"plotly>=6.0"', '"anywidget>=0.9"', '"tqdm>=4.66"', '"platformdirs>=4.0"')


def repo_url() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'^Repository\s*=\s*"([^"]+)"', text, flags=re.MULTILINE)
    if not m:
        raise SystemExit('pyproject.toml has no [project.urls] Repository = "..." line')
    return m.group(1).rstrip("/")


def expected(url: str) -> tuple[str, str]:
    m = re.match(r"https://github\.com/([^/]+/[^/]+)$", url)
    if not m:
        raise SystemExit(f"Repository URL must look like https://github.com/OWNER/NAME, got {url!r}")
    return f"https://colab.research.google.com/github/{m.group(1)}/blob/main/notebooks/", f"gpulab @ git+{url}"


def binder_url(url: str, notebook: str = "00_setup_and_ceilings.ipynb") -> str:
    """mybinder.org's link that builds binder/ for repository ``url`` and opens ``notebook`` in JupyterLab."""
    m = re.match(r"https://github\.com/([^/]+/[^/]+)$", url)
    if not m:
        raise SystemExit(f"Repository URL must look like https://github.com/OWNER/NAME, got {url!r}")
    return f"https://mybinder.org/v2/gh/{m.group(1)}/HEAD?urlpath=lab/tree/notebooks/{notebook}"


def install_cell(install: str) -> str:
    """The Colab install cell's source for the pip requirement ``install`` ("gpulab @ git+URL")."""
    return (
        f"{INSTALL_MARK} beside Colab's own torch and Triton (never replacing them).\n"
        "# Everywhere else `make lab` has already installed it.\n"
        "import sys\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install -q --no-deps "{install}"\n'
        f"    %pip install -q {' '.join(LIGHT_DEPS)}"
    )


def sync(write: bool = True) -> list[str]:
    """Return the notebooks that were (or, with write=False, would be) changed."""
    badge, install = expected(repo_url())
    changed = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        raw = path.read_text()
        nb = json.loads(raw)
        for cell in nb["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] == "code" and src.startswith(INSTALL_MARK):
                cell["source"] = install_cell(install)
            else:
                cell["source"] = INSTALL.sub(install, BADGE.sub(badge, src))
        new = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        if json.loads(new) != json.loads(raw):
            changed.append(path.name)
            if write:
                tmp = path.with_suffix(".ipynb.tmp")
                tmp.write_text(new)
                tmp.replace(path)
    return changed


if __name__ == "__main__":
    done = sync(write="--check" not in sys.argv)
    print("\n".join(done) or "all notebooks already match pyproject.toml")
    sys.exit(1 if done and "--check" in sys.argv else 0)
