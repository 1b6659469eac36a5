"""Rewrite every notebook's Colab and Binder badges and Colab install cell from the URL in pyproject.toml, and keep
the notebooks' cells tidy; ``binder_url`` gives the Binder link that README.md, the static site and each
notebook's badge line carry (tests/test_links.py checks them).

The repository's public URL lives in one place, ``[project.urls] Repository`` in pyproject.toml. Change it
there and run ``python tools/sync_links.py``; ``tests/test_links.py`` fails until the notebooks agree.

Each notebook's first markdown cell opens with one badge line, written whole from ``badges``: Colab's badge,
then Binder's. ``tidy`` gives every cell an ``id`` (nbformat 4.5; a short hash of the notebook's name and the
cell's index, so a rerun gives the same ids) and moves nbval's comment markers (``# NBVAL_IGNORE_OUTPUT``,
``# NBVAL_SKIP``, ...) out of the learner's code into the cell tags nbval reads (``nbval-ignore-output``,
``nbval-skip``, ...); tests/test_notebook_hygiene.py checks both.

The install cell (the code cell starting with ``INSTALL_MARK``) is written whole from ``install_cell``. Its
rule (docs/colab.md): never replace Colab's torch or Triton. gpulab goes in with ``--no-deps``; then only the
light pure-Python dependencies, each a no-op where Colab's version already satisfies it. ipywidgets, numpy,
jupyterlab, torch and Triton are Colab's own; ``import gpulab`` refuses a torch/Triton pair older than it needs.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BADGE = re.compile(r"https://colab\.research\.google\.com/github/[^\"')\s]+?/blob/[^/\"')\s]+/notebooks/")
INSTALL = re.compile(r"gpulab @ git\+[^\"'\s]+")
INSTALL_MARK = "# Colab only: install gpulab"
LIGHT_DEPS = ('"plotly>=6.0"', '"anywidget>=0.9"', '"tqdm>=4.66"', '"platformdirs>=4.0"')
BINDER = re.compile(r"https://mybinder\.org/v2/gh/[^/\"')\s]+/[^/\"')\s]+/")
# nbval 0.11's comment markers (nbval.plugin.comment_markers) and the cell tags it reads in their place.
NBVAL_MARKER = re.compile(
    r"^[ \t]*#+[ \t]*(NBVAL_(?:IGNORE_OUTPUT|CHECK_OUTPUT|RAISES_EXCEPTION|SKIP))[ \t]*(?:\n|$)", re.M
)


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


def binder_url(url: str, notebook: str = "00_the_machine.ipynb") -> str:
    """mybinder.org's link that builds binder/ for repository ``url`` and opens ``notebook`` in JupyterLab."""
    m = re.match(r"https://github\.com/([^/]+/[^/]+)$", url)
    if not m:
        raise SystemExit(f"Repository URL must look like https://github.com/OWNER/NAME, got {url!r}")
    return f"https://mybinder.org/v2/gh/{m.group(1)}/HEAD?urlpath=lab/tree/notebooks/{notebook}"


def badges(url: str, notebook: str) -> str:
    """The badge line that opens ``notebook``'s first markdown cell: Colab's badge, then Binder's."""
    colab, _ = expected(url)
    return (
        f'<a href="{colab}{notebook}" target="_parent">'
        '<img src="https://colab.research.google.com/assets/colab-badge.svg" alt="Open In Colab"/></a> '
        f'<a href="{binder_url(url, notebook)}" target="_parent">'
        '<img src="https://mybinder.org/badge_logo.svg" alt="Launch Binder"/></a>'
    )


def nbval_tag(marker: str) -> str:
    """The cell tag nbval reads in place of comment ``marker``: NBVAL_SKIP -> nbval-skip."""
    return marker.lower().replace("_", "-")


def cell_id(notebook: str, index: int, taken: set[str]) -> str:
    """A stable 8-hex id for cell ``index`` of ``notebook``, not in ``taken``."""
    salt = 0
    while True:
        h = hashlib.sha1(f"{notebook}:{index}:{salt}".encode()).hexdigest()[:8]
        if h not in taken:
            return h
        salt += 1


def tidy(nb: dict, notebook: str) -> None:
    """In place: nbformat 4.5, an id on every cell (existing ids kept, duplicates replaced), and nbval's comment
    markers moved from code cells' source into their metadata tags. New keys go where nbformat sorts them."""
    if nb.get("nbformat") == 4 and nb.get("nbformat_minor", 0) < 5:
        nb["nbformat_minor"] = 5
    taken: set[str] = set()
    for i, cell in enumerate(nb["cells"]):
        if not cell.get("id") or cell["id"] in taken:
            new_id = cell_id(notebook, i, taken | {c.get("id") for c in nb["cells"]})
            keys = [k for k in cell if k != "id"]
            at = next((j for j, k in enumerate(keys) if k > "id"), len(keys))
            items = {**cell, "id": new_id}
            cell.clear()
            cell.update((k, items[k]) for k in [*keys[:at], "id", *keys[at:]])
        taken.add(cell["id"])
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        markers = NBVAL_MARKER.findall(src)
        if markers:
            left = NBVAL_MARKER.sub("", src)
            cell["source"] = left if src.endswith("\n") else left.rstrip("\n")
            tags = cell["metadata"].setdefault("tags", [])
            tags.extend(t for t in dict.fromkeys(map(nbval_tag, markers)) if t not in tags)


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
    url = repo_url()
    badge, install = expected(url)
    binder = binder_url(url, "").split("HEAD?")[0]  # https://mybinder.org/v2/gh/OWNER/NAME/
    changed = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        raw = path.read_text()
        nb = json.loads(raw)
        tidy(nb, path.name)
        first_markdown = True
        for cell in nb["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] == "code" and src.startswith(INSTALL_MARK):
                cell["source"] = install_cell(install)
                continue
            src = INSTALL.sub(install, BINDER.sub(binder, BADGE.sub(badge, src)))
            if cell["cell_type"] == "markdown" and first_markdown:
                first_markdown = False
                head, sep, rest = src.partition("\n")
                if head.startswith('<a href="https://colab.research.google.com/'):  # the badge line, written whole
                    src = badges(url, path.name) + sep + rest
                else:
                    src = badges(url, path.name) + "\n\n" + src
            cell["source"] = src
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
