"""Rewrite every notebook's Colab badge and Colab install cell from the URL in pyproject.toml.

The repository's public URL lives in one place, ``[project.urls] Repository`` in pyproject.toml. Change it
there and run ``python tools/sync_links.py``; ``tests/test_links.py`` fails until the notebooks agree.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BADGE = re.compile(r"https://colab\.research\.google\.com/github/[^\"')\s]+?/blob/[^/\"')\s]+/notebooks/")
INSTALL = re.compile(r"gpulab @ git\+[^\"'\s]+")


def repo_url() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'^Repository\s*=\s*"([^"]+)"', text, flags=re.MULTILINE)
    if not m:
        raise SystemExit("pyproject.toml has no [project.urls] Repository = \"...\" line")
    return m.group(1).rstrip("/")


def expected(url: str) -> tuple[str, str]:
    m = re.match(r"https://github\.com/([^/]+/[^/]+)$", url)
    if not m:
        raise SystemExit(f"Repository URL must look like https://github.com/OWNER/NAME, got {url!r}")
    return f"https://colab.research.google.com/github/{m.group(1)}/blob/main/notebooks/", f"gpulab @ git+{url}"


def sync(write: bool = True) -> list[str]:
    """Return the notebooks that were (or, with write=False, would be) changed."""
    badge, install = expected(repo_url())
    changed = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        raw = path.read_text()
        nb = json.loads(raw)
        for cell in nb["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
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
